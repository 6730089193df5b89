// pipeline.cuh — stage/phase bookkeeping of the mbarrier rings shared by producer and consumers.
//
// Producer and consumers walk the same sequence of stages (they visit the same tiles in the same
// order), so each side keeps its own counter and they never exchange indices: stage = count %
// STAGES and the phase parity flips every time the ring wraps.
#pragma once
#include "../../ptx/mbarrier.cuh"
#include "../../ptx/regs.cuh"

namespace gdpa::sm90 {

template <int STAGES>
struct PipeCounter {
  int count = 0;
  __device__ __forceinline__ int stage() const { return count % STAGES; }
  __device__ __forceinline__ unsigned phase() const { return unsigned(count / STAGES) & 1u; }
  __device__ __forceinline__ void advance() { ++count; }
};

// Full/empty barrier pair of one ring slot.
struct SlotBarriers {
  unsigned long long full;
  unsigned long long empty;
};

// Producer side: wait until consumers released the slot, then arm it for `bytes` of TMA.
__device__ __forceinline__ void producer_acquire(SlotBarriers& b, unsigned phase, unsigned bytes) {
  ptx::mbarrier_wait(&b.empty, phase ^ 1u);
  ptx::mbarrier_arrive_expect_tx(&b.full, bytes);
}

// Consumer side.
__device__ __forceinline__ void consumer_wait(SlotBarriers& b, unsigned phase) { ptx::mbarrier_wait(&b.full, phase); }
// One arrival per consumer warp (lane 0), after that warp's wgmma reading the slot completed.
__device__ __forceinline__ void consumer_release(SlotBarriers& b) {
  if ((threadIdx.x & 31) == 0) ptx::mbarrier_arrive(&b.empty);
}

// Pingpong turns of the two consumer warpgroups (FA3's warp scheduler barriers): a warpgroup waits
// for its turn before issuing a batch of GEMMs and hands the turn to the other after, so the tensor
// cores run one warpgroup's batch while the other computes, instead of interleaving both batches
// so that both finish late. Named barriers BAR_BASE + cw, each completed by the waiting
// warpgroup's 128 threads and the other's 128 arrivals. Both warpgroups must take the same number
// of turns, and warpgroup 1 starts by handing the first turn to warpgroup 0 (start()).
template <bool ON, int BAR_BASE>
struct ConsumerTurns {
  __device__ __forceinline__ static void start(int cw) {
    if constexpr (ON)
      if (cw == 1) pass(cw);
  }
  __device__ __forceinline__ static void wait(int cw) {
    if constexpr (ON) ptx::named_barrier_sync(BAR_BASE + cw, 2 * 128);
  }
  __device__ __forceinline__ static void pass(int cw) {
    if constexpr (ON) ptx::named_barrier_arrive(BAR_BASE + (cw ^ 1), 2 * 128);
  }
};

}  // namespace gdpa::sm90
