// fence.cuh — proxy fences. Shared memory written by ordinary stores (st.shared, stmatrix) and
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

}  // namespace gdpa::ptx
