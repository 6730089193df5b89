// bwd_consumer_ops.cuh — the consumer warpgroup's building blocks: the five products' wgmma
// issue, P^T and dS^T from the accumulators, masking, the dS^T exchange and the dQ hand-over.
// Part of the Hopper backward: gdpa_bwd.cu has the design, the roles and the kernel.
#pragma once
#include "bwd_common.cuh"
#include "fwd_qk.cuh"

namespace gdpa::sm90 {

// ---------------------------------------------------------------------------------------------
// Consumer helpers: one warpgroup, 64 keys.
// ---------------------------------------------------------------------------------------------

// Acc (64 keys x 64 queries) = rows [first_row, +64) of a resident [BlockN][D] tile (K or V) times
// a [BlockM][D] tile (Q or dO) transposed: both operands K-major (D contiguous), D/16 wgmmas; the
// forward's score product with the roles swapped (fwd_qk.cuh).
template <int DTYPE, int D>
__device__ __forceinline__ void issue_keys_x_tile(float (&acc)[32], unsigned kv_tile, int first_row, unsigned qd_tile) {
  issue_qk<DTYPE, D, 64, kBwdBlockN, kBwdBlockM>(acc, kv_tile, first_row, qd_tile);
}

// Acc (64 keys x D) += A (64 keys x 64 queries, registers) times a [BlockM][D] tile (dO or Q):
// the reduction runs over the tile's rows, so the tile is an N-major B (TRANS_B = 1). k16 slice kk
// of A is packed registers 4kk .. 4kk+3 (fragments.cuh). Accumulates: dK and dV are zeroed by
// ordinary moves at the start of a work tile, so no run-time scale-d is needed; INIT
// (kBwdFirstStepInitAcc, the tile's first step): the first slice overwrites the accumulator instead.
template <int DTYPE, int D, bool INIT = false>
__device__ __forceinline__ void issue_acc_rs(float (&acc)[D / 2], const unsigned (&a)[16], unsigned b_tile) {
  const WgmmaDescBase b = sw128_mnmajor_base(b_tile, kBwdBlockM);
#pragma unroll
  for (int kk = 0; kk < kBwdBlockM / 16; ++kk) {
    const unsigned frag[4] = {a[4 * kk], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3]};
    if (INIT && kk == 0)
      ptx::Wgmma<D, DTYPE>::template rs<0, 1>(acc, frag, b.at(sw128_mnmajor_step(kk)));
    else
      ptx::Wgmma<D, DTYPE>::template rs<1, 1>(acc, frag, b.at(sw128_mnmajor_step(kk)));
  }
}

// f and f' of two neighbouring elements. fast_gelu_bf16 evaluates both lanes in one packed bf16x2
// pass (what ActImpl<kFastGeluBf16> does per element) and keeps f' in fp32 from that tanh.
template <int ACT>
__device__ __forceinline__ void act_f_df2(float x0, float x1, float* f0, float* f1, float* d0, float* d1) {
  if constexpr (ACT == kFastGeluBf16) {
    unsigned fb, tb;
    fast_gelu_bf16x2(x0, x1, &fb, &tb);
    *f0 = bf16x2_lo(fb);
    *f1 = bf16x2_hi(fb);
    const float t0 = bf16x2_lo(tb), t1 = bf16x2_hi(tb);
    const float h0 = 0.5f * x0, h1 = 0.5f * x1;
    *d0 = gelu_tanh_df_from_t(x0 * x0, t0, act_math::fma_f(h0, t0, h0));
    *d1 = gelu_tanh_df_from_t(x1 * x1, t1, act_math::fma_f(h1, t1, h1));
  } else {
    act_f_df<ACT>(x0, f0, d0);
    act_f_df<ACT>(x1, f1, d1);
  }
}

