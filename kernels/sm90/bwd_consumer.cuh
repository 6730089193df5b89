// bwd_consumer.cuh — one consumer warpgroup of the backward (64 keys of every work tile): the
// step loop, the deferred last dQ job and the dK / dV epilogue.
// Part of the Hopper backward: gdpa_bwd.cu has the design, the roles and the kernel.
#pragma once
#include "bwd_consumer_ops.cuh"

namespace gdpa::sm90 {

// ---------------------------------------------------------------------------------------------
// Consumer: one warpgroup (cw = 0 or 1), keys [n0 + 64 cw, + 64) of every work tile.
// ---------------------------------------------------------------------------------------------
//
// One step t (p = t % kBwdDsStages), in issue order:
//   1  wait Q/dO(t) full (K and V were waited for before the tile's first step)
//   2  S^T = K Q^T and dP^T = V dO^T, one commit group (kBwdPingpong: in this warpgroup's turn;
//      kBwdEarlyAct: two groups, and P^T and act' are computed between the two waits)
//   3  wait it
//   4  P^T and dS^T from the two accumulators (scores_to_p_ds), packed in registers; boundary
//      blocks then clear their disallowed entries (mask_p_ds)
//   5  dS exchange: wait ds_empty[p], store our dS^T half, fence.proxy.async, arrive ds_full[p]
//   6  dV += P^T dO, dK += dS^T Q (RS), commit   (dS^T was stored first: A registers of an
//      in-flight wgmma must not even be read)
//   7  dQ job: step t-1 (kBwdDeferDq, not at a tile's first step) or step t: wait ds_full, 8
//      wgmmas, commit   (kBwdPingpong: 6 and 7 in this warpgroup's next turn, ds_full waited
//      for before it)
//   8  wait all: release Q/dO(t); dq job: arrive ds_empty, stage for the writer
// kBwdDqFirst (D = 128; the host's default with the ordered finish only): 7 is issued before 6 as
// its own commit group, and after waiting for it alone (wait_group 1) the warpgroup gives the dS
// buffer back and hands the job over while 6 still runs; then it waits for 6.
// V is released at step 3 of the tile's last step (dP^T is its only reader); with kBwdDeferDq the
// tile then runs the dQ job of its last step; then K is released (kBwdDvInV: dV is staged in our
// rows of V at that job's start, and K and V go back before its hand-over), and dV, dK leave through the
// warpgroup's partial-sum or dQ staging buffer, or dK through its halves of the dS^T buffers
// (kBwdDkInDs; the epilogue below says which).
//
// dS exchange protocol: buffer p is reused every kBwdDsStages steps. Its "empty" phase for use u
// completes when all 8 consumer warps have arrived after use u's dQ job (a warpgroup without a job
// arrives at once), so before writing use u + kBwdDsStages a warpgroup waits parity
// ((t / S) & 1) ^ 1 (a fresh barrier passes: the producer idiom). "Full" for use u completes when
// both warpgroups stored their halves; a dQ job of step j waits parity (j / S) & 1. No barrier can
// run two phases ahead of a waiter, since each phase needs that waiter's own arrivals.
template <int DTYPE, int D, int ACT, int MASK, long long FLAGS>
__device__ __forceinline__ void bwd_consumer(int cw, const GdpaParams& p, const ptx::TensorMap* tm_dk,
                                             const ptx::TensorMap* tm_dv, unsigned char* smem) {
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  constexpr bool kDefer = (FLAGS & kBwdDeferDq) != 0;
  // kBwdFirstStepInitAcc: the first step (its own instantiation with kDefer) initialises dV / dK.
  constexpr bool kInitAcc = kDefer && (FLAGS & kBwdFirstStepInitAcc) != 0;
  constexpr bool kUnitScale = (FLAGS & kBwdUnitLogitScale) != 0;  // the host checked logit_scale == 1
  // P^T = round(2 f), dV halved in the epilogue (activations.cuh act_twice_f: why that is exact).
  constexpr bool kTwice = (FLAGS & kBwdHalfFold) != 0 && use_twice_f<DTYPE, ACT, act_mix_of(FLAGS)>;
  constexpr bool kFinish = (FLAGS & kBwdDqFinish) != 0;
  constexpr bool kPingpong = (FLAGS & kBwdPingpong) != 0;
  constexpr bool kPair = (FLAGS & kBwdPair) != 0;
  constexpr bool kRecords = (FLAGS & kBwdTileRecords) != 0;
  constexpr bool kTmaStore = (FLAGS & kBwdDqTmaStore) != 0;
  // D = 64: a warpgroup has a dQ job every other step, a run-time branch around its issue, and
  // ahead of dV and dK that makes ptxas insert a warpgroup.arrive: kept after them there.
  constexpr bool kDqFirst = (FLAGS & kBwdDqFirst) != 0 && D == 128;
  constexpr bool kTwo = bwd_dq_two_stage(FLAGS);
  constexpr bool kRed = bwd_dq_red(FLAGS);
  constexpr bool kEarlyAct = (FLAGS & kBwdEarlyAct) != 0 && bwd_early_act_fits(D, ACT);
  // dK staged in our halves of the dS^T buffers: one 64-column panel per buffer.
  constexpr bool kDkInDs = (FLAGS & kBwdDkInDs) != 0 && kTwo && D / 64 <= kBwdDsStages;
  constexpr bool kPairDvInDs = kPair && (FLAGS & kBwdPairDvInDs) != 0 && D / 64 <= kBwdDsStages;
  constexpr bool kLateStoreWait = kPair && (FLAGS & kBwdPairLateStoreWait) != 0;  // rank 1 only
  constexpr bool kRank1DvInDs = kLateStoreWait && kDefer && (FLAGS & kBwdPairRank1DvInDs) != 0;
  constexpr bool kRank0Late = kPair && kDefer && (FLAGS & kBwdPairRank0LateStoreWait) != 0;
  constexpr bool kDvInV = bwd_dv_in_v(FLAGS) && kDkInDs;  // dV staged in our rows of V; V released after
  constexpr bool kStmatrix = (FLAGS & kBwdStmatrix) != 0;
  constexpr bool kStmatrixDs = (FLAGS & kBwdStmatrixDs) != 0;
  constexpr bool kSkipEmptyHalf = (FLAGS & kBwdSkipEmptyHalf) != 0;
  constexpr bool kDsFenceAtReader = (FLAGS & kBwdDsFenceAtReader) != 0;
  constexpr bool kWriterFence = (FLAGS & kBwdDqFenceAtWriter) != 0;
  const DqStage dq_stage = dq_stage_of<kTwo, kPair && (FLAGS & kBwdPairTwoStage) != 0>();
  auto* bars = reinterpret_cast<BwdBarriers*>(smem + plan.bar_off);
  BwdTracer<(FLAGS & kBwdTrace) != 0> trace(p, cw, int(threadIdx.x) == 128 * (cw + 1));
  const unsigned base = ptx::smem_addr(smem);
  const unsigned k_tile = base + plan.k_off, v_tile = base + plan.v_off, ds_tiles = base + plan.ds_off;
  const FragThread f = frag_thread(int(threadIdx.x) - 128 * (cw + 1));
  const long long k_stride = (long long)p.heads_kv * D;  // elements between consecutive key rows

  PipeCounter<1> kvc;
  // CTA-lifetime step counter: dS buffer, dQ owner (the writer keeps the same count) and Q/dO ring
  // position (one slot per step, so the producer's ring counter equals it too).
  int step = 0;
  float dv[D / 2], dk[D / 2];  // live for a whole work tile
  BwdTurns<FLAGS>::start(cw);

  const BwdWalk<kPair> walk;
  // kBwdRecordLanes: this thread's field of the next tile's record (bwd_record_field), loaded at
  // the end of each tile's steps, or before an empty tile's zeros; an index past the CTA's last
  // tile reloads the current one, so the load needs no predicate.
  constexpr bool kLanes = (FLAGS & kBwdRecordLanes) != 0 && kRecords;
  int next_field = 0;
  if (kLanes && walk.first < p.num_tiles) next_field = bwd_record_field<kPair>(p, walk.first);
  auto load_next_record = [&](int it) {
    if constexpr (kLanes) next_field = bwd_record_field<kPair>(p, it + walk.stride < p.num_tiles ? it + walk.stride : it);
  };
  for (int it = walk.first; it < p.num_tiles; it += walk.stride) {
    trace(kTrLoopTop, step);
    // Row 0 of this warpgroup's 64 keys in dK / dV.
    auto out_rows = [&](void* grad, int k_row, int kv_head) {
      return static_cast<unsigned short*>(grad) + (long long)(k_row + 64 * cw) * k_stride + (long long)kv_head * D;
    };
    BwdTileScalars ts;
    {
      // Each field through a lane-0 shuffle, so that ptxas knows it is warp-uniform (kBwdRecordLanes:
      // the gathering shuffles do that).
      auto uniform = [](int v) { return __shfl_sync(0xffffffffu, v, 0); };
      auto read_tile = [&] {
        const BwdTile r = bwd_tile<MASK, kPair, kRecords>(p, it);
        return BwdTile{{uniform(r.batch), uniform(r.kv_head), uniform(r.n0), uniform(r.k_row), uniform(r.q_seq_row),
                        uniform(r.len_q), uniform(r.len_k), uniform(r.m_begin), uniform(r.m_end), uniform(r.steps)}};
      };
      const BwdTile t = kLanes ? bwd_tile_from_lanes(next_field) : read_tile();
      trace(kTrRecordIn, step);
      if (t.empty()) {  // Lq = 0 or no query sees these keys: zero gradients (rows past Lk: not ours)
        load_next_record(it);
        store_zero_rows<D>(out_rows(p.dk, t.k_row, t.kv_head), k_stride, t.len_k - t.n0 - 64 * cw, f);
        store_zero_rows<D>(out_rows(p.dv, t.k_row, t.kv_head), k_stride, t.len_k - t.n0 - 64 * cw, f);
        continue;
      }
      ts = BwdTileScalars{t, dq_slot_begin(t.q_seq_row, t.batch)};
    }
    // kBwdSkipEmptyHalf: all of this warpgroup's keys lie past the sequence's end, so it issues no
    // S^T, dP^T, dV or dK product in this tile (the step body's IDLE form).
    const bool keys_past_end = kSkipEmptyHalf && 64 * cw >= ts.len_k - ts.n0;
    // kInitAcc: only a warpgroup that issues no dV / dK wgmmas.
    if (!kInitAcc || keys_past_end) {
#pragma unroll
      for (int i = 0; i < D / 2; ++i) dv[i] = dk[i] = 0.0f;
    }
    // Pins the zeros before the first wgmma.fence of the tile: a move defining a wgmma input after
    // the fence would make ptxas serialize every wgmma of the kernel.
    ptx::fence_operand(dv);
    ptx::fence_operand(dk);

    // The header of the dQ job of step `js` of this tile, column chunk `chunk` (bwd_config.h
    // for the block layout and the semaphores; the deterministic protocol in bwd_dq_writer).
    auto job_header = [&](const BwdStep& js, int chunk) {
      const long long block = dq_block_index(ts.slot0 + js.m, js.head, p.heads_q);
      DqJobHeader h;
      // Pairs use neither the accumulator nor the semaphores (and computing them anyway keeps two
      // 64-bit addresses live in the hand-over).
      h.dst = kPair ? nullptr : p.dq_accum + dq_chunk_offset(block, chunk, D);
      h.sem = kPair ? nullptr : p.semaphores + block;
      h.out = nullptr;
      h.expected = 0;
      h.flags = 0;
      h.rows = 0;
      h.pad = 0;
      const int r0 = js.m * kBwdBlockM;
      auto finish_here = [&] {
        const int row = ts.q_seq_row + r0, col = js.head * D + chunk * kBwdDqCols;
        h.rows = min(kBwdBlockM, ts.len_q - r0);
        if (kTmaStore && h.rows == kBwdBlockM) {  // whole rows: a box never clips
          h.flags |= kDqJobTmaStore;
          h.box = DqTmaBox{col, row};
        } else {
          h.out = static_cast<unsigned short*>(p.dq) + (long long)row * (p.heads_q * D) + col;
        }
      };
      if (kPair) {  // rank 1 finishes every block with rank 0's part; rank 0 only sends
        if (ptx::cluster_ctarank() == 1) {
          h.flags = kDqJobLast | kDqJobPartial;
          finish_here();
        }
      } else if (p.deterministic) {
        // KV tiles [first / BlockN, (last - 1) / BlockN] see query tile m (mask_key_range is exact
        // for a rectangle: the same relation bwd_tile uses the other way round), so n - first /
        // BlockN tiles of the group add before ours, in increasing KV order.
        int first, last;
        const int len_q = ts.len_q;
        mask_key_range(MASK, r0, min(r0 + kBwdBlockM, len_q), len_q, ts.len_k, p.window_left, p.window_right, &first,
                       &last);
        h.expected = ts.n0 / kBwdBlockN - first / kBwdBlockN;
        if (kFinish && ts.n0 / kBwdBlockN == (last - 1) / kBwdBlockN) {  // nobody adds after us
          h.flags = kDqJobLast | (h.expected > 0 ? kDqJobPartial : 0);
          finish_here();
        }
      }
      return h;
    };

    // One step; HAS_DQ = false only for the first step of a tile in the deferred mode (no earlier
    // step to finish). Two straight-line instantiations instead of a branch around the dQ issue:
    // with a wgmma group in flight across that branch ptxas serializes every wgmma and spills.
    int ls = 0;
    // The (head, query tile) of step ls or, `previous`, of step ls - 1 (the deferred dQ job's).
    // Walked one step at a time (bwd_next_step) as one loop-carried pair, `job`: the step whose dQ
    // job this step stages (kBwdDeferDq: step ls - 1, from ls = 1 on; otherwise step ls). Except
    // with the ordered finish, where the walk made ptxas spill 32-40 bytes at D = 128: that path
    // still divides.
    constexpr bool kWalk = !(kFinish && !kPair);
    BwdStep job{ts.kv_head * p.group, ts.m_begin};
    auto step_of = [&](bool previous) {
      if constexpr (!kWalk)
        return bwd_step(ts.m_begin, ts.m_end, ts.kv_head, p.group, previous ? ls - 1 : ls);
      else if constexpr (kDefer)
        return previous || ls == 0 ? job : bwd_next_step(job, ts.m_begin, ts.m_end);
      else
        return job;  // `previous` is asked for only with kBwdDeferDq
    };
    // IDLE (kBwdSkipEmptyHalf): all of this warpgroup's keys lie past the sequence's end; the
    // step keeps every wait, arrival and turn but issues only the dQ job.
    auto step_body = [&](auto has_dq, auto idle_half) {
      constexpr bool kHasDq = decltype(has_dq)::value;
      constexpr bool kIdle = decltype(idle_half)::value;
      const int query0 = step_of(false).m * kBwdBlockM;
      const int qs = step % kBwdQStages;
      const unsigned q_tile = base + plan.q_off + qs * plan.q_bytes;
      const unsigned do_tile = base + plan.do_off + qs * plan.q_bytes;
      // Declared per step on purpose: the first wgmma of each product passes its accumulator as
      // "+f" although scale-d = 0 ignores it; a fresh (undefined) array keeps the compiler from
      // carrying the previous step's values, which would hold 96 more registers for nothing.
      // The dQ job reuses s_acc (dead once dS^T is formed): ptxas gives every wgmma accumulator
      // array its own aligned register block, so a separate array would cost 32 registers.
      float s_acc[32], dp_acc[32];
      unsigned pk[16], dsk[16];
      float(&dq)[32] = s_acc;
      const int dq_step = kDefer ? step - 1 : step;
      const int chunk = bwd_dq_owner_chunk<D>(dq_step, cw);
      // kBwdDqFinish: the writer learns of this step's dQ job now, a GEMM phase before it is staged
      // (pairs need no announcement: the rank says what each job is, bwd_dq_finish). Announced
      // after the S^T / dP^T issue instead, where the header's division would have run under the
      // GEMMs, it measured 0.98-0.99x at s = 0.5 L = 256 (the writer's early start matters more);
      // a step ahead, under the previous step's products, 0.94-0.98x (PERF_NOTES, twenty-fourth
      // session).
      if (kFinish && !kPair && kHasDq && chunk >= 0)
        bwd_dq_announce<D>(dq_step, cw, bars, [&] { return job_header(step_of(kDefer), chunk); });

      // 1-2: the two transposed score products, one commit group.
      consumer_wait(bars->qdo[qs], unsigned(step / kBwdQStages) & 1u);
      trace(kTrQdoReady, step);
      BwdTurns<FLAGS>::wait(cw);
      trace(kTrTurnA, step);
      if constexpr (!kIdle) {
        ptx::wgmma_fence();
        issue_keys_x_tile<DTYPE, D>(s_acc, k_tile, 64 * cw, q_tile);
        if (kEarlyAct) ptx::wgmma_commit();
        issue_keys_x_tile<DTYPE, D>(dp_acc, v_tile, 64 * cw, do_tile);
        ptx::wgmma_commit();
      }
      BwdTurns<FLAGS>::pass(cw);

      // 3-4: P^T and dS^T (kEarlyAct: P^T and act' while dP^T still runs).
      if constexpr (kIdle) {
        if (!kDvInV && ls == ts.steps - 1) consumer_release(bars->v);  // as below: the last dP^T is done
      } else {
        ptx::wgmma_wait<kEarlyAct ? 1 : 0>();
        ptx::fence_operand(s_acc);
        trace(kTrADone, step);
        if (kEarlyAct) {
          scores_to_p_dact<DTYPE, ACT, kUnitScale, act_mix_of(FLAGS), kTwice>(s_acc, pk, p.logit_scale);
          ptx::wgmma_wait<0>();
        }
        ptx::fence_operand(dp_acc);
        // dP^T is V's only reader: after the tile's last one, the producer may load the next tile's
        // V while this tile's last dV / dK / dQ products and its epilogue still run (kDvInV: in
        // the tail, once dV's store has read our rows of it).
        if (!kDvInV && ls == ts.steps - 1) consumer_release(bars->v);
        if (kEarlyAct)
          dact_to_ds<DTYPE>(s_acc, dp_acc, dsk);
        else
          scores_to_p_ds<DTYPE, ACT, kUnitScale, act_mix_of(FLAGS), kTwice>(s_acc, dp_acc, pk, dsk, p.logit_scale);
        {
          const int key0 = ts.n0 + 64 * cw, len_q = ts.len_q, len_k = ts.len_k;
          if (bwd_block_needs_mask<MASK>(key0, query0, len_q, len_k, p))
            mask_p_ds<MASK>(pk, dsk, f, key0, query0, MaskBounds{len_q, len_k, p.window_left, p.window_right});
        }
      }
      trace(kTrActComputed, step);

      // 5: publish our half of dS^T(step) (IDLE: zeros, into each buffer once per tile).
      {
        const int buf = step % kBwdDsStages;
        wait_ds_empty(step, bars);
        // kRank1DvInDs: the previous tile's dV left rank 1 through our halves of these buffers;
        // the tile's first step (no dQ job) waits for that store's read before writing them.
        // kRank0Late: the same wait for rank 0's epilogue stores (its dV here, its dK in the
        // staging buffer of its next job, written after this).
        if constexpr ((kRank1DvInDs || kRank0Late) && !kHasDq) {
          const unsigned rank = ptx::cluster_ctarank();
          if ((kRank1DvInDs && rank == 1) || (kRank0Late && rank == 0)) {
            if (int(threadIdx.x) == 128 * (cw + 1)) ptx::bulk_wait_group_read<0>();
            ptx::named_barrier_sync(kBwdBarEpilogueBase + cw, 128);
          }
        }
        if constexpr (kIdle) {
          if (ls < kBwdDsStages) {
            const unsigned zeros[16] = {};
            store_ds_t<kStmatrixDs>(zeros, smem + plan.ds_off + buf * plan.ds_bytes, 64 * cw, f);
          }
        } else {
          store_ds_t<kStmatrixDs>(dsk, smem + plan.ds_off + buf * plan.ds_bytes, 64 * cw, f);
        }
        if (!kDsFenceAtReader) ptx::fence_proxy_async_smem();  // generic stores -> the dQ wgmma (async proxy)
        __syncwarp();
        if (ptx::lane_id() == 0) ptx::mbarrier_arrive(&bars->ds_full[buf]);
      }
      trace(kTrDsPublished, step);

      // 6-7: dV and dK, then the dQ job (which needs both warpgroups' dS^T halves). Without turns
      // dV and dK go first and run while the job waits for its buffer; with turns the buffer is
      // waited for before the turn is taken, so a turn is never held across that wait. kDqFirst:
      // the job first, so that its hand-over can run under dV and dK.
      const bool dq_job = kHasDq && chunk >= 0;
      if (kPingpong && dq_job) wait_ds_full<kDsFenceAtReader>(dq_step, bars);
      BwdTurns<FLAGS>::wait(cw);
      trace(kTrTurnB, step);
      auto dq_issue = [&] {
        if (dq_job) {
          if (!kPingpong) wait_ds_full<kDsFenceAtReader>(dq_step, bars);
          issue_dq<DTYPE, D>(dq, dq_step, chunk, ds_tiles, k_tile);
        } else if (!kDqFirst) {
          ptx::wgmma_commit();  // an empty group, so that wait_group 1 below always means dV and dK
        }
      };
      auto dq_hand_over = [&] {
        if (kHasDq)
          bwd_dq_finish<DTYPE, D, kFinish, kPair, kTmaStore, kRed, kStmatrix, kWriterFence, kLateStoreWait>(
              dq, chunk >= 0, dq_step, cw, dq_stage, bars, smem, p, f,
              [&] { return job_header(step_of(kDefer), chunk); }, trace, step);
        trace(kTrDqHanded, step);
      };
      ptx::wgmma_fence();
      if (kDqFirst) dq_issue();
      if constexpr (!kIdle) {
        issue_acc_rs<DTYPE, D, kInitAcc && !kHasDq>(dv, pk, do_tile);
        issue_acc_rs<DTYPE, D, kInitAcc && !kHasDq>(dk, dsk, q_tile);
      }
      ptx::wgmma_commit();  // IDLE: an empty group, so that the waits below count the same groups
      if (!kDqFirst) dq_issue();
      BwdTurns<FLAGS>::pass(cw);

      // 8: everything of this step has finished reading Q, dO, P^T, dS^T and the dS buffer.
      // kDqFirst: the dQ job's group first (dV and dK still run): its hand-over, then the rest.
      // Otherwise dV and dK (the last readers of Q and dO) are the older group: Q and dO go back to
      // the producer while the dQ job still runs. With two Q / dO stages the slot of step t + 2
      // frees when the second warpgroup is done with step t, about half a step before the first
      // one needs it; the earlier release gives the load the dQ job's time more. Measured 1.01-
      // 1.035x on the self s = 1 sets, though the trace saw a step only 0.7 % shorter (PERF_NOTES,
      // backward v12): the gain is real, this reason for it is not confirmed.
      if constexpr (kDqFirst) {
        ptx::wgmma_wait<1>();
        ptx::fence_operand(dq);
        trace(kTrDqJobDone, step);
        dq_hand_over();
      } else {
        ptx::wgmma_wait<1>();
        if constexpr (!kIdle) {
          ptx::fence_operand(pk);
          ptx::fence_operand(dsk);
        }
        ptx::fence_operand(dv);
        ptx::fence_operand(dk);
        consumer_release(bars->qdo[qs]);
      }
      ptx::wgmma_wait<0>();
      if constexpr (!kIdle) {
        ptx::fence_operand(pk);
        ptx::fence_operand(dsk);
      }
      ptx::fence_operand(dv);
      ptx::fence_operand(dk);
      ptx::fence_operand(dq);
      trace(kTrBDone, step);
      if (kDqFirst) consumer_release(bars->qdo[qs]);
      if (!kDqFirst) dq_hand_over();
    };
    // K and V of the tile (the first step needs both at once; the producer loads them right after
    // that step's Q and dO).
    trace(kTrTileRead, step);
    consumer_wait(bars->k, kvc.phase());
    trace(kTrKIn, step);
    consumer_wait(bars->v, kvc.phase());
    trace(kTrVIn, step);
    if constexpr (kTwo) {
      // The previous tile's epilogue staged dK in the buffer that our next dQ job uses: its TMA
      // store's issuer waits until the store has read it, then everyone (it did long ago: the
      // K / V wait above was longer).
      if (int(threadIdx.x) == 128 * (cw + 1)) ptx::bulk_wait_group_read<0>();
      ptx::named_barrier_sync(kBwdBarEpilogueBase + cw, 128);
    }
    trace(kTrTileStart, step);
    auto run_steps = [&](auto idle_half) {
      for (; ls < ts.steps; ++ls, ++step) {
        if (kDefer && ls == 0)
          step_body(BoolConstant<false>{}, idle_half);
        else
          step_body(BoolConstant<true>{}, idle_half);
        if (kWalk && (!kDefer || ls > 0)) job = bwd_next_step(job, ts.m_begin, ts.m_end);
      }
    };
    if (keys_past_end)
      run_steps(BoolConstant<kSkipEmptyHalf>{});
    else
      run_steps(BoolConstant<false>{});
    load_next_record(it);  // kBwdRecordLanes: lands under the tail and the epilogue

    // Rows and head from the tile's start (no global reads here, in series with the stores).
    const int rows_valid = ts.len_k - ts.n0 - 64 * cw, k_row = ts.k_row, kv_head = ts.kv_head;
    const int tid = ptx::thread_x_fresh() - 128 * (cw + 1), bar = kBwdBarEpilogueBase + cw;
    const float dv_scale = (kTwice ? 0.5f : 1.0f) * p.out_scale;
    // kDvInV: dV leaves from our 64 rows of each V panel (a panel stride of kBwdBlockN rows), which
    // only our own dP^T products read, the last one long done. Staged before the tail's wait for
    // the other warpgroup's last dS^T (the leading warpgroup waits there anyway), so that the
    // store's read runs under that wait and the dQ product, and V goes back about when K does.
    auto store_dv_in_v = [&] {
      store_block_tma<DTYPE, D, kBwdBlockN, kStmatrix>(dv, v_tile + 64 * cw * kSw128RowBytes, tm_dv, kv_head,
                                                       k_row + 64 * cw, out_rows(p.dv, k_row, kv_head), int(k_stride),
                                                       rows_valid, dv_scale, f, tid, bar, false);
    };
    auto release_k_and_v = [&] {
      consumer_release(bars->k);
      // V once dV's reads are done: the TMA store's (this thread's only bulk group), or, for a
      // block holding the sequence's last rows, each warp's own row copies.
      if (rows_valid >= 64) {
        if (tid == 0) {
          ptx::bulk_wait_group_read<0>();
          ptx::mbarrier_arrive_count(&bars->v.empty, 4);  // for the warpgroup's four warps
        }
      } else {
        __syncwarp();
        consumer_release(bars->v);
      }
    };
    if constexpr (kDefer) {  // the last step's dQ job, while K is still resident
      float dq[32];
      const int chunk = bwd_dq_owner_chunk<D>(step - 1, cw);
      if (chunk >= 0) {
        if (kFinish && !kPair)
          bwd_dq_announce<D>(step - 1, cw, bars, [&] { return job_header(step_of(true), chunk); });
        if constexpr (kDvInV) store_dv_in_v();
        wait_ds_full<kDsFenceAtReader>(step - 1, bars);
        issue_dq<DTYPE, D>(dq, step - 1, chunk, ds_tiles, k_tile);
        ptx::wgmma_wait<0>();
        ptx::fence_operand(dq);
      } else if constexpr (kDvInV) {
        store_dv_in_v();
      }
      // kDvInV: K and V go back before the hand-over (which may wait for the writer): the dQ
      // product was K's last reader, and V's rows have been read by dV's store or its row copies.
      if constexpr (kDvInV) release_k_and_v();
      bwd_dq_finish<DTYPE, D, kFinish, kPair, kTmaStore, kRed, kStmatrix, kWriterFence, kLateStoreWait>(
          dq, chunk >= 0, step - 1, cw, dq_stage, bars, smem, p, f, [&] { return job_header(step_of(true), chunk); },
          trace, step - 1);
      trace(kTrLastDqHanded, step - 1);
    }
    // every dQ job of the tile has read K: the next tile may load (kDvInV: released above)
    if constexpr (!kDvInV) consumer_release(bars->k);
    kvc.advance();

    // Epilogue: the scales folded out of P and dS, io dtype, key rows inside the sequence only.
    // dV and dK leave through shared memory and the TMA unit (epilogue.cuh). dV goes through our
    // partial-sum buffer wherever that is free at a tile's end ("spare"), so it is staged and
    // stored while the writer may still hold the staging buffer with our last dQ job. The
    // partial buffer is free then: without kBwdDqFinish nothing uses it; with it, the next partial
    // sum is loaded into it only after our next announcement, which follows the final wait below;
    // in a pair, rank 0 receives nothing. Rank 1's receives the partner's next part as soon as it
    // has read this tile's last one, so rank 1 uses the staging buffer for both, after the writer.
    // Rank 0 with kBwdPairTwoStage stages its jobs in both buffers; with kBwdPairDvInDs (its
    // default) its dV then goes to our halves of the dS^T buffers, which wait only for this CTA's
    // last dQ jobs, and dK alone to the next job's buffer (1.02-1.07x on the pair sets); without it
    // both follow the accumulator path's order through the next job's buffer, whose previous job
    // rank 1 must have read first.
    // dK: on the two-stage accumulator path with kBwdDkInDs (the default there) it goes to our
    // halves of the dS^T buffers, staged right after dV (1.03x at self L = 512). Otherwise,
    // without kBwdDqFinish, it follows dV through the same buffer once dV's store has read it
    // (store_block_tma waits for that): the writer's last bulk add took 2.4k cycles of a 5.4k
    // epilogue (trace) and dV's store reads sooner, 1.04x at self L = 512 (ab-epi-dk-*). With the
    // finish, dK waits for the writer and takes the staging buffer: the writer's last job is tied
    // to another CTA's progress there (the partner, the earlier contributors), so that wait is not
    // saved, only moved, and adding dV's store to it measured 0.95-0.97x (and the dS^T buffers
    // instead 0.965-1.00x).
    // Two staging buffers: the one our next dQ job will use, whose previous job the writer has read
    // long ago (the tile's last job is in the other one); the next tile's start waits for these
    // stores (kTwo), or the end of this epilogue does (kBwdDqFinish, rank 0 of a pair).
    const bool spare = !kPair || ptx::cluster_ctarank() == 0;
    const unsigned stage = base + dq_buffer_off<D>(cw, kDqStaging);
    const int dv_buffer = dq_stage.two ? dq_stage.buffer(unsigned(dq_jobs_before<D>(step, cw)))
                                       : spare ? kDqPartial : kDqStaging;
    const unsigned dv_stage = base + dq_buffer_off<D>(cw, dv_buffer);
    // dK through dV's buffer (with the finish and two staging buffers, the other one holds the
    // tile's last job, which rank 1 may not have read yet).
    const bool dk_after_dv = !kFinish || !spare || dq_stage.two;
    // One 64 x D block (dV or dK) through shared memory and the TMA unit (store_block_tma).
    const float dk_scale = p.logit_scale * p.out_scale;
    auto store_out = [&](const float(&acc)[D / 2], unsigned at, const ptx::TensorMap* map, void* grad, float scale,
                         bool wait_for_stores) {
      store_block_tma<DTYPE, D, 64, kStmatrix>(acc, at, map, kv_head, k_row + 64 * cw, out_rows(grad, k_row, kv_head),
                                               int(k_stride), rows_valid, scale, f, tid, bar, wait_for_stores);
    };
    // The same block into our 64 key rows of both dS^T buffers, free once both warpgroups' dQ jobs
    // of the tile's last two steps have read them: the waits the next two steps' dS^T stores would
    // make. Panel c goes to buffer c (a panel stride of kBwdBlockN rows). The next store into them
    // waits for these reads: the next tile's start (kTwo) or the end of this epilogue (kFinish).
    auto store_out_in_ds = [&](const float(&acc)[D / 2], const ptx::TensorMap* map, void* grad, float scale) {
      for (int t = step; t < step + kBwdDsStages; ++t) wait_ds_empty(t, bars);
      store_block_tma<DTYPE, D, kBwdBlockN, kStmatrix>(acc, ds_tiles + 64 * cw * kSw128RowBytes, map, kv_head,
                                                       k_row + 64 * cw, out_rows(grad, k_row, kv_head), int(k_stride),
                                                       rows_valid, scale, f, tid, bar, false);
    };
    // kBwdPairDvInDs, rank 0 of a pair with two staging buffers: dV goes to our halves of the dS^T
    // buffers (waiting only for this CTA's last dQ jobs), dK alone to the next job's buffer.
    const bool dv_in_ds = (kPairDvInDs && dq_stage.two) || (kRank1DvInDs && !spare);
    if (kDvInV) {
      // dV has left during the tail (store_dv_in_v above).
    } else if (dv_in_ds) {
      store_out_in_ds(dv, tm_dv, p.dv, dv_scale);
    } else {
      if (dq_stage.two) bwd_wait_staging_idle<D>(bars, cw, step, dq_stage, 2);
      if (!spare) bwd_wait_staging_idle<D>(bars, cw, step, dq_stage);
      store_out(dv, dv_stage, tm_dv, p.dv, dv_scale, true);
    }
    trace(kTrDvOut, step - 1);
    if (dv_in_ds) {  // rank 0 with two buffers: the next job's; kRank1DvInDs: rank 1's only one
      bwd_wait_staging_idle<D>(bars, cw, step, dq_stage, dq_stage.depth());
      store_out(dk, dv_stage, tm_dk, p.dk, dk_scale, false);
    } else if constexpr (kDkInDs) {  // the accumulator path: dK in the dS^T buffers, right after dV
      store_out_in_ds(dk, tm_dk, p.dk, dk_scale);
    } else {
      if (!dk_after_dv) bwd_wait_staging_idle<D>(bars, cw, step, dq_stage);
      store_out(dk, dk_after_dv ? dv_stage : stage, tm_dk, p.dk, dk_scale, dk_after_dv);
    }
    // All reads of the staged dV and dK (threads' or the TMA unit's) done before a dQ job or a
    // partial sum overwrites them. Without kBwdDqFinish both went through the spare buffer, which
    // nothing but the next tile's epilogue writes, and that waits for these reads first
    // (store_block_tma): no wait here (the CTA's exit waits for the stores).
    // kLateStoreWait, rank 1 of a pair: both went through the staging buffer, whose next writer
    // (the next tile's first finished block, bwd_dq_finish) waits for these reads instead.
    // kRank0Late: rank 0's too, at the next tile's first dS^T store.
    if (kFinish && !(kLateStoreWait && !spare) && !(kRank0Late && spare)) {
      if (tid == 0) ptx::bulk_wait_group_read<0>();
      ptx::named_barrier_sync(bar, 128);
    }
    trace(kTrEpilogueEnd, step - 1);
  }
  // Pairs the writer's dq_empty arrival after our last job; it also keeps the staging buffer (and
  // the CTA's shared memory) alive until that job's bulk reduce has read it.
  bwd_wait_staging_idle<D>(bars, cw, step, dq_stage);
  // The last dK / dV TMA stores must be complete before the CTA goes away.
  if (threadIdx.x == 128 * (cw + 1)) ptx::bulk_wait_group<0>();
}

}  // namespace gdpa::sm90
