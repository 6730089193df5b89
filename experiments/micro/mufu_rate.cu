// mufu_rate.cu — issue rate of the special-function unit (MUFU) on one SM partition: how many
// cycles one warp-wide tanh.approx.f32 / ex2.approx.f32 occupies it, next to FFMA and the forward's
// fast_gelu chain (x^2, FFMA, FMUL, tanh, FFMA), with one and two warps per partition. 132 blocks
// of 4 or 8 warps, 16 independent chains per thread, clock64 around the loop.
// Build and run on an sm_90 GPU, from the repository root:
//   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I. -o mufu_rate \
//     experiments/micro/mufu_rate.cu && ./mufu_rate
// Seventeenth session, H200 (experiments/PERF_NOTES.md): tanh 8.0-8.1 cycles per warp instruction
// per partition (16 per cycle per SM), ex2 8.3, FFMA 1.15-1.3, the fast_gelu chain 11.9 per element
// with one warp, 9.7 with two.
#include "experiments/micro/micro_ops.cuh"

enum Op { kTanh, kEx2, kFfma, kFastGeluChain };

template <int OP>
__global__ void chains(float* out, long long* cycles, int iters) {
  float v[16];
  for (int i = 0; i < 16; ++i) v[i] = 0.001f * float(threadIdx.x + i);
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      if constexpr (OP == kTanh) v[i] = mufu_tanh(v[i]);
      if constexpr (OP == kEx2) v[i] = mufu_ex2(v[i]) * -0.5f;  // the multiply keeps it bounded
      if constexpr (OP == kFfma) v[i] = fmaf(v[i], 0.999f, 0.001f);
      if constexpr (OP == kFastGeluChain) v[i] = gelu_twice_f(v[i]) * 0.5f;  // f: keeps it bounded
    }
  }
  const long long t1 = clock64();
  float s = 0.0f;
  for (int i = 0; i < 16; ++i) s += v[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x % 32 == 0) cycles[blockIdx.x * 32 + threadIdx.x / 32] = t1 - t0;
}

template <int OP>
void time_op(const char* name, float* out, long long* cycles) {
  const int iters = 4096;
  for (int warps = 4; warps <= 8; warps += 4) {
    for (int rep = 0; rep < 2; ++rep) chains<OP><<<132, 32 * warps>>>(out, cycles, iters);
    wait_for_kernels();
    const long long slowest = slowest_warp(cycles, warps);
    const double per_warp = double(slowest) / (iters * 16.0);  // cycles per element per warp
    std::printf("%-44s warps per partition %d: %.2f cycles per element per warp, %.2f per partition\n", name,
                warps / 4, per_warp, per_warp / (warps / 4));
  }
}

int main() {
  float* out;
  long long* cycles;
  cuda_check(cudaMalloc(&out, 132 * 256 * sizeof(float)), "cudaMalloc");
  cuda_check(cudaMalloc(&cycles, 132 * 32 * sizeof(long long)), "cudaMalloc");
  time_op<kTanh>("tanh.approx.f32", out, cycles);
  time_op<kEx2>("ex2.approx.f32 (+FMUL)", out, cycles);
  time_op<kFfma>("FFMA", out, cycles);
  time_op<kFastGeluChain>("fast_gelu chain (FMUL,FFMA,FMUL,MUFU,FFMA)", out, cycles);
  return 0;
}
