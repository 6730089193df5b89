// act_under_wgmma.cu — does a warpgroup's wgmma traffic slow another warpgroup's FP32 / MUFU work
// on the same SM partitions? The forward's profile (experiments/PERF_NOTES.md, seventeenth session)
// showed the activation's FFMAs and FMULs held by "dispatch" stalls while the other consumer
// warpgroup issues and runs its GEMMs. Here one warpgroup runs a step's activation (64 scores per
// thread: fast_gelu's 2f form and the bf16 pack as the kernel computes them, or only its FP32 part,
// or only its tanh, or fast_gelu with its MUFUs forced to interleave with the FP32 work) in a loop and
// times it, while the other warpgroup of the CTA (one warp on each partition, like the kernel's)
// idles or issues wgmmas back to back: m64n128k16 with both operands in shared memory (QK^T's
// form), with A from registers (PV's form), both in turn, or SS at N = 64 / 8 / 256 (as many
// instructions for 1/2, 1/16 or 2x the tensor work). Shared memory holds zeros: only timing matters.
// Eighteenth session, H200, two identical runs (cycles per step; results/micro-act-under-wgmma-*):
//   fast_gelu: alone 675; next to N = 8 908, N = 64 1208, N = 128 SS 1222 / RS 1272, N = 256 1244
//   FP32 part only: alone 488; next to the wgmmas 597-698
//   tanh only: alone 693; next to the wgmmas 859-983
//   fast_gelu, MUFUs interleaved by a dependency chain: alone 659-709; next to the wgmmas 1279-1424
// Each part alone slows 1.2-1.4x, the mix 1.8x; the loss grows with the other warpgroup's tensor
// work up to half the kernel's width, and about 40 % of it comes with the instructions alone (N = 8);
// ptxas's breadth-first order (all tanh arguments first) is not the cause.
// Thirty-seventh session, same GPU, the GEMM warpgroup's own rate beside each (cycles per k16 wgmma,
// 64 at the dense peak): fast_gelu next to back-to-back m64n128k16 1222 (64), next to batches of
// eight each drained before the next issue 1121 (72), next to groups of two drained 957 (95). With
// the GEMM warp waiting in WARPGROUP.DEPBAR instead of at an HGMMA's dispatch, the extra time per
// fully busy step falls only from 547 to 501 / 420 cycles: the slowdown follows the tensor work that
// runs beside the activation, not a warp held at a dispatch.
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

// Q at 0, K / V at 16 KB (m64n256k16 reads 256 rows of it), 1 KB spare for the 1024-byte alignment.
constexpr int kSmemBytes = 100 * 1024;

// m64n8k16 with both operands in shared memory: as many wgmma instructions as m64n128k16, a
// sixteenth of the tensor work (no wrapper in ptx/wgmma.cuh: the kernels never use N = 8).
__device__ __forceinline__ void ss_batch_n8(float (&acc)[4], const WgmmaDescBase& a, const WgmmaDescBase& b) {
  ptx::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    const unsigned long long da = a.at(sw128_kmajor_step(64, ks)), db = b.at(sw128_kmajor_step(128, ks));
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "l"(da), "l"(db));
  }
  ptx::wgmma_commit();
}

// What the activation warpgroup computes per step, 64 scores per thread:
// kind 0: fast_gelu's 2f form and the pack, as the forward (one MUFU.TANH and four FP32 ops a score);
// kind 1: the same with the tanh replaced by one FFMA (FP32 pipe only, as many instructions);
// kind 2: the tanh alone, and the pack (the MUFU with little FP32 work around it).
template <int KIND>
__device__ __forceinline__ float act_score(float x) {
  if constexpr (KIND == 0) return gelu_twice_f(x);
  if constexpr (KIND == 1) return gelu_twice_f_from_t(x, fmaf(gelu_tanh_arg(x), 0.25f, 0.5f));
  return mufu_tanh(x);
}

