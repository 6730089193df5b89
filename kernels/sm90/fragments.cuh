// fragments.cuh — what one thread holds of a wgmma accumulator, and the element-wise work done on
// it in registers: S -> P (activation, mask, pack to the A-operand layout) and the O epilogue.
//
// Accumulator layout of m64nN (PTX ISA, "wgmma .m64nNk16 accumulator D"): warp w of the warpgroup
// owns rows 16w .. 16w+15; lane = 4 * g + t. Register r holds
//   row = 16w + g + 8 * ((r / 2) % 2),   col = 8 * (r / 4) + 2 * t + (r % 2).
// Registers 2i and 2i+1 are neighbouring columns of one row, so packing them gives exactly the
// 16-bit A fragment of the next wgmma (k16 slice kk uses packed registers 4kk .. 4kk+3): P feeds
// O += P V straight from registers, with no shuffle and no shared-memory round trip.
#pragma once
#include "../common/activations.cuh"
#include "../common/dtype.cuh"
#include "../common/masks.cuh"
#include "../../ptx/math.cuh"

namespace gdpa::sm90 {

// Position of this thread inside its warpgroup's 64-row fragment.
struct FragThread {
  int warp;  // 0..3 within the warpgroup
  int g;     // lane / 4: row inside the 8-row group
  int t;     // lane % 4: column pair
};

GDPA_DEVICE FragThread frag_thread(int thread_in_warpgroup) {
  const int lane = thread_in_warpgroup & 31;
  return FragThread{thread_in_warpgroup >> 5, lane >> 2, lane & 3};
}

// Row (within the 64-row fragment) and column of packed pair i (= registers 2i, 2i+1).
GDPA_DEVICE int pair_row(const FragThread& f, int i) { return 16 * f.warp + f.g + 8 * (i & 1); }
GDPA_DEVICE int pair_col(const FragThread& f, int i) { return 8 * (i >> 1) + 2 * f.t; }

// Two floats to one 32-bit register of two 16-bit values, `lo` in the low half (lower column).
template <int DTYPE>
GDPA_DEVICE unsigned pack2(float lo, float hi) {
  if constexpr (DTYPE == kFP16) {
    return ptx::cvt_f16x2(lo, hi);
  } else {
    return ptx::cvt_bf16x2(lo, hi);
  }
}

// Per-sequence facts the mask needs.
struct MaskBounds {
  int len_q, len_k, window_left, window_right;
};

// S (fp32 accumulator of a 64 x N block) -> P = act(logit_scale * S), zeroed where the mask or
// the sequence end forbids (i, j), packed to 16 bits. row0/col0: sequence-local index of this
// warpgroup's first row and of the block's first key. MASKED = false is the interior fast path
// (no compares at all); UNIT_SCALE skips the multiply by logit_scale when it is 1; out_scale is
// applied later, to O (see the kernel).
template <int DTYPE, int ACT, int MASK, bool MASKED, bool UNIT_SCALE, int N>
GDPA_DEVICE void s_to_p(const float (&s)[N / 2], unsigned (&p)[N / 4], float logit_scale, const FragThread& f,
                        int row0, int col0, const MaskBounds& mb) {
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    float a, b;
    if constexpr (UNIT_SCALE)
      act_f2<ACT>(s[2 * i], s[2 * i + 1], &a, &b);
    else
      act_f2<ACT>(s[2 * i] * logit_scale, s[2 * i + 1] * logit_scale, &a, &b);
    if constexpr (MASKED) {
      const int row = row0 + pair_row(f, i);
      const int col = col0 + pair_col(f, i);
      if (!mask_allowed(MASK, row, col, mb.len_q, mb.len_k, mb.window_left, mb.window_right)) a = 0.0f;
      if (!mask_allowed(MASK, row, col + 1, mb.len_q, mb.len_k, mb.window_left, mb.window_right)) b = 0.0f;
    }
    p[i] = pack2<DTYPE>(a, b);
  }
}

// Stores a 64 x D fp32 accumulator (times `scale`) as 16-bit values to rows [0, rows_valid) of a
// row-major global tensor whose rows are `row_stride` elements apart. Rows past a sequence end
// belong to the next sequence and are never written.
template <int DTYPE, int D>
GDPA_DEVICE void store_rows(const float (&o)[D / 2], unsigned short* base, long long row_stride, int rows_valid,
                            float scale, const FragThread& f) {
#pragma unroll
  for (int i = 0; i < D / 4; ++i) {
    const int row = pair_row(f, i);
    if (row < rows_valid) {
      const unsigned v = pack2<DTYPE>(o[2 * i] * scale, o[2 * i + 1] * scale);
      *reinterpret_cast<unsigned*>(base + row * row_stride + pair_col(f, i)) = v;
    }
  }
}

// Writes zeros to rows [0, rows_valid) of a 64 x D block (a query tile that sees no key).
template <int D>
GDPA_DEVICE void store_zero_rows(unsigned short* base, long long row_stride, int rows_valid, const FragThread& f) {
#pragma unroll
  for (int i = 0; i < D / 4; ++i) {
    const int row = pair_row(f, i);
    if (row < rows_valid) *reinterpret_cast<unsigned*>(base + row * row_stride + pair_col(f, i)) = 0u;
  }
}

}  // namespace gdpa::sm90
