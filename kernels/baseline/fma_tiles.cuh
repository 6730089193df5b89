// fma_tiles.cuh — the building blocks of the baseline kernels: 64-row tiles staged in shared
// memory as fp32, and the two tile products every GDPA step is made of, in plain FMA.
//
// Why FMA and fp32 tiles: the baseline is the oracle the tensor-core kernels are checked against,
// so it shares no MMA fragment layout, descriptor or swizzle with them. Inputs are converted to
// fp32 once, when a tile is staged, so the inner loops are nothing but shared loads and FMAs.
//
// Thread layout (256 threads = 16 x 16): thread t has tr = t / 16 and tc = t % 16.
//  - It owns the tile rows tr + 16*a, a = 0..3 (strided, so the 16 threads of a half-warp that
//    share tr read the same A row: a broadcast).
//  - In an A.B^T product (64 x 64 result) it owns the columns tc + 16*b, b = 0..3.
//  - In an A.B product (64 x D result) it owns the 4-column groups 4*tc + 64*g, g < D/64.
// Bank check (32 banks of 4 bytes; a 16-byte load is served a quarter-warp, 8 lanes, at a time):
//  - A.B^T reads B rows c = tc + 16*b at the same d: word offsets c * (D + 4) + d, and since
//    D % 32 == 0 that is 4*c + d mod 32: the 8 lanes of a quarter-warp cover 32 distinct banks.
//  - A.B reads B row k at columns 4*tc + 64*g: 8 lanes x 4 consecutive words, again 32 banks.
//  - A operands are the same address for the whole quarter-warp (one broadcast).
// This file is included only by the baseline .cu files (device code).
#pragma once
#include "../common/dtype.cuh"
#include "../common/portability.h"
#include "convert.cuh"
#include "layout.h"

namespace gdpa {
namespace baseline {

static_assert(kThreads == 256 && kTile == 64, "the 16 x 16 thread layout covers 64 rows as 16 x 4");

// 16-byte and 8-byte vectors as plain aligned structs: the compiler emits single 128-bit and
// 64-bit loads/stores for them, and NVRTC needs no vector-type header.
struct alignas(16) Float4 {
  float v[4];
};
struct alignas(16) Bits128 {  // eight 16-bit io elements, element 2*w in the low half of word w
  unsigned w[4];
};
struct alignas(8) Bits64 {  // four 16-bit io elements
  unsigned w[2];
};

GDPA_DEVICE int imin(int a, int b) { return a < b ? a : b; }

// Stages rows [0, 64) of one head of a packed io tensor into dst[r * smem_ld(D) + d] as fp32.
// `src` points at (first row, this head, d = 0); `row_stride` is heads * D elements.
// Rows r >= valid_rows are written as zeros: past the end of a sequence the packed rows belong to
// the next sequence (or to nothing), and a zero row contributes nothing to either product.
// Every thread of the CTA must call this (callers put a __syncthreads() after it).
template <int DTYPE, int D>
GDPA_DEVICE void stage_tile(float* dst, const unsigned short* src, long long row_stride,
                            int valid_rows) {
  static_assert(D % 8 == 0, "rows are moved in 16-byte chunks of 8 elements");
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int idx = threadIdx.x; idx < kTile * kChunks; idx += kThreads) {
    const int r = idx / kChunks;        // consecutive threads walk one row: coalesced reads
    const int c = (idx % kChunks) * 8;  // first column of the chunk
    Float4 lo = {{0.f, 0.f, 0.f, 0.f}}, hi = {{0.f, 0.f, 0.f, 0.f}};
    if (r < valid_rows) {
      const Bits128 bits = *reinterpret_cast<const Bits128*>(src + r * row_stride + c);
#pragma unroll
      for (int e = 0; e < 2; ++e) {  // word e holds elements 2e (low half) and 2e + 1
        lo.v[2 * e] = io_bits_to_float_fast<DTYPE>(bits.w[e] & 0xffffu);
        lo.v[2 * e + 1] = io_bits_to_float_fast<DTYPE>(bits.w[e] >> 16);
        hi.v[2 * e] = io_bits_to_float_fast<DTYPE>(bits.w[e + 2] & 0xffffu);
        hi.v[2 * e + 1] = io_bits_to_float_fast<DTYPE>(bits.w[e + 2] >> 16);
      }
    }
    Float4* out = reinterpret_cast<Float4*>(dst + r * smem_ld(D) + c);
    out[0] = lo;
    out[1] = hi;
  }
}

// acc[a][b] += sum_{d < D} A[tr + 16a][d] * B[tc + 16b][d]: a 64 x 64 block of A.B^T where A and B
// are staged 64 x D tiles (row stride smem_ld(D)). Each S or dP element is one thread's plain
// fp32 sum over d in order 0..D-1.
template <int D>
GDPA_DEVICE void tile_abt(const float* A, const float* B, int tr, int tc, float (&acc)[4][4]) {
  constexpr int ld = smem_ld(D);
  // Not unrolled further: at the forward's 128-register cap (two CTAs per SM) a second copy of
  // the eight 16-byte operands would spill.
#pragma unroll 1
  for (int d = 0; d < D; d += 4) {
    Float4 a[4], b[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = *reinterpret_cast<const Float4*>(A + (tr + 16 * i) * ld + d);
#pragma unroll
    for (int j = 0; j < 4; ++j) b[j] = *reinterpret_cast<const Float4*>(B + (tc + 16 * j) * ld + d);
#pragma unroll
    for (int e = 0; e < 4; ++e)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i].v[e], b[j].v[e], acc[i][j]);
  }
}