// Modes 1-6: `batches` batches of the mode's wgmmas, each committed as one group, one group kept in
// flight (wait_group 1) so that the tensor cores never wait for an issue.
template <int MODE, int ACC>
__device__ __forceinline__ void gemm_batches(float (&acc)[ACC], const unsigned (&a_regs)[32], const WgmmaDescBase& qa,
                                             const WgmmaDescBase& kb, const WgmmaDescBase& vb, int batches) {
  for (int n = 0; n < batches; ++n) {
    if constexpr (MODE == 4) ss_batch<64>(acc, qa, kb);  // as many wgmmas at half the width: half the work
    if constexpr (MODE == 5) ss_batch_n8(acc, qa, kb);
    if constexpr (MODE == 6) ss_batch<256>(acc, qa, kb);
    if constexpr (MODE == 1 || MODE == 3) ss_batch<128>(acc, qa, kb);
    if constexpr (MODE == 2 || MODE == 3) {
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
}

// The GEMM warpgroup. MODE 0: idles; 1: SS wgmmas; 2: RS wgmmas; 3: a batch of each in turn (the
// kernel's turn: QK^T then PV); 4: SS wgmmas of half the width (as many instructions, half the
// tensor work); 5: SS m64n8k16 (as many instructions, a sixteenth of the work); 6: SS m64n256k16
// (as many instructions, twice the work per instruction). A template argument, so that each
// instantiation holds only its own accumulator (all of them at once made ptxas serialize the wgmmas).
// 7: SS m64n128k16 batches of eight, each waited for before the next is issued (the queue drains:
// the warp waits in WARPGROUP.DEPBAR, not at an HGMMA's dispatch); 8: the same in groups of two.
// The GEMM warpgroup's thread 0 writes its cycles per k16 wgmma to gemm_cycles (64 at the dense peak).
template <int MODE>
__device__ __forceinline__ void gemm_role(unsigned base, int act_iters, unsigned* out, long long* gemm_cycles) {
  constexpr int kAccRegs = MODE == 4 ? 32 : MODE == 5 ? 4 : MODE == 6 ? 128 : 64;
  float acc[kAccRegs];
#pragma unroll
  for (int i = 0; i < kAccRegs; ++i) acc[i] = 0.0f;
  unsigned a_regs[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) a_regs[i] = 0;
  const WgmmaDescBase qa = sw128_kmajor_base(base);               // 64 x 128, K-major
  const WgmmaDescBase kb = sw128_kmajor_base(base + 16384);       // 128 (or 256) x 128, K-major
  const WgmmaDescBase vb = sw128_mnmajor_base(base + 16384, 128);  // 128 x 128, N-major
  // A fixed count that outlasts the activation loop in every mode (the narrow wgmmas' batches are
  // short: a count fitted to m64n128k16 let them finish early, and the activation then ran partly
  // alone); wgmma is .aligned, so the four warps must run the same number of batches (a per-warp
  // look at a flag would let one leave early). Only the activation's own loop is timed.
  const int batches = 32 * act_iters / 3;
  const long long g0 = clock64();
  if constexpr (MODE == 7 || MODE == 8) {
    constexpr int kPerGroup = MODE == 7 ? 8 : 2;
    for (int n = 0; n < batches * (8 / kPerGroup); ++n) {
      ptx::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kPerGroup; ++ks)
        ptx::Wgmma<128, kBF16>::template ss<1, 0, 0>(acc, qa.at(sw128_kmajor_step(64, ks)), kb.at(sw128_kmajor_step(128, ks)));
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
    }
  } else {
    gemm_batches<MODE>(acc, a_regs, qa, kb, vb, batches);
  }
  ptx::wgmma_wait<0>();
  if (threadIdx.x == 0) gemm_cycles[blockIdx.x] = (clock64() - g0) / ((MODE == 3 ? 16LL : 8LL) * batches);
  ptx::fence_operand(acc);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kAccRegs; ++i) s += acc[i];
  if (s == 12345.0f) out[0] = 1;  // keep the GEMMs
}

// One CTA: the GEMM warpgroup (threads 0-127) runs gemm_role<MODE>, the activation warpgroup times
// act_iters steps of activation KIND. Per CTA: one activation timing per warp.
// kinds 3 / 4: fast_gelu, with the first score of each group of 8 / 16 made to depend on the first
// tanh of the group before: its bits OR (that tanh's bits AND zero), one LOP3, x unchanged (`zero`
// is a kernel argument, 0, which ptxas cannot fold). ptxas can then not compute every tanh argument
// first (its breadth-first order): a group's arguments wait for the previous group's first MUFU,
// so FP32 work and MUFUs interleave.
template <int GROUP>
__device__ __forceinline__ void act_chained(const float (&sc)[64], unsigned (&p)[32], unsigned zero) {
  unsigned prev = 0;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    float x0 = sc[2 * i];
    const float x1 = sc[2 * i + 1];
    const bool first = (2 * i) % GROUP == 0;
    if (first && i > 0) x0 = __uint_as_float(__float_as_uint(x0) | (prev & zero));
    const float t0 = mufu_tanh(gelu_tanh_arg(x0)), t1 = mufu_tanh(gelu_tanh_arg(x1));
    if (first) prev = __float_as_uint(t0);
    p[i] = pack_bf16x2(gelu_twice_f_from_t(x0, t0), gelu_twice_f_from_t(x1, t1));
  }
}

