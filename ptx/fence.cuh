// fence.cuh — proxy fences, and acquire / release on a global flag. Shared memory written by ordinary stores (st.shared, stmatrix) and
// then read by the async proxy (wgmma operands, TMA stores, bulk reduces) needs
// fence.proxy.async in the writing threads before the barrier that publishes it.
#pragma once

namespace gdpa::ptx {

__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Generic-proxy global writes that a later TMA load in the same grid reads.
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

// A flag in global memory shared between CTAs (the backward's dQ semaphores): an acquire load
// orders every access after it behind the releaser's accesses before its release, at GPU scope;
// a release reduction is the matching one-sided publish. The pair replaces a full fence.sc.gpu
// (MEMBAR.SC.GPU) on each side, which also waits for unrelated memory traffic.
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void red_release_gpu_add(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Four floats added into global memory (16-byte aligned) at GPU scope without a result: a vector
// reduction (sm_90), performed in L2 like the bulk reduce, but straight from registers.
__device__ __forceinline__ void red_add_v4_f32(float* p, float a, float b, float c, float d) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

}  // namespace gdpa::ptx
