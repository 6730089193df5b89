// unfused_cublas.cpp — the padded cuBLAS path (see unfused_cublas.h for the algorithm).
#include "unfused_cublas.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "device_problem.h"

namespace gdpa {

namespace {

constexpr const char* kUnfusedFile = "kernels/baseline/unfused.cu";
constexpr unsigned kElementwiseThreads = 256;  // __launch_bounds__ of every unfused.cu kernel

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string("cuBLAS: ") + what + " failed: " + cublasGetStatusName(s));
}

void check_cudart(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw CudaError(std::string("CUDA runtime: ") + what + " failed: " + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")");
}

cudaDataType io_type(DType d) { return d == kFP16 ? CUDA_R_16F : CUDA_R_16BF; }

constexpr size_t kElem = 2;  // bytes of one io element (bf16 / fp16)

// cuMemAlloc refuses zero bytes; empty buffers still get a valid pointer.
DeviceBuffer alloc_at_least_16(size_t bytes) { return DeviceBuffer(bytes < 16 ? 16 : bytes); }

class UnfusedCublasKernel final : public AttentionKernel {
 public:
  explicit UnfusedCublasKernel(size_t budget) : budget_(budget) {}

  std::string name() const override { return "unfused-cublas"; }
  bool rounds_scores() const override { return true; }

  std::vector<KernelSource> sources(const ProblemDesc& p, bool backward) const override {
    return unfused_kernel_sources(p, backward);
  }

  bool supports(const ProblemDesc& p, int arch, bool backward, std::string* why) const override {
    auto no = [&](const std::string& reason) {
      if (why) *why = reason;
      return false;
    };
    if (arch < 80) return no("bf16 cuBLAS GEMMs need sm_80 or newer");
    if (p.head_dim != 64 && p.head_dim != 128)
      return no("head_dim " + std::to_string(p.head_dim) + " (unfused: 64 or 128)");
    if (p.dtype != kBF16 && p.dtype != kFP16) return no("dtype must be bf16 or fp16");
    if (backward && !p.kv_index.empty()) return no("kv_index is forward-only (spec 4)");
    return true;
  }

  void prepare(const ProblemDesc& p, const DeviceInfo& dev, bool backward) override {
    validate(p, -1, -1, backward);
    std::string why;
    if (!supports(p, dev.arch(), backward, &why)) throw std::runtime_error("unfused-cublas: " + why);
    if (!handle_ || device_ != dev.ordinal) {
      handle_.reset();
      handle_ = std::make_unique<CublasHandle>(dev.ordinal);
      device_ = dev.ordinal;
    }
    for (const KernelSource& src : unfused_kernel_sources(p, backward)) {
      const std::string key = src.name_expression + "@" + std::to_string(dev.arch());
      if (!modules_.count(key)) {
        const CompiledKernel k = compile_kernel(src, dev.arch());
        modules_[key] = std::make_unique<Module>(k.cubin.data(), k.lowered_name);
      }
    }
    const std::string arch = "@" + std::to_string(dev.arch());
    const std::string dim = "<" + std::to_string(p.head_dim) + ">";
    const std::string var = "<" + std::to_string(int(p.dtype)) + "," +
                            std::to_string(int(p.activation)) + "," + std::to_string(int(p.mask)) + ">";
    gather_ = modules_.at("gdpa::unfused_gather" + dim + arch).get();
    scatter_ = modules_.at("gdpa::unfused_scatter" + dim + arch).get();
    act_ = modules_.at("gdpa::unfused_act" + var + arch).get();
    act_bwd_ = backward ? modules_.at("gdpa::unfused_act_bwd" + var + arch).get() : nullptr;

    desc_ = p;
    plan_ = plan_unfused(p, backward, budget_);
    sm_count_ = dev.sm_count > 0 ? dev.sm_count : 1;
    allocate(backward);
  }

