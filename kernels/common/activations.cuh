// activations.cuh — every activation of spec section 3: f and f', on the host and on the device.
//
// One source of truth: the CPU reference, the baseline kernels and the Hopper/Blackwell kernels all
// call these. Three tiers:
//   act_f / act_df / act_f_df / act_f2 <ACT>   fp32, exactly as the kernels compute it. On the device
//       the MUFU forms use the hardware approximations (ptx/math.cuh); on the host they fall back to
//       accurate libm math (the host has no tanh.approx), except fast_gelu_bf16, whose bf16 rounding
//       the host emulates step by step.
//   act_f_rt / act_df_rt (int act, float)     the same, selected at run time.
//   act_f_exact / act_df_exact (int, double)  host only: fp64 definitions, the reference's truth.
//
// Each activation is one ActImpl specialisation holding its forward and its derivative side by
// side: fwd(x) returns f and whatever f' reuses (t = tanh(z), s = sigmoid(x), ...), and
// df(x, fwd) finishes f'. act_df runs fwd too; on the device the unused part of fwd is dead code.
//
// NaN: a NaN input gives a NaN f and a NaN f' for every activation (spec 2: NaN propagates), the one
// exception being identity's f' = 1, which never reads x. Clamps therefore use the NaN-propagating
// min/max, and piecewise derivatives test "x < 0" and "x >= 0" separately.
// Every arithmetic step that could be fused is written as an explicit fma_f, so the host (g++ does not
// contract without FMA hardware) and the device (nvcc contracts a*b+c) round identically.
#pragma once
#include "portability.h"
#include "enums.h"
#include "dtype.cuh"
#include "../../ptx/math.cuh"