// P^T = act(logit_scale S^T) and act'(logit_scale S^T) from the S^T accumulator (64 keys x 64
// queries, fp32): P^T packed to the io dtype, act' written over S^T. MIX > 0: fast_gelu's
// 8-column blocks chosen by act_mix_alu_block (act_mix.h) take f and f' from gelu_poly on the FMA
// pipe instead of tanh.approx (pair i lies in block i / 2). TWICE (kBwdHalfFold): P^T holds
// round(2 f), one multiply per score fewer (act_twice_f_df); the dV epilogue halves it back,
// exactly, as the forward does with O. dS is unchanged.
template <int ACT, bool UNIT_SCALE, int MIX, bool TWICE>
__device__ __forceinline__ void act_pair(const float (&s)[32], int i, float logit_scale, float* f0, float* f1,
                                         float* d0, float* d1) {
  static_assert(!(TWICE && MIX > 0), "the doubled form is not mixed");
  const float x0 = UNIT_SCALE ? s[2 * i] : s[2 * i] * logit_scale;
  const float x1 = UNIT_SCALE ? s[2 * i + 1] : s[2 * i + 1] * logit_scale;
  if constexpr (TWICE) {
    act_twice_f_df<ACT>(x0, f0, d0);
    act_twice_f_df<ACT>(x1, f1, d1);
  } else if (ACT == kFastGelu && MIX > 0 && act_mix_alu_block(i >> 1, MIX)) {
    act_f_df2<kGeluPoly>(x0, x1, f0, f1, d0, d1);
  } else {
    act_f_df2<ACT>(x0, x1, f0, f1, d0, d1);
  }
}

// S^T, dP^T -> P^T and dS^T = act'(logit_scale S^T) dP^T, packed to the io dtype in place of the
// accumulators (ptxas puts each packed array in the register block of the accumulator it
// replaces), in one pass after both products landed. No mask here: blocks that need one zero the
// disallowed entries afterwards (mask_p_ds), so the heavy loop is the same code, with the same
// small register footprint, for both kinds of block.
template <int DTYPE, int ACT, bool UNIT_SCALE, int MIX, bool TWICE>
__device__ __forceinline__ void scores_to_p_ds(const float (&s)[32], const float (&dp)[32], unsigned (&pk)[16],
                                               unsigned (&dsk)[16], float logit_scale) {
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    float f0, f1, d0, d1;
    act_pair<ACT, UNIT_SCALE, MIX, TWICE>(s, i, logit_scale, &f0, &f1, &d0, &d1);
    pk[i] = pack2<DTYPE>(f0, f1);
    dsk[i] = pack2<DTYPE>(d0 * dp[2 * i], d1 * dp[2 * i + 1]);
  }
}

// kBwdEarlyAct, the same in two halves: scores_to_p_dact needs S^T only and leaves act' in S^T's
// registers, and runs while the dP^T product is still in flight (its accumulator untouched);
// dact_to_ds multiplies by dP^T once it has landed. Same operations, same bits. ptxas keeps act'
// (32), P^T (16) and the in-flight dP^T (32) next to dK and dV (128) without spilling, but it
// schedules the wait for dP^T itself: about 12 of the 32 tanh.approx come before it (SASS at
// D = 128, fast_gelu), the rest after. Fences around the wait do not move it (they are no SASS
// instruction to order against), and a branch or a trap there makes ptxas serialize or spill.
// The non-split form above stays for the other paths: split there, some activations spill
// (gelu_poly at D = 64) or serialize (hardswish).
template <int DTYPE, int ACT, bool UNIT_SCALE, int MIX, bool TWICE>
__device__ __forceinline__ void scores_to_p_dact(float (&s)[32], unsigned (&pk)[16], float logit_scale) {
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    float f0, f1, d0, d1;
    act_pair<ACT, UNIT_SCALE, MIX, TWICE>(s, i, logit_scale, &f0, &f1, &d0, &d1);
    pk[i] = pack2<DTYPE>(f0, f1);
    s[2 * i] = d0;
    s[2 * i + 1] = d1;
  }
}

template <int DTYPE>
__device__ __forceinline__ void dact_to_ds(const float (&dact)[32], const float (&dp)[32], unsigned (&dsk)[16]) {
#pragma unroll
  for (int i = 0; i < 16; ++i) dsk[i] = pack2<DTYPE>(dact[2 * i] * dp[2 * i], dact[2 * i + 1] * dp[2 * i + 1]);
}

