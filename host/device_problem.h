// device_problem.h — one problem's tensors on the device, and the kernel parameter block built
// from them. Every implementation (baseline, unfused, sm90) fills GdpaParams through
// make_params() so the mapping from the host description to the kernel ABI exists once.
#pragma once
#include <cstdint>
#include <vector>

#include "../kernels/common/params.h"
#include "driver.h"
#include "generator.h"  // HostInputs
#include "kernel_api.h"
#include "problem.h"

namespace gdpa {

// Device buffers of one problem: inputs, outputs, offsets. Outputs are allocated but not
// initialised; poison() fills them with the NaN pattern so unwritten elements are caught.
class DeviceProblem {
 public:
  DeviceProblem(const ProblemDesc& p, const HostInputs& in, bool backward);
  // Benchmark data drawn on the device (spec 5: Q, K ~ N(0, D^-1/2) elementwise so logits are
  // about N(0, 1); V, dO ~ N(0, 1)). Host generation would dominate at benchmark sizes.
  DeviceProblem(const ProblemDesc& p, bool backward, uint64_t seed, int arch, CUstream s);
  const ProblemDesc& desc() const { return desc_; }
  DeviceTensors view() const;
  void poison_outputs(CUstream s);  // 0xFFFF in every 16-bit output element: NaN in bf16 and fp16
  void download_out(std::vector<uint16_t>& o) const;
  void download_grads(std::vector<uint16_t>& dq, std::vector<uint16_t>& dk, std::vector<uint16_t>& dv) const;
  size_t input_bytes() const;

 private:
  void allocate(bool backward);
  ProblemDesc desc_;
  DeviceBuffer q_, k_, v_, dout_, out_, dq_, dk_, dv_, cu_q_, cu_k_, kv_index_;
};

// The kernel parameter block for problem `p` on tensors `t` (tiles and scratch left null).
GdpaParams make_params(const ProblemDesc& p, const DeviceTensors& t);

}  // namespace gdpa
