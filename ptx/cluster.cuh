// cluster.cuh — thread-block clusters (sm_90): the rank of a CTA in its cluster, the cluster-wide
// barrier, and the distributed-shared-memory operations one CTA performs on another's shared
// memory: remote mbarrier arrivals and bulk copies from its own shared memory into the partner's.
//
// Addresses: a CTA's shared variable has a 32-bit shared::cta address (smem_addr); `mapa` turns it
// into the shared::cluster address of the same variable in the CTA of another rank (the kernel's
// shared-memory layout is the same in every CTA of a launch, so the same offset names the same
// variable there).
#pragma once
#include "common.cuh"
#include "mbarrier.cuh"

namespace gdpa::ptx {

__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Every thread of every CTA of the cluster; release / acquire order shared-memory writes (and
// mbarrier inits, after fence_mbarrier_init) before any other CTA's use of them.
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The shared::cluster address of `cta_addr` (a shared::cta address of this CTA) in CTA `rank`.
__device__ __forceinline__ unsigned map_shared_rank(unsigned cta_addr, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(cta_addr), "r"(rank));
  return r;
}

// Arrive on another CTA's mbarrier (shared::cluster address). Release at cluster scope: this
// thread's earlier shared-memory accesses happen before whatever the waiter does next.
__device__ __forceinline__ void mbarrier_arrive_remote(unsigned cluster_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(cluster_bar) : "memory");
}

// Arrive on another CTA's mbarrier and add `bytes` to the transaction count of its current phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx_remote(unsigned cluster_bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%0], %1;" ::"r"(cluster_bar),
               "r"(bytes)
               : "memory");
}

// Waiting on a local mbarrier whose arrivals come from other CTAs: mbarrier.cuh,
// mbarrier_wait_cluster (acquire at cluster scope).

// The TMA unit copies `bytes` (multiple of 16, 16-byte aligned) from this CTA's shared memory into
// another CTA's (shared::cluster address) and counts them on that CTA's mbarrier as transaction
// bytes. The only completion signal is that remote mbarrier: the source may be rewritten once the
// receiver says so.
__device__ __forceinline__ void bulk_copy_s2c(unsigned cluster_dst, const void* smem_src, unsigned bytes,
                                              unsigned cluster_bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   cluster_dst),
               "r"(smem_addr(smem_src)), "r"(bytes), "r"(cluster_bar)
               : "memory");
}

}  // namespace gdpa::ptx