template <int KIND, int MODE>
__global__ void __launch_bounds__(256, 1) bench(int act_iters, const float* in, unsigned* out, long long* cycles,
                                                long long* gemm_cycles, unsigned zero) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int tid = threadIdx.x;
  for (int i = tid; i < kSmemBytes / 4; i += 256) reinterpret_cast<unsigned*>(smem)[i] = 0;
  __syncthreads();
  // The 128-byte swizzle needs 1024-byte aligned tiles: round up inside the buffer (1 KB spare).
  const unsigned base = (static_cast<unsigned>(__cvta_generic_to_shared(smem)) + 1023u) & ~1023u;
  if (tid < 128) {
    if constexpr (MODE != 0) gemm_role<MODE>(base, act_iters, out, gemm_cycles);
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
    if constexpr (KIND >= 3) {
      act_chained<KIND == 3 ? 8 : 16>(sc, p, zero);
    } else {
#pragma unroll
      for (int i = 0; i < 32; ++i) p[i] = pack_bf16x2(act_score<KIND>(sc[2 * i]), act_score<KIND>(sc[2 * i + 1]));
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
  long long* gcyc;
  cuda_check(cudaMalloc(&gcyc, sizeof(long long) * blocks), "cudaMalloc");
  using Bench = void (*)(int, const float*, unsigned*, long long*, long long*, unsigned);
#define GDPA_MICRO_ROW(K) \
  {bench<K, 0>, bench<K, 1>, bench<K, 2>, bench<K, 3>, bench<K, 4>, bench<K, 5>, bench<K, 6>, bench<K, 7>, bench<K, 8>}
  const Bench kernels[5][9] = {GDPA_MICRO_ROW(0), GDPA_MICRO_ROW(1), GDPA_MICRO_ROW(2), GDPA_MICRO_ROW(3),
                               GDPA_MICRO_ROW(4)};
#undef GDPA_MICRO_ROW
  const char* kinds[] = {"fast_gelu (MUFU + FP32)", "FP32 only (tanh -> FFMA)", "tanh only (MUFU)",
                         "fast_gelu, chained by 8", "fast_gelu, chained by 16"};
  const char* names[] = {"idle", "SS m64n128k16", "RS m64n128k16", "SS + RS in turn", "SS m64n64k16 (1/2 work)",
                         "SS m64n8k16 (1/16 work)", "SS m64n256k16 (2x work)", "SS n128, 8 then drain",
                         "SS n128, 2 then drain"};
  long long hc[4 * 132];
  std::printf("activation cycles per 64-score step (mean over warps), by what the other warpgroup issues\n");
  for (int kind = 0; kind < 5; ++kind) {
    for (int mode = 0; mode < 9; ++mode) {
      const Bench k = kernels[kind][mode];
      cuda_check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes),
                 "cudaFuncSetAttribute");
      for (int rep = 0; rep < 2; ++rep) k<<<blocks, 256, kSmemBytes>>>(iters, in, out, cyc, gcyc, 0u);
      wait_for_kernels();
      cuda_check(cudaMemcpy(hc, cyc, sizeof(hc), cudaMemcpyDeviceToHost), "cudaMemcpy");
      double sum = 0;
      for (int i = 0; i < 4 * blocks; ++i) sum += double(hc[i]);
      long long hg[132];
      cuda_check(cudaMemcpy(hg, gcyc, sizeof(hg), cudaMemcpyDeviceToHost), "cudaMemcpy");
      double gsum = 0;
      for (int i = 0; i < blocks; ++i) gsum += double(hg[i]);
      std::printf("%-26s next to %-26s %6.0f   (GEMM warpgroup: %5.1f cycles per wgmma)\n", kinds[kind],
                  names[mode], sum / (4.0 * blocks) / iters, mode == 0 ? 0.0 : gsum / blocks);
    }
  }
  return 0;
}
