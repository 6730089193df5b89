// math.cuh — the special-function and packed 16-bit arithmetic instructions the activations use.
//
// Device only: each wrapper is one PTX instruction. Host code never sees them; activations.cuh
// gives the host its accurate (or bit-emulated) counterpart of each.
//
// Hardware units, because they decide what an activation costs on Hopper (per SM per clock):
//   MUFU (the special-function unit): tanh / ex2 / rcp, 16 lanes — 1/8 of the FP32 pipe's 128 lanes.
//   FMA pipe: fma / mul / add in f32 and packed bf16x2 / f16x2 (a packed op does two lanes at once).
//   ALU pipe: min / max / logic, issued alongside the FMA pipe.
#pragma once
#include "../kernels/common/portability.h"

namespace gdpa {
namespace ptx {

#if GDPA_DEVICE_CODE

// ---- MUFU ----------------------------------------------------------------------------------------

// tanh, one MUFU.TANH. Max relative error about 2^-11 (PTX ISA); saturates to +-1 for large |x|.
GDPA_DEVICE float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 2^x, one MUFU.EX2. Max relative error about 2^-22 (a few ulp); subnormal inputs and results flush to 0.
GDPA_DEVICE float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1/x, one MUFU.RCP. Max error 1 ulp (not IEEE-rounded, PTX ISA); rcp(inf) = 0, subnormals flush.
GDPA_DEVICE float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

#if __CUDA_ARCH__ >= 900
// tanh of two bf16 lanes; bf16 results, max absolute error about 2^-8 (PTX ISA). Needs sm_90.
// Note: ptxas 13.0 for sm_90a lowers it to two MUFU.TANH.BF16 (one per lane) plus a PRMT, so on Hopper
// it does not halve MUFU issue; what the packed form saves is FMA-pipe work around the tanh.
GDPA_DEVICE unsigned tanh_approx_bf16x2(unsigned x) {
  unsigned y;
  asm("tanh.approx.bf16x2 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}
#endif

// ---- FMA pipe: conversions and packed bf16x2 arithmetic ------------------------------------------

// Packs two floats into bf16x2, round-to-nearest-even. PTX puts the FIRST source in the UPPER half,
// so `lo` (the element with the lower address / lower column) is the second operand.
GDPA_DEVICE unsigned cvt_bf16x2(float lo, float hi) {
  unsigned d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// Same for f16x2 (overflow gives inf, as cvt.rn.f16.f32).
GDPA_DEVICE unsigned cvt_f16x2(float lo, float hi) {
  unsigned d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// a * b + c on two bf16 lanes, one rounding per lane (round-to-nearest-even). Needs sm_80.
GDPA_DEVICE unsigned fma_bf16x2(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

#if __CUDA_ARCH__ >= 900
// a * b on two bf16 lanes, round-to-nearest-even (sm_90 has a native packed bf16 multiply).
GDPA_DEVICE unsigned mul_bf16x2(unsigned a, unsigned b) {
  unsigned d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// a + b on two bf16 lanes, round-to-nearest-even. Needs sm_90.
GDPA_DEVICE unsigned add_bf16x2(unsigned a, unsigned b) {
  unsigned d;
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
#endif

// ---- ALU pipe ------------------------------------------------------------------------------------

#if __CUDA_ARCH__ >= 800
// min / max that return NaN when either input is NaN (fminf / fmaxf return the other operand), so a
// clamp never turns a NaN logit into a finite activation. One FMNMX each, exact. Needs sm_80.
GDPA_DEVICE float fmin_nan(float a, float b) {
  float d;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

GDPA_DEVICE float fmax_nan(float a, float b) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}
#endif

#endif  // GDPA_DEVICE_CODE

}  // namespace ptx
}  // namespace gdpa
