// jagged_load.cuh — TMA loads of a sequence's rows through the jagged 4-D tensor maps
// (host/tensor_map.h make_tensor_map_jagged), shared by the forward and the backward.
//
// A map's coordinates are {column, head, row - end + window, end}: a row at or past `end` (its
// sequence's end) lies outside the map, so the TMA unit writes zeros for it and reads nothing from
// L2. Every tile that runs past its sequence's end therefore holds zeros there, never the next
// sequence's rows or what an earlier tile left in the slot. Why it matters: a score masked to zero
// still multiplies its operand row in the next GEMM, and 0 * NaN or 0 * Inf is NaN, so one
// sequence's non-finite input would reach its neighbours' outputs. With zero rows a score past the
// end is exactly 0 and act(0) = 0 for every activation (spec 3), so the forward skips the length
// mask as well (the softmax variant still needs it: exp(0) is not 0; the backward keeps it, see
// bwd_block_needs_mask).
#pragma once
#include "../../ptx/smem_desc.h"
#include "../../ptx/tma.cuh"
#include "jagged_window.h"

namespace gdpa::sm90 {

// The first `boxes` BOX_ROWS-row boxes of a [ROWS x D] tile whose first row is global row `row`
// of a sequence that ends before global row `end` (end > row: the tile holds a row of it): D / 64
// boxes of 64 columns per row box, column block c landing in its own [ROWS][128 B] 128B-swizzled
// panel (the layout sw128_*_desc read) and row box h at row BOX_ROWS * h of it. Boxes past `boxes`
// are not loaded (their rows keep what the slot held: only for rows whose results nobody reads).
// `window` is jagged_window(max length); `zeros` points to kJaggedZeroBytes of zeros.
//
// A box that lies wholly past the end is not a TMA load but a plain bulk copy of zeros (same bytes
// on the same barrier). Why: a tensor load whose every row is out of bounds of the jagged map
// raised an illegal address on the H200, with its origin at a mapped row or not (measured with the
// forward on jagged batches: the fault went away only when no such box was issued; a box starting
// inside the sequence and running past its end, or past the allocation, never faulted).
template <int D, int ROWS, int BOX_ROWS>
__device__ __forceinline__ void load_jagged_rows(unsigned char* dst, int boxes, const ptx::TensorMap* map,
                                                 unsigned long long* bar, int head, int row, int end, int window,
                                                 const void* zeros, unsigned long long policy) {
  static_assert(ROWS % BOX_ROWS == 0, "a tile is a whole number of row boxes");
  static_assert(BOX_ROWS * kSw128RowBytes <= kJaggedZeroBytes, "the zero buffer covers one box of one panel");
#pragma unroll
  for (int h = 0; h < ROWS / BOX_ROWS; ++h) {
    if (h < boxes) {
      const int first = row + h * BOX_ROWS;
#pragma unroll
      for (int panel = 0; panel < D / kSw128PanelCols; ++panel) {
        unsigned char* box = dst + (panel * ROWS + h * BOX_ROWS) * kSw128RowBytes;
        if (first < end)
          ptx::tma_load_4d(box, map, bar, panel * kSw128PanelCols, head, first - end + window, end, policy);
        else
          ptx::bulk_copy_g2s(box, zeros, BOX_ROWS * kSw128RowBytes, bar, policy);
      }
    }
  }
}

}  // namespace gdpa::sm90
