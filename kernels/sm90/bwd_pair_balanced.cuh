// bwd_pair_balanced.cuh — kBwdPairBalanced (bwd_config.h): the two CTAs of a cluster pair take
// turns at finishing the dQ blocks, each finish one job late. The consumers' hand-over and finish,
// and the dQ writer's step, tile end and exit.
// Part of the Hopper backward: gdpa_bwd.cu has the design, the roles and the kernel.
#pragma once
#include "bwd_common.cuh"

namespace gdpa::sm90 {

// Job k of a consumer (dq_job_index: the same jobs, in the same order, in both CTAs) is finished by
// rank 1 where k is even and by rank 0 where it is odd; the other rank sends its part. Each rank
// therefore finishes every other job and sends every other one, and the n-th job it finishes and
// the n-th it sends both have n = k / 2: every barrier below counts its phases by k / 2.
__device__ __forceinline__ bool pair_finishes(unsigned k, unsigned rank) { return ((k ^ rank) & 1u) != 0; }

// Consumer cw's two 16 KB buffers in this mode (the same bytes as DqBuffer's):
//   staging (kDqStaging): the fp32 part of its current job, sent by the writer (a job the partner
//     finishes) or kept for its own finish one job later;
//   partial (kDqPartial): the partner's part of a job this rank finishes (the partner's bulk copy,
//     on pair_full), then the finished io-dtype rows staged over it for the writer's TMA store.
// Barriers of consumer cw, each counting its phases by k / 2 unless said otherwise:
//   dq_full[cw][0]                    the consumer's 128 threads: job k's part is staged (by k)
//   dq_empty[cw][0]                   the writer: it has taken a job this rank finishes (whose part
//                                     stays staged for the consumer); a sent part's buffer is free
//                                     once its copy has landed (pair_landed), which the consumer
//                                     waits for itself, so that the writer never waits for it
//   dq_full[cw][1]                    the consumer's 128 threads: a finished block is staged in the
//                                     partial buffer (or its rows were copied by the threads)
//   pair_full[cw]                     the partner's part has landed in our partial buffer
//   pair_landed[cw]                   our part has landed in the partner's (the partner's writer)
//   pair_empty[cw]                    the partner's partial buffer is free again (its writer, once
//                                     its TMA store has read the finished rows)
// Every remote arrival is waited for by the CTA it lands in before that CTA may exit (the writer's
// last pair_empty wait, bwd_pair_writer_exit).

// Waits until consumer cw's staging buffer, which holds job k's part, may be rewritten: a sent
// part once its copy has landed in the partner (the partner's writer says so on pair_landed), a
// part this rank finishes once the writer has taken the job (dq_empty; the part itself was read
// by the consumer's own finish). Also the order the barriers' phases need: neither dq_full[cw][0]
// nor these two can run two phases ahead of their waiters.
template <int D>
__device__ __forceinline__ void bwd_pair_wait_staging_free(unsigned k, int cw, BwdBarriers* bars) {
  if (pair_finishes(k, ptx::cluster_ctarank()))
    ptx::mbarrier_wait(&bars->dq_empty[cw][0], (k >> 1) & 1u);
  else
    ptx::mbarrier_wait_cluster(&bars->pair_landed[cw], (k >> 1) & 1u);
}

// The same for the warpgroup's last job before step `step` of the CTA's lifetime, if it had one
// (the epilogue's dK staging and the CTA's exit).
template <int D>
__device__ __forceinline__ void bwd_pair_wait_last_staging_free(int step, int cw, BwdBarriers* bars) {
  const int jobs = dq_jobs_before<D>(step, cw);
  if (jobs >= 1) bwd_pair_wait_staging_free<D>(unsigned(jobs - 1), cw, bars);
}

// Finishes consumer cw's job k (one this rank finishes): its own part from the staging buffer plus
// the partner's from the partial buffer, times logit_scale * out_scale, rounded and staged as the
// 64 x 64 block of dQ rows over the partial buffer, as bwd_dq_finish does for rank 1 of a plain
// pair: the same single fp32 add (it commutes) and the same scaling, so the same bits. The header
// is the one thread 0 wrote at the job's hand-over (bwd_pair_hand_over). NEXT: the hand-over of
// the consumer's next job, whose part `next` each thread stores over the very float4s it has just
// read (no barrier needed), so that the old part and the new one are never both in registers:
// with the sum and dK, dV they would not fit (ptxas spilled 288 bytes). The sum is packed to the
// io dtype as it is formed, for the same reason. NEXT arrives on dq_full[cw][0] as soon as `next`
// is staged, so that the writer's copy of it does not wait for the finish; the finished block is
// announced on dq_full[cw][1].
template <int DTYPE, int D, bool TMA, bool STMATRIX, bool WRITER_FENCE, bool NEXT>
__device__ __forceinline__ void bwd_pair_finish_job(unsigned k, int cw, BwdBarriers* bars, unsigned char* smem,
                                                    const GdpaParams& p, const FragThread& f, int tid,
                                                    const float (&next)[32]) {
  const unsigned n = k >> 1;
  const int bar = kBwdBarEpilogueBase + cw;
  const unsigned own = ptx::smem_addr(smem) + dq_buffer_off<D>(cw, kDqStaging);
  const unsigned partner = ptx::smem_addr(smem) + dq_buffer_off<D>(cw, kDqPartial);
  const float scale = p.logit_scale * p.out_scale;
  ptx::mbarrier_wait_cluster(&bars->pair_full[cw], n & 1u);
  unsigned packed[16];  // pair i: registers 2i, 2i + 1 of the job (store_pairs)
  float4* staged = reinterpret_cast<float4*>(smem + dq_buffer_off<D>(cw, kDqStaging));
#pragma unroll
  for (int q = 0; q < 8; ++q) {  // float4 [q][tid] = registers 4q..4q+3 of a job (dq_frag_index)
    const uint4 a = ptx::ld_shared_u128(own + unsigned((q * 128 + tid) * 16));
    const uint4 b = ptx::ld_shared_u128(partner + unsigned((q * 128 + tid) * 16));
    packed[2 * q] = pack2<DTYPE>((__uint_as_float(b.x) + __uint_as_float(a.x)) * scale,
                                 (__uint_as_float(b.y) + __uint_as_float(a.y)) * scale);
    packed[2 * q + 1] = pack2<DTYPE>((__uint_as_float(b.z) + __uint_as_float(a.z)) * scale,
                                     (__uint_as_float(b.w) + __uint_as_float(a.w)) * scale);
    if constexpr (NEXT)
      staged[q * 128 + tid] = make_float4(next[4 * q], next[4 * q + 1], next[4 * q + 2], next[4 * q + 3]);
  }
  // Our generic reads of both buffers (and NEXT's stores) before the async proxy touches them
  // again: the writer's copy of the next part out of the staging buffer, the partner's next copy
  // into the partial buffer (ordered by the writer's arrival on its pair_empty).
  ptx::fence_proxy_async_smem();
  if constexpr (NEXT) ptx::mbarrier_arrive(&bars->dq_full[cw][0]);
  // Every thread has read the partner's part before the rows overwrite it; thread 0's header store
  // (at the job's hand-over) is ordered for the others as well.
  ptx::named_barrier_sync(bar, 128);
  const DqJobHeader h = bars->dq_job[cw][n & 1u];
  store_pairs<16, 64, STMATRIX>(partner, f, [&](int i) { return packed[i]; });
  if (TMA && (h.flags & kDqJobTmaStore)) {
    if (!WRITER_FENCE) ptx::fence_proxy_async_smem();  // generic stores -> the writer's TMA store
  } else {
    ptx::named_barrier_sync(bar, 128);
    copy_staged_rows<kBwdDqCols>(partner, h.out, p.heads_q * D, h.rows, tid);
    ptx::fence_proxy_async_smem();  // these reads before the partner's next copy into the buffer
  }
  ptx::mbarrier_arrive(&bars->dq_full[cw][1]);
}

// The hand-over of the dQ job of step j (has_job: whether this warpgroup has one; at D = 64 the
// consumers alternate), in place of bwd_dq_finish: give the dS buffer back; wait until the writer
// no longer needs the previous job's staged part; if this rank finishes that previous job
// (`pending`, set here, cleared by its finish; a tile's last one is finished by
// bwd_pair_finish_pending at the tile's end), finish it while staging this job's part over it;
// otherwise stage this job's part, and, where this rank will finish it, its header for that
// finish and for the writer's TMA store. Jobs alternate, so a job staged over a finish is sent.
template <int DTYPE, int D, bool TMA, bool STMATRIX, bool WRITER_FENCE, class HeaderFn>
__device__ __forceinline__ void bwd_pair_hand_over(const float (&dq)[32], bool has_job, int j, int cw,
                                                   BwdBarriers* bars, unsigned char* smem, const GdpaParams& p,
                                                   const FragThread& f, HeaderFn header, bool& pending) {
  __syncwarp();
  if (ptx::lane_id() == 0) ptx::mbarrier_arrive(&bars->ds_empty[j % kBwdDsStages]);
  if (!has_job) return;
  const unsigned k = unsigned(dq_job_index<D>(j));
  const int tid = int(threadIdx.x) - 128 * (cw + 1);
  if (k >= 1) bwd_pair_wait_staging_free<D>(k - 1, cw, bars);
  if (pending) {  // arrives on dq_full[cw][0] itself
    bwd_pair_finish_job<DTYPE, D, TMA, STMATRIX, WRITER_FENCE, true>(k - 1, cw, bars, smem, p, f, tid, dq);
    pending = false;
  } else {
    pending = pair_finishes(k, ptx::cluster_ctarank());
    // Read by this rank's finish (after its barrier) and by the writer (after the finish's arrival).
    if (pending && tid == 0) bars->dq_job[cw][(k >> 1) & 1u] = header();
    float4* dst = reinterpret_cast<float4*>(smem + dq_buffer_off<D>(cw, kDqStaging));
#pragma unroll
    for (int q = 0; q < 8; ++q)  // dq_frag_index: registers 4q..4q+3 at float4 [q][tid]
      dst[q * 128 + tid] = make_float4(dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
    if (!WRITER_FENCE) ptx::fence_proxy_async_smem();  // generic stores -> the writer's copy (async proxy)
    ptx::mbarrier_arrive(&bars->dq_full[cw][0]);
  }
}

// At a tile's end: the tile's last job of this warpgroup, if this rank finishes it, is finished
// now (the partner sent its part from its own tail), so that no job outlives its tile (the
// epilogue's buffers and the next tile's headers start clean). `step`: steps done in the CTA's
// lifetime.
template <int DTYPE, int D, bool TMA, bool STMATRIX, bool WRITER_FENCE>
__device__ __forceinline__ void bwd_pair_finish_pending(bool& pending, int step, int cw, BwdBarriers* bars,
                                                        unsigned char* smem, const GdpaParams& p,
                                                        const FragThread& f) {
  if (!pending) return;
  const unsigned k = unsigned(dq_jobs_before<D>(step, cw)) - 1u;
  const float none[32] = {};  // NEXT = false: not read
  bwd_pair_finish_job<DTYPE, D, TMA, STMATRIX, WRITER_FENCE, false>(k, cw, bars, smem, p, f,
                                                                    int(threadIdx.x) - 128 * (cw + 1), none);
  pending = false;
}

// Writer: consumer cw's finished job k is staged (or copied): store it by TMA where its header
// says so, and once the store has read the partial buffer, tell the partner it may copy its next
// part into it.
template <int D, bool TMA, bool FENCE>
__device__ __forceinline__ void bwd_pair_store_finished(int cw, unsigned k, BwdBarriers* bars, unsigned char* smem,
                                                        const ptx::TensorMap* tm_dq, bool leader) {
  const unsigned n = k >> 1;
  ptx::mbarrier_wait(&bars->dq_full[cw][1], n & 1u);
  if (leader) {
    if (FENCE) ptx::fence_proxy_async_smem();  // kBwdDqFenceAtWriter
    const DqJobHeader& h = bars->dq_job[cw][n & 1u];
    if (TMA && (h.flags & kDqJobTmaStore)) {
      bwd_store_finished_job<D>(h, tm_dq, smem + dq_buffer_off<D>(cw, kDqPartial));
      ptx::bulk_wait_group_read<0>();
    }
    ptx::mbarrier_arrive_remote(ptx::map_shared_rank(ptx::smem_addr(&bars->pair_empty[cw]), ptx::cluster_ctarank() ^ 1u));
  }
  __syncwarp();
}

// Writer, one step (the consumers' lifetime step `step`, step `ls` of its tile): for each of the
// step's jobs (one per consumer at D = 128, one in turn at D = 64), k = dq_job_index.
//   A job this rank sends: once the partner's partial buffer is free, copy the staged part into
//     it (first: the partner finishes it a job later, and nothing else here should delay that);
//     then the owner's previous job, which this rank finished at this job's hand-over, is stored.
//   A job this rank finishes: once the partner's part has landed here, tell the partner (its
//     staging buffer is free); then take the job (the own part stays staged for the consumer).
template <int D, bool TMA, bool FENCE>
__device__ __forceinline__ void bwd_pair_balanced_step(int step, int ls, BwdBarriers* bars, unsigned char* smem,
                                                       const ptx::TensorMap* tm_dq, bool leader) {
  constexpr int kChunks = D / kBwdDqCols;
  const unsigned rank = ptx::cluster_ctarank(), partner = rank ^ 1u;
  const unsigned k = unsigned(dq_job_index<D>(step));
  const bool finishes = pair_finishes(k, rank);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int owner = (step + c) & 1;  // bwd_dq_owner_chunk
    if (finishes) {
      ptx::mbarrier_wait_cluster(&bars->pair_full[owner], (k >> 1) & 1u);
      if (leader) ptx::mbarrier_arrive_remote(ptx::map_shared_rank(ptx::smem_addr(&bars->pair_landed[owner]), partner));
      ptx::mbarrier_wait(&bars->dq_full[owner][0], k & 1u);
      if (leader) ptx::mbarrier_arrive(&bars->dq_empty[owner][0]);
    } else {
      ptx::mbarrier_wait(&bars->dq_full[owner][0], k & 1u);
      if ((k >> 1) >= 1) ptx::mbarrier_wait_cluster(&bars->pair_empty[owner], ((k >> 1) - 1u) & 1u);
      if (leader) {
        if (FENCE) ptx::fence_proxy_async_smem();  // kBwdDqFenceAtWriter
        const unsigned buf = ptx::smem_addr(smem + dq_buffer_off<D>(owner, kDqPartial));
        const unsigned full = ptx::map_shared_rank(ptx::smem_addr(&bars->pair_full[owner]), partner);
        ptx::mbarrier_arrive_expect_tx_remote(full, kBwdDqJobBytes);
        ptx::bulk_copy_s2c(ptx::map_shared_rank(buf, partner), smem + dq_buffer_off<D>(owner, kDqStaging),
                           kBwdDqJobBytes, full);
      }
      __syncwarp();
      // The owner's previous job lies in this tile (one step back at D = 128, two at D = 64).
      if (ls >= 2 / kChunks) bwd_pair_store_finished<D, TMA, FENCE>(owner, k - 1, bars, smem, tm_dq, leader);
    }
    __syncwarp();
  }
}

// Writer, a tile's end (`step`: steps done after it; `steps`: the tile's): each consumer's last job
// of the tile, if this rank finishes it, was finished at the tile's end (bwd_pair_finish_pending):
// store it. At D = 64 a consumer's last job is at the tile's last step or the one before.
template <int D, bool TMA, bool FENCE>
__device__ __forceinline__ void bwd_pair_writer_tile_end(int step, int steps, BwdBarriers* bars,
                                                         unsigned char* smem, const ptx::TensorMap* tm_dq,
                                                         bool leader) {
  constexpr int kChunks = D / kBwdDqCols;
  const unsigned rank = ptx::cluster_ctarank();
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    // The owner of the job of step `step - 1 - back`: each consumer once at D = 128 (back 0), in
    // turn at D = 64 (the last step's owner, then the other one a step earlier).
    const int back = kChunks == 2 ? 0 : c;
    if (steps <= back) continue;
    const int cw = kChunks == 2 ? (step - 1 + c) & 1 : (step - 1 - back) & 1;
    const unsigned k = unsigned(dq_job_index<D>(step - 1 - back));
    if (pair_finishes(k, rank)) bwd_pair_store_finished<D, TMA, FENCE>(cw, k, bars, smem, tm_dq, leader);
  }
}

// Writer, before the CTA exits (`step`: all steps): the partner's answer to our last copy of each
// consumer (its pair_empty arrival) must have landed, since it lands in our shared memory.
template <int D>
__device__ __forceinline__ void bwd_pair_writer_exit(int step, BwdBarriers* bars) {
  const unsigned rank = ptx::cluster_ctarank();
#pragma unroll
  for (int cw = 0; cw < kBwdConsumerWarpgroups; ++cw) {
    const unsigned jobs = unsigned(dq_jobs_before<D>(step, cw));
    const unsigned sent = rank == 0 ? (jobs + 1u) >> 1 : jobs >> 1;  // the even jobs, or the odd ones
    if (sent >= 1) ptx::mbarrier_wait_cluster(&bars->pair_empty[cw], (sent - 1u) & 1u);
  }
}

}  // namespace gdpa::sm90
