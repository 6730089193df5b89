// gdpa_fwd.cu — the hand-scheduled Hopper GDPA forward: O = act(logit_scale * Q K^T) * out_scale V
// on packed jagged batches. TMA + mbarrier pipelines, wgmma, explicit warp roles, persistent grid.
//
// Roles (kernels/sm90/fwd_config.h for the shapes):
//   warpgroup 0, one elected lane of warp 0: the producer. Issues every TMA load: Q (one tile per
//     work item, double-buffered so the next tile's Q arrives during this tile's tail), and K and
//     V for each inner step on their own two-stage rings, in 64-row boxes: only the halves of an
//     edge tile or key block that hold its rows. Gives its registers away (setmaxnreg.dec).
//   warpgroups 1 and 2: consumers, 64 query rows each. Per inner step j:
//       S_j = Q K_j^T            (wgmma, both operands in shared memory)
//       O  += P_{j-1} V_{j-1}    (wgmma, P from registers: the S accumulator repacked, no smem trip)
//       P_j = act(S_j)           (in registers, under the PV GEMM: intra-warpgroup overlap)
//     and the two consumers take turns issuing GEMMs (pingpong), so one's activation runs while
//     the other's GEMMs keep the tensor cores busy. A consumer's 64 rows of O leave through
//     shared memory by TMA store (epilogue.cuh).
// There is no softmax: no row max, no row sum, no rescaling of O. Those registers pay for the
// second P buffer that lets P_j be computed while P_{j-1} is still being read by the tensor cores.
//
// Numerics: S and O accumulate in fp32, P is rounded to the input dtype as the tensor cores consume
// it. out_scale multiplies O once in the epilogue instead of every P element: sum_j s*f_j*V_j =
// s * sum_j f_j*V_j, one multiply per output instead of per score (the rounding point of P moves
// by one bf16 rounding of s*f vs f, well inside the tolerance rule).
#include "../common/bool_constant.h"
#include "../common/params.h"
#include "../../ptx/common.cuh"
#include "../../ptx/fence.cuh"
#include "../../ptx/mbarrier.cuh"
#include "../../ptx/regs.cuh"
#include "../../ptx/smem_desc.h"
#include "../../ptx/tma.cuh"
#include "../../ptx/wgmma.cuh"
#include "epilogue.cuh"
#include "fragments.cuh"
#include "fwd_config.h"
#include "fwd_qk.cuh"
#include "fwd_sibling_tail.cuh"
#include "fwd_tile.cuh"
#include "jagged_load.cuh"
#include "pipeline.cuh"
#include "record_lanes.cuh"
#include "trace.cuh"

