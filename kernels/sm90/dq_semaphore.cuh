// dq_semaphore.cuh — the deterministic mode's per-block dQ semaphores, shared by the backward's
// writer (bwd_dq_writer.cuh) and the dQ follower (dq_follow.cu).
//
// The dQ block of (query tile, head) receives one add per KV tile that sees the query tile; its
// semaphore counts the adds done. The CTA of KV tile n waits until the count equals the number of
// such tiles with a smaller index (n - first / BlockN, DqJobHeader.expected), adds, waits until its
// adds have completed in global memory, and increments the count. So the adds land in increasing
// KV order, the same every run: bit-identical dQ (dK and dV are per-CTA register sums in a fixed
// order anyway). No CTA can wait on a tile queued behind itself: the host orders each (sequence,
// KV head)'s tiles by KV index (host/sm90_bwd.cpp). The follower waits for the final count (every
// add) before it reads the block. A wait longer than ~2^35 cycles (~19 s) would still be a bug:
// it traps, so the launch fails instead of hanging the GPU.
// Acquire / release at GPU scope rather than a full fence.sc.gpu on each side (ncu, self L = 2048:
// the writer warp spent a fifth of its samples in those two fences, on the deterministic order's
// chain from one KV tile's CTA to the next).
#pragma once
#include "../../ptx/fence.cuh"

namespace gdpa::sm90 {

// Waits until *sem == expected, polling every SLEEP_NS nanoseconds. The acquire orders the
// previous owners' adds before what follows, and the proxy fence extends that to our bulk
// operations (reduces or copies), which run in the async proxy.
template <unsigned SLEEP_NS = 32>
__device__ __forceinline__ void semaphore_wait(const int* sem, int expected) {
  const long long start = clock64();
  while (ptx::ld_acquire_gpu(sem) != expected) {
    __nanosleep(SLEEP_NS);
    if (clock64() - start > (1ll << 35)) __trap();
  }
  ptx::fence_proxy_async_global();
}

__device__ __forceinline__ void semaphore_release(int* sem) {
  ptx::fence_proxy_async_global();  // our completed bulk reduces before the generic release
  ptx::red_release_gpu_add(sem, 1);
}

}  // namespace gdpa::sm90
