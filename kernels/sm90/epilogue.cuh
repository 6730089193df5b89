// epilogue.cuh — how a consumer warpgroup's 64-row block of an output (the forward's O, the
// backward's dK and dV) leaves the kernel: through shared memory and the TMA unit.
//
// The 64 x D block is staged as D/64 panels of [64 rows][128 B] in the 128-byte swizzle (16-byte
// chunk index XOR row % 8: a warp's fragment stores hit 32 different banks), the layout a tensor
// map with a 64 x 64 box and CU_TENSOR_MAP_SWIZZLE_128B reads. A block whose 64 rows all lie inside
// the sequence then leaves as one TMA store per panel, issued by one thread: the other 127 only
// store to shared memory, and the copy to global memory runs while the warpgroup goes on. Stored
// straight from the accumulator fragment instead, each warp store would cover 8 rows x 16 bytes,
// half of every 32-byte sector. TMA writes whole boxes (it clips only at the tensor's end, not at a
// sequence's), so the block that holds a sequence's last rows is copied by the threads, row by row,
// as whole 16-byte chunks. The staging itself is one 4-byte store per packed pair or one
// stmatrix.x4 per four pairs (store_pairs): same bytes, same layout.
#pragma once
#include "../../ptx/common.cuh"
#include "../../ptx/fence.cuh"
#include "../../ptx/smem_desc.h"
#include "../../ptx/tma.cuh"
#include "fragments.cuh"

