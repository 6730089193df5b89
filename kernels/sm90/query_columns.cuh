// query_columns.cuh — the forward's products with the queries as the wgmma's N (S^T = K Q^T,
// O^T = V^T P^T), shared by the query-column tiles (fwd_tail.cu) and the sibling tails' warpgroup
// (fwd_sibling_tail.cuh): an accumulator fragment stored transposed to shared memory (P^T as the
// K-major B operand of O^T, O^T as [query][D] rows for the copy out), and the O^T product.
#pragma once
#include "../../ptx/common.cuh"
#include "../../ptx/smem_desc.h"
#include "../../ptx/wgmma.cuh"
#include "epilogue.cuh"
#include "fragments.cuh"
#include "fwd_tail_config.h"

namespace gdpa::sm90 {

// Packed pairs of an m64nN fragment (rows: keys or head-dim entries, columns: queries) stored
// transposed, as [query][row] in a 128B-swizzled stage of PANEL_ROWS-row panels: stmatrix.x4.trans
// per four pairs (pairs 4m .. 4m + 3 are the 16 x 16 block of rows 16 warp .., columns 16 m ..),
// each lane naming the row tail_trans_row / tail_trans_col give (fwd_tail_config.h; a host test
// emulates the stores). `col0` places the fragment's rows at columns col0 .. of the stage (the
// head-dim half of O, the 64-key half of a key block).
template <int N, int PANEL_ROWS = kTailMaxRows, class PairFn>
__device__ __forceinline__ void store_pairs_trans(unsigned stage, int col0, const FragThread& f, PairFn pair) {
  static_assert(N <= PANEL_ROWS, "a panel holds every query column");
  const int lane = 4 * f.g + f.t;
  const int col = col0 + tail_trans_col(lane, f.warp);
#pragma unroll
  for (int m = 0; m < N / 16; ++m)
    ptx::stmatrix_x4_trans(stage + staged_panel_offset<PANEL_ROWS>(tail_trans_row(lane, m), col), pair(4 * m),
                           pair(4 * m + 1), pair(4 * m + 2), pair(4 * m + 3));
}

// O^T += V^T P^T over one key block of KEYS keys: for each 64-wide half dh of the head dim, the V
// slot's panel dh ([KEYS keys][128 B]) read M-major (the head dim contiguous, as the backward's dQ
// reads dS^T) against P^T stored [query][key] in panels of P_ROWS rows and 64 keys (K-major),
// KEYS / 16 wgmmas each. O^T starts at zero, so every product accumulates (no run-time scale-d).
template <int DTYPE, int D, int N, int KEYS, int P_ROWS>
__device__ __forceinline__ void issue_ot(float (&o)[D / 64][N / 2], unsigned v_slot, unsigned p_stage) {
  const WgmmaDescBase pb = sw128_kmajor_base(p_stage);
#pragma unroll
  for (int dh = 0; dh < D / 64; ++dh) {
    const WgmmaDescBase va = sw128_mnmajor_base(v_slot + unsigned(dh * KEYS) * kSw128RowBytes, KEYS);
#pragma unroll
    for (int kk = 0; kk < KEYS / 16; ++kk)
      ptx::Wgmma<N, DTYPE>::template ss<1, 1, 0>(o[dh], va.at(sw128_mnmajor_step(kk)),
                                                  pb.at(sw128_kmajor_step(P_ROWS, kk)));
  }
}

}  // namespace gdpa::sm90
