// fwd_qk.cuh — the score product over the head dim, both operands K-major tiles in the 128-byte
// swizzle: S = Q K^T in the main forward (gdpa_fwd.cu), and, with the operands' roles swapped,
// S^T = K Q^T in the query-column tiles (fwd_tail.cu: A a 64-key K block, B the tile's Q stage, N
// its query columns) and S^T = K Q^T, dP^T = V dO^T in the backward (bwd_consumer_ops.cuh).
#pragma once
#include "../../ptx/smem_desc.h"
#include "../../ptx/wgmma.cuh"
#include "fwd_config.h"

namespace gdpa::sm90 {

// S = Q K^T over the head dim: D/16 wgmmas, the first overwriting S. BM: the Q tile's rows (its
// panels' row count, which sets the descriptor's step from one 64-column panel to the next); the
// first BN keys of a K slot of KROWS rows per panel (a narrow last block: 64 of 128).
template <int DTYPE, int D, int BN, int BM = kFwdBlockM, int KROWS = BN>
__device__ __forceinline__ void issue_qk(float (&s)[BN / 2], unsigned q_tile, int q_first_row, unsigned k_tile) {
  // Stepped descriptors (ptx/smem_desc.h): encoded once here, one add per wgmma below.
  const WgmmaDescBase qa = sw128_kmajor_base(q_tile + unsigned(q_first_row) * kSw128RowBytes);
  const WgmmaDescBase kb = sw128_kmajor_base(k_tile);
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const unsigned long long da = qa.at(sw128_kmajor_step(BM, ks));
    const unsigned long long db = kb.at(sw128_kmajor_step(KROWS, ks));
    if (ks == 0)
      ptx::Wgmma<BN, DTYPE>::template ss<0, 0, 0>(s, da, db);
    else
      ptx::Wgmma<BN, DTYPE>::template ss<1, 0, 0>(s, da, db);
  }
}

}  // namespace gdpa::sm90