namespace gdpa {

// ---- scalar building blocks: one name, the device instruction or the host's accurate fallback ----
namespace act_math {

GDPA_HD float fma_f(float a, float b, float c) {
#if GDPA_DEVICE_CODE
  return fmaf(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}
GDPA_HD float abs_f(float x) {
#if GDPA_DEVICE_CODE
  return fabsf(x);
#else
  return __builtin_fabsf(x);
#endif
}
GDPA_HD float copysign_f(float magnitude, float sign) {
#if GDPA_DEVICE_CODE
  return copysignf(magnitude, sign);
#else
  return __builtin_copysignf(magnitude, sign);
#endif
}
GDPA_HD bool is_nan(float x) { return x != x; }
GDPA_HD float quiet_nan() { return bits_float(0x7fc00000u); }

// min / max that return NaN if either input is NaN (fminf / fmaxf would return the other one).
GDPA_HD float min_nan(float a, float b) {
#if GDPA_DEVICE_CODE && __CUDA_ARCH__ >= 800
  return ptx::fmin_nan(a, b);
#else
  return (is_nan(a) || is_nan(b)) ? a + b : (b < a ? b : a);
#endif
}
GDPA_HD float max_nan(float a, float b) {
#if GDPA_DEVICE_CODE && __CUDA_ARCH__ >= 800
  return ptx::fmax_nan(a, b);
#else
  return (is_nan(a) || is_nan(b)) ? a + b : (b > a ? b : a);
#endif
}
// Plain clamp helpers, used only where a NaN input already reaches the result by another path.
GDPA_HD float min_f(float a, float b) {
#if GDPA_DEVICE_CODE
  return fminf(a, b);
#else
  return __builtin_fminf(a, b);
#endif
}
GDPA_HD float max_f(float a, float b) {
#if GDPA_DEVICE_CODE
  return fmaxf(a, b);
#else
  return __builtin_fmaxf(a, b);
#endif
}

// Accurate math (libdevice on the device, libm on the host): a few ulp.
GDPA_HD float tanh_acc(float x) {
#if GDPA_DEVICE_CODE
  return tanhf(x);
#else
  return __builtin_tanhf(x);
#endif
}
GDPA_HD float exp_acc(float x) {
#if GDPA_DEVICE_CODE
  return expf(x);
#else
  return __builtin_expf(x);
#endif
}

// MUFU forms. The host has no such unit: it falls back to the accurate function of the same value,
// so host results of fast_gelu / fast_silu equal gelu_tanh / silu up to libm rounding.
GDPA_HD float tanh_fast(float x) {
#if GDPA_DEVICE_CODE
  return ptx::tanh_approx(x);
#else
  return __builtin_tanhf(x);
#endif
}
GDPA_HD float exp2_fast(float x) {
#if GDPA_DEVICE_CODE
  return ptx::ex2_approx(x);
#else
  return __builtin_exp2f(x);
#endif
}
GDPA_HD float rcp_fast(float x) {
#if GDPA_DEVICE_CODE
  return ptx::rcp_approx(x);
#else
  return 1.0f / x;
#endif
}

// Phi(x) = 0.5 erfc(-x / sqrt 2), the standard normal CDF, for gelu = x Phi(x): erfc(|z|) by the
// Chebyshev fit of Numerical Recipes (6.2, relative error < 1.2e-7 for every z >= 0) with the
// exponential and the reciprocal from MUFU on the device (measured on the GPU: max |error| 3.7e-7
// in gelu over |x| <= 8; bf16 keeps 4e-3). Why not libdevice's erff in 0.5 x (1 + erf): with this
// form the erf-GELU kernels run 1.09-1.42x faster forward and 1.05-1.17x backward on the H200
// (PERF_NOTES, twenty-seventh session). Phi directly also avoids the cancellation of 1 + erf for
// negative x, where gelu's tail is Phi itself. (0.7071... = 1 / sqrt 2, 1.4427... = log2 e.)
GDPA_HD float normal_cdf(float x) {
  const float z = x * 0.70710678118654752f, a = abs_f(z);
  const float t = rcp_fast(fma_f(0.5f, a, 1.0f));
  float q = 0.17087277f;
  q = fma_f(q, t, -0.82215223f);
  q = fma_f(q, t, 1.48851587f);
  q = fma_f(q, t, -1.13520398f);
  q = fma_f(q, t, 0.27886807f);
  q = fma_f(q, t, -0.18628806f);
  q = fma_f(q, t, 0.09678418f);
  q = fma_f(q, t, 0.37409196f);
  q = fma_f(q, t, 1.00002368f);
  q = fma_f(q, t, -1.26551223f);
  const float half_erfc = 0.5f * t * exp2_fast(fma_f(-a, a, q) * 1.44269504088896341f);  // 0.5 erfc(|z|)
  return z >= 0.0f ? 1.0f - half_erfc : half_erfc;
}

}  // namespace act_math

// ---- constants --------------------------------------------------------------------------------------
namespace act_const {

constexpr float kInvSqrt2 = 0.70710678118654752f;    // 1/sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1/sqrt(2 pi) = phi(0)
constexpr float kLog2e = 1.44269504088896341f;
// tanh GELU: z = k x (1 + a x^2) = x (k + k a x^2);  dz/dx = k (1 + 3 a x^2) = k + gamma x^2.
constexpr float kGeluK = 0.79788456080286536f;       // k = sqrt(2/pi)
constexpr float kGeluKA = 0.035677408136300125f;     // k a, a = 0.044715
constexpr float kGeluGamma = 0.10703222440890038f;   // 3 k a
// f' multiplies 0.5x(1 - t^2) by k + gamma x^2, which overflows for |x| > 1e19: 0 * inf would be NaN.
// Capping x^2 at 100 (|x| = 10, |z| > 43) changes no accurate result, since fp32 tanh is exactly +-1
// from |z| = 9.1 on, and it bounds the term where an approximate t falls short of +-1.
constexpr float kGeluTanhX2Cap = 100.0f;
// bf16 bit patterns of k, k a and 0.5, for the packed bf16x2 form (round-to-nearest-even of the above).
constexpr unsigned kBf16GeluK = 0x3f4cu;   // 0.796875
constexpr unsigned kBf16GeluKA = 0x3d12u;  // 0.03564453125
constexpr unsigned kBf16Half = 0x3f00u;    // 0.5

// gelu_taylor6 (the paper's form): 0.5x + c2 x^2 + c4 x^4 + c6 x^6, the Maclaurin series of x Phi(x).
constexpr float kTaylorC2 = 0.39894228040143268f;     // 1/sqrt(2 pi)
constexpr float kTaylorC4 = -0.066490380066905446f;   // -c2/6
constexpr float kTaylorC6 = 0.0099735570100358170f;   // c2/40
constexpr float kTaylorD2 = 0.79788456080286536f;     // 2 c2   (f' coefficients)
constexpr float kTaylorD4 = -0.26596152026762178f;    // 4 c4
constexpr float kTaylorD6 = 0.059841342060214902f;    // 6 c6

// gelu_poly (spec 3.1, docs/gelu_poly.md; printed by verify/tools/fit_gelu_poly.cpp):
//   v = min(|x|, 4),  f(x) = 0.5 x + |x| v R(v),  R(v) = sum_j r_j v^j            (degree 7)
//   f'(x) = 0.5 + copysign(v, x) D(v),             D(v) = sum_j d_j v^j, d_j = (j+2) r_j
// With E(v) = 2 v R(v) standing in for erf(v / sqrt 2), the fit imposes E(4) = 1 (f meets relu at the
// clamp: continuous) and E'(4) = 0 (f' meets relu' there: continuous too). r0 and d0 are pinned so the
// fp32 Horner values R(4) and D(4) are exactly 1/8: the fp32 f is then exactly relu and the fp32 f'
// exactly 0 or 1 for every |x| >= 4. d_j equals (j+2) r_j to fp32 rounding, except d0, which the pin
// moves by 1.5e-6 (below the fp32 evaluation noise of D near v = 4).
constexpr float kGeluPolyClamp = 4.0f;
constexpr float kGeluPolyR0 = 3.970796168e-01f;
constexpr float kGeluPolyR1 = 8.092785254e-03f;
constexpr float kGeluPolyR2 = -7.764312625e-02f;
constexpr float kGeluPolyR3 = 2.877238905e-03f;
constexpr float kGeluPolyR4 = 1.647481881e-02f;
constexpr float kGeluPolyR5 = -6.513757166e-03f;
constexpr float kGeluPolyR6 = 1.022608951e-03f;
constexpr float kGeluPolyR7 = -5.995950050e-05f;
constexpr float kGeluPolyD0 = 7.941610217e-01f;
constexpr float kGeluPolyD1 = 2.427835390e-02f;
constexpr float kGeluPolyD2 = -3.105725050e-01f;
constexpr float kGeluPolyD3 = 1.438619476e-02f;
constexpr float kGeluPolyD4 = 9.884890914e-02f;
constexpr float kGeluPolyD5 = -4.559630156e-02f;
constexpr float kGeluPolyD6 = 8.180871606e-03f;
constexpr float kGeluPolyD7 = -5.396354827e-04f;

}  // namespace act_const

// ---- bf16 emulation: what fma.rn / mul.rn / tanh.approx .bf16x2 do, lane by lane, in exact steps ----
// Used by the host and by devices older than sm_90. Exact for results in the bf16 normal range.
namespace bf16_emu {

// Round-to-nearest-even of a double to bf16 (8 significant bits), returned as the float it is.
GDPA_HD float round_double(double v) {
  if (v != v) return (float)v;
  union { double d; unsigned long long u; } c;
  c.d = v;
  c.u += 0x00000fffffffffffull + ((c.u >> 45) & 1ull);  // half of the 45 dropped bits, ties to even
  c.u &= ~0x00001fffffffffffull;
  return (float)c.d;  // 8 significant bits: exact in fp32
}
GDPA_HD float round_float(float v) { return bf16_bits_to_float(float_to_bf16_bits(v)); }

// p + c rounded to double with round-to-odd, so that the later rounding to bf16 (45 bits fewer)
// is the correctly rounded one: rounding twice to nearest could land on a tie that was not there.
GDPA_HD double add_round_to_odd(double p, double c) {
  const double s = p + c;
  const double pv = s - c;  // TwoSum: err is the exact rounding error of s
  const double err = (p - pv) + (c - (s - pv));
  if (err == 0) return s;
  union { double d; unsigned long long u; } r;
  r.d = s;
  if ((r.u & 1ull) == 0) r.u += ((err > 0) == (s > 0)) ? 1ull : ~0ull;  // odd neighbour towards s+err
  return r.d;
}

// a, b, c are bf16 values; the products of two 8-bit significands are exact in double.
GDPA_HD float mul(float a, float b) { return round_double((double)a * (double)b); }
GDPA_HD float fma(float a, float b, float c) { return round_double(add_round_to_odd((double)a * (double)b, c)); }
// The host's stand-in for tanh.approx.bf16: the accurate tanh, rounded once to bf16.
GDPA_HD float tanh(float z) {
#if GDPA_DEVICE_CODE
  return round_double(::tanh((double)z));
#else
  return round_double(__builtin_tanh((double)z));
#endif
}

}  // namespace bf16_emu

// fast_gelu_bf16 on a pair: x rounded to bf16, then tanh GELU entirely in bf16x2 with one
// tanh.approx.bf16x2. Returns the packed bf16 results f (ready to feed a bf16 MMA) and t = tanh(z),
// which the fp32 gradient reuses. Low half = element 0. On sm_90a this is 1 cvt + 5 packed FMA-pipe
// ops per pair (2.5 per element against fast_gelu's 5) and still one MUFU op per element.
//   x2 = x x;  p = k + (k a) x2;  z = x p;  t = tanh(z);  h = x / 2;  f = h t + h      (bf16 each step)
GDPA_HD void fast_gelu_bf16x2(float x0, float x1, unsigned* f_bits, unsigned* t_bits) {
  using namespace act_const;
#if GDPA_DEVICE_CODE && __CUDA_ARCH__ >= 900
  const unsigned x = ptx::cvt_bf16x2(x0, x1);
  const unsigned x2 = ptx::mul_bf16x2(x, x);
  const unsigned p = ptx::fma_bf16x2(x2, kBf16GeluKA * 0x10001u, kBf16GeluK * 0x10001u);
  const unsigned z = ptx::mul_bf16x2(x, p);
  const unsigned t = ptx::tanh_approx_bf16x2(z);
  const unsigned h = ptx::mul_bf16x2(x, kBf16Half * 0x10001u);
  *f_bits = ptx::fma_bf16x2(h, t, h);
  *t_bits = t;
#else
  const float k = bf16_bits_to_float((unsigned short)kBf16GeluK);
  const float ka = bf16_bits_to_float((unsigned short)kBf16GeluKA);
  unsigned f_out = 0, t_out = 0;
  for (int lane = 0; lane < 2; ++lane) {
    const float x = bf16_emu::round_float(lane ? x1 : x0);
    const float x2 = bf16_emu::mul(x, x);
    const float p = bf16_emu::fma(x2, ka, k);
    const float z = bf16_emu::mul(x, p);
    const float t = bf16_emu::tanh(z);
    const float h = bf16_emu::mul(x, 0.5f);
    const float f = bf16_emu::fma(h, t, h);
    f_out |= unsigned(float_to_bf16_bits(f)) << (16 * lane);
    t_out |= unsigned(float_to_bf16_bits(t)) << (16 * lane);
  }
  *f_bits = f_out;
  *t_bits = t_out;
#endif
}

GDPA_HD float bf16x2_lo(unsigned packed) { return bits_float(packed << 16); }
GDPA_HD float bf16x2_hi(unsigned packed) { return bits_float(packed & 0xffff0000u); }

// f' of tanh GELU from t = tanh(z) and g = 0.5 x (1 + t), in fp32:
//   f' = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2),  and  0.5 x (1 - t^2) = (1 - t) g = g - g t,
// one fma instead of forming 1 - t^2, and exact where t is +-1.
GDPA_HD float gelu_tanh_df_from_t(float x2, float t, float g) {
  using namespace act_const;
  const float dz = act_math::fma_f(kGeluGamma, act_math::min_f(x2, kGeluTanhX2Cap), kGeluK);
  return act_math::fma_f(act_math::fma_f(-g, t, g), dz, act_math::fma_f(t, 0.5f, 0.5f));
}

// ---- the activations: fwd (f and what f' reuses) and df, side by side -----------------------------
template <int ACT>
struct ActImpl;

template <>
struct ActImpl<kIdentity> {
  struct Fwd { float f; };
  static GDPA_HD Fwd fwd(float x) { return {x}; }
  static GDPA_HD float df(float, Fwd) { return 1.0f; }  // constant: the backward never needs S
};

// gelu: x Phi(x) = 0.5 x (1 + erf(x / sqrt 2));  f' = Phi(x) + x phi(x) (act_math::normal_cdf).
template <>
struct ActImpl<kGelu> {
  struct Fwd { float f, cdf; };
  static GDPA_HD Fwd fwd(float x) {
    const float cdf = act_math::normal_cdf(x);
    return {x * cdf, cdf};
  }
  static GDPA_HD float df(float x, Fwd s) {
    const float phi = act_const::kInvSqrt2Pi * act_math::exp_acc(-0.5f * x * x);
    return act_math::fma_f(x, phi, s.cdf);
  }
};

// gelu_tanh / fast_gelu: f = h (1 + t), h = x/2, t = tanh(x (k + k a x^2)). Forward: 4 FMA-pipe ops
// (x2, k + ka x2, z, h) + tanh + 1 fma; the derivative adds 4 FMA-pipe ops and one min.
template <bool kFastTanh>
struct GeluTanhForm {
  struct Fwd { float f, t, x2; };
  static GDPA_HD Fwd fwd(float x) {
    const float x2 = x * x;
    const float z = x * act_math::fma_f(act_const::kGeluKA, x2, act_const::kGeluK);
    const float t = kFastTanh ? act_math::tanh_fast(z) : act_math::tanh_acc(z);
    const float h = 0.5f * x;
    return {act_math::fma_f(h, t, h), t, x2};
  }
  static GDPA_HD float df(float, Fwd s) { return gelu_tanh_df_from_t(s.x2, s.t, s.f); }
  // 2 f = x + x t: one multiply (h = x / 2) fewer than f. A caller that scales its result by 1/2
  // later gets f exactly (act_twice_f).
  static GDPA_HD float twice_f(float x) {
    const float z = x * act_math::fma_f(act_const::kGeluKA, x * x, act_const::kGeluK);
    const float t = kFastTanh ? act_math::tanh_fast(z) : act_math::tanh_acc(z);
    return act_math::fma_f(x, t, x);
  }
  // 2 f and f' together. f' = (f - f t) dz + (1 + t) / 2 (gelu_tanh_df_from_t) is formed from
  // 2 f with dz's constants halved: (2f - 2f t) (dz / 2) is the same real number as (f - f t) dz,
  // and halving a constant or doubling f is exact, so f' comes out bit-identical to df().
  static GDPA_HD void twice_f_df(float x, float* f2, float* df) {
    using namespace act_const;
    const float x2 = x * x;
    const float z = x * act_math::fma_f(kGeluKA, x2, kGeluK);
    const float t = kFastTanh ? act_math::tanh_fast(z) : act_math::tanh_acc(z);
    const float g2 = act_math::fma_f(x, t, x);
    const float dz_half = act_math::fma_f(0.5f * kGeluGamma, act_math::min_f(x2, kGeluTanhX2Cap), 0.5f * kGeluK);
    *df = act_math::fma_f(act_math::fma_f(-g2, t, g2), dz_half, act_math::fma_f(t, 0.5f, 0.5f));
    *f2 = g2;
  }
};
template <>
struct ActImpl<kGeluTanh> : GeluTanhForm<false> {};
template <>
struct ActImpl<kFastGelu> : GeluTanhForm<true> {};  // t from tanh.approx.f32: one MUFU op

// fast_gelu_bf16: f from the packed bf16 form above; f' in fp32 from that t (spec 3).
template <>
struct ActImpl<kFastGeluBf16> {
  struct Fwd { float f, t; };
  static GDPA_HD Fwd fwd(float x) {
    unsigned f, t;
    fast_gelu_bf16x2(x, x, &f, &t);
    return {bf16x2_lo(f), bf16x2_lo(t)};
  }
  static GDPA_HD float df(float x, Fwd s) {
    const float h = 0.5f * x;
    return gelu_tanh_df_from_t(x * x, s.t, act_math::fma_f(h, s.t, h));
  }
};

// gelu_taylor6: 0.5x + x2 (c2 + x2 (c4 + c6 x2)); f' = 0.5 + x (2c2 + x2 (4c4 + 6c6 x2)).
// FMA/ALU only: 5 ops forward (x2, 2 fma, h, fma), 3 more for f'. Accurate only for |x| <~ 1.
template <>
struct ActImpl<kGeluTaylor6> {
  struct Fwd { float f, x2; };
  static GDPA_HD Fwd fwd(float x) {
    using namespace act_const;
    const float x2 = x * x;
    const float p = act_math::fma_f(act_math::fma_f(kTaylorC6, x2, kTaylorC4), x2, kTaylorC2);
    return {act_math::fma_f(x2, p, 0.5f * x), x2};
  }
  static GDPA_HD float df(float x, Fwd s) {
    using namespace act_const;
    const float q = act_math::fma_f(act_math::fma_f(kTaylorD6, s.x2, kTaylorD4), s.x2, kTaylorD2);
    return act_math::fma_f(x, q, 0.5f);
  }
};

// gelu_poly (spec 3.1): FMA/ALU only, within 5e-4 of erf GELU for every x (docs/gelu_poly.md).
// Forward: 1 min + 7 fma (Horner) + 2 mul + 1 fma; f' adds 1 sign copy + 7 fma + 1 fma.
template <>
struct ActImpl<kGeluPoly> {
  struct Fwd { float f, v; };
  static GDPA_HD Fwd fwd(float x) {
    using namespace act_const;
    using act_math::fma_f;
    const float ax = act_math::abs_f(x);
    const float v = act_math::min_nan(ax, kGeluPolyClamp);  // NaN stays NaN; beyond 4: f = relu
    float r = fma_f(kGeluPolyR7, v, kGeluPolyR6);
    r = fma_f(r, v, kGeluPolyR5);
    r = fma_f(r, v, kGeluPolyR4);
    r = fma_f(r, v, kGeluPolyR3);
    r = fma_f(r, v, kGeluPolyR2);
    r = fma_f(r, v, kGeluPolyR1);
    r = fma_f(r, v, kGeluPolyR0);
    // |x| (v R) rather than (|x| v) R: v R(v) is exactly 1/2 at the clamp, so for any |x| >= 4 the
    // fma is exactly 0.5|x| + 0.5x, with no overflow of |x| v for huge |x|.
    return {fma_f(ax, v * r, 0.5f * x), v};
  }
  static GDPA_HD float df(float x, Fwd s) {
    using namespace act_const;
    using act_math::fma_f;
    const float v = s.v;
    float d = fma_f(kGeluPolyD7, v, kGeluPolyD6);
    d = fma_f(d, v, kGeluPolyD5);
    d = fma_f(d, v, kGeluPolyD4);
    d = fma_f(d, v, kGeluPolyD3);
    d = fma_f(d, v, kGeluPolyD2);
    d = fma_f(d, v, kGeluPolyD1);
    d = fma_f(d, v, kGeluPolyD0);
    return fma_f(act_math::copysign_f(v, x), d, 0.5f);  // copysign(v, x) = clamp(x, -4, 4)
  }
};

// relu: max(x, 0);  f' = 1 if x >= 0 (so f'(0) = 1, spec 3) else 0.
template <>
struct ActImpl<kRelu> {
  struct Fwd { float f; };
  static GDPA_HD Fwd fwd(float x) { return {act_math::max_nan(x, 0.0f)}; }
  static GDPA_HD float df(float x, Fwd) { return x < 0.0f ? 0.0f : (x >= 0.0f ? 1.0f : x); }
};

// relu_square: max(x, 0)^2;  f' = 2 max(x, 0).
template <>
struct ActImpl<kReluSquare> {
  struct Fwd { float f, r; };
  static GDPA_HD Fwd fwd(float x) {
    const float r = act_math::max_nan(x, 0.0f);
    return {r * r, r};
  }
  static GDPA_HD float df(float, Fwd s) { return 2.0f * s.r; }
};

// leaky_relu: x if x >= 0 else 0.01 x;  f' = 1 if x >= 0 else 0.01.
template <>
struct ActImpl<kLeakyRelu> {
  struct Fwd { float f; };
  static GDPA_HD Fwd fwd(float x) { return {x < 0.0f ? 0.01f * x : x}; }
  static GDPA_HD float df(float x, Fwd) { return x < 0.0f ? 0.01f : (x >= 0.0f ? 1.0f : x); }
};

// silu: x s, s = sigmoid(x) = 1 / (1 + e^-x);  f' = s (1 + x (1 - s)) = s + (f - f s).
template <>
struct ActImpl<kSilu> {
  struct Fwd { float f, s; };
  static GDPA_HD Fwd fwd(float x) {
    const float s = 1.0f / (1.0f + act_math::exp_acc(-x));
    return {x * s, s};
  }
  static GDPA_HD float df(float, Fwd s) { return act_math::fma_f(-s.f, s.s, s.f) + s.s; }
};

// fast_silu: the same with s = rcp.approx(1 + ex2.approx(-x log2 e)): two MUFU ops.
template <>
struct ActImpl<kFastSilu> {
  struct Fwd { float f, s; };
  static GDPA_HD Fwd fwd(float x) {
    const float s = act_math::rcp_fast(1.0f + act_math::exp2_fast(x * -act_const::kLog2e));
    return {x * s, s};
  }
  static GDPA_HD float df(float, Fwd s) { return act_math::fma_f(-s.f, s.s, s.f) + s.s; }
};

// hardswish: x min(max(x + 3, 0), 6) / 6 = x clamp(x/6 + 1/2, 0, 1);
// f' = 0 if x <= -3, 1 if x >= 3, x/3 + 1/2 otherwise (spec table; it jumps at both ends).
template <>
struct ActImpl<kHardswish> {
  struct Fwd { float f; };
  static GDPA_HD Fwd fwd(float x) {
    // A NaN x makes the clamp 0 but the product x * 0 is NaN again.
    const float r = act_math::min_f(act_math::max_f(act_math::fma_f(x, 1.0f / 6.0f, 0.5f), 0.0f), 1.0f);
    return {x * r};
  }
  static GDPA_HD float df(float x, Fwd) {
    return x <= -3.0f ? 0.0f : (x >= 3.0f ? 1.0f : act_math::fma_f(x, 1.0f / 3.0f, 0.5f));
  }
};

// ---- public API ---------------------------------------------------------------------------------

template <int ACT>
GDPA_HD float act_f(float x) {
  return ActImpl<ACT>::fwd(x).f;
}

template <int ACT>
GDPA_HD float act_df(float x) {
  return ActImpl<ACT>::df(x, ActImpl<ACT>::fwd(x));
}

template <int ACT>
GDPA_HD void act_f_df(float x, float* f, float* df) {
  const auto s = ActImpl<ACT>::fwd(x);
  *f = s.f;
  *df = ActImpl<ACT>::df(x, s);
}

// Two elements at once: what the kernels call on adjacent accumulator columns. Only fast_gelu_bf16
// differs from two act_f calls: it runs both lanes through one packed bf16x2 evaluation.
template <int ACT>
GDPA_HD void act_f2(float x0, float x1, float* f0, float* f1) {
  if constexpr (ACT == kFastGeluBf16) {
    unsigned f, t;
    fast_gelu_bf16x2(x0, x1, &f, &t);
    *f0 = bf16x2_lo(f);
    *f1 = bf16x2_hi(f);
  } else {
    *f0 = act_f<ACT>(x0);
    *f1 = act_f<ACT>(x1);
  }
}

// 2 f(x) for the activations where that is cheaper than f (the GELU tanh forms: f = x/2 (1 + t),
// 2f = x + x t saves the multiply by 1/2). The forward kernel computes P' = 2 f, rounds it, and
// multiplies O by 1/2 once in its epilogue instead. In bf16, round(2f) = 2 round(f) exactly (bf16
// has fp32's exponent range, so scaling by 2 neither overflows nor changes the rounding above
// 2^-126), and a sum whose every term is doubled is the doubled sum, rounding included: O comes
// out bit-for-bit as with P = round(f). Not in fp16, where 2f can overflow (|f| > 32752).
template <int ACT>
constexpr bool act_has_twice_f = ACT == kGeluTanh || ACT == kFastGelu;

template <int ACT>
GDPA_HD float act_twice_f(float x) {
  if constexpr (act_has_twice_f<ACT>)
    return ActImpl<ACT>::twice_f(x);
  else
    return 2.0f * act_f<ACT>(x);
}

// The backward's form: 2 f (for P, the dV product halved once) and f' (bit-identical to act_df).
template <int ACT>
GDPA_HD void act_twice_f_df(float x, float* f2, float* df) {
  if constexpr (act_has_twice_f<ACT>) {
    ActImpl<ACT>::twice_f_df(x, f2, df);
  } else {
    act_f_df<ACT>(x, f2, df);
    *f2 *= 2.0f;
  }
}

namespace act_detail {
template <int ACT, bool kDerivative>
GDPA_HD float eval(float x) {
  return kDerivative ? act_df<ACT>(x) : act_f<ACT>(x);
}
template <bool kDerivative>
GDPA_HD float eval_rt(int act, float x) {
  switch (act) {
    case kIdentity: return eval<kIdentity, kDerivative>(x);
    case kGelu: return eval<kGelu, kDerivative>(x);
    case kGeluTanh: return eval<kGeluTanh, kDerivative>(x);
    case kFastGelu: return eval<kFastGelu, kDerivative>(x);
    case kFastGeluBf16: return eval<kFastGeluBf16, kDerivative>(x);
    case kGeluTaylor6: return eval<kGeluTaylor6, kDerivative>(x);
    case kGeluPoly: return eval<kGeluPoly, kDerivative>(x);
    case kRelu: return eval<kRelu, kDerivative>(x);
    case kReluSquare: return eval<kReluSquare, kDerivative>(x);
    case kLeakyRelu: return eval<kLeakyRelu, kDerivative>(x);
    case kSilu: return eval<kSilu, kDerivative>(x);
    case kFastSilu: return eval<kFastSilu, kDerivative>(x);
    case kHardswish: return eval<kHardswish, kDerivative>(x);
    default: return act_math::quiet_nan();  // not an activation: make it loud
  }
}
}  // namespace act_detail

// Run-time selection (the CPU reference, tests, the baseline's generic path). NaN for an unknown act.
GDPA_HD float act_f_rt(int act, float x) { return act_detail::eval_rt<false>(act, x); }
GDPA_HD float act_df_rt(int act, float x) { return act_detail::eval_rt<true>(act, x); }

// The spec's names (section 3), indexed by the Activation enum; "unknown" outside it.
GDPA_HD const char* activation_name(int act) {
  switch (act) {
    case kIdentity: return "identity";
    case kGelu: return "gelu";
    case kGeluTanh: return "gelu_tanh";
    case kFastGelu: return "fast_gelu";
    case kFastGeluBf16: return "fast_gelu_bf16";
    case kGeluTaylor6: return "gelu_taylor6";
    case kGeluPoly: return "gelu_poly";
    case kRelu: return "relu";
    case kReluSquare: return "relu_square";
    case kLeakyRelu: return "leaky_relu";
    case kSilu: return "silu";
    case kFastSilu: return "fast_silu";
    case kHardswish: return "hardswish";
    default: return "unknown";
  }
}

// The Activation with that exact name, or -1.
GDPA_HD int activation_from_name(const char* name) {
  if (name == nullptr) return -1;
  for (int act = 0; act < kNumActivations; ++act) {
    const char* a = activation_name(act);
    int i = 0;
    while (a[i] != '\0' && a[i] == name[i]) ++i;
    if (a[i] == '\0' && name[i] == '\0') return act;
  }
  return -1;
}

#if !GDPA_DEVICE_CODE
// ---- fp64 definitions (host only): what the CPU reference treats as the truth ---------------------
// MUFU forms are their accurate functions here: fast_gelu and fast_gelu_bf16 are gelu_tanh, fast_silu
// is silu. gelu_taylor6 and gelu_poly are their own polynomials (they ARE those activations), with
// the fp32 constants above taken as exact; gelu_poly is relu from the clamp on, by construction.
namespace act_exact {

// 1 - sigmoid(x) is sigmoid(-x): no cancellation for large x, and no inf / inf for very negative x.
inline double sigmoid(double x) { return 1.0 / (1.0 + __builtin_exp(-x)); }
inline double gelu_tanh_z(double x) { return 0.7978845608028654 * x * (1.0 + 0.044715 * x * x); }

inline double gelu_poly_r(double v) {  // R(v), the fp32 constants in fp64
  using namespace act_const;
  const double r[8] = {kGeluPolyR0, kGeluPolyR1, kGeluPolyR2, kGeluPolyR3,
                       kGeluPolyR4, kGeluPolyR5, kGeluPolyR6, kGeluPolyR7};
  double p = 0;
  for (int j = 7; j >= 0; --j) p = p * v + r[j];
  return p;
}
inline double gelu_poly_h(double v) {  // d/dv of v^2 R(v), divided by v: sum (j+2) r_j v^j
  using namespace act_const;
  const double r[8] = {kGeluPolyR0, kGeluPolyR1, kGeluPolyR2, kGeluPolyR3,
                       kGeluPolyR4, kGeluPolyR5, kGeluPolyR6, kGeluPolyR7};
  double p = 0;
  for (int j = 7; j >= 0; --j) p = p * v + (j + 2) * r[j];
  return p;
}

}  // namespace act_exact

inline double act_f_exact(int act, double x) {
  using namespace act_exact;
  if (x != x) return x;
  const double ax = x < 0 ? -x : x;
  switch (act) {
    case kIdentity: return x;
    case kGelu: return 0.5 * x * __builtin_erfc(-x * 0.70710678118654752440);
    case kGeluTanh:
    case kFastGelu:
    case kFastGeluBf16: return x * sigmoid(2.0 * gelu_tanh_z(x));  // 0.5 x (1 + tanh z) = x sigmoid(2z)
    case kGeluTaylor6: {
      const double c2 = 0.3989422804014327, x2 = x * x;
      return 0.5 * x + x2 * (c2 + x2 * (-c2 / 6.0 + x2 * (c2 / 40.0)));
    }
    case kGeluPoly:
      if (ax >= act_const::kGeluPolyClamp) return x > 0 ? x : 0.0;
      return 0.5 * x + ax * ax * gelu_poly_r(ax);
    case kRelu: return x > 0 ? x : 0.0;
    case kReluSquare: return x > 0 ? x * x : 0.0;
    case kLeakyRelu: return x >= 0 ? x : 0.01 * x;
    case kSilu:
    case kFastSilu: return x * sigmoid(x);
    case kHardswish: {
      const double r = x + 3.0 < 0 ? 0.0 : (x + 3.0 > 6.0 ? 6.0 : x + 3.0);
      return x * r / 6.0;
    }
    default: return __builtin_nan("");
  }
}

inline double act_df_exact(int act, double x) {
  using namespace act_exact;
  if (act == kIdentity) return 1.0;
  if (x != x) return x;
  const double ax = x < 0 ? -x : x;
  switch (act) {
    case kGelu:
      return 0.5 * __builtin_erfc(-x * 0.70710678118654752440) +
             x * 0.39894228040143268 * __builtin_exp(-0.5 * x * x);
    case kGeluTanh:
    case kFastGelu:
    case kFastGeluBf16: {
      // 0.5(1 + t) = s and 0.5 x (1 - t^2) = 2 x s (1 - s), s = sigmoid(2z). From |x| = 20 on,
      // 1 - s < 1e-300: the step itself, and no inf * 0 from dz/dx.
      if (ax >= 20) return x > 0 ? 1.0 : 0.0;
      const double z2 = 2.0 * gelu_tanh_z(x);
      const double dz = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
      return sigmoid(z2) + 2.0 * x * sigmoid(z2) * sigmoid(-z2) * dz;
    }
    case kGeluTaylor6: {
      const double c2 = 0.3989422804014327, x2 = x * x;
      return 0.5 + x * (2 * c2 + x2 * (-4 * c2 / 6.0 + x2 * (6 * c2 / 40.0)));
    }
    case kGeluPoly:
      if (ax >= act_const::kGeluPolyClamp) return x > 0 ? 1.0 : 0.0;
      return 0.5 + x * gelu_poly_h(ax);
    case kRelu: return x >= 0 ? 1.0 : 0.0;
    case kReluSquare: return x > 0 ? 2.0 * x : 0.0;
    case kLeakyRelu: return x >= 0 ? 1.0 : 0.01;
    case kSilu:
    case kFastSilu: {
      const double s = sigmoid(x);
      return s * (1.0 + x * sigmoid(-x));
    }
    case kHardswish: return x <= -3 ? 0.0 : (x >= 3 ? 1.0 : x / 3.0 + 0.5);
    default: return __builtin_nan("");
  }
}
#endif  // !GDPA_DEVICE_CODE

}  // namespace gdpa