namespace gdpa::sm90 {

// Named barrier ids (0 is __syncthreads): one per consumer warpgroup for the pingpong turn, one
// per consumer warpgroup for its O staging buffer.
constexpr int kBarSchedBase = 1;
constexpr int kBarEpilogueBase = kBarSchedBase + kFwdConsumerWarpgroups;
constexpr int kBarSiblingTail = kBarEpilogueBase + kFwdConsumerWarpgroups;  // kFwdSiblingTails

// The first M elements of a register array, as an array of their own (a narrow last block's S and
// P are half the size); every index stays a compile-time constant, so nothing goes to local memory.
template <int M, class T, int N>
__device__ __forceinline__ T (&leading(T (&a)[N]))[M] {
  static_assert(M <= N, "a view inside the array");
  if constexpr (M == N)
    return a;  // the whole array as it is: the whole-block path compiles as it did without views
  else
    return *reinterpret_cast<T(*)[M]>(&a[0]);
}

// Registers per thread after reallocation: 24 x 128 + 240 x 256 = 64,512 <= 65,536. A consumer
// holds S (64), two P buffers (2 x 32) and O (64) at D = 128; at 232 a few loop-carried scalars spill.
constexpr int kProducerRegs = 24;
constexpr int kConsumerRegs = 240;
// kFwdThreeConsumers: 24 x 128 + 160 x 384 = 64,512.
constexpr int kConsumerRegsThree = 160;
// kFwdSiblingTails: 24 x 128 + 200 x 256 + 88 x 128 = 65,536 (fwd_sibling_tail.cuh). 200 holds S,
// one P buffer and O without spilling only without the narrow last block's second step form
// (experiments/register_probe.sh; PERF_NOTES, "The register and shared-memory plan ...").
constexpr int kConsumerRegsSibling = 200;

// kFwdRecordLanes: the consumers take each tile's record a tile ahead, spread over the lanes:
// lane l of every warp loads field l % 8 (one register, the same 32 bytes for every warp), and
// fwd_tile_from_lanes gathers them with shuffles when that tile starts. Why: ptxas keeps the
// record's fields in uniform registers and moves a loaded record there (R2UR) right after its
// load, so a record loaded where it is needed costs the whole load (225-396 cycles in the trace,
// an L2 hit: a prefetch into L1 a tile earlier did not keep the line there); eight registers held
// through a tile instead cost more than the load (experiments/PERF_NOTES.md).
__device__ __forceinline__ int fwd_tile_field(const GdpaParams& p, int index) {
  return record_field_of_lane<kFwdRecordFields>(p.tile_records, index);
}

__device__ __forceinline__ FwdTile fwd_tile_from_lanes(int field) {
  auto lane = [&](int l) { return __shfl_sync(0xffffffffu, field, l); };
  return FwdTile{{lane(0), lane(1), lane(2), lane(3), lane(4), lane(5), lane(6), lane(7)}};
}

// True when some (row, key) of rows [row_lo, row_hi] x keys [col_lo, col_hi] is disallowed, or,
// with PAST_END, past the keys: only those blocks pay for the mask compares. The activation kernels
// leave keys past the end unmasked: their K and V rows are zeros (jagged_load.cuh), so the score is
// 0 and act(0) = 0. The softmax variant passes PAST_END (exp of a zero score is not zero).
template <int MASK, bool PAST_END>
__device__ __forceinline__ bool block_needs_mask(int col_lo, int col_hi, int row_lo, int row_hi, const FwdTile& t,
                                                 const GdpaParams& p) {
  if (PAST_END && col_hi >= t.len_k) return true;
  const int d0 = t.len_k - t.len_q;
  if constexpr (MASK == kMaskCausal) return col_hi > row_lo + d0;
  if constexpr (MASK == kMaskWindow) {
    const bool right_ok = p.window_right < 0 || col_hi <= row_lo + d0 + p.window_right;
    const bool left_ok = p.window_left < 0 || col_lo >= row_hi + d0 - p.window_left;
    return !(right_ok && left_ok);
  }
  return false;
}

template <int FLAGS>
struct FwdBarriers {
  SlotBarriers q[fwd_q_stages(FLAGS)];
  SlotBarriers k[fwd_kv_stages(FLAGS)];
  SlotBarriers v[fwd_kv_stages(FLAGS)];
};

// TMA bytes of `boxes` 64-row boxes of a D-column tile.
template <int D>
__device__ __forceinline__ unsigned load_bytes(int boxes) {
  return unsigned(boxes * kFwdLoadRows * D * 2);
}

// ---------------------------------------------------------------------------------------------
// Producer: one thread.
// ---------------------------------------------------------------------------------------------
template <int D, int MASK, int FLAGS>
__device__ __forceinline__ void fwd_producer(const GdpaParams& p, const ptx::TensorMap* tm_q, const ptx::TensorMap* tm_k,
                                             const ptx::TensorMap* tm_v, unsigned char* smem) {
  constexpr int BN = fwd_block_n(D, FLAGS);
  constexpr int BM = fwd_block_m(FLAGS);
  constexpr int QS = fwd_q_stages(FLAGS);
  constexpr int ST = fwd_kv_stages(FLAGS);
  constexpr FwdSmemPlan plan = fwd_smem_plan(D, FLAGS);
  constexpr bool kReuse = (FLAGS & kFwdKvReuse) != 0;
  constexpr bool kPieces = fwd_sibling_tails(FLAGS);
  auto* bars = reinterpret_cast<FwdBarriers<FLAGS>*>(smem + plan.bar_off);
  auto* piece_q = reinterpret_cast<SlotBarriers*>(smem + plan.tail_bar_off);  // kPieces only
  int q_count = 0, kv_count = 0;  // Q tiles and K/V blocks loaded so far (the consumers count the same)
  int pieces = 0;                 // kPieces: pieces whose Q was loaded (the tail warpgroup counts the same)
  int it, end, stride;
  cta_tiles(p, &it, &end, &stride);
  for (; it < end; it += stride) {
    const FwdTile t = fwd_tile(p, it);
    if (t.empty()) continue;
    const bool reuse = kReuse && t.reuses_kv();
    {
      const int s = q_count % QS;
      // A query tile past its sequence's end skips its empty 64-row half: those rows' results are
      // never stored, and no product sums over query rows.
      const int boxes = fwd_load_boxes(BM, t.len_q - t.m0);
      producer_acquire(bars->q[s], unsigned(q_count / QS) & 1u, load_bytes<D>(boxes));
      load_jagged_rows<D, BM, kFwdLoadRows>(smem + plan.q_off + s * plan.q_bytes, boxes, tm_q, &bars->q[s].full,
                                            t.head(), t.q_row, t.q_row - t.m0 + t.len_q, p.load_window_q,
                                            p.zero_rows, ptx::kEvictFirst);
      ++q_count;
    }
    for (int n = t.n_begin(); n < t.n_end() && !reuse; ++n, ++kv_count) {
      const int s = kv_count % ST;
      const unsigned phase = unsigned(kv_count / ST) & 1u;
      // Every box of a key block, also one wholly past the end: the PV product sums over all BN
      // keys, so those rows must be zeros (jagged_load.cuh), and a box outside the map reads no L2.
      const int key_row = t.k_row + n * BN, key_end = t.k_row + t.len_k;
      constexpr int kBoxes = BN / kFwdLoadRows;
      producer_acquire(bars->k[s], phase, load_bytes<D>(kBoxes));
      load_jagged_rows<D, BN, kFwdLoadRows>(smem + plan.k_off + s * plan.kv_bytes, kBoxes, tm_k, &bars->k[s].full,
                                            t.kv_head(), key_row, key_end, p.load_window_k, p.zero_rows,
                                            ptx::kEvictLast);
      producer_acquire(bars->v[s], phase, load_bytes<D>(kBoxes));
      load_jagged_rows<D, BN, kFwdLoadRows>(smem + plan.v_off + s * plan.kv_bytes, kBoxes, tm_v, &bars->v[s].full,
                                            t.kv_head(), key_row, key_end, p.load_window_k, p.zero_rows,
                                            ptx::kEvictLast);
      // kPieces: the piece's Q (one 64-row box from its first row) after the tile's first K and V,
      // not before: its one stage is free only once the tail warpgroup has copied the previous
      // piece out, and the consumers should not wait behind that for their first blocks.
      if constexpr (kPieces) {
        const FwdPiece piece = fwd_piece(t);
        if (n == t.n_begin() && piece.rows > 0) {
          producer_acquire(*piece_q, unsigned(pieces) & 1u, load_bytes<D>(1));
          const int seq_row = t.q_row - t.m0;
          load_jagged_rows<D, 64, kFwdLoadRows>(smem + plan.tail_q_off, 1, tm_q, &piece_q->full, t.head(),
                                                seq_row + piece.first, seq_row + t.len_q, p.load_window_q,
                                                p.zero_rows, ptx::kEvictFirst);
          ++pieces;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Consumer helpers: one warpgroup, 64 query rows.
// ---------------------------------------------------------------------------------------------

// O (+)= P V over the first BN keys of a V slot of VROWS rows per panel (a narrow last block: 64
// of 128): BN/16 wgmmas with A from registers and V N-major. ACCUMULATE = false starts O over
// (the tile's first block).
template <int DTYPE, int D, int BN, bool ACCUMULATE, int VROWS = BN>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const unsigned (&p)[BN / 4], unsigned v_tile) {
  const WgmmaDescBase vb = sw128_mnmajor_base(v_tile, VROWS);
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    const unsigned a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    const unsigned long long db = vb.at(sw128_mnmajor_step(kk));
    if (!ACCUMULATE && kk == 0)
      ptx::Wgmma<D, DTYPE>::template rs<0, 1>(o, a, db);
    else
      ptx::Wgmma<D, DTYPE>::template rs<1, 1>(o, a, db);
  }
}

template <int DTYPE, int D, int BN, int VROWS = BN>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const unsigned (&p)[BN / 4], unsigned v_tile, bool accumulate) {
  if (accumulate)
    issue_pv<DTYPE, D, BN, true, VROWS>(o, p, v_tile);
  else
    issue_pv<DTYPE, D, BN, false, VROWS>(o, p, v_tile);
}

// Pingpong (kFwdPingpong): one turn per inner step, S_j and PV_{j-1} issued together.
template <int FLAGS>
using FwdTurns = ConsumerTurns<(FLAGS & kFwdPingpong) != 0, kBarSchedBase>;

// P = act(S) for the BN keys from col0 on (sequence-local) and the 64 rows from row0 on.
template <int DTYPE, int ACT, int MASK, int BN, bool UNIT_SCALE, int MIX, bool TWICE>
__device__ __forceinline__ void activate_block(const float (&s)[BN / 2], unsigned (&p)[BN / 4], int col0, int row0,
                                               const FwdTile& t, const GdpaParams& prm, const FragThread& f) {
  const MaskBounds mb{t.len_q, t.len_k, prm.window_left, prm.window_right};
  if (block_needs_mask<MASK, false>(col0, col0 + BN - 1, row0, row0 + 63, t, prm))
    s_to_p<DTYPE, ACT, MASK, true, UNIT_SCALE, BN, MIX, TWICE>(s, p, prm.logit_scale, f, row0, col0, mb);
  else
    s_to_p<DTYPE, ACT, MASK, false, UNIT_SCALE, BN, MIX, TWICE>(s, p, prm.logit_scale, f, row0, col0, mb);
}

// The softmax variant's counterpart: P from the online softmax, corr for O and the row sums.
template <int DTYPE, int MASK, int BN>
__device__ __forceinline__ void softmax_block(const float (&s)[BN / 2], unsigned (&p)[BN / 4], int n, int row0,
                                              const FwdTile& t, const GdpaParams& prm, const FragThread& f,
                                              SoftmaxRows& rows, float (&corr)[2]) {
  const MaskBounds mb{t.len_q, t.len_k, prm.window_left, prm.window_right};
  const float scale_log2 = prm.logit_scale * 1.4426950408889634f;
  if (block_needs_mask<MASK, true>(n * BN, n * BN + BN - 1, row0, row0 + 63, t, prm))
    softmax_s_to_p<DTYPE, MASK, true, BN>(s, p, scale_log2, f, row0, n * BN, mb, rows, corr);
  else
    softmax_s_to_p<DTYPE, MASK, false, BN>(s, p, scale_log2, f, row0, n * BN, mb, rows, corr);
}

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

// kFwdThreeConsumers: one of three consumer warpgroups, its blocks in series. Per key block j:
// P = act(S_j); then O += P V_j and S_j+1 = Q K_j+1^T issued as one batch, wait. One P buffer and
// no GEMM in flight across the activation, so S (32), O (64) and P (16) fit the 160 registers
// three consumer warpgroups leave; the tensor cores stay busy because the other two warpgroups
// issue while this one computes, and issuing PV and the next QK^T together saves a round trip to
// the tensor cores per block. No pingpong turns: three warpgroups interleave by themselves.
template <int DTYPE, int D, int ACT, int MASK, int FLAGS>
__device__ __forceinline__ void fwd_consumer_serial(int cw, const GdpaParams& p, const ptx::TensorMap* tm_o,
                                                    unsigned char* smem) {
  constexpr int BN = fwd_block_n(D, FLAGS);
  constexpr int BM = fwd_block_m(FLAGS);
  constexpr int QS = fwd_q_stages(FLAGS);
  constexpr int ST = fwd_kv_stages(FLAGS);
  constexpr FwdSmemPlan plan = fwd_smem_plan(D, FLAGS);
  constexpr bool kReuse = (FLAGS & kFwdKvReuse) != 0;
  constexpr bool kUnit = (FLAGS & kFwdUnitLogitScale) != 0;
  constexpr int kMix = act_mix_of(FLAGS);
  constexpr bool kTwice = (FLAGS & kFwdHalfFold) != 0 && use_twice_f<DTYPE, ACT, kMix>;
  static_assert((FLAGS & kFwdSoftmax) == 0, "the softmax variant keeps two consumer warpgroups");
  auto* bars = reinterpret_cast<FwdBarriers<FLAGS>*>(smem + plan.bar_off);
  const unsigned base_addr = ptx::smem_addr(smem);
  const int tid = int(threadIdx.x) - 128 * (cw + 1);
  const FragThread f = frag_thread(tid);
  const int row_stride = p.heads_q * D;
  auto phase_of = [](int count, int stages) { return unsigned(count / stages) & 1u; };
  auto k_tile = [&](int count) { return base_addr + plan.k_off + (count % ST) * plan.kv_bytes; };
  auto v_tile = [&](int count) { return base_addr + plan.v_off + (count % ST) * plan.kv_bytes; };
  // plan.o_in_q: the Q stage a tile's O was staged in goes back to the producer during the next
  // tile, once thread 0's TMA store has read it; the fence orders the threads' generic accesses to
  // it (staging, a partial tile's copy) before the TMA load that will overwrite it.
  auto release_staged_q = [&](int stage) {
    if (tid == 0) ptx::bulk_wait_group_read<0>();
    ptx::fence_proxy_async_smem();
    __syncwarp();
    consumer_release(bars->q[stage]);
  };

  float s_acc[BN / 2];
  unsigned p_acc[BN / 4];
  float o_acc[D / 2];
  RoleTracer<(FLAGS & kFwdTrace) != 0, kFwdTraceCtas, fwd_consumer_wgs(FLAGS), kFwdTraceSlots> trace(p, cw, tid == 0);
  int q_count = 0, kv_count = 0;
  int held_q = -1;  // plan.o_in_q: the stage holding the previous tile's staged O, not yet released
  int it, end, stride;
  cta_tiles(p, &it, &end, &stride);
  for (; it < end; it += stride) {
    const FwdTile cur = fwd_tile(p, it);
    trace(kFtTileStart, 0);
    const bool next_reuse = kReuse && it + stride < end && fwd_tile(p, it + stride).reuses_kv();
    const int row0 = cur.m0 + 64 * cw;
    unsigned short* const out_rows =
        static_cast<unsigned short*>(p.out) + (long long)(cur.q_row + 64 * cw) * row_stride + cur.head() * D;
    if (cur.empty()) {
      store_zero_rows<D>(out_rows, row_stride, cur.len_q - row0, f);
      continue;
    }
    const int nblocks = cur.n_end() - cur.n_begin();
    const bool fresh = !(kReuse && cur.reuses_kv());
    const int kvb = fresh ? kv_count : kv_count - nblocks;
    const bool release_kv = !next_reuse;
    const int qs = q_count % QS;
    const unsigned q_addr = base_addr + plan.q_off + qs * plan.q_bytes;
    consumer_wait(bars->q[qs], phase_of(q_count, QS));
    if (row0 >= cur.len_q) {
      // Rows all past the sequence's end: walk the slots (their empty barriers count every
      // consumer warp) without computing. A path of its own: a wgmma batch may not span a branch
      // (ptxas would serialize every wgmma of the kernel, C7520).
      for (int j = 0; j < nblocks; ++j) {
        const int kj = kvb + j;
        if (fresh) {
          consumer_wait(bars->k[kj % ST], phase_of(kj, ST));
          consumer_wait(bars->v[kj % ST], phase_of(kj, ST));
        }
        if (release_kv) {
          consumer_release(bars->k[kj % ST]);
          consumer_release(bars->v[kj % ST]);
        }
      }
      if (plan.o_in_q && held_q >= 0) release_staged_q(held_q);
      if (!plan.o_in_q) consumer_release(bars->q[qs]);
    } else {
      trace(kFtTurn, 0);
      if (fresh) consumer_wait(bars->k[kvb % ST], phase_of(kvb, ST));
      ptx::wgmma_fence();
      issue_qk<DTYPE, D, BN, BM>(s_acc, q_addr, 64 * cw, k_tile(kvb));
      ptx::wgmma_commit();
      trace(kFtQkIssued, 0);
#pragma unroll
      for (int i = 0; i < D / 2; ++i) o_acc[i] = 0.0f;  // every PV accumulates: one wgmma sequence
      ptx::wgmma_wait<0>();
      ptx::fence_operand(s_acc);
      if (release_kv) consumer_release(bars->k[kvb % ST]);
      if (plan.o_in_q && held_q >= 0) release_staged_q(held_q);
      for (int j = 0;; ++j) {
        const int kj = kvb + j;
        const bool last = j == nblocks - 1;
        trace(kFtSReady, j);
        if (!plan.o_in_q && last) consumer_release(bars->q[qs]);
        activate_block<DTYPE, ACT, MASK, BN, kUnit, kMix, kTwice>(s_acc, p_acc, (cur.n_begin() + j) * BN, row0, cur, p,
                                                                  f);
        trace(kFtActDone, j);
        if (fresh) consumer_wait(bars->v[kj % ST], phase_of(kj, ST));
        if (last) {
          trace(kFtOperandsReady, j);
          ptx::wgmma_fence();
          issue_pv<DTYPE, D, BN, true>(o_acc, p_acc, v_tile(kj));
          ptx::wgmma_commit();
          trace(kFtPvIssued, j);
          ptx::wgmma_wait<0>();
          ptx::fence_operand(o_acc);
          ptx::fence_operand(p_acc);
          trace(kFtPvDone, j);
          if (release_kv) consumer_release(bars->v[kj % ST]);
          break;
        }
        if (fresh) consumer_wait(bars->k[(kj + 1) % ST], phase_of(kj + 1, ST));
        trace(kFtOperandsReady, j);
        ptx::wgmma_fence();
        issue_pv<DTYPE, D, BN, true>(o_acc, p_acc, v_tile(kj));
        issue_qk<DTYPE, D, BN, BM>(s_acc, q_addr, 64 * cw, k_tile(kj + 1));
        ptx::wgmma_commit();
        trace(kFtPvIssued, j);
        ptx::wgmma_wait<0>();
        ptx::fence_operand(o_acc);
        ptx::fence_operand(p_acc);
        ptx::fence_operand(s_acc);
        trace(kFtPvDone, j);
        if (release_kv) {
          consumer_release(bars->v[kj % ST]);
          consumer_release(bars->k[(kj + 1) % ST]);
        }
      }
      const float scale = (kTwice ? 0.5f : 1.0f) * p.out_scale;
      if constexpr (plan.o_in_q)  // this warpgroup's rows of the Q stage; no earlier store reads them
        store_block_tma<DTYPE, D, BM>(o_acc, q_addr + 64 * cw * kSw128RowBytes, tm_o, cur.head(), cur.q_row + 64 * cw,
                                      out_rows, row_stride, cur.len_q - row0, scale, f, tid, kBarEpilogueBase + cw,
                                      false);
      else
        store_block_tma<DTYPE, D>(o_acc, base_addr + plan.o_off + cw * plan.o_bytes, tm_o, cur.head(),
                                  cur.q_row + 64 * cw, out_rows, row_stride, cur.len_q - row0, scale, f, tid,
                                  kBarEpilogueBase + cw);
      trace(kFtEpilogueEnd, nblocks);
    }
    held_q = qs;
    if (fresh) kv_count += nblocks;
    ++q_count;
  }
  if (tid == 0) ptx::bulk_wait_group<0>();
}

// ---------------------------------------------------------------------------------------------
// The kernel: barrier set-up, then one branch per role.
// ---------------------------------------------------------------------------------------------
template <int DTYPE, int D, int ACT, int MASK, int FLAGS>
__global__ void __launch_bounds__(fwd_threads(FLAGS), 1)
    gdpa_fwd(const __grid_constant__ ptx::TensorMap tm_q, const __grid_constant__ ptx::TensorMap tm_k,
             const __grid_constant__ ptx::TensorMap tm_v, const __grid_constant__ ptx::TensorMap tm_o,
             const __grid_constant__ GdpaParams p) {
  static_assert(D == 64 || D == 128, "head dim");
  constexpr int BN = fwd_block_n(D, FLAGS);
  constexpr int QS = fwd_q_stages(FLAGS);
  constexpr int ST = fwd_kv_stages(FLAGS);
  constexpr int kWgs = fwd_consumer_wgs(FLAGS);
  constexpr FwdSmemPlan plan = fwd_smem_plan(D, FLAGS);
  static_assert(plan.q_off % 1024 == 0 && plan.k_off % 1024 == 0 && plan.v_off % 1024 == 0,
                "128B-swizzled tiles must start on 1024-byte boundaries");
  static_assert(plan.o_off % 1024 == 0 && plan.o_bytes % 1024 == 0,
                "O staging panels are 128B-swizzled TMA sources: 1024-byte aligned");
  static_assert(!fwd_sibling_tails(FLAGS) || (plan.tail_q_off % 1024 == 0 && plan.tail_p_off % 1024 == 0),
                "the pieces' Q and P^T stages are 128B-swizzled operands: 1024-byte aligned");

  extern __shared__ unsigned char smem_raw[];
  const unsigned raw = ptx::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + ((1024u - (raw & 1023u)) & 1023u);
  auto* bars = reinterpret_cast<FwdBarriers<FLAGS>*>(smem + plan.bar_off);

  // Rows of a V slot past a sequence's end may not be loaded (kFwdLoadRows); their P entries are 0,
  // and 0 * V must be 0, so the slots start as zeros rather than whatever the last kernel left
  // (a NaN bit pattern there would make 0 * NaN). Later they hold real V rows of earlier tiles.
  for (int i = int(threadIdx.x); i < ST * plan.kv_bytes / 16; i += fwd_threads(FLAGS))
    reinterpret_cast<uint4*>(smem + plan.v_off)[i] = make_uint4(0u, 0u, 0u, 0u);
  ptx::fence_proxy_async_smem();  // the zeros (generic proxy) before the TMA loads (async proxy)
  constexpr bool kPieces = fwd_sibling_tails(FLAGS);
  auto* piece_q = reinterpret_cast<SlotBarriers*>(smem + plan.tail_bar_off);  // kPieces only
  if (threadIdx.x == 0) {
    constexpr unsigned kConsumerWarps = 4 * kWgs;
    // kPieces: the tail warpgroup's four warps release every K and V slot too.
    constexpr unsigned kKvWarps = kConsumerWarps + (kPieces ? 4 : 0);
    for (int s = 0; s < QS; ++s) {
      ptx::mbarrier_init(&bars->q[s].full, 1);
      ptx::mbarrier_init(&bars->q[s].empty, kConsumerWarps);
    }
    for (int s = 0; s < ST; ++s) {
      ptx::mbarrier_init(&bars->k[s].full, 1);
      ptx::mbarrier_init(&bars->k[s].empty, kKvWarps);
      ptx::mbarrier_init(&bars->v[s].full, 1);
      ptx::mbarrier_init(&bars->v[s].empty, kKvWarps);
    }
    if constexpr (kPieces) {
      ptx::mbarrier_init(&piece_q->full, 1);
      ptx::mbarrier_init(&piece_q->empty, 4);
    }
    ptx::fence_mbarrier_init();
  }
  __syncthreads();

  if constexpr ((FLAGS & kFwdAllowDependents) != 0)
    if (threadIdx.x == 0) ptx::griddepcontrol_launch_dependents();
  const int wg = ptx::warpgroup_id();
  if (wg == 0) {
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (ptx::warp_id() == 0 && ptx::elect_one()) {
      ptx::prefetch_tensormap(&tm_q);
      ptx::prefetch_tensormap(&tm_k);
      ptx::prefetch_tensormap(&tm_v);
      ptx::prefetch_tensormap(&tm_o);
      fwd_producer<D, MASK, FLAGS>(p, &tm_q, &tm_k, &tm_v, smem);
    }
  } else if constexpr (kWgs == 3) {
    ptx::setmaxnreg_inc<kConsumerRegsThree>();
    fwd_consumer_serial<DTYPE, D, ACT, MASK, FLAGS>(wg - 1, p, &tm_o, smem);
  } else if constexpr (kPieces) {
    static_assert(MASK == kMaskNone, "kFwdSiblingTails: the pieces are computed without a mask");
    if (wg == 1 + kFwdConsumerWarpgroups) {
      ptx::setmaxnreg_dec<kSiblingTailRegs>();
      fwd_sibling_tail_warpgroup<DTYPE, D, ACT, FLAGS>(p, smem, bars->k, bars->v, piece_q, kBarSiblingTail);
    } else {
      ptx::setmaxnreg_inc<kConsumerRegsSibling>();
      fwd_consumer<DTYPE, D, ACT, MASK, FLAGS>(wg - 1, p, &tm_o, smem);
    }
  } else {
    ptx::setmaxnreg_inc<kConsumerRegs>();
    fwd_consumer<DTYPE, D, ACT, MASK, FLAGS>(wg - 1, p, &tm_o, smem);
  }
}

}  // namespace gdpa::sm90