// acc[a][4g + e] += sum_{k < 64} A[tr + 16a][k] * B[k][64g + 4tc + e]: a 64 x D block of A.B where
// A is a staged 64 x 64 tile (row stride smem_ld(64)) and B a staged 64 x D tile.
template <int D>
GDPA_DEVICE void tile_ab(const float* A, const float* B, int tr, int tc, float (&acc)[4][D / 16]) {
  constexpr int lda = smem_ld(kTile), ldb = smem_ld(D), kGroups = D / 64;
  static_assert(D % 64 == 0, "each thread owns D/64 groups of 4 columns");
#pragma unroll 2
  for (int k = 0; k < kTile; k += 4) {
    Float4 a[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = *reinterpret_cast<const Float4*>(A + (tr + 16 * i) * lda + k);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      Float4 b[kGroups];
#pragma unroll
      for (int g = 0; g < kGroups; ++g)
        b[g] = *reinterpret_cast<const Float4*>(B + (k + e) * ldb + 64 * g + 4 * tc);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int g = 0; g < kGroups; ++g)
#pragma unroll
          for (int c = 0; c < 4; ++c)
            acc[i][4 * g + c] = fmaf(a[i].v[e], b[g].v[c], acc[i][4 * g + c]);
    }
  }
}

// Writes this thread's rows of a 64 x D fp32 accumulator (layout of tile_ab) to one head of a
// packed io tensor, rounding each value once. Rows r >= valid_rows are not written: they belong
// to the next sequence. `dst` points at (first row, this head, d = 0).
template <int DTYPE, int D>
GDPA_DEVICE void store_rows(unsigned short* dst, long long row_stride, int valid_rows, int tr,
                            int tc, const float (&acc)[4][D / 16]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = tr + 16 * i;
    if (r >= valid_rows) continue;
#pragma unroll
    for (int g = 0; g < D / 64; ++g) {
      Bits64 out;
      out.w[0] = unsigned(float_to_io(DTYPE, acc[i][4 * g + 0])) |
                 (unsigned(float_to_io(DTYPE, acc[i][4 * g + 1])) << 16);
      out.w[1] = unsigned(float_to_io(DTYPE, acc[i][4 * g + 2])) |
                 (unsigned(float_to_io(DTYPE, acc[i][4 * g + 3])) << 16);
      *reinterpret_cast<Bits64*>(dst + r * row_stride + 64 * g + 4 * tc) = out;
    }
  }
}

}  // namespace baseline
}  // namespace gdpa