  void forward(const DeviceTensors& t, CUstream stream) override {
    if (!act_) throw std::logic_error("unfused-cublas: forward() before prepare()");
    const ProblemDesc& p = desc_;
    if (plan_.lq == 0) return;  // no query rows anywhere: nothing to write
    if (plan_.lk == 0) {        // every Lk = 0: O is all zeros (spec 2)
      GDPA_CU(cu().cuMemsetD8Async(t.out, 0, size_t(p.total_q()) * p.q_row() * kElem, stream));
      return;
    }
    for (int b0 = 0; b0 < p.batch(); b0 += plan_.chunk) {
      const int nb = std::min(plan_.chunk, p.batch() - b0);
      gather(t.q, q_pad_.ptr(), t.cu_seqlens_q, 0, b0, nb, p.heads_q, plan_.lq, stream);
      gather(t.k, k_pad_.ptr(), t.cu_seqlens_k, t.kv_index, b0, nb, p.heads_kv, plan_.lk, stream);
      gather(t.v, v_pad_.ptr(), t.cu_seqlens_k, t.kv_index, b0, nb, p.heads_kv, plan_.lk, stream);
      scores(q_pad_.ptr(), k_pad_.ptr(), s_.ptr(), p.logit_scale, nb, stream);  // S
      activation(t, b0, nb, stream);                                            // S -> P
      gemm(group_gemm(false, false, rows_qg(), p.head_dim, plan_.lk, s_.ptr(), plan_.lk_ld,
                      score_stride(), v_pad_.ptr(), p.head_dim, kv_stride(), o_pad_.ptr(),
                      p.head_dim, q_stride(), nb),
           stream);                                                             // O = P V
      scatter(o_pad_.ptr(), t.out, t.cu_seqlens_q, b0, nb, p.heads_q, plan_.lq, stream);
    }
  }

  void backward(const DeviceTensors& t, CUstream stream) override {
    if (!act_bwd_) throw std::logic_error("unfused-cublas: backward() before prepare(backward=true)");
    const ProblemDesc& p = desc_;
    const size_t k_bytes = size_t(p.total_k()) * p.k_row() * kElem;
    const size_t q_bytes = size_t(p.total_q()) * p.q_row() * kElem;
    if (plan_.lq == 0) {  // no queries: every dK, dV row is zero
      if (k_bytes) {
        GDPA_CU(cu().cuMemsetD8Async(t.dk, 0, k_bytes, stream));
        GDPA_CU(cu().cuMemsetD8Async(t.dv, 0, k_bytes, stream));
      }
      return;
    }
    if (plan_.lk == 0) {  // no keys: every dQ row is zero
      GDPA_CU(cu().cuMemsetD8Async(t.dq, 0, q_bytes, stream));
      return;
    }
    const int D = p.head_dim;
    for (int b0 = 0; b0 < p.batch(); b0 += plan_.chunk) {
      const int nb = std::min(plan_.chunk, p.batch() - b0);
      gather(t.q, q_pad_.ptr(), t.cu_seqlens_q, 0, b0, nb, p.heads_q, plan_.lq, stream);
      gather(t.dout, do_pad_.ptr(), t.cu_seqlens_q, 0, b0, nb, p.heads_q, plan_.lq, stream);
      gather(t.k, k_pad_.ptr(), t.cu_seqlens_k, 0, b0, nb, p.heads_kv, plan_.lk, stream);
      gather(t.v, v_pad_.ptr(), t.cu_seqlens_k, 0, b0, nb, p.heads_kv, plan_.lk, stream);
      scores(q_pad_.ptr(), k_pad_.ptr(), s_.ptr(), p.logit_scale, nb, stream);  // S
      scores(do_pad_.ptr(), v_pad_.ptr(), dp_.ptr(), 1.0f, nb, stream);         // dP = dO V^T
      activation_bwd(t, b0, nb, stream);                                        // P, dS
      // dV = P^T dO and dK = dS^T Q: per (sequence, KV head), [lk x G*lq] . [G*lq x D], which
      // sums over the G query heads of the group inside the GEMM.
      gemm(group_gemm(true, false, plan_.lk, D, rows_qg(), s_.ptr(), plan_.lk_ld, score_stride(),
                      do_pad_.ptr(), D, q_stride(), dv_pad_.ptr(), D, kv_stride(), nb),
           stream);
      gemm(group_gemm(true, false, plan_.lk, D, rows_qg(), dp_.ptr(), plan_.lk_ld, score_stride(),
                      q_pad_.ptr(), D, q_stride(), dk_pad_.ptr(), D, kv_stride(), nb),
           stream);
      // dQ = dS K: [G*lq x lk] . [lk x D]; o_pad_ holds the padded dQ.
      gemm(group_gemm(false, false, rows_qg(), D, plan_.lk, dp_.ptr(), plan_.lk_ld, score_stride(),
                      k_pad_.ptr(), D, kv_stride(), o_pad_.ptr(), D, q_stride(), nb),
           stream);
      scatter(o_pad_.ptr(), t.dq, t.cu_seqlens_q, b0, nb, p.heads_q, plan_.lq, stream);
      scatter(dk_pad_.ptr(), t.dk, t.cu_seqlens_k, b0, nb, p.heads_kv, plan_.lk, stream);
      scatter(dv_pad_.ptr(), t.dv, t.cu_seqlens_k, b0, nb, p.heads_kv, plan_.lk, stream);
    }
  }

