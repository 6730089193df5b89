// act_under_wgmma.cu — does a warpgroup's wgmma traffic slow another warpgroup's FP32 / MUFU work
// on the same SM partitions? The forward's profile (experiments/PERF_NOTES.md, seventeenth session)
// showed the activation's FFMAs and FMULs held by "dispatch" stalls while the other consumer
// warpgroup issues and runs its GEMMs. Here one warpgroup runs the forward's activation of a step
// (64 scores per thread, fast_gelu's 2f form and the bf16 pack, as the kernel computes them) in a loop
// and times it, while the other warpgroup of the CTA (one warp on each partition, like the
// kernel's) either idles, or issues m64n128k16 wgmmas with both operands in shared memory (QK^T's
// form), or with A from registers (PV's form), or both in turn, back to back. Shared memory holds
// zeros: only timing matters.
// Seventeenth session, H200, two runs (cycles per 64-score step of the activation warpgroup): idle
// 628-630; next to SS wgmmas 984-1067; RS 981-1127; SS and RS in turn 1087-1107; SS at half the
// width 941 (that warpgroup then ends its fixed batch count sooner, so part of the loop runs alone).
// Build and run on an sm_90 GPU, from the repository root:
//   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I. -o act_under_wgmma \
//     experiments/micro/act_under_wgmma.cu && ./act_under_wgmma
#include "experiments/micro/micro_ops.cuh"
#include "ptx/smem_desc.h"
#include "ptx/wgmma.cuh"

using namespace gdpa;

// One batch of the eight k16 wgmmas of a 64 x N x 128 product with both operands in shared memory
// (QK^T's form), committed as one group.
template <int N>
__device__ __forceinline__ void ss_batch(float (&acc)[N / 2], const WgmmaDescBase& a, const WgmmaDescBase& b) {
  ptx::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 8; ++ks)
    ptx::Wgmma<N, kBF16>::template ss<1, 0, 0>(acc, a.at(sw128_kmajor_step(64, ks)), b.at(sw128_kmajor_step(128, ks)));
  ptx::wgmma_commit();
}

// mode 0: the GEMM warpgroup idles; 1: SS wgmmas; 2: RS wgmmas; 3: a batch of each in turn (the
// kernel's turn: QK^T then PV); 4: SS wgmmas of half the width (as many instructions, half the
// tensor work). Per CTA: one activation timing.
__global__ void __launch_bounds__(256, 1) bench(int mode, int act_iters, const float* in, unsigned* out,
                                                long long* cycles) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int tid = threadIdx.x;
  for (int i = tid; i < 65 * 1024 / 4; i += 256) reinterpret_cast<unsigned*>(smem)[i] = 0;
  __syncthreads();
  // The 128-byte swizzle needs 1024-byte aligned tiles: round up inside the buffer (1 KB spare).
  const unsigned base = (static_cast<unsigned>(__cvta_generic_to_shared(smem)) + 1023u) & ~1023u;
  if (tid < 128) {  // the GEMM warpgroup
    if (mode == 0) return;
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    float acc_half[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc_half[i] = 0.0f;
    unsigned a_regs[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) a_regs[i] = 0;
    const WgmmaDescBase qa = sw128_kmajor_base(base);               // 64 x 128, K-major
    const WgmmaDescBase kb = sw128_kmajor_base(base + 16384);       // 128 x 128, K-major
    const WgmmaDescBase vb = sw128_mnmajor_base(base + 16384, 128);  // 128 x 128, N-major
    // A fixed count that outlasts the activation loop: wgmma is .aligned, so the four warps must
    // run the same number of batches (a per-warp look at a flag would let one leave early).
    const int batches = mode == 3 ? 4 * act_iters / 3 : 8 * act_iters / 3;
    for (int n = 0; n < batches; ++n) {
      // The branch before the fence, each side a whole batch with its own commit (a branch inside
      // the batch makes ptxas fence between the wgmmas: kernels/sm90/fwd_config.h kFwdWholeBatchBranch).
      if (mode == 4) ss_batch<64>(acc_half, qa, kb);  // as many wgmmas at half the width: half the work
      if (mode == 1 || mode == 3) ss_batch<128>(acc, qa, kb);
      if (mode == 2 || mode == 3) {
        ptx::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
          const unsigned a[4] = {a_regs[4 * kk], a_regs[4 * kk + 1], a_regs[4 * kk + 2], a_regs[4 * kk + 3]};
          ptx::Wgmma<128, kBF16>::rs<1, 1>(acc, a, vb.at(sw128_mnmajor_step(kk)));
        }
        ptx::wgmma_commit();
      }
      ptx::wgmma_wait<1>();
    }
    ptx::wgmma_wait<0>();
    ptx::fence_operand(acc);
    ptx::fence_operand(acc_half);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i) s += acc[i];
#pragma unroll
    for (int i = 0; i < 32; ++i) s += acc_half[i];
    if (s == 12345.0f) out[0] = 1;  // keep the GEMMs
    return;
  }
  // The activation warpgroup: 64 scores per thread, as one consumer thread of the forward holds.
  const int t = tid - 128;
  float sc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) sc[i] = in[(blockIdx.x * 128 + t) * 64 + i];
  unsigned acc_bits = 0;
  const long long t0 = clock64();
  for (int it = 0; it < act_iters; ++it) {
    unsigned p[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const float x0 = sc[2 * i], x1 = sc[2 * i + 1];
      const float z0 = gelu_tanh_arg(x0), z1 = gelu_tanh_arg(x1);
      p[i] = pack_bf16x2(gelu_twice_f_from_t(x0, mufu_tanh(z0)), gelu_twice_f_from_t(x1, mufu_tanh(z1)));
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) acc_bits ^= p[i];
#pragma unroll
    for (int i = 0; i < 64; ++i) sc[i] *= 1.0001f;  // new scores each step (stands in for the GEMM)
  }
  const long long t1 = clock64();
  out[blockIdx.x * 128 + t] = acc_bits;
  if (t % 32 == 0) cycles[blockIdx.x * 4 + t / 32] = t1 - t0;
}

int main() {
  const int blocks = 132, iters = 4000;
  const float* in = device_scores(64 * 128 * blocks);
  unsigned* out;
  long long* cyc;
  cuda_check(cudaMalloc(&out, sizeof(unsigned) * 128 * blocks), "cudaMalloc");
  cuda_check(cudaMalloc(&cyc, sizeof(long long) * 4 * blocks), "cudaMalloc");
  const int smem_bytes = 65 * 1024;
  cuda_check(cudaFuncSetAttribute(bench, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes),
             "cudaFuncSetAttribute");
  const char* names[] = {"GEMM warpgroup idle", "GEMM warpgroup issuing SS wgmmas (QK^T form)",
                         "GEMM warpgroup issuing RS wgmmas (PV form)", "GEMM warpgroup issuing SS + RS in turn",
                         "GEMM warpgroup issuing SS m64n64k16 (half the work)"};
  long long hc[4 * 132];
  for (int mode = 0; mode < 5; ++mode) {
    for (int rep = 0; rep < 2; ++rep) bench<<<blocks, 256, smem_bytes>>>(mode, iters, in, out, cyc);
    wait_for_kernels();
    cuda_check(cudaMemcpy(hc, cyc, sizeof(hc), cudaMemcpyDeviceToHost), "cudaMemcpy");
    double sum = 0;
    for (int i = 0; i < 4 * blocks; ++i) sum += double(hc[i]);
    std::printf("%-46s activation: %.0f cycles per 64-score step (mean over warps)\n", names[mode],
                sum / (4.0 * blocks) / iters);
  }
  return 0;
}
