// tensor_map.h — TMA descriptors (CUtensorMap) for the packed jagged tensors.
//
// Q, K, V, O, dO (and dQ, dK, dV) are [total_rows, heads, head_dim] in a 2-byte io dtype. The map
// views them as a 3-D tensor, innermost first {head_dim, heads, total_rows}, so one box
// {box_cols, 1, box_rows} is box_rows consecutive tokens of one head: the jagged sequences need
// no per-sequence map, a kernel just offsets the row coordinate by cu_seqlens[b]. Rows past a
// sequence's end belong to the next sequence, and rows past total_rows are filled with zeros by
// the hardware; the kernels' loads use the 4-D "jagged" view below instead, which zero-fills
// every sequence's rows past its own end.
//
// Building a map is split in two: computing the encode arguments (a plain struct, checked against
// the rules cuTensorMapEncodeTiled documents, testable without a GPU) and encoding them (the
// driver call).
#pragma once
#include <cuda.h>  // types only

#include <cstdint>

#include "../kernels/common/params.h"
#include "driver.h"
#include "kernel_api.h"
#include "problem.h"

namespace gdpa {

// The arguments of cuTensorMapEncodeTiled, spelled out.
struct TensorMapArgs {
  CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  int element_bytes = 2;
  cuuint32_t rank = 0;
  CUdeviceptr base = 0;
  cuuint64_t dims[5] = {};             // elements, innermost first
  cuuint64_t strides[4] = {};          // bytes, of dims 1 .. rank-1 (dim 0 is contiguous)
  cuuint32_t box[5] = {};              // elements per TMA transfer, innermost first
  cuuint32_t element_strides[5] = {};  // all 1: dense boxes
  CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  CUtensorMapL2promotion l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  CUtensorMapFloatOOBfill oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;  // NONE = zeros
};

// Bytes of the swizzle pattern's span (0 for no swizzle): the inner box may not exceed it.
int swizzle_span_bytes(CUtensorMapSwizzle s);

// [rows, heads, head_dim] io-dtype tensor at base, boxes of box_rows tokens x box_cols features
// of one head. Throws ProblemError when a rule is violated (see check_tensor_map_args).
TensorMapArgs tensor_map_args_3d(CUdeviceptr base, DType dtype, int64_t rows, int heads, int head_dim,
                                 int box_rows, int box_cols = 64,
                                 CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B);

// The Hopper kernels read and write every io tensor with TMA or 16-byte vector accesses, so each
// must start on a 16-byte boundary. Throws one ProblemError naming the first tensor that does not
// (`who` prefixes the message, e.g. "sm90 forward"); the backward also covers dO, dQ, dK and dV.
void require_16_byte_aligned(const DeviceTensors& t, bool backward, const std::string& who);

// The same tensor as a 4-D map whose rows end where each sequence ends, for loads. Innermost first
// {head_dim, heads, window, rows + 1}: dims 2 and 3 both step one token (same stride), and the
// base is moved `window` tokens back. A box at {column, head, row - end + window, end} then reads
// token row, row + 1, ... exactly as the 3-D map would, except that a token at or past `end`
// has coordinate 2 >= window: out of bounds, so the hardware writes zeros for it and reads
// nothing. One map thus bounds every sequence at its own end, given window >= the longest
// sequence (so that coordinate 2 of its first row, window - length, is not negative).
// Why the kernels want it: rows past a sequence's end would otherwise be the next sequence's
// tokens (or what an earlier tile left in shared memory), and a masked score times a NaN or Inf
// there is NaN: one sequence's non-finite input would spread to its neighbours. With zeros there
// a score past the end is exactly 0 and so is act(0) for every activation (spec 3), so the
// forward needs no length mask, and the padding costs no L2 reads. (A box wholly past the end is
// not loaded through the map but copied from zero_rows_buffer(): kernels/sm90/jagged_load.cuh.)
TensorMapArgs tensor_map_args_jagged(CUdeviceptr base, DType dtype, int64_t rows, int heads, int head_dim,
                                     int64_t window, int box_rows, int box_cols = 64,
                                     CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B);

// A device buffer of sm90::kJaggedZeroBytes zeros: what a kernel copies in place of a jagged load
// box that lies wholly past its sequence's end (kernels/sm90/jagged_load.cuh; GdpaParams::zero_rows).
DeviceBuffer zero_rows_buffer();

// Fills what the sm90 kernels' jagged loads read from their parameters: the maps' windows, derived
// from the longest sequences make_params put in `params` (build the maps with load_window_q / _k, so
// that they and the kernel's coordinates agree), and `zeros` (a zero_rows_buffer()).
void set_jagged_load_params(GdpaParams& params, const DeviceBuffer& zeros);

// Row-major [rows, cols] fp32 matrix (e.g. the dQ accumulator viewed as [total_q, heads * D]).
TensorMapArgs tensor_map_args_2d_f32(CUdeviceptr base, int64_t rows, int64_t cols, int box_rows,
                                     int box_cols, CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE);

// The hardware rules (cuTensorMapEncodeTiled's documentation): rank 1..5, base 16-byte aligned,
// dims in [1, 2^32], strides multiples of 16 below 2^40, box dims in [1, 256], inner box bytes a
// multiple of 16 and within the swizzle span, element strides in [1, 8]. Throws ProblemError
// naming the first violation.
void check_tensor_map_args(const TensorMapArgs& a);

// Checks, then encodes with the driver (throws CudaError / CudaUnavailable).
CUtensorMap encode_tensor_map(const TensorMapArgs& a);

CUtensorMap make_tensor_map_3d(CUdeviceptr base, DType dtype, int64_t rows, int heads, int head_dim,
                               int box_rows, int box_cols = 64,
                               CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B);
CUtensorMap make_tensor_map_jagged(CUdeviceptr base, DType dtype, int64_t rows, int heads, int head_dim,
                                   int64_t window, int box_rows, int box_cols = 64,
                                   CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B);
CUtensorMap make_tensor_map_2d_f32(CUdeviceptr base, int64_t rows, int64_t cols, int box_rows,
                                   int box_cols, CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE);

}  // namespace gdpa