// Zeroes the packed P^T and dS^T entries of disallowed or out-of-range (key, query) pairs by
// clearing their 16-bit halves: a selection, never a multiplication, so the garbage of another
// sequence's rows (possibly Inf or NaN) cannot leak. Fragment row = key (key0 + row), column =
// query (query0 + col); the low half of a packed pair is the lower column. A thread's pairs sit on
// two keys only (rows g and g + 8 of its warp's 16), so its mask is two query intervals
// (bwd_query_interval): a subtract and an unsigned compare per element.
template <int MASK>
__device__ __forceinline__ void mask_p_ds(unsigned (&pk)[16], unsigned (&dsk)[16], const FragThread& f, int key0,
                                          int query0, const MaskBounds& mb) {
  int lo[2], count[2];  // per key row (pair i & 1)
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    bwd_query_interval(MASK, key0 + pair_row(f, e), mb.len_q, mb.len_k, mb.window_left, mb.window_right, &lo[e],
                       &count[e]);
    // pair_col(f, i) = 8 (i / 2) + 2 t, so query - lo = 8 (i / 2) - (lo - query0 - 2 t).
    lo[e] -= query0 + 2 * f.t;
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int c = 8 * (i >> 1) - lo[i & 1];
    const unsigned keep = (unsigned(c) < unsigned(count[i & 1]) ? 0x0000FFFFu : 0u) |
                          (unsigned(c + 1) < unsigned(count[i & 1]) ? 0xFFFF0000u : 0u);
    pk[i] &= keep;
    dsk[i] &= keep;
  }
}

// True when some (key, query) of keys [key_lo, key_lo + 63] x queries [q_lo, q_lo + 63] is
// disallowed or out of range: only those blocks pay for the compares. Out of range alone would
// not need the mask any more (K, V, Q and dO rows past the end are zeros, jagged_load.cuh, so
// P^T = act(0) = 0 and dS^T = act'(0) * 0 = 0 there, as in the forward), but without the range
// test ptxas spilled a register in the consumers of two D = 128 variants (pairs, causal), so the
// edge blocks keep their mask pass.
template <int MASK>
__device__ __forceinline__ bool bwd_block_needs_mask(int key_lo, int q_lo, int len_q, int len_k, const GdpaParams& p) {
  const int key_hi = key_lo + 63, q_hi = q_lo + kBwdBlockM - 1;
  if (key_hi >= len_k || q_hi >= len_q) return true;
  const int d0 = len_k - len_q;
  if constexpr (MASK == kMaskCausal) return key_hi > q_lo + d0;  // allowed: key <= query + d0
  if constexpr (MASK == kMaskWindow) {
    const bool right_ok = p.window_right < 0 || key_hi <= q_lo + d0 + p.window_right;
    const bool left_ok = p.window_left < 0 || key_lo >= q_hi + d0 - p.window_left;
    return !(right_ok && left_ok);
  }
  return false;
}

// Writes this warpgroup's dS^T (64 keys x 64 queries, packed pairs) as rows [row_base, +64) of a
// [BlockN][64] 128B-swizzled tile: one 128-byte row per key, so the dQ product can read dS (64
// queries x 128 keys) as an M-major A operand. Pair i = columns (2t, 2t+1) of 16-byte chunk i/2
// of row g (+8): the XOR with g spreads the 32 lanes over all 32 banks. STMATRIX
// (kBwdStmatrixDs): the same bytes by 4 stmatrix.x4 instead of 16 4-byte stores (epilogue.cuh
// store_pairs; row_base is a multiple of 8, so the swizzle of row_base + r is that of r). The
// 4-byte form stays a store through the generic pointer: routed through store_pairs' st.shared
// it gave the accumulator path's kernels (which use it) another integer schedule.
template <bool STMATRIX>
__device__ __forceinline__ void store_ds_t(const unsigned (&dsk)[16], unsigned char* tile, int row_base,
                                           const FragThread& f) {
  if constexpr (STMATRIX) {
    store_pairs<16, 64, true>(ptx::smem_addr(tile) + unsigned(row_base * kSw128RowBytes), f,
                              [&](int i) { return dsk[i]; });
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i)
      *reinterpret_cast<unsigned*>(tile + sw128_offset(row_base + pair_row(f, i), pair_col(f, i))) = dsk[i];
  }
}