namespace gdpa::sm90 {

// Byte offset of element (row, col) of a staged block (the staging buffer must be 1024-aligned).
// PANEL_ROWS: rows from one panel's start to the next's, 64 for a block of its own; a block staged
// inside a larger swizzled tile (the forward's Q stage, fwd_config.h fwd_o_in_q) has the tile's.
template <int PANEL_ROWS = 64>
GDPA_DEVICE unsigned staged_panel_offset(int row, int col) {
  return unsigned((col >> 6) * PANEL_ROWS * kSw128RowBytes) + sw128_offset(row, col & 63);
}

// Packed pair i of the fragment (registers 2i, 2i + 1) times `scale`, rounded to the io dtype.
template <int DTYPE, int D>
__device__ __forceinline__ unsigned scaled_pair(const float (&acc)[D / 2], int i, float scale) {
  return pack2<DTYPE>(acc[2 * i] * scale, acc[2 * i + 1] * scale);
}

// Packed pairs pair(0 .. NPAIRS - 1) of a warpgroup's fragment (pair i at row pair_row(f, i),
// columns pair_col(f, i) and pair_col + 1) into a staged block at `staging`, the same bytes in the
// same places either way:
// - one 4-byte st.shared per pair;
// - STMATRIX: each warp stores its 16 rows as NPAIRS / 4 stmatrix.x4 (four 8 x 8 matrices: rows
//   0-7 and 8-15 of two neighbouring 8-column blocks, which are the thread's pairs 4m .. 4m + 3),
//   a quarter of the instructions. The address this lane gives is that of fragment row
//   16 warp + lane % 8 + 8 ((lane / 8) % 2), columns 8 (lane / 16) past the pair of blocks' first.
template <int NPAIRS, int PANEL_ROWS, bool STMATRIX, class PairFn>
__device__ __forceinline__ void store_pairs(unsigned staging, const FragThread& f, PairFn pair) {
  if constexpr (STMATRIX) {
    static_assert(NPAIRS % 4 == 0, "whole stmatrix.x4 groups");
    const int lane = 4 * f.g + f.t;
    const int row = 16 * f.warp + (lane & 7) + 8 * ((lane >> 3) & 1);
    const int col_off = 8 * (lane >> 4);
#pragma unroll
    for (int m = 0; m < NPAIRS / 4; ++m)
      ptx::stmatrix_x4(staging + staged_panel_offset<PANEL_ROWS>(row, 16 * m + col_off), pair(4 * m),
                       pair(4 * m + 1), pair(4 * m + 2), pair(4 * m + 3));
  } else {
#pragma unroll
    for (int i = 0; i < NPAIRS; ++i)
      ptx::st_shared_u32(staging + staged_panel_offset<PANEL_ROWS>(pair_row(f, i), pair_col(f, i)), pair(i));
  }
}

// The warpgroup's 64 x D fragment, times `scale` and rounded to the io dtype, into a staged block
// (store_pairs; STMATRIX: by stmatrix). The caller syncs the warpgroup before (the buffer's
// previous readers are done) and after.
template <int DTYPE, int D, int PANEL_ROWS = 64, bool STMATRIX = false>
__device__ __forceinline__ void stage_block(const float (&acc)[D / 2], unsigned staging, float scale,
                                            const FragThread& f) {
  store_pairs<D / 4, PANEL_ROWS, STMATRIX>(staging, f, [&](int i) { return scaled_pair<DTYPE, D>(acc, i, scale); });
}

// Rows [0, rows_valid) of a staged 64 x D block to the row-major global rows at `rows` (rows
// `row_stride` elements apart), copied by the warpgroup's 128 threads as whole 16-byte chunks, so a
// warp writes whole rows; rows past `rows_valid` (the next sequence's) are never written.
// Thread tid moves chunk c of rows r, r + R, ... (R = 128 / chunks per row, a multiple of 8, so
// the swizzle term row % 8 is the same in every pass: one address and a constant step; written
// per pass as chunk / chunks-per-row, the divisions would be hoisted to the kernel start and held
// across the main loop, where they spill).
template <int D, int PANEL_ROWS = 64>
__device__ __forceinline__ void copy_staged_rows(unsigned staging, unsigned short* rows, int row_stride, int rows_valid,
                                                 int tid) {
  constexpr int kChunksPerRow = D * 2 / 16;
  constexpr int kRowsPerPass = 128 / kChunksPerRow;
  static_assert(kRowsPerPass % 8 == 0, "the swizzle must repeat from pass to pass");
  const int r = tid / kChunksPerRow, c = tid % kChunksPerRow;
  const unsigned src = staging + staged_panel_offset<PANEL_ROWS>(r, 8 * c);
  unsigned short* dst = rows + (long long)r * row_stride + 8 * c;
#pragma unroll
  for (int k = 0; k < 64 / kRowsPerPass; ++k)
    if (r + k * kRowsPerPass < rows_valid)
      *reinterpret_cast<uint4*>(dst + (long long)k * kRowsPerPass * row_stride) =
          ptx::ld_shared_u128(src + k * kRowsPerPass * kSw128RowBytes);
}

// out(row, :) = round(acc(row, :) * scale) for rows [0, rows_valid) of the block whose first row is
// `first_row` of the tensor map's row dimension (head `head`); `rows` points at its element (0, 0)
// for the threads' copy of a partial block. `tid` is 0..127 in the warpgroup, `bar` a named barrier
// of the warpgroup's. Thread 0 issues the TMA stores; the buffer is free again once it has waited
// for them (cp.async.bulk.wait_group.read), which the next call does first. A caller staging into
// a buffer no earlier store of thread 0 reads passes wait_for_stores = false, so that this block's
// staging does not wait for the previous one's store. Before the CTA exits, thread 0 must wait for
// the stores to complete (ptx::bulk_wait_group<0>). PANEL_ROWS: see staged_panel_offset.
// STMATRIX: stage by stmatrix (store_pairs; same bytes).
template <int DTYPE, int D, int PANEL_ROWS = 64, bool STMATRIX = false>
__device__ __forceinline__ void store_block_tma(const float (&acc)[D / 2], unsigned staging, const ptx::TensorMap* map,
                                                int head, int first_row, unsigned short* rows, int row_stride,
                                                int rows_valid, float scale, const FragThread& f, int tid, int bar,
                                                bool wait_for_stores = true) {
  // The previous block's TMA stores must have read the buffer: their issuer waits, then everyone.
  if (tid == 0 && wait_for_stores) ptx::bulk_wait_group_read<0>();
  ptx::named_barrier_sync(bar, 128);
  stage_block<DTYPE, D, PANEL_ROWS, STMATRIX>(acc, staging, scale, f);
  if (rows_valid >= 64) {
    ptx::fence_proxy_async_smem();  // generic stores -> the TMA unit (async proxy)
    ptx::named_barrier_sync(bar, 128);
    if (tid == 0) {
#pragma unroll
      for (int panel = 0; panel < D / 64; ++panel)
        ptx::tma_store_3d(map, staging + panel * PANEL_ROWS * kSw128RowBytes, panel * 64, head, first_row);
      ptx::bulk_commit_group();
    }
  } else {
    ptx::named_barrier_sync(bar, 128);
    copy_staged_rows<D, PANEL_ROWS>(staging, rows, row_stride, rows_valid, tid);
  }
}

}  // namespace gdpa::sm90
