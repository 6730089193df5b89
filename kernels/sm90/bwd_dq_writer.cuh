// bwd_dq_writer.cuh — the backward's dQ writer warp: bulk reduces of the staged dQ jobs in the
// deterministic order, a pair's copies to rank 1, finished blocks stored by TMA.
// Part of the Hopper backward: gdpa_bwd.cu has the design, the roles and the kernel.
#pragma once
#include "bwd_common.cuh"

namespace gdpa::sm90 {

// ---------------------------------------------------------------------------------------------
// dQ writer: one warp. Jobs arrive in the consumers' step order; job (step j, column chunk c) is
// produced by consumer warpgroup (j + c) % 2 (see bwd_dq_owner_chunk).
// ---------------------------------------------------------------------------------------------

// kBwdDqTmaStore: the staged rows of a finished job leave by one TMA store of the 64 x 64 box.
template <int D>
__device__ __forceinline__ void bwd_store_finished_job(const DqJobHeader& h, const ptx::TensorMap* tm_dq,
                                                       const unsigned char* staging) {
  ptx::tma_store_3d(tm_dq, ptx::smem_addr(staging), h.box.col % D, h.box.col / D, h.box.row);
  ptx::bulk_commit_group();
}

// kBwdPair, one step of the writer. Rank 0 sends: the step's jobs (one per consumer at D = 128,
// one in turn at D = 64) go from the consumers' staging buffers into rank 1's partial buffers of
// the same consumer index, and each staging buffer is given back once rank 1 has read the copy
// (its only completion signal). Rank 1 finishes: its consumers add the parts and stage the rows;
// with TMA (kBwdDqTmaStore) this warp stores a job of whole rows and gives the buffer back once
// the store has read it, otherwise the consumers copied the rows and their dq_full arrival
// already says the buffer is free. `k` is each owner's job index of this step (dq_job_index),
// also its copy index. `stage`: the consumers' staging buffers (rank 0 with kBwdPairTwoStage: two,
// so that a consumer stages its next job while rank 1 has not yet read the previous copy).
template <int D, bool TMA, bool FENCE>
__device__ __forceinline__ void bwd_pair_send_step(int step, unsigned k, DqStage stage, BwdBarriers* bars,
                                                   unsigned char* smem, const ptx::TensorMap* tm_dq, bool leader) {
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  constexpr int kChunks = D / kBwdDqCols;
  const bool sender = ptx::cluster_ctarank() == 0;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int owner = (step + c) & 1;  // bwd_dq_owner_chunk
    const int b = stage.buffer(k);
    ptx::mbarrier_wait(&bars->dq_full[owner][b], stage.parity(k));
    if (FENCE && leader) ptx::fence_proxy_async_smem();  // kBwdDqFenceAtWriter
    const unsigned char* staging = smem + dq_buffer_off<D>(owner, b);
    if (sender && leader) {
      const unsigned buf = ptx::smem_addr(smem + dq_buffer_off<D>(owner, kDqPartial));
      const unsigned full = ptx::map_shared_rank(ptx::smem_addr(&bars->pair_full[owner]), 1u);
      ptx::mbarrier_arrive_expect_tx_remote(full, kBwdDqJobBytes);
      ptx::bulk_copy_s2c(ptx::map_shared_rank(buf, 1u), staging, kBwdDqJobBytes, full);
    }
    if (TMA && !sender && leader) {
      const DqJobHeader& h = bars->dq_job[owner][k & 1];
      if (h.flags & kDqJobTmaStore) bwd_store_finished_job<D>(h, tm_dq, staging);
    }
    __syncwarp();
  }
  if (TMA && !sender && leader) ptx::bulk_wait_group_read<0>();  // the stores have read the staging buffers
  __syncwarp();
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int owner = (step + c) & 1;
    if (sender) ptx::mbarrier_wait_cluster(&bars->pair_empty[owner], k & 1u);
    if (leader) ptx::mbarrier_arrive(&bars->dq_empty[owner][stage.buffer(k)]);
    __syncwarp();
  }
}

// The warp runs with the producer warpgroup's 24 registers, so it decodes nothing per job: it
// only counts steps (bwd_tile's step count, the same as the consumers') to know how many jobs come
// and from which staging buffer, and takes addresses and semaphores from the job headers.
// FINISH (kBwdDqFinish; the host sets it in the deterministic mode only): each step's jobs are
// first taken from their announcements, made while the consumers still compute them; for a last
// job the semaphore wait happens there and its partial sum is loaded for the consumer (dq_partial
// is answered for every job, so both sides count phases by job). Then the staged jobs are added as
// usual, except the last ones, which their consumers have finished: stored themselves, or, with
// TMA (kBwdDqTmaStore) and whole rows, staged for this warp's TMA store.
//
// PAIR (kBwdPair, with FINISH): no accumulator, no semaphores, no announcements (the CTA's rank
// says what every job is). The CTA of cluster rank 0 (KV
// tile 0) sends its part of every job to rank 1 (KV tile 1), which finishes the blocks: rank 1
// runs a little behind and waits for nothing else, while rank 0 never waits for data, only for
// rank 1 to have read its previous copy (bwd_pair_send_step). The job of (step, chunk) is done by
// the consumer of the same index in both CTAs, since both run the same steps.
template <int D, int MASK, bool FINISH, bool PAIR, bool TMA, bool TWO, bool PAIR_TWO, bool RED, bool RECORDS,
          bool FENCE>