// Which 64-column chunk of dQ consumer `cw` computes for step j: the two warpgroups alternate, so
// with D = 64 (one chunk) they take turns step by step, and with D = 128 each does one chunk per
// step. Returns -1 when the warpgroup has no dQ job this step.
template <int D>
__device__ __forceinline__ int bwd_dq_owner_chunk(int j, int cw) {
  const int c = (j + cw) & 1;
  return c < D / kBwdDqCols ? c : -1;
}

// The dQ job of step j reads both warpgroups' dS^T halves of step j: wait for its buffer's full phase.
// FENCE (kBwdDsFenceAtReader): the halves were published without a proxy fence; this thread's
// fence after the acquire orders both warpgroups' stores before its dQ wgmma's operand reads.
template <bool FENCE>
__device__ __forceinline__ void wait_ds_full(int j, BwdBarriers* bars) {
  ptx::mbarrier_wait(&bars->ds_full[j % kBwdDsStages], unsigned(j / kBwdDsStages) & 1u);
  if constexpr (FENCE) ptx::fence_proxy_async_smem();
}

// Before writing into step j's dS^T buffer: every dQ job that read its previous use is done (the
// "empty" phase of the use kBwdDsStages steps earlier; a fresh barrier passes, the producer idiom).
__device__ __forceinline__ void wait_ds_empty(int j, BwdBarriers* bars) {
  ptx::mbarrier_wait(&bars->ds_empty[j % kBwdDsStages], (unsigned(j / kBwdDsStages) & 1u) ^ 1u);
}

// dQ job of step j: dq (64 queries x 64 columns of chunk c) = dS (64 x 128 keys) K[:, chunk c].
// A = dS^T buffer read M-major (TRANS_A: queries contiguous), B = the resident K tile read N-major
// (TRANS_B: D contiguous), reduction over all 128 keys; the caller waited for the buffer
// (wait_ds_full).
template <int DTYPE, int D>
__device__ __forceinline__ void issue_dq(float (&dq)[32], int j, int chunk, unsigned ds_tiles, unsigned k_tile) {
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  const int buf = j % kBwdDsStages;
  const unsigned a_tile = ds_tiles + buf * plan.ds_bytes;
  const unsigned b_tile = k_tile + chunk * kBwdBlockN * kSw128RowBytes;  // panel `chunk` of K
  const WgmmaDescBase ad = sw128_mnmajor_base(a_tile, kBwdBlockN), bd = sw128_mnmajor_base(b_tile, kBwdBlockN);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBwdBlockN / 16; ++kk) {
    const unsigned long long a = ad.at(sw128_mnmajor_step(kk));
    const unsigned long long b = bd.at(sw128_mnmajor_step(kk));
    if (kk == 0)
      ptx::Wgmma<64, DTYPE>::template ss<0, 1, 1>(dq, a, b);
    else
      ptx::Wgmma<64, DTYPE>::template ss<1, 1, 1>(dq, a, b);
  }
  ptx::wgmma_commit();
}

// kBwdDqFinish: publishes the header of consumer cw's dQ job of step j (its slot in the ring of
// two) at the start of the step that stages the job, so that the writer can wait for the earlier
// contributors and load a last job's partial sum while the job is still being computed. The ring
// slot was freed by the writer's dq_empty arrival for job k - 2, which this warpgroup waited for
// before staging job k - 1, so no announcement can run a phase ahead of the writer.
template <int D, class HeaderFn>
__device__ __forceinline__ void bwd_dq_announce(int j, int cw, BwdBarriers* bars, HeaderFn header) {
  const int tid = int(threadIdx.x) - 128 * (cw + 1);
  if (tid == 0) {
    const unsigned k = unsigned(dq_job_index<D>(j));
    bars->dq_job[cw][k & 1] = header();
    ptx::mbarrier_arrive(&bars->dq_announce[cw][k & 1]);  // release: the header before the arrival
  }
}