 private:
  // Padded layouts, per chunk of nb sequences (elements):
  //   Q, dO, O/dQ  [nb][Hq][lq][D]        per-group stride G*lq*D   (group = sequence x KV head)
  //   K, V, dK, dV [nb][Hkv][lk][D]       per-group stride lk*D
  //   S, dP        [nb][Hq][lq][lk_ld]    per-group stride G*lq*lk_ld
  // Query head h = hk*G + g of sequence bl sits at group bl*Hkv + hk, rows g*lq .. g*lq + lq - 1,
  // so every product below is one strided-batched GEMM over nb * Hkv groups.
  int rows_qg() const { return desc_.group() * plan_.lq; }
  long long q_stride() const { return (long long)rows_qg() * desc_.head_dim; }
  long long kv_stride() const { return (long long)plan_.lk * desc_.head_dim; }
  long long score_stride() const { return (long long)rows_qg() * plan_.lk_ld; }

  RowMajorGemm group_gemm(bool ta, bool tb, int m, int n, int k, CUdeviceptr a, int lda, long long sa,
                          CUdeviceptr b, int ldb, long long sb, CUdeviceptr c, int ldc, long long sc,
                          int nb) const {
    RowMajorGemm g;
    g.trans_a = ta;
    g.trans_b = tb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.a = a;
    g.lda = lda;
    g.stride_a = sa;
    g.b = b;
    g.ldb = ldb;
    g.stride_b = sb;
    g.c = c;
    g.ldc = ldc;
    g.stride_c = sc;
    g.batch = nb * desc_.heads_kv;
    return g;
  }

  void gemm(const RowMajorGemm& g, CUstream stream) const {
    gemm_row_major(*handle_, desc_.dtype, g, stream);
  }

  // S = alpha * X Y^T per group: [G*lq x D] . [D x lk], stored with row stride lk_ld.
  void scores(CUdeviceptr x, CUdeviceptr y, CUdeviceptr s, float alpha, int nb, CUstream stream) const {
    RowMajorGemm g = group_gemm(false, true, rows_qg(), plan_.lk, desc_.head_dim, x, desc_.head_dim,
                                q_stride(), y, desc_.head_dim, kv_stride(), s, plan_.lk_ld,
                                score_stride(), nb);
    g.alpha = alpha;
    gemm(g, stream);
  }

  void launch_elementwise(const Module* m, long long items, CUstream stream, void** args) const {
    if (items <= 0) return;
    // Grid-stride kernels: enough blocks to fill the GPU several times over, no more.
    const long long want = (items + kElementwiseThreads - 1) / kElementwiseThreads;
    const long long cap = (long long)sm_count_ * 32;
    LaunchShape shape;
    shape.grid[0] = unsigned(std::max(1LL, std::min(want, cap)));
    shape.block[0] = kElementwiseThreads;
    launch(m->function(), shape, stream, args);
  }

