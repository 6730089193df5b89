// dq_rows.cuh — the last step of every dQ conversion (dq_convert.cu, dq_follow.cu): one 64 x 64
// chunk of the fp32 accumulator, held by 128 threads in the consumer's fragment order (bwd_config.h
// dq_frag_*: thread tid has float4 k = registers 4k..4k+3), scaled, rounded to the io dtype and
// staged in shared memory, then written as whole 16-byte pieces of dQ rows.
#pragma once
#include "bwd_config.h"
#include "fragments.cuh"

namespace gdpa::sm90 {

// Thread tid's eight float4 of a chunk, times `scale`, rounded, into the staging tile.
template <int DTYPE>
__device__ __forceinline__ void stage_dq_fragment(const float4 (&v)[8], float scale, unsigned char* tile, int tid) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int row = dq_frag_row(tid, 4 * k), col = dq_frag_col(tid, 4 * k);  // registers 4k, 4k+1
    *reinterpret_cast<unsigned*>(tile + row * kConvertRowBytes + col * 2) = pack2<DTYPE>(v[k].x * scale, v[k].y * scale);
    // registers 4k+2, 4k+3: the same columns, 8 rows down
    *reinterpret_cast<unsigned*>(tile + (row + 8) * kConvertRowBytes + col * 2) =
        pack2<DTYPE>(v[k].z * scale, v[k].w * scale);
  }
}

// The staged tile as the first `rows` rows of dQ at `out` (row stride `row_stride` elements): 16-byte
// row-order stores, 8 threads per 128-byte row segment. Rows past the sequence end belong to the next
// sequence and are never written.
__device__ __forceinline__ void store_staged_dq_rows(const unsigned char* tile, unsigned short* out,
                                                     long long row_stride, int rows, int tid) {
#pragma unroll
  for (int q = tid; q < kBwdBlockM * 8; q += kConvertThreads) {
    const int row = q >> 3, part = q & 7;
    if (row < rows)
      *reinterpret_cast<uint4*>(out + row * row_stride + part * 8) =
          *reinterpret_cast<const uint4*>(tile + row * kConvertRowBytes + part * 16);
  }
}

}  // namespace gdpa::sm90