// After the dQ job's wgmma completed (or at once, for a warpgroup without a job): give the dS
// buffer back, then hand the accumulator to the writer through this warpgroup's staging buffer
// (TWO, kBwdDqTwoStage: buffer k & 1 of its two, DqStage).
//   dq_empty phases: the writer arrives on a buffer's empty once after each job staged there; we
//   wait before reusing the buffer (job k waits for job k - 1's read, with TWO for job k - 2's) and
//   once at exit (bwd_consumer), on that earlier job's phase (DqStage::parity). A phase cannot be
//   skipped: our arrival on a buffer's full for job k needs the writer's empty arrival for the
//   buffer's previous job first, and the writer's arrival needs our full arrival for that job.
//   That wait also means every thread's reads of the buffer for the earlier job are done (they
//   arrived on dq_full after them), so the buffer may be rewritten without a warpgroup barrier.
// FINISH: the header was announced (bwd_dq_announce); the writer's dq_partial answer says the
// header was read and, for a last job with earlier contributors, their partial sum is in partial
// buffer cw. A last job is then finished here: dq + partial (the add the accumulator's bulk reduce
// would have done), times logit_scale * out_scale, rounded and staged as the 64 x 64 block of dQ
// rows, exactly as dq_convert would: the same bits. TMA (kBwdDqTmaStore) and whole rows: the
// writer stores the staged block by TMA; otherwise the threads copy its rows after a barrier.
// PAIR: no announcement; the header is computed here (rank 1 finishes every job, rank 0 sends
// every job). The rank-0 CTA's part arrives in the partial buffer on pair_full[cw] (one copy per
// job, so the k-th job waits parity k & 1), and once every thread has read it, rank 0's writer
// hears it on its pair_empty[cw]. LATE_STORE_WAIT: see kBwdPairLateStoreWait.
// `trace` / `step`: kBwdTrace's recorder and the consumer's current step (for the events' key).
template <int DTYPE, int D, bool FINISH, bool PAIR, bool TMA, bool RED, bool STMATRIX, bool WRITER_FENCE,
          bool LATE_STORE_WAIT, class HeaderFn, class Tracer>
