// act_schedule.cu — the forward's activation alone: one warp per SM partition turns 64 scores per
// thread into packed bf16 P with fast_gelu's 2f form, as a consumer warpgroup does per step, in
// several source orders (plain, grouped with warp syncs, all tanh arguments first, skewed). ptxas
// schedules all of them alike (a MUFU every ~8 instructions), so the difference is small; the point
// is the cost of the activation with nothing else on the SM. The other orders split the activation
// at the tanh (z = x (k + k a x^2), then 2 f = x + x tanh(z)) to move its parts around.
// Build and run on an sm_90 GPU, from the repository root:
//   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I. -o act_schedule \
//     experiments/micro/act_schedule.cu && ./act_schedule
// Seventeenth session, H200: 665-685 cycles per 64-score step including the loop's 96 stand-in
// instructions, against about 1000-1250 cycles inside the kernel (experiments/PERF_NOTES.md).
#include "experiments/micro/micro_ops.cuh"

__device__ __forceinline__ unsigned pair_from_args(const float (&s)[64], const float (&z)[64], int i) {
  return pack_bf16x2(gelu_twice_f_from_t(s[2 * i], mufu_tanh(z[2 * i])),
                     gelu_twice_f_from_t(s[2 * i + 1], mufu_tanh(z[2 * i + 1])));
}

// 0: plain; 1 / 2 / 3: groups of 8 / 4 / 16 pairs separated by __syncwarp; 4: every tanh argument
// first; 5: skewed (the arguments of pair i + 4 computed with the tanh of pair i); 6: skewed, with a
// __syncwarp every 4 pairs.
template <int V>
__device__ __forceinline__ void activate(const float (&s)[64], unsigned (&p)[32]) {
  if constexpr (V == 0) {
#pragma unroll
    for (int i = 0; i < 32; ++i)
      p[i] = pack_bf16x2(gelu_twice_f(s[2 * i]), gelu_twice_f(s[2 * i + 1]));
  } else if constexpr (V <= 3) {
    constexpr int kGroup = V == 1 ? 8 : (V == 2 ? 4 : 16);
#pragma unroll
    for (int g = 0; g < 32; g += kGroup) {
#pragma unroll
      for (int i = g; i < g + kGroup; ++i)
        p[i] = pack_bf16x2(gelu_twice_f(s[2 * i]), gelu_twice_f(s[2 * i + 1]));
      __syncwarp();
    }
  } else {
    constexpr int kSkew = V == 4 ? 32 : 4;  // pairs whose arguments are ready ahead of their tanh
    float z[64];
#pragma unroll
    for (int i = 0; i < 2 * kSkew; ++i) z[i] = gelu_tanh_arg(s[i]);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      if (i + kSkew < 32) {
        z[2 * (i + kSkew)] = gelu_tanh_arg(s[2 * (i + kSkew)]);
        z[2 * (i + kSkew) + 1] = gelu_tanh_arg(s[2 * (i + kSkew) + 1]);
      }
      p[i] = pair_from_args(s, z, i);
      if (V == 6 && i % 4 == 3) __syncwarp();
    }
  }
}

template <int V>
__global__ void steps(const float* in, unsigned* out, long long* cycles, int iters) {
  float s[64];
  unsigned p[32];
  for (int i = 0; i < 64; ++i) s[i] = in[(blockIdx.x * blockDim.x + threadIdx.x) * 64 + i];
  unsigned acc = 0;
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    activate<V>(s, p);
#pragma unroll
    for (int i = 0; i < 32; ++i) acc ^= p[i];
#pragma unroll
    for (int i = 0; i < 64; ++i) s[i] *= 1.0001f;  // new scores each step (stands in for the GEMM)
  }
  const long long t1 = clock64();
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  if (threadIdx.x % 32 == 0) cycles[blockIdx.x * 32 + threadIdx.x / 32] = t1 - t0;
}

template <int V>
void time_order(const char* name, const float* in, unsigned* out, long long* cycles) {
  const int iters = 2000;
  for (int rep = 0; rep < 2; ++rep) steps<V><<<132, 128>>>(in, out, cycles, iters);
  wait_for_kernels();
  const long long slowest = slowest_warp(cycles, 4);
  std::printf("%-34s %.0f cycles per 64-score step per warp (MUFU floor 512; with the loop's 64 FMUL + 32 LOP)\n",
              name, double(slowest) / iters);
}

int main() {
  const float* in = device_scores(64 * 128 * 132);
  unsigned* out;
  long long* cycles;
  cuda_check(cudaMalloc(&out, 128 * 132 * sizeof(unsigned)), "cudaMalloc");
  cuda_check(cudaMalloc(&cycles, 132 * 32 * sizeof(long long)), "cudaMalloc");
  time_order<0>("plain loop (the kernel's order)", in, out, cycles);
  time_order<1>("groups of 8 pairs + syncwarp", in, out, cycles);
  time_order<2>("groups of 4 pairs + syncwarp", in, out, cycles);
  time_order<3>("groups of 16 pairs + syncwarp", in, out, cycles);
  time_order<4>("all tanh arguments first", in, out, cycles);
  time_order<5>("skewed by 4 pairs", in, out, cycles);
  time_order<6>("skewed by 4, syncwarp every 4", in, out, cycles);
  return 0;
}
