// fragments.cuh — what one thread holds of a wgmma accumulator, and the element-wise work done on
// it in registers: S -> P (activation, mask, pack to the A-operand layout) and zero rows of an
// empty tile (staged stores of a fragment: epilogue.cuh).
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
#include "../../ptx/regs.cuh"
#include "act_mix.h"

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
// the sequence end forbids (i, j) (without a mask: only keys past the end), packed to 16 bits.
// row0/col0: sequence-local index of this warpgroup's first row and of the block's first key.
// MASKED = false is the interior fast path (no compares at all); UNIT_SCALE skips the multiply by
// logit_scale when it is 1; out_scale is applied later, to O (see the kernel).
// A thread's fragment covers two rows (g and g + 8 of its warp's 16). The allowed keys of a row
// are one interval, so a masked block costs two compares per element: [lo, hi) per row, relative
// to the block's first key col0 (rows past the sequence end see nothing); one without a mask.
template <int MASK>
GDPA_DEVICE void row_key_intervals(const FragThread& f, int row0, int col0, const MaskBounds& mb, int (&lo)[2],
                                   int (&hi)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + pair_row(f, h);
    int first, last;
    mask_key_range(MASK, row, row + 1, mb.len_q, mb.len_k, mb.window_left, mb.window_right, &first, &last);
    if (row >= mb.len_q) last = first;
    lo[h] = first - col0;
    hi[h] = last - col0;
  }
}

// f of the packed pair i of a fragment row: pair i lies in 8-column block i / 2. With MIX > 0
// (act_mix.h) fast_gelu's blocks chosen by act_mix_alu_block run gelu_poly on the FMA pipe instead
// of tanh.approx; i is an unrolled loop index, so the choice costs nothing at run time.
// Where the kernels may round 2 f instead of f (kFwdHalfFold, kBwdHalfFold): the GELU tanh forms,
// in bf16 only (act_twice_f says why), and not in the MUFU / FMA mix, whose gelu_poly blocks have
// no doubled form.
template <int DTYPE, int ACT, int MIX>
constexpr bool use_twice_f = act_has_twice_f<ACT> && DTYPE == kBF16 && MIX == 0;

// TWICE (no MIX): 2 f instead of f (act_twice_f; the caller halves O).
template <int ACT, int MIX, bool TWICE = false>
GDPA_DEVICE void act_f2_mixed(int i, float x0, float x1, float* f0, float* f1) {
  static_assert(!(TWICE && MIX > 0), "the doubled form is not mixed");
  if constexpr (TWICE) {
    *f0 = act_twice_f<ACT>(x0);
    *f1 = act_twice_f<ACT>(x1);
    return;
  }
  if (ACT == kFastGelu && MIX > 0 && act_mix_alu_block(i >> 1, MIX))
    act_f2<kGeluPoly>(x0, x1, f0, f1);
  else
    act_f2<ACT>(x0, x1, f0, f1);
}

// TWICE: P = round(2 f) instead of round(f), for the caller to halve O (act_twice_f).
template <int DTYPE, int ACT, int MASK, bool MASKED, bool UNIT_SCALE, int N, int MIX = 0, bool TWICE = false>
GDPA_DEVICE void s_to_p(const float (&s)[N / 2], unsigned (&p)[N / 4], float logit_scale, const FragThread& f,
                        int row0, int col0, const MaskBounds& mb) {
  // Without a mask, a block is masked only because it runs past the sequence's last key: the same
  // columns are cut in both rows, and rows past the last query are left as they are (their O rows
  // are never stored). One compare per element, against a bound that already holds this thread's
  // column offset 2t: 8 (i / 2) (+ 1) is then a compile-time constant.
  constexpr bool kKeysOnly = MASK == kMaskNone;
  int lo[2] = {0, 0}, hi[2] = {N, N};
  if constexpr (MASKED && !kKeysOnly) row_key_intervals<MASK>(f, row0, col0, mb, lo, hi);
  // kKeysOnly: pair i's first column is cut if 8 (i / 2) >= key_limit, its second if 8 (i / 2) + 1 is.
  const int key_limit = mb.len_k - col0 - 2 * f.t;
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    float a, b;
    if constexpr (UNIT_SCALE)
      act_f2_mixed<ACT, MIX, TWICE>(i, s[2 * i], s[2 * i + 1], &a, &b);
    else
      act_f2_mixed<ACT, MIX, TWICE>(i, s[2 * i] * logit_scale, s[2 * i + 1] * logit_scale, &a, &b);
    if constexpr (MASKED && kKeysOnly) {
      if (8 * (i >> 1) >= key_limit) a = 0.0f;
      if (8 * (i >> 1) + 1 >= key_limit) b = 0.0f;
    } else if constexpr (MASKED) {
      const int col = pair_col(f, i);
      if (col < lo[i & 1] || col >= hi[i & 1]) a = 0.0f;
      if (col + 1 < lo[i & 1] || col + 1 >= hi[i & 1]) b = 0.0f;
    }
    p[i] = pack2<DTYPE>(a, b);
  }
}