  void gather(CUdeviceptr src, CUdeviceptr dst, CUdeviceptr cu_seqlens, CUdeviceptr seq_map, int b0,
              int nb, int heads, int len_pad, CUstream stream) const {
    void* args[] = {&src, &dst, &cu_seqlens, &seq_map, &b0, &nb, &heads, &len_pad};
    launch_elementwise(gather_, (long long)nb * heads * len_pad * (desc_.head_dim / 8), stream, args);
  }

  void scatter(CUdeviceptr src, CUdeviceptr dst, CUdeviceptr cu_seqlens, int b0, int nb, int heads,
               int len_pad, CUstream stream) const {
    void* args[] = {&src, &dst, &cu_seqlens, &b0, &nb, &heads, &len_pad};
    launch_elementwise(scatter_, (long long)nb * heads * len_pad * (desc_.head_dim / 8), stream, args);
  }

  long long score_vectors(int nb) const {
    return (long long)nb * desc_.heads_q * plan_.lq * (plan_.lk_ld / 8);
  }

  void activation(const DeviceTensors& t, int b0, int nb, CUstream stream) const {
    CUdeviceptr s = s_.ptr(), cu_q = t.cu_seqlens_q, cu_k = t.cu_seqlens_k, kv = t.kv_index;
    int heads_q = desc_.heads_q, lq = plan_.lq, lk_ld = plan_.lk_ld;
    float out_scale = desc_.out_scale;
    int wl = desc_.window_left, wr = desc_.window_right;
    void* args[] = {&s, &cu_q, &cu_k, &kv, &b0, &nb, &heads_q, &lq, &lk_ld, &out_scale, &wl, &wr};
    launch_elementwise(act_, score_vectors(nb), stream, args);
  }

  void activation_bwd(const DeviceTensors& t, int b0, int nb, CUstream stream) const {
    CUdeviceptr s = s_.ptr(), dp = dp_.ptr(), cu_q = t.cu_seqlens_q, cu_k = t.cu_seqlens_k;
    int heads_q = desc_.heads_q, lq = plan_.lq, lk_ld = plan_.lk_ld;
    float logit_scale = desc_.logit_scale, out_scale = desc_.out_scale;
    int wl = desc_.window_left, wr = desc_.window_right;
    void* args[] = {&s,  &dp,    &cu_q,        &cu_k,      &b0, &nb, &heads_q,
                    &lq, &lk_ld, &logit_scale, &out_scale, &wl, &wr};
    launch_elementwise(act_bwd_, score_vectors(nb), stream, args);
  }

  void allocate(bool backward) {
    const size_t nb = size_t(plan_.chunk);
    const size_t q = nb * desc_.heads_q * plan_.lq * desc_.head_dim * kElem;
    const size_t kv = nb * desc_.heads_kv * plan_.lk * desc_.head_dim * kElem;
    const size_t s = nb * desc_.heads_q * plan_.lq * plan_.lk_ld * kElem;
    // Free before allocating so that a re-prepare never holds two plans' worth of memory.
    for (DeviceBuffer* b : {&q_pad_, &k_pad_, &v_pad_, &s_, &o_pad_, &do_pad_, &dp_, &dk_pad_, &dv_pad_})
      *b = DeviceBuffer();
    q_pad_ = alloc_at_least_16(q);
    k_pad_ = alloc_at_least_16(kv);
    v_pad_ = alloc_at_least_16(kv);
    s_ = alloc_at_least_16(s);
    o_pad_ = alloc_at_least_16(q);
    if (backward) {
      do_pad_ = alloc_at_least_16(q);
      dp_ = alloc_at_least_16(s);
      dk_pad_ = alloc_at_least_16(kv);
      dv_pad_ = alloc_at_least_16(kv);
    }
  }