__device__ __forceinline__ void bwd_dq_writer(const GdpaParams& p, const ptx::TensorMap* tm_dq, unsigned char* smem) {
  static_assert(!PAIR || FINISH, "kBwdPair: the finishing code");
  static_assert(!(TWO && FINISH), "kBwdDqTwoStage: the partial-sum buffer is the finish's");
  static_assert(!(RED && FINISH), "kBwdDqRed: the unordered accumulator path only");
  const DqStage stage = dq_stage_of<TWO, PAIR_TWO>();
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  constexpr int kChunks = D / kBwdDqCols;
  auto* bars = reinterpret_cast<BwdBarriers*>(smem + plan.bar_off);
  const bool leader = ptx::lane_id() == 0;
  int step = 0;  // the consumers' CTA-lifetime step counter, reproduced
  // Deterministic mode: the previous step's semaphore. Its adds are waited for (landed in global
  // memory) and it is released at the start of the next step, not before the staging buffers are
  // given back: the consumers need their buffer once the bulk operations have read it, and the
  // landing takes about as long again. Released before anything of the next step waits on a
  // semaphore, which may be this very one (the next tile's first block can be this tile's last).
  int* pending = nullptr;
  auto release_pending = [&] {
    if (leader && pending != nullptr) {
      ptx::bulk_wait_group<0>();
      semaphore_release(pending);
    }
    pending = nullptr;
  };
  const BwdWalk<PAIR> walk;
#pragma unroll 1
  for (int it = walk.first; it < p.num_tiles; it += walk.stride) {
    const int steps = bwd_tile<MASK, PAIR, RECORDS>(p, it).steps;
#pragma unroll 1
    for (int ls = 0; ls < steps; ++ls, ++step) {
      const unsigned k = unsigned(dq_job_index<D>(step));  // each owner's job index this step
      int* sem = nullptr;
      release_pending();
      if constexpr (FINISH && !PAIR) {  // pairs announce nothing (bwd_dq_finish)
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const int owner = (step + c) & 1;
          ptx::mbarrier_wait(&bars->dq_announce[owner][k & 1], (k >> 1) & 1u);
          if (leader) {
            const DqJobHeader& h = bars->dq_job[owner][k & 1];
            unsigned long long* bar = &bars->dq_partial[owner];
            // Only a last job waits for the earlier contributors here (its partial sum must be
            // complete before the load); the others wait when they add, as without FINISH, so
            // that their consumers keep a step of slack against the other CTAs.
            if ((h.flags & kDqJobLast) && c == 0 && p.deterministic) semaphore_wait(h.sem, h.expected);
            if (h.flags & kDqJobPartial) {
              ptx::mbarrier_arrive_expect_tx(bar, kBwdDqJobBytes);
              ptx::bulk_copy_g2s(smem + dq_buffer_off<D>(owner, kDqPartial), h.dst, kBwdDqJobBytes, bar,
                                 ptx::kEvictFirst);
            } else {
              ptx::mbarrier_arrive(bar);
            }
          }
          __syncwarp();
        }
      }
      if constexpr (PAIR) {
        bwd_pair_send_step<D, TMA, FENCE>(step, k, stage, bars, smem, tm_dq, leader);
      } else {
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const int owner = (step + c) & 1;  // bwd_dq_owner_chunk: chunk c of step j is WG (j + c) % 2
          const int b = stage.buffer(k);
          ptx::mbarrier_wait(&bars->dq_full[owner][b], stage.parity(k));  // buffer b of owner holds the job
          if (!RED && leader) {  // RED: the consumer added the job itself; only the phases go on
            if (FENCE) ptx::fence_proxy_async_smem();  // kBwdDqFenceAtWriter
            const DqJobHeader& h = bars->dq_job[owner][k & 1];
            // Both chunks of a step belong to the same (slot, head): one wait, one release.
            if (c == 0 && p.deterministic && !(FINISH && (h.flags & kDqJobLast))) semaphore_wait(h.sem, h.expected);
            sem = h.sem;
            const float* staged = reinterpret_cast<const float*>(smem + dq_buffer_off<D>(owner, b));
            // Deterministic mode: the first contributor (in the fixed KV order) stores, the others
            // add, so the accumulator needs no zeroing pass; blocks nobody writes are recognised by
            // their semaphore (0) in dq_convert.cu. A last job (FINISH) is finished: its consumer
            // stored the rows, or staged them for our TMA store (kBwdDqTmaStore).
            if (!FINISH || !(h.flags & kDqJobLast)) {
              if (p.deterministic && h.expected == 0)
                ptx::bulk_copy_s2g(h.dst, staged, kBwdDqJobBytes);
              else
                ptx::bulk_reduce_add_f32(h.dst, staged, kBwdDqJobBytes);
              ptx::bulk_commit_group();
            } else if (TMA && (h.flags & kDqJobTmaStore)) {
              bwd_store_finished_job<D>(h, tm_dq, reinterpret_cast<const unsigned char*>(staged));
            }
          }
          __syncwarp();  // bar.sync is .aligned: the whole warp reaches the next one together
        }
        if (leader) ptx::bulk_wait_group_read<0>();  // staging may be overwritten
        __syncwarp();
        if (leader)
#pragma unroll
          for (int c = 0; c < kChunks; ++c) ptx::mbarrier_arrive(&bars->dq_empty[(step + c) & 1][stage.buffer(k)]);
        // A finished step has no adds; its count still rises, so dq_convert knows the block was written.
        if (p.deterministic) pending = sem;
      }
    }
  }
  release_pending();
  if (leader) ptx::bulk_wait_group<0>();
}

}  // namespace gdpa::sm90