// ---- The softmax variant (kFwdSoftmax): FlashAttention's online softmax on the same fragments ----

// Per thread, for its two rows: running max of the scaled logits in log2 units and the partial row
// sum of P over this thread's columns (the 4 threads of a row are summed once, at the end).
struct SoftmaxRows {
  float m[2];
  float l[2];
};

GDPA_DEVICE void softmax_rows_init(SoftmaxRows& r) {
  r.m[0] = r.m[1] = -__int_as_float(0x7f800000);
  r.l[0] = r.l[1] = 0.0f;
}

// P = exp2(S * scale_log2 - m) with m the new running max of each row (masked entries 0, never
// exp of -inf), corr = exp2(m_old - m_new): the factor O and l must be rescaled by.
template <int DTYPE, int MASK, bool MASKED, int N>
GDPA_DEVICE void softmax_s_to_p(const float (&s)[N / 2], unsigned (&p)[N / 4], float scale_log2, const FragThread& f,
                                int row0, int col0, const MaskBounds& mb, SoftmaxRows& r, float (&corr)[2]) {
  const float neg_inf = -__int_as_float(0x7f800000);
  int lo[2] = {0, 0}, hi[2] = {N, N};
  if constexpr (MASKED) row_key_intervals<MASK>(f, row0, col0, mb, lo, hi);
  auto allowed = [&](int i, int dc) {
    const int col = pair_col(f, i) + dc;
    return !MASKED || (col >= lo[i & 1] && col < hi[i & 1]);
  };
  float mx[2] = {neg_inf, neg_inf};
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    if (allowed(i, 0)) mx[i & 1] = fmaxf(mx[i & 1], s[2 * i]);
    if (allowed(i, 1)) mx[i & 1] = fmaxf(mx[i & 1], s[2 * i + 1]);
  }
  float ref[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // the 4 threads t of a row hold its columns: reduce over the quad
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float m_new = fmaxf(r.m[h], mx[h] * scale_log2);
    // A row that has seen no allowed key yet keeps m = -inf: use 0 as the reference so that no
    // exp2(-inf - -inf) = NaN appears (its P entries are all masked to 0 anyway).
    ref[h] = m_new == neg_inf ? 0.0f : m_new;
    corr[h] = m_new == neg_inf ? 1.0f : ptx::ex2_approx(r.m[h] - m_new);
    r.m[h] = m_new;
    r.l[h] *= corr[h];
  }
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    const int h = i & 1;
    const float a = allowed(i, 0) ? ptx::ex2_approx(fmaf(s[2 * i], scale_log2, -ref[h])) : 0.0f;
    const float b = allowed(i, 1) ? ptx::ex2_approx(fmaf(s[2 * i + 1], scale_log2, -ref[h])) : 0.0f;
    r.l[h] += a + b;
    p[i] = pack2<DTYPE>(a, b);
  }
}

// O rows times their factor (the rescale by corr, or the final 1 / l).
template <int D>
GDPA_DEVICE void scale_rows(float (&o)[D / 2], const float (&factor)[2]) {
#pragma unroll
  for (int i = 0; i < D / 4; ++i) {
    o[2 * i] *= factor[i & 1];
    o[2 * i + 1] *= factor[i & 1];
  }
}

// The end of a tile: row sums over the quad, O divided by them (a row with no allowed key is 0).
template <int D>
GDPA_DEVICE void softmax_normalize(float (&o)[D / 2], const SoftmaxRows& r) {
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = r.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    inv[h] = l > 0.0f ? 1.0f / l : 0.0f;
  }
  scale_rows<D>(o, inv);
}

// Writes zeros to rows [0, rows_valid) of a 64 x D block (a query tile that sees no key).
template <int D>
GDPA_DEVICE void store_zero_rows(unsigned short* base, int row_stride, int rows_valid, const FragThread& f) {
#pragma unroll
  for (int i = 0; i < D / 4; ++i) {
    const int row = pair_row(f, i);
    if (row < rows_valid) *reinterpret_cast<unsigned*>(base + (long long)row * row_stride + pair_col(f, i)) = 0u;
  }
}

}  // namespace gdpa::sm90