  size_t budget_;
  std::unique_ptr<CublasHandle> handle_;
  int device_ = -1;
  std::map<std::string, std::unique_ptr<Module>> modules_;
  const Module* gather_ = nullptr;
  const Module* scatter_ = nullptr;
  const Module* act_ = nullptr;
  const Module* act_bwd_ = nullptr;
  ProblemDesc desc_;
  UnfusedPlan plan_;
  int sm_count_ = 1;
  DeviceBuffer q_pad_, k_pad_, v_pad_, s_, o_pad_, do_pad_, dp_, dk_pad_, dv_pad_;
};

}  // namespace

UnfusedPlan plan_unfused(const ProblemDesc& p, bool backward, size_t budget_bytes) {
  UnfusedPlan plan;
  plan.lq = p.max_len_q();
  plan.lk = p.max_len_k();
  plan.lk_ld = (plan.lk + 7) / 8 * 8;
  const size_t q = size_t(p.heads_q) * plan.lq * p.head_dim;   // Q (and dO, O/dQ)
  const size_t kv = size_t(p.heads_kv) * plan.lk * p.head_dim;  // K (and V, dK, dV)
  const size_t s = size_t(p.heads_q) * plan.lq * plan.lk_ld;   // S (and dP)
  // Forward: Q, K, V, S, O. Backward adds dO, dP, dK, dV (dQ reuses O's buffer).
  const size_t elems = backward ? 3 * q + 4 * kv + 2 * s : 2 * q + 2 * kv + s;
  plan.bytes_per_sequence = elems * kElem;
  const int batch = p.batch();
  size_t chunk = plan.bytes_per_sequence ? budget_bytes / plan.bytes_per_sequence : size_t(batch);
  chunk = std::max<size_t>(chunk, 1);
  chunk = std::min<size_t>(chunk, size_t(std::max(batch, 1)));
  plan.chunk = int(chunk);
  return plan;
}

std::vector<KernelSource> unfused_kernel_sources(const ProblemDesc& p, bool backward) {
  const std::string dim = "<" + std::to_string(p.head_dim) + ">";
  const std::string var = "<" + std::to_string(int(p.dtype)) + "," + std::to_string(int(p.activation)) +
                          "," + std::to_string(int(p.mask)) + ">";
  std::vector<KernelSource> out = {
      {kUnfusedFile, "gdpa::unfused_gather" + dim, {}},
      {kUnfusedFile, "gdpa::unfused_scatter" + dim, {}},
      {kUnfusedFile, "gdpa::unfused_act" + var, {}},
  };
  if (backward) out.push_back({kUnfusedFile, "gdpa::unfused_act_bwd" + var, {}});
  return out;
}

CublasHandle::CublasHandle(int device_ordinal) {
  check_cudart(cudaSetDevice(device_ordinal), "cudaSetDevice");
  cublasHandle_t h = nullptr;
  check_cublas(cublasCreate(&h), "cublasCreate");
  handle_ = h;
}

CublasHandle::~CublasHandle() {
  if (handle_) cublasDestroy(handle_);
}

void gemm_row_major(const CublasHandle& handle, DType dtype, const RowMajorGemm& g, CUstream stream) {
  // cuBLAS is column-major. A row-major X (ld = row stride) read column-major with the same ld is
  // X^T, so the row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T: swap the
  // operands, keep each one's transpose flag, and swap m and n.
  check_cublas(cublasSetStream(handle.get(), stream), "cublasSetStream");
  const float beta = 0.0f;
  const cudaDataType t = io_type(dtype);
  check_cublas(cublasGemmStridedBatchedEx(
                   handle.get(), g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                   g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.n, g.m, g.k, &g.alpha,
                   reinterpret_cast<const void*>(g.b), t, g.ldb, g.stride_b,
                   reinterpret_cast<const void*>(g.a), t, g.lda, g.stride_a, &beta,
                   reinterpret_cast<void*>(g.c), t, g.ldc, g.stride_c, g.batch, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

std::unique_ptr<AttentionKernel> make_unfused_cublas_kernel(size_t memory_budget_bytes) {
  return std::make_unique<UnfusedCublasKernel>(memory_budget_bytes);
}

}  // namespace gdpa
