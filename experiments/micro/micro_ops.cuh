// micro_ops.cuh — what the standalone microbenchmarks of this folder share: a few device operations
// and the host side's checked calls, timing read-back and inputs.
// The kernels' own wrappers (ptx/math.cuh, kernels/sm90/fragments.cuh) are written for device-only
// compilation (NVRTC) and are absent from nvcc's host pass of a whole program, so these are
// spelled out here, as the same single PTX instructions.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

// tanh.approx.f32: one MUFU.TANH (not volatile, as in ptx/math.cuh: ptxas schedules it freely).
__device__ __forceinline__ float mufu_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// ex2.approx.f32: one MUFU.EX2.
__device__ __forceinline__ float mufu_ex2(float x) {
  float y;
  asm volatile("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Two floats to one register of two bf16 values, `lo` in the low half (what the kernels' P is).
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// fast_gelu's halved-P form, 2 f = x + x tanh(x (k + k a x^2)), as the forward computes it
// (kernels/common/activations.cuh act_twice_f), split at the tanh so that callers can reorder it.
__device__ __forceinline__ float gelu_tanh_arg(float x) { return x * fmaf(0.0356774081f, x * x, 0.7978845608f); }
__device__ __forceinline__ float gelu_twice_f_from_t(float x, float t) { return fmaf(x, t, x); }
__device__ __forceinline__ float gelu_twice_f(float x) { return gelu_twice_f_from_t(x, mufu_tanh(gelu_tanh_arg(x))); }

// ---- Host side ----

// Every runtime call's status: the program stops with the call's name on the first failure.
inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::printf("error: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
// The launches so far finished without error.
inline void wait_for_kernels() {
  cuda_check(cudaGetLastError(), "launch");
  cuda_check(cudaDeviceSynchronize(), "kernel");
}
// The largest of the first `warps` per-warp cycle counts the kernel wrote to `dev_cycles`.
inline long long slowest_warp(const long long* dev_cycles, int warps) {
  long long h[64];
  cuda_check(cudaMemcpy(h, dev_cycles, sizeof(long long) * warps, cudaMemcpyDeviceToHost), "cudaMemcpy");
  long long slowest = 0;
  for (int w = 0; w < warps; ++w) slowest = h[w] > slowest ? h[w] : slowest;
  return slowest;
}
// n scores spread over [-3, 3] (a fixed linear congruential sequence), in device memory.
inline float* device_scores(int n) {
  float* h = new float[n];
  unsigned x = 1;
  for (int i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    h[i] = ((x >> 8) / 16777216.0f - 0.5f) * 6.0f;
  }
  float* d = nullptr;
  cuda_check(cudaMalloc(&d, sizeof(float) * n), "cudaMalloc");
  cuda_check(cudaMemcpy(d, h, sizeof(float) * n, cudaMemcpyHostToDevice), "cudaMemcpy");
  delete[] h;
  return d;
}
