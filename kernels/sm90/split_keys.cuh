// split_keys.cuh — the forward's split-keys half tile (fwd_config.h kFwdSplitKeys): how warpgroup
// 0's fp32 partial O reaches warpgroup 1, which adds it to its own and stores the sum.
//
// Both warpgroups hold the same 64 x D block of O in the same fragment layout (same rows, same
// columns, different keys), so thread tid of one adds exactly what thread tid of the other holds:
// no layout change, each thread moves its D / 2 floats as D / 8 chunks of 16 bytes, chunk c at
// region + c' * 2048 + tid * 16. A warp's 32 chunks are 512 contiguous bytes: no bank conflict.
//
// The partial is 64 x D x 4 bytes; nothing of that size is free in the forward's shared memory,
// but two halves of it are during such a tile:
// - warpgroup 1's O staging buffer (64 x D x 2 bytes): its own previous TMA store must have read it
//   (warpgroup 1 says so on a named barrier before warpgroup 0 writes);
// - rows 64..127 of every 64-column panel of the tile's Q stage (64 x D x 2 bytes): the tile's
//   query rows are 0..63, so the producer loaded only the first 64-row box (fwd_load_boxes) and no
//   wgmma reads the rest. The stage goes back to the producer only after both warpgroups have
//   released it, i.e. after the partial has been read.
#pragma once
#include "../../ptx/common.cuh"
#include "../../ptx/smem_desc.h"

namespace gdpa::sm90 {

// Shared-memory address of chunk c (fragment registers 4c .. 4c + 3) of thread tid's partial O.
// `staging`: warpgroup 1's O staging buffer; `q_stage`: the tile's Q stage (BM rows per panel).
template <int D, int BM>
__device__ __forceinline__ unsigned split_partial_chunk(unsigned staging, unsigned q_stage, int c, int tid) {
  constexpr int kChunks = D / 8;                                   // per thread
  constexpr int kInStaging = kChunks / 2;                          // 64 x D x 2 bytes
  constexpr int kPerPanel = 64 * kSw128RowBytes / (128 * 16);      // chunks in 64 rows of a panel: 4
  static_assert(BM == 128, "the Q stage's unused half is rows 64..127 of a 128-row tile");
  if (c < kInStaging) return staging + unsigned(c * 128 * 16 + tid * 16);
  const int k = c - kInStaging;
  return q_stage + unsigned((k / kPerPanel) * BM * kSw128RowBytes + 64 * kSw128RowBytes +
                            (k % kPerPanel) * 128 * 16 + tid * 16);
}

// Warpgroup 0: its partial O into the two regions.
template <int D, int BM>
__device__ __forceinline__ void split_put_partial(const float (&o)[D / 2], unsigned staging, unsigned q_stage,
                                                  int tid) {
#pragma unroll
  for (int c = 0; c < D / 8; ++c)
    ptx::st_shared_u128(split_partial_chunk<D, BM>(staging, q_stage, c, tid),
                        make_uint4(__float_as_uint(o[4 * c]), __float_as_uint(o[4 * c + 1]),
                                   __float_as_uint(o[4 * c + 2]), __float_as_uint(o[4 * c + 3])));
}

// Warpgroup 1: adds warpgroup 0's partial to its own.
template <int D, int BM>
__device__ __forceinline__ void split_add_partial(float (&o)[D / 2], unsigned staging, unsigned q_stage, int tid) {
#pragma unroll
  for (int c = 0; c < D / 8; ++c) {
    const uint4 v = ptx::ld_shared_u128(split_partial_chunk<D, BM>(staging, q_stage, c, tid));
    o[4 * c] += __uint_as_float(v.x);
    o[4 * c + 1] += __uint_as_float(v.y);
    o[4 * c + 2] += __uint_as_float(v.z);
    o[4 * c + 3] += __uint_as_float(v.w);
  }
}

}  // namespace gdpa::sm90
