// fwd_consumer.cuh — one consumer warpgroup of the forward (64 query rows of every work tile):
// the pingpong step loop over the key blocks, the outer-loop pipelining and the O epilogue.
// Part of the Hopper forward: gdpa_fwd.cu has the design, the roles and the kernel.
#pragma once
#include "fwd_consumer_ops.cuh"

namespace gdpa::sm90 {

template <int DTYPE, int D, int ACT, int MASK, int FLAGS>
__device__ __forceinline__ void fwd_consumer(int cw, const GdpaParams& p, const ptx::TensorMap* tm_o,
                                             unsigned char* smem) {
  constexpr int BN = fwd_block_n(D, FLAGS);
  constexpr int QS = fwd_q_stages(FLAGS);
  constexpr int ST = fwd_kv_stages(FLAGS);
  constexpr FwdSmemPlan plan = fwd_smem_plan(D, FLAGS);
  constexpr bool kOuter = (FLAGS & kFwdOuterPipeline) != 0;
  constexpr bool kOverlap = (FLAGS & kFwdIntraOverlap) != 0;
  constexpr bool kReuse = (FLAGS & kFwdKvReuse) != 0;
  constexpr bool kUnit = (FLAGS & kFwdUnitLogitScale) != 0;
  constexpr bool kSoftmax = (FLAGS & kFwdSoftmax) != 0;
  constexpr bool kSkipEmpty = (FLAGS & kFwdSkipEmptyHalf) != 0;
  constexpr bool kWholeBatch = (FLAGS & kFwdWholeBatchBranch) != 0;
  constexpr bool kStmatrix = (FLAGS & kFwdStmatrixO) != 0;
  constexpr bool kNarrow = (FLAGS & kFwdNarrowLastBlock) != 0;
  constexpr bool kLanes = (FLAGS & kFwdRecordLanes) != 0;
  // plan.o_in_q (kFwdSiblingTails): O is staged in this warpgroup's rows of the tile's Q stage,
  // which goes back to the producer during the next tile, once the TMA store has read it.
  constexpr bool kOInQ = plan.o_in_q;
  static_assert(!(kNarrow && kSoftmax), "the softmax variant masks keys past the end in whole blocks");
  static_assert(!fwd_sibling_tails(FLAGS) || (!kOverlap && !kNarrow && !kReuse && !kSoftmax && kOuter &&
                                               (FLAGS & kFwdTrace) == 0),
                "kFwdSiblingTails: one P buffer, whole last blocks, no K / V reuse, two Q stages (fwd_config.h)");
  constexpr int kMix = act_mix_of(FLAGS);  // sixteenths of fast_gelu on the FMA pipe (act_mix.h)
  // kFwdHalfFold: P = round(2 f), O halved in the epilogue (act_twice_f; bf16 only, see there).
  constexpr bool kTwice = (FLAGS & kFwdHalfFold) != 0 && use_twice_f<DTYPE, ACT, kMix> && !kSoftmax;
  auto* bars = reinterpret_cast<FwdBarriers<FLAGS>*>(smem + plan.bar_off);
  const unsigned base_addr = ptx::smem_addr(smem);
  const FragThread f = frag_thread(int(threadIdx.x) - 128 * (cw + 1));
  const int row_stride = p.heads_q * D;
  auto q_tile = [&](int count) { return base_addr + plan.q_off + (count % QS) * plan.q_bytes; };
  auto k_tile = [&](int count) { return base_addr + plan.k_off + (count % ST) * plan.kv_bytes; };
  auto v_tile = [&](int count) { return base_addr + plan.v_off + (count % ST) * plan.kv_bytes; };
  auto phase_of = [](int count, int stages) { return unsigned(count / stages) & 1u; };
  // kOInQ: the Q stage holding the previous tile's staged O; released once thread 0's TMA store
  // has read it (the fence orders the threads' generic accesses to it, the staging and a partial
  // block's copy, before the TMA load that will overwrite it). Every thread waits: the others have
  // no bulk group, so theirs returns at once, and a wait under a branch on the thread index put a
  // compiler-inserted warpgroup.arrive on a divergent path, which serialized every wgmma of the
  // kernel (ptxas C7520).
  // The same goes for the first tile, which has no stage to release: only the arrival is skipped
  // (an early return there serialized the wgmmas the same way).
  int held_q = -1;
  auto release_held_q = [&] {
    ptx::bulk_wait_group_read<0>();
    ptx::fence_proxy_async_smem();
    __syncwarp();
    const bool held = held_q >= 0;
    if ((threadIdx.x & 31) == 0 && held) ptx::mbarrier_arrive(&bars->q[held ? held_q : 0].empty);
    held_q = -1;
  };

  float s_acc[BN / 2];
  unsigned p_a[BN / 4], p_b[BN / 4];  // P of consecutive blocks alternate between the two arrays
  float o_acc[D / 2];
  SoftmaxRows rows;  // softmax variant only (dead code for GDPA)
  float corr[2];

  RoleTracer<(FLAGS & kFwdTrace) != 0, kFwdTraceCtas, fwd_consumer_wgs(FLAGS), kFwdTraceSlots> trace(
      p, cw, int(threadIdx.x) == 128 * (cw + 1));
  FwdTurns<FLAGS>::start(cw);

  int q_count = 0;   // Q tiles consumed; the producer loads them in the same order
  int kv_count = 0;  // K/V blocks loaded by the producer so far
  int it, end, stride;
  cta_tiles(p, &it, &end, &stride);
  // The next tile's record is needed at the top of each tile. kFwdRecordLanes: it was loaded a tile
  // earlier, spread over the lanes (fwd_tile_field says why; an index past the end loads the
  // current tile's again). Otherwise it is loaded there, after a prefetch into L1 a tile earlier.
  const FwdTileRecord* records = static_cast<const FwdTileRecord*>(p.tile_records);
  FwdTile cur;
  int next_field = 0;
  if (it < end) {
    cur = fwd_tile(p, it);
    if constexpr (kLanes)
      next_field = fwd_tile_field(p, it + stride < end ? it + stride : it);
    else if (it + stride < end)
      ptx::prefetch_l1(records + it + stride);
  }
  bool first_s_in_flight = false;  // the first QK^T of `cur` was issued during the previous tile
  while (it < end) {
    const int it_next = it + stride;
    const bool have_next = it_next < end;
    trace(kFtRecordLoad, 0);
    FwdTile nxt;  // meaningless without have_next
    if constexpr (kLanes) {
      nxt = fwd_tile_from_lanes(next_field);
      next_field = fwd_tile_field(p, it_next + stride < end ? it_next + stride : it);
    } else {
      if (have_next) nxt = fwd_tile(p, it_next);
      if (it_next + stride < end) ptx::prefetch_l1(records + it_next + stride);
    }
    const bool next_reuse = kReuse && have_next && nxt.reuses_kv();
    trace(kFtTileStart, 0);
    const int row0 = cur.m0 + 64 * cw;  // sequence-local row of this warpgroup's fragment row 0
    // Where this warpgroup's 64 output rows go; computed where used, not held through the loop.
    auto out_rows = [&]() {
      return static_cast<unsigned short*>(p.out) + (long long)(cur.q_row + 64 * cw) * row_stride + cur.head() * D;
    };

    if (cur.empty()) {  // no visible key (Lk = 0 or a window that misses the tile): O = 0
      store_zero_rows<D>(out_rows(), row_stride, cur.len_q - row0, f);
      it = it_next;
      cur = nxt;
      continue;
    }
    // Block j of this tile sits in ring slot `kvb + j`: freshly loaded ones were loaded right after
    // the previous tile's, reused ones are where the run's first tile had them loaded (every tile
    // of a run visits the same blocks, so that is kv_count - nblocks).
    const int nblocks = cur.n_end() - cur.n_begin();
    const bool fresh = !(kReuse && cur.reuses_kv());
    const int kvb = fresh ? kv_count : kv_count - nblocks;
    const bool release_kv = !next_reuse;  // keep K/V resident for the next tile of the run
    const unsigned q_addr = q_tile(q_count);
    const int qs = q_count % QS;

    // The waits before each of a tile's turns, the same on the busy path and the skip-empty one:
    // block 0's turn needs Q and K_0 (unless the previous tile issued S_0 already), inner step j's
    // K_j and V_j-1, the last turn the last V block and, with outer pipelining, the next tile's Q
    // and first K block, whose QK^T rides in that turn; then the turn itself.
    auto wait_first_turn = [&] {
      consumer_wait(bars->q[qs], phase_of(q_count, QS));
      if (fresh) consumer_wait(bars->k[kvb % ST], phase_of(kvb, ST));
      FwdTurns<FLAGS>::wait(cw);
      trace(kFtTurn, 0);
    };
    auto wait_step_turn = [&](int j) {
      const int kj = kvb + j, vj = kvb + j - 1;
      if (fresh) {
        consumer_wait(bars->k[kj % ST], phase_of(kj, ST));
        consumer_wait(bars->v[vj % ST], phase_of(vj, ST));
      }
      FwdTurns<FLAGS>::wait(cw);
      trace(kFtTurn, j);
    };
    auto wait_last_turn = [&] {
      const int vj = kvb + nblocks - 1;
      const int next_kvb = next_reuse ? kvb : kvb + nblocks;
      if (fresh) consumer_wait(bars->v[vj % ST], phase_of(vj, ST));
      if (kOuter && have_next && !nxt.empty()) {
        consumer_wait(bars->q[(q_count + 1) % QS], phase_of(q_count + 1, QS));
        if (!next_reuse) consumer_wait(bars->k[next_kvb % ST], phase_of(next_kvb, ST));
      }
      FwdTurns<FLAGS>::wait(cw);
      trace(kFtTurn, nblocks);
    };

    // ---- kFwdSkipEmptyHalf: all of this warpgroup's rows lie past the sequence's end ----
    // (the second warpgroup on a last tile of at most 64 rows). It walks the tile's slots and turns
    // exactly as the busy path below does (the empty barriers count one arrival per consumer warp
    // and the pingpong needs both warpgroups to take the same number of turns), without GEMMs, the
    // activation or the store; only the next tile's first QK^T is issued in the last turn, as the
    // outer pipeline does. A separate path rather than conditions inside the busy one: predicated
    // wgmma issues in the steady-state loop cost 2-11 % at s = 1, where no tile is ever idle.
    if (kSkipEmpty && row0 >= cur.len_q) {
      if (!first_s_in_flight) {
        wait_first_turn();
        FwdTurns<FLAGS>::pass(cw);
        trace(kFtIssued, 0);
      }
      ptx::wgmma_wait<0>();  // the QK^T the previous tile issued for this one, unused
      if (release_kv) consumer_release(bars->k[kvb % ST]);
      if constexpr (kOInQ) release_held_q();
      for (int j = 1; j < nblocks; ++j) {
        const int kj = kvb + j, vj = kvb + j - 1;
        wait_step_turn(j);
        FwdTurns<FLAGS>::pass(cw);
        trace(kFtIssued, j);
        if (release_kv) {
          consumer_release(bars->k[kj % ST]);
          consumer_release(bars->v[vj % ST]);
        }
      }
      if constexpr (kOInQ)
        held_q = qs;  // no O staged there: released with the next tile's, at the same point
      else
        consumer_release(bars->q[qs]);
      const int vj = kvb + nblocks - 1;
      const bool prefetch = kOuter && have_next && !nxt.empty();
      const int next_kvb = next_reuse ? kvb : kvb + nblocks;
      wait_last_turn();
      if (prefetch) {
        ptx::wgmma_fence();
        issue_qk<DTYPE, D, BN>(s_acc, q_tile(q_count + 1), 64 * cw, k_tile(next_kvb));
        ptx::wgmma_commit();
      }
      FwdTurns<FLAGS>::pass(cw);
      trace(kFtIssued, nblocks);
      if (release_kv) consumer_release(bars->v[vj % ST]);
      if (fresh) kv_count += nblocks;
      ++q_count;
      first_s_in_flight = prefetch;
      it = it_next;
      cur = nxt;
      continue;
    }

    // ---- block 0: S_0 = Q K_0^T (already in flight if the previous tile issued it) ----
    if (!first_s_in_flight) {
      wait_first_turn();
      ptx::wgmma_fence();
      issue_qk<DTYPE, D, BN>(s_acc, q_addr, 64 * cw, k_tile(kvb));
      ptx::wgmma_commit();
      FwdTurns<FLAGS>::pass(cw);
      trace(kFtIssued, 0);
    }
    ptx::wgmma_wait<0>();
    ptx::fence_operand(s_acc);
    trace(kFtSReady, 0);
    if (release_kv) consumer_release(bars->k[kvb % ST]);
    if (!kOInQ && nblocks == 1) consumer_release(bars->q[qs]);
    // kOInQ: the previous tile's store has had this tile's first QK^T to read its staged O.
    if constexpr (kOInQ) release_held_q();
    if constexpr (kSoftmax) {
      softmax_rows_init(rows);
      softmax_block<DTYPE, MASK, BN>(s_acc, p_a, cur.n_begin(), row0, cur, p, f, rows, corr);
    } else {
      activate_block<DTYPE, ACT, MASK, BN, kUnit, kMix, kTwice>(s_acc, p_a, cur.n_begin() * BN, row0, cur, p, f);
    }
    trace(kFtActDone, 0);

    // ---- step j: S_j issued before O += P_{j-1} V_{j-1}; act(S_j) runs under the PV GEMM ----
    // acc: whether the PV GEMM adds to O (false for the tile's first, which starts O over); known
    // at run time only where the loop runs both kinds of step (kFwdWholeBatchBranch says why the
    // branch on it comes before the batch). NARROW (kFwdNarrowLastBlock, the tile's last block
    // only): S_j over the block's first BN / 2 keys, the rest lying past the sequence's end; P_j is
    // then the leading half of p_out. p_in and p_out are P's unsigned[BN / 4] arrays, taken as
    // auto&: a generic lambda with array-reference parameters of that bound crashed nvcc 13.0's
    // cicc (segmentation fault).
    auto step = [&](auto narrow_tag, int j, auto& p_in, auto& p_out_all, bool acc) {
      constexpr int NS = decltype(narrow_tag)::value ? BN / 2 : BN;  // keys of S_j
      float(&s)[NS / 2] = leading<NS / 2>(s_acc);
      unsigned(&p_out)[NS / 4] = leading<NS / 4>(p_out_all);
      const int kj = kvb + j, vj = kvb + j - 1;
      wait_step_turn(j);
      auto issue_s = [&] {
        ptx::wgmma_fence();
        issue_qk<DTYPE, D, NS, kFwdBlockM, BN>(s, q_addr, 64 * cw, k_tile(kj));
        ptx::wgmma_commit();
        trace(kFtQkIssued, j);
        if constexpr (!kOverlap) {  // ablation: finish S before the PV GEMM starts
          ptx::wgmma_wait<0>();
          ptx::fence_operand(s);
        }
      };
      // Each branch commits its own batch: a commit after the join would need ptxas's extra
      // HGMMA.64x8 to close the group again.
      if (kWholeBatch && acc) {
        issue_s();
        issue_pv<DTYPE, D, BN, true>(o_acc, p_in, v_tile(vj));
        ptx::wgmma_commit();
      } else if (kWholeBatch) {
        issue_s();
        issue_pv<DTYPE, D, BN, false>(o_acc, p_in, v_tile(vj));
        ptx::wgmma_commit();
      } else {
        issue_s();
        issue_pv<DTYPE, D, BN>(o_acc, p_in, v_tile(vj), acc);
        ptx::wgmma_commit();
      }
      FwdTurns<FLAGS>::pass(cw);
      trace(kFtIssued, j);
      if constexpr (kOverlap)
        ptx::wgmma_wait<1>();  // S_j done; the PV GEMM may still run under the activation
      else
        ptx::wgmma_wait<0>();
      ptx::fence_operand(s);
      trace(kFtSReady, j);
      if (release_kv) consumer_release(bars->k[kj % ST]);
      if (!kOInQ && j == nblocks - 1) consumer_release(bars->q[qs]);
      if constexpr (kSoftmax)
        softmax_block<DTYPE, MASK, BN>(s_acc, p_out_all, cur.n_begin() + j, row0, cur, p, f, rows, corr);
      else
        activate_block<DTYPE, ACT, MASK, NS, kUnit, kMix, kTwice>(s, p_out, (cur.n_begin() + j) * BN, row0, cur, p, f);
      trace(kFtActDone, j);
      ptx::wgmma_wait<0>();
      ptx::fence_operand(p_in);
      ptx::fence_operand(o_acc);
      trace(kFtPvDone, j);
      // Softmax: O so far is relative to the previous row max; bring it to the new one before the
      // next PV GEMM adds P_j V_j (GDPA has no such step: nothing to rescale).
      if constexpr (kSoftmax) scale_rows<D>(o_acc, corr);
      if (release_kv) consumer_release(bars->v[vj % ST]);
    };

    // ---- last PV; with outer pipelining the next tile's first QK^T rides in the same turn ----
    // NARROW: the last block's PV over its first BN / 2 keys (the leading half of p_last).
    auto finish = [&](auto narrow_tag, auto& p_last_all) {
      constexpr int NP = decltype(narrow_tag)::value ? BN / 2 : BN;  // keys of the last PV
      unsigned(&p_last)[NP / 4] = leading<NP / 4>(p_last_all);
      const int vj = kvb + nblocks - 1;
      const bool prefetch = kOuter && have_next && !nxt.empty();
      const int next_kvb = next_reuse ? kvb : kvb + nblocks;
      wait_last_turn();
      // The accumulate flag stays a run-time choice inside the batch here (a branch between two PV
      // sequences after the fence): in any form that fixes it before the fence, ptxas flags the
      // epilogue's reads of O (under the next tile's QK^T) and serializes every wgmma (C7514).
      ptx::wgmma_fence();
      issue_pv<DTYPE, D, NP, BN>(o_acc, p_last, v_tile(vj), nblocks > 1);
      ptx::wgmma_commit();
      if (prefetch) {
        issue_qk<DTYPE, D, BN>(s_acc, q_tile(q_count + 1), 64 * cw, k_tile(next_kvb));
        ptx::wgmma_commit();
      }
      FwdTurns<FLAGS>::pass(cw);
      trace(kFtIssued, nblocks);
      if (prefetch)
        ptx::wgmma_wait<1>();
      else
        ptx::wgmma_wait<0>();
      ptx::fence_operand(o_acc);
      ptx::fence_operand(p_last);
      trace(kFtLastPvDone, nblocks);
      if (release_kv) consumer_release(bars->v[vj % ST]);
      // Epilogue: O * out_scale -> io dtype, rows inside the sequence only (softmax: O / row sum).
      if constexpr (kSoftmax) softmax_normalize<D>(o_acc, rows);
      const float o_scale = kSoftmax ? 1.0f : (kTwice ? 0.5f : 1.0f) * p.out_scale;
      if constexpr (kOInQ)  // this warpgroup's rows of the Q stage; no earlier store reads them
        store_block_tma<DTYPE, D, kFwdBlockM, kStmatrix>(o_acc, q_addr + 64 * cw * kSw128RowBytes, tm_o, cur.head(),
                                                         cur.q_row + 64 * cw, out_rows(), row_stride,
                                                         cur.len_q - row0, o_scale, f,
                                                         int(threadIdx.x) - 128 * (cw + 1), kBarEpilogueBase + cw,
                                                         false);
      else
        store_block_tma<DTYPE, D, 64, kStmatrix>(o_acc, base_addr + plan.o_off + cw * plan.o_bytes, tm_o, cur.head(),
                                                 cur.q_row + 64 * cw, out_rows(), row_stride, cur.len_q - row0, o_scale,
                                                 f, int(threadIdx.x) - 128 * (cw + 1), kBarEpilogueBase + cw);
      trace(kFtEpilogueEnd, nblocks);
      return prefetch;
    };

    // P alternates between p_a and p_b so no register copy is needed between steps.
    using Wide = BoolConstant<false>;  // the step and finish forms (bool_constant.h)
    using Narrow = BoolConstant<true>;
    bool prefetched;
    if constexpr (!kNarrow) {
      int j = 1;
      for (; j + 1 < nblocks; j += 2) {
        step(Wide{}, j, p_a, p_b, j > 1);
        step(Wide{}, j + 1, p_b, p_a, true);
      }
      if (j < nblocks) {
        step(Wide{}, j, p_a, p_b, j > 1);
        prefetched = finish(Wide{}, p_b);
      } else {
        prefetched = finish(Wide{}, p_a);
      }
    } else {
      // kFwdNarrowLastBlock: a last block (not the first) holding at most BN / 2 of the keys runs
      // narrow. The whole steps before it leave P in p_a or p_b by their parity; the narrow step
      // takes it from p_a (one copy of 32 registers otherwise), so it and the narrow finish exist
      // once in the code: every copy of a step costs the whole kernel (PERF_NOTES, twenty-third
      // session).
      const bool narrow = nblocks >= 2 && cur.len_k - (cur.n_end() - 1) * BN <= BN / 2;
      const int wide_end = narrow ? nblocks - 1 : nblocks;  // steps j < wide_end are whole
      int j = 1;
      for (; j + 1 < wide_end; j += 2) {
        step(Wide{}, j, p_a, p_b, j > 1);
        step(Wide{}, j + 1, p_b, p_a, true);
      }
      const bool in_b = j < wide_end;  // one whole step left: it writes p_b
      if (in_b) {
        step(Wide{}, j, p_a, p_b, j > 1);
        ++j;
      }
      if (narrow) {
        if (in_b) {
#pragma unroll
          for (int i = 0; i < BN / 4; ++i) p_a[i] = p_b[i];
        }
        step(Narrow{}, j, p_a, p_b, j > 1);
        prefetched = finish(Narrow{}, p_b);
      } else {
        prefetched = in_b ? finish(Wide{}, p_b) : finish(Wide{}, p_a);
      }
    }

    if constexpr (kOInQ) held_q = qs;
    if (fresh) kv_count += nblocks;
    ++q_count;
    first_s_in_flight = prefetched;
    it = it_next;
    cur = nxt;
  }
  // The last TMA stores of O must be complete before the CTA (and its shared memory) goes away.
  if (threadIdx.x == 128 * (cw + 1)) ptx::bulk_wait_group<0>();
}

}  // namespace gdpa::sm90
