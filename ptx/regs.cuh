// regs.cuh — register reallocation between warpgroups, lane election and named barriers.
#pragma once

namespace gdpa::ptx {

// setmaxnreg moves registers between warpgroups of one CTA: the producer gives most of its
// registers back (dec) so the consumers can hold S, P and O fragments (inc). Only legal when the
// kernel has a register cap at entry (__launch_bounds__(threads, 1)) and every thread of the
// warpgroup executes it; R is a multiple of 8 in [24, 256].
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg range");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg range");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}

// True in exactly one active lane of the warp (elect.sync is cheaper than comparing lane ids and
// keeps the branch provably warp-uniform up to the elected lane).
__device__ __forceinline__ bool elect_one() {
  unsigned pred = 0;
  asm volatile(
      "{\n .reg .pred p;\n .reg .b32 lane;\n"
      " elect.sync lane|p, 0xffffffff;\n"
      " selp.u32 %0, 1, 0, p;\n}"
      : "=r"(pred));
  return pred != 0;
}

// Named barriers (ids 1..15; 0 is __syncthreads). `threads` counts every thread that syncs or
// arrives, a multiple of 32.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace gdpa::ptx
