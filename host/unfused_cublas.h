// unfused_cublas.h — GDPA the way a user without a fused kernel computes it: pad the jagged batch,
// two cuBLAS batched GEMMs around an elementwise activation kernel, unpad. The "unfused" row of
// every benchmark, and a second, independent GPU implementation for the tests.
//
// Forward, per chunk of sequences (kernels/baseline/unfused.cu has the elementwise kernels):
//   gather Q, K, V -> padded [nb, heads, Lmax, D]      (zero padding)
//   S = logit_scale * Q K^T                            cuBLAS, io dtype out, fp32 compute
//   P = mask ? out_scale * act(S) : 0                  elementwise, io dtype (in place on S)
//   O = P V                                            cuBLAS
//   scatter O -> packed rows
// S is stored in the io dtype, as torch.bmm gives it to a PyTorch user: the activation sees S
// rounded once more than in the fused kernels, so this path is a little less accurate.
// Backward: S is recomputed with a GEMM (what activation checkpointing does; keeping S from the
// forward would need Hq * Lq * Lk elements for the whole batch, 38 GB at the benchmark sizes),
// dP = dO V^T, one elementwise kernel gives P and dS = logit_scale * out_scale * act'(S) * dP,
// then dV = P^T dO, dK = dS^T Q, dQ = dS K: five GEMMs per chunk.
// GQA needs no K/V expansion: the G query heads of a KV head are adjacent in the padded layout,
// so each product is one GEMM per (sequence, KV head) with G * Lmax query rows.
// The batch is cut into chunks so that every padded buffer together stays under a memory budget.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "compile.h"
#include "kernel_api.h"

struct cublasContext;  // cublasHandle_t is cublasContext*; cublas_v2.h stays out of this header

namespace gdpa {

inline constexpr size_t kUnfusedDefaultBudget = size_t(16) << 30;  // 16 GiB of padded buffers

// How the unfused path pads and chunks one problem.
struct UnfusedPlan {
  int lq = 0;       // padded query length: the longest query sequence
  int lk = 0;       // padded key length: the longest KV sequence read
  int lk_ld = 0;    // row stride of the score matrices: lk rounded up to 8 (16-byte rows for the
                    // vectorised elementwise kernels; the GEMMs use ld = lk_ld, n or k = lk)
  int chunk = 0;    // sequences per chunk (>= 1 when there are sequences)
  size_t bytes_per_sequence = 0;  // padded bytes one sequence occupies over all buffers
  size_t total_bytes() const { return bytes_per_sequence * size_t(chunk); }
};
// Largest chunk whose buffers fit `budget_bytes` (at least one sequence, at most the batch).
UnfusedPlan plan_unfused(const ProblemDesc& p, bool backward, size_t budget_bytes);

// The elementwise kernels `p` needs, as NVRTC name expressions:
//   "gdpa::unfused_gather<128>", "gdpa::unfused_scatter<128>"         (head_dim)
//   "gdpa::unfused_act<0,3,0>"                    (dtype, activation, mask; always)
//   "gdpa::unfused_act_bwd<0,3,0>"                (backward only)
std::vector<KernelSource> unfused_kernel_sources(const ProblemDesc& p, bool backward);

// A cuBLAS handle on device `ordinal`. cudaSetDevice(ordinal) first, so the runtime (and cuBLAS)
// use that device's primary context: the one driver.h's Context retains and makes current.
class CublasHandle {
 public:
  explicit CublasHandle(int device_ordinal);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasContext* get() const { return handle_; }

 private:
  cublasContext* handle_ = nullptr;
};

// Row-major C[m x n] = alpha * op(A)[m x k] . op(B)[k x n] for `batch` matrix triples at fixed
// element strides, in the io dtype with fp32 accumulation (cublasGemmStridedBatchedEx,
// CUBLAS_COMPUTE_32F). op(X) = X^T when trans_x; leading dimensions are row strides in elements.
struct RowMajorGemm {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  CUdeviceptr a = 0;
  int lda = 0;
  long long stride_a = 0;
  CUdeviceptr b = 0;
  int ldb = 0;
  long long stride_b = 0;
  CUdeviceptr c = 0;
  int ldc = 0;
  long long stride_c = 0;
  int batch = 1;
};
// Enqueues on `stream`. Throws CudaError naming the cublasStatus_t on failure.
void gemm_row_major(const CublasHandle& handle, DType dtype, const RowMajorGemm& g, CUstream stream);

// Implements kernel_api.h under the name "unfused-cublas".
std::unique_ptr<AttentionKernel> make_unfused_cublas_kernel(size_t memory_budget_bytes = kUnfusedDefaultBudget);

}  // namespace gdpa
