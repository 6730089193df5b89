// kernel_api.h — the one interface every GDPA implementation of the suite offers to the CLI,
// the benchmarks and the GPU tests: baseline kernels, the unfused cuBLAS path, the Hopper kernels.
//
// prepare() does everything that must not be timed (NVRTC compile or cache load, module load,
// tile-list build and upload, tensor maps, scratch allocation); forward()/backward() only enqueue
// work on the stream, so a benchmark times exactly what a training step would pay.
#pragma once
#include <memory>
#include <string>

#include <vector>

#include "compile.h"
#include "driver.h"
#include "problem.h"

namespace gdpa {

// Device views of one problem's tensors (packed jagged layout of the spec, io dtype bits).
struct DeviceTensors {
  CUdeviceptr q = 0, k = 0, v = 0, dout = 0;
  CUdeviceptr out = 0, dq = 0, dk = 0, dv = 0;
  CUdeviceptr cu_seqlens_q = 0, cu_seqlens_k = 0, kv_index = 0;  // int32; kv_index may be 0
};

class AttentionKernel {
 public:
  virtual ~AttentionKernel() = default;
  // Short stable name used in tables and JSON: "baseline", "unfused-cublas", "sm90", ...
  virtual std::string name() const = 0;
  // False (with a one-line reason) when this implementation cannot run the problem on `arch`.
  virtual bool supports(const ProblemDesc& p, int arch, bool backward, std::string* why) const = 0;
  // Untimed set-up for this problem on this device. May be called again with another problem.
  virtual void prepare(const ProblemDesc& p, const DeviceInfo& dev, bool backward) = 0;
  // Enqueue the forward (writes out) / backward (writes dq, dk, dv). Launch errors throw.
  virtual void forward(const DeviceTensors& t, CUstream stream) = 0;
  virtual void backward(const DeviceTensors& t, CUstream stream) = 0;
  // True when the implementation rounds S (and dP) to the io dtype before the activation, as the
  // unfused cuBLAS path does: its rounding is then emulated that way when judging it (verify/).
  virtual bool rounds_scores() const { return false; }
  // True for a softmax-attention kernel (the sm90 kernel's softmax variant): it is judged against
  // the softmax CPU reference (verify/softmax_reference.h) instead of GDPA's.
  virtual bool is_softmax() const { return false; }
  // The NVRTC variants prepare() would compile for this problem, so a caller can compile many
  // problems' kernels in parallel (or ahead of time) before preparing them one by one.
  virtual std::vector<KernelSource> sources(const ProblemDesc& p, bool backward) const {
    (void)p;
    (void)backward;
    return {};
  }
};

}  // namespace gdpa