__device__ __forceinline__ void bwd_dq_finish(float (&dq)[32], bool has_job, int j, int cw, DqStage stage,
                                              BwdBarriers* bars, unsigned char* smem, const GdpaParams& p,
                                              const FragThread& f, HeaderFn header, Tracer& trace, int step) {
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  __syncwarp();
  if (ptx::lane_id() == 0) ptx::mbarrier_arrive(&bars->ds_empty[j % kBwdDsStages]);
  if (!has_job) return;
  const unsigned k = unsigned(dq_job_index<D>(j));
  const int b = stage.buffer(k);
  // The writer must have read the job that used this buffer before (the previous one, or with
  // two buffers the one before it).
  if (k >= stage.depth()) ptx::mbarrier_wait(&bars->dq_empty[cw][b], stage.parity(k - stage.depth()));
  trace(kTrDqBufferFree, step);
  const int tid = int(threadIdx.x) - 128 * (cw + 1);
  const unsigned staging = ptx::smem_addr(smem) + dq_buffer_off<D>(cw, b);
  const int bar = kBwdBarEpilogueBase + cw;
  bool finished = false;
  if constexpr (FINISH) {
    DqJobHeader h;
    if constexpr (PAIR) {
      h = header();
    } else {
      ptx::mbarrier_wait(&bars->dq_partial[cw], k & 1u);
      // Thread 0 wrote the header; a warpgroup barrier orders that for the other threads directly
      // (the writer's answer orders it too, but through a third thread).
      ptx::named_barrier_sync(bar, 128);
      h = bars->dq_job[cw][k & 1];
    }
    if (h.flags & kDqJobLast) {
      if (h.flags & kDqJobPartial) {
        if (PAIR) ptx::mbarrier_wait_cluster(&bars->pair_full[cw], k & 1u);
        trace(kTrPartialIn, step);
        const unsigned partial = ptx::smem_addr(smem) + dq_buffer_off<D>(cw, kDqPartial);
#pragma unroll
        for (int q = 0; q < 8; ++q) {  // float4 [q][tid] = our registers 4q..4q+3 (dq_frag_index)
          const uint4 v = ptx::ld_shared_u128(partial + unsigned((q * 128 + tid) * 16));
          dq[4 * q] = __uint_as_float(v.x) + dq[4 * q];
          dq[4 * q + 1] = __uint_as_float(v.y) + dq[4 * q + 1];
          dq[4 * q + 2] = __uint_as_float(v.z) + dq[4 * q + 2];
          dq[4 * q + 3] = __uint_as_float(v.w) + dq[4 * q + 3];
        }
        // Our generic reads of the buffer before the TMA unit (async proxy) overwrites it for a
        // later job, once our dq_full arrival has reached the writer.
        ptx::fence_proxy_async_smem();
      }
      if constexpr (PAIR) {
        // LATE_STORE_WAIT (kBwdPairLateStoreWait): the previous epilogue's dK / dV stores, issued by
        // thread 0, have read the staging buffer before the rows below overwrite it (at once after
        // the first job of a tile: nothing else is outstanding then).
        if (LATE_STORE_WAIT && tid == 0) ptx::bulk_wait_group_read<0>();
        // Every thread has read the partner's part (and fenced the reads against the async proxy).
        ptx::named_barrier_sync(bar, 128);
        if (tid == 0) ptx::mbarrier_arrive_remote(ptx::map_shared_rank(ptx::smem_addr(&bars->pair_empty[cw]), 0u));
      }
      stage_block<DTYPE, kBwdDqCols, 64, STMATRIX>(dq, staging, p.logit_scale * p.out_scale, f);
      if (TMA && (h.flags & kDqJobTmaStore)) {
        if (!WRITER_FENCE) ptx::fence_proxy_async_smem();  // generic stores -> the writer's TMA store (async proxy)
      } else {
        ptx::named_barrier_sync(bar, 128);
        copy_staged_rows<kBwdDqCols>(staging, h.out, p.heads_q * D, h.rows, tid);
      }
      // Pairs computed the header here; the writer reads it (ordered by dq_full) for the TMA
      // store's coordinates, or to see that there is nothing to store.
      if (TMA && PAIR && tid == 0) bars->dq_job[cw][k & 1] = h;
      finished = true;
    }
  } else if constexpr (RED) {
    // Added here, from the registers (kBwdDqRed); the writer only answers the arrival below.
    float* dst = header().dst;
#pragma unroll
    for (int q = 0; q < 8; ++q)  // dq_frag_index: registers 4q..4q+3 at float4 [q][tid]
      ptx::red_add_v4_f32(dst + (q * 128 + tid) * 4, dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
    finished = true;
  } else {
    if (tid == 0) bars->dq_job[cw][k & 1] = header();  // ordered for the writer by the dq_full arrival below
  }
  if (!finished) {
    float4* dst = reinterpret_cast<float4*>(smem + dq_buffer_off<D>(cw, b));
#pragma unroll
    for (int q = 0; q < 8; ++q)  // dq_frag_index: registers 4q..4q+3 at float4 [q][tid]
      dst[q * 128 + tid] = make_float4(dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
    if (!WRITER_FENCE) ptx::fence_proxy_async_smem();  // generic stores -> the writer's bulk reduce (async proxy)
  }
  // Every thread arrives (not one per warp after __syncwarp): the partial-sum reads of each thread
  // are then ordered before the writer's next TMA load into that buffer by the thread's own
  // release, which is also the form compute-sanitizer's racecheck recognises.
  ptx::mbarrier_arrive(&bars->dq_full[cw][b]);
}

// Waits until the writer has read consumer cw's job `back` jobs before its next one (1: the last;
// `step` = steps done in the CTA's lifetime), if it had one, so that the buffer of that job may be
// rewritten; the writer reads in job order, so every earlier job has been read as well. The wait
// is for a phase the next job's own wait (bwd_dq_finish) targets as well (or, with two buffers and
// back = 2, the job after it), so waiting for it early is harmless.
template <int D>
__device__ __forceinline__ void bwd_wait_staging_idle(BwdBarriers* bars, int cw, int step, DqStage stage,
                                                      unsigned back = 1) {
  const unsigned next = unsigned(dq_jobs_before<D>(step, cw));
  if (next >= back) {
    const unsigned k = next - back;
    ptx::mbarrier_wait(&bars->dq_empty[cw][stage.buffer(k)], stage.parity(k));
  }
}

}  // namespace gdpa::sm90
