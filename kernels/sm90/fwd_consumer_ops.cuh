// fwd_consumer_ops.cuh — a consumer warpgroup's building blocks: register-array views, which
// blocks pay for the mask, the PV product's wgmma issue, P from S (activation or softmax), and the
// pingpong turns.
// Part of the Hopper forward: gdpa_fwd.cu has the design, the roles and the kernel.
#pragma once
#include "fwd_common.cuh"

namespace gdpa::sm90 {

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

}  // namespace gdpa::sm90
