// fwd_producer.cuh — the forward's TMA producer (one thread): Q per work tile, K and V per key
// block, and a sibling tail's Q.
// Part of the Hopper forward: gdpa_fwd.cu has the design, the roles and the kernel.
#pragma once
#include "fwd_common.cuh"

namespace gdpa::sm90 {

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

}  // namespace gdpa::sm90
