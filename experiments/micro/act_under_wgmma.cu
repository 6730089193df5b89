// act_under_wgmma.cu — does a warpgroup's wgmma traffic slow another warpgroup's FP32 / MUFU work
// on the same SM partitions? The forward's profile (experiments/PERF_NOTES.md, seventeenth session)
// showed the activation's FFMAs and FMULs held by "dispatch" stalls while the other consumer
// warpgroup issues and runs its GEMMs. Here one warpgroup runs the forward's activation of a step
// (64 scores per thread, fast_gelu's 2f form, bf16 pack) in a loop and times it, while the other
// warpgroup of the CTA (one warp on each partition, like the kernel's) either idles, or issues
// m64n128k16 wgmmas with both operands in shared memory (QK^T's form), or with A from registers
// (PV's form), or both in turn, back to back. Shared memory holds zeros: only timing matters.
// Seventeenth session, H200, two runs (cycles per 64-score step of the activation warpgroup): idle
// 628-630; next to SS wgmmas 984-1067; RS 981-1127; SS and RS in turn 1087-1107; SS at half the
// width 941 (that warpgroup then ends its fixed batch count sooner, so part of the loop runs alone).
// Build and run on an sm_90 GPU, from the repository root:
//   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I. -o act_under_wgmma \
//     experiments/micro/act_under_wgmma.cu && ./act_under_wgmma
#include <cstdio>
#include <cuda_runtime.h>

#include "ptx/smem_desc.h"
#include "ptx/wgmma.cuh"

using namespace gdpa;

__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ unsigned pack_bf16(float a, float b) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
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
      if (mode == 4) {  // the same number of wgmmas at half the width: half the tensor work
        ptx::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 8; ++ks)
          ptx::Wgmma<64, kBF16>::ss<1, 0, 0>(acc_half, qa.at(sw128_kmajor_step(64, ks)), kb.at(sw128_kmajor_step(128, ks)));
        ptx::wgmma_commit();
      }
      if (mode == 1 || mode == 3) {
        ptx::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 8; ++ks)
          ptx::Wgmma<128, kBF16>::ss<1, 0, 0>(acc, qa.at(sw128_kmajor_step(64, ks)), kb.at(sw128_kmajor_step(128, ks)));
        ptx::wgmma_commit();
      }
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
      const float z0 = x0 * fmaf(0.0356774081f, x0 * x0, 0.7978845608f);
      const float z1 = x1 * fmaf(0.0356774081f, x1 * x1, 0.7978845608f);
      p[i] = pack_bf16(fmaf(x0, tanh_approx(z0), x0), fmaf(x1, tanh_approx(z1), x1));
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
  float* in;
  unsigned* out;
  long long* cyc;
  cudaMalloc(&in, sizeof(float) * 64 * 128 * blocks);
  cudaMalloc(&out, sizeof(unsigned) * 128 * blocks);
  cudaMalloc(&cyc, sizeof(long long) * 4 * blocks);
  float* h = new float[64 * 128 * blocks];
  unsigned x = 1;
  for (int i = 0; i < 64 * 128 * blocks; ++i) {
    x = x * 1664525u + 1013904223u;
    h[i] = ((x >> 8) / 16777216.0f - 0.5f) * 6.0f;
  }
  cudaMemcpy(in, h, sizeof(float) * 64 * 128 * blocks, cudaMemcpyHostToDevice);
  const int smem_bytes = 65 * 1024;
  cudaFuncSetAttribute(bench, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  const char* names[] = {"GEMM warpgroup idle", "GEMM warpgroup issuing SS wgmmas (QK^T form)",
                         "GEMM warpgroup issuing RS wgmmas (PV form)", "GEMM warpgroup issuing SS + RS in turn",
                         "GEMM warpgroup issuing SS m64n64k16 (half the work)"};
  long long hc[4 * 132];
  for (int mode = 0; mode < 5; ++mode) {
    for (int rep = 0; rep < 2; ++rep) bench<<<blocks, 256, smem_bytes>>>(mode, iters, in, out, cyc);
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      std::printf("error: %s\n", cudaGetErrorString(e));
      return 1;
    }
    cudaMemcpy(hc, cyc, sizeof(hc), cudaMemcpyDeviceToHost);
    double sum = 0;
    for (int i = 0; i < 4 * blocks; ++i) sum += double(hc[i]);
    std::printf("%-46s activation: %.0f cycles per 64-score step (mean over warps)\n", names[mode],
                sum / (4.0 * blocks) / iters);
  }
  return 0;
}
