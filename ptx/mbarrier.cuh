// mbarrier.cuh — shared-memory transaction barriers (sm_90): the handshake between the TMA
// producer and the tensor-core consumers.
//
// Protocol used by every pipeline here: a "full" barrier (count 1) is armed by the producer with
// arrive.expect_tx(bytes) and completes when the TMA engine has written those bytes; an "empty"
// barrier (count = number of consumer warpgroups) completes when every consumer has released the
// stage. Waiters track the phase bit: a fresh barrier is in phase 0, so a producer that waits for
// "previous phase complete" (parity 1) on an empty barrier passes immediately the first time.
#pragma once
#include "common.cuh"

namespace gdpa::ptx {

__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// Makes the inits above visible to the async proxy (TMA complete_tx) and other threads; follow it
// with a CTA-wide barrier before any thread uses the mbarriers.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// `count` arrivals at once: one thread standing for `count` others whose accesses it has already
// ordered (a warpgroup's four warps, after it waited for an async read of their stores).
__device__ __forceinline__ void mbarrier_arrive_count(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// Arrive and add `bytes` to the transaction count the phase must see before completing.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

// CLUSTER: the arrivals come from other CTAs of the cluster (cluster.cuh), so the wait acquires at
// cluster scope and their released accesses are visible after it; otherwise the default, CTA scope.
template <bool CLUSTER = false>
__device__ __forceinline__ bool mbarrier_try_wait(unsigned long long* bar, unsigned parity) {
  unsigned done;
  // The suspend-time hint lets the warp sleep in hardware instead of spinning on issue slots.
  if constexpr (CLUSTER)
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2, 0x989680;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  else
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, 0x989680;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  return done != 0;
}

// Blocks until the phase with the given parity has completed.
template <bool CLUSTER = false>
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity) {
  while (!mbarrier_try_wait<CLUSTER>(bar, parity)) {
  }
}

// The same for a local mbarrier that other CTAs of the cluster arrive on.
__device__ __forceinline__ void mbarrier_wait_cluster(unsigned long long* bar, unsigned parity) {
  mbarrier_wait<true>(bar, parity);
}

}  // namespace gdpa::ptx
