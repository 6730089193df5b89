// dtype.cuh — the 16-bit input/output element types, as raw bits, on host and device.
//
// The project keeps its own bf16/fp16 types instead of <cuda_bf16.h> because NVRTC compiles the
// kernels without toolkit headers, and the CPU reference needs the very same rounding
// (round-to-nearest-even, NaN kept NaN) as the device's cvt.rn instructions.
#pragma once
#include "portability.h"
#include "enums.h"

namespace gdpa {

GDPA_HD unsigned float_bits(float f) {
#if GDPA_DEVICE_CODE
  return __float_as_uint(f);
#else
  union { float f; unsigned u; } c;
  c.f = f;
  return c.u;
#endif
}

GDPA_HD float bits_float(unsigned u) {
#if GDPA_DEVICE_CODE
  return __uint_as_float(u);
#else
  union { float f; unsigned u; } c;
  c.u = u;
  return c.f;
#endif
}

GDPA_HD float bf16_bits_to_float(unsigned short h) { return bits_float(unsigned(h) << 16); }

// Round-to-nearest-even, as cvt.rn.bf16.f32.
GDPA_HD unsigned short float_to_bf16_bits(float f) {
  const unsigned u = float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (unsigned short)((u >> 16) | 0x40);
  const unsigned rounding = 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)((u + rounding) >> 16);
}

GDPA_HD float fp16_bits_to_float(unsigned short h) {
  const unsigned sign = (unsigned(h) & 0x8000u) << 16;
  const unsigned exp = (h >> 10) & 0x1f;
  const unsigned man = h & 0x3ff;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));  // inf / nan
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (man << 13));
  if (man == 0) return bits_float(sign);
  // subnormal: value = man * 2^-24
  float v = float(man) * (1.0f / 16777216.0f);
  return (sign ? -v : v);
}

// Round-to-nearest-even, as cvt.rn.f16.f32 (overflow gives inf, tiny values flush through subnormals).
GDPA_HD unsigned short float_to_fp16_bits(float f) {
  const unsigned u = float_bits(f);
  const unsigned short sign = (unsigned short)((u >> 16) & 0x8000u);
  const unsigned a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (unsigned short)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {                                          // below the smallest normal 2^-14
    if (a < 0x33000000u) return sign;                             // < 2^-25 rounds to zero
    const unsigned e = a >> 23;
    const unsigned m = (a & 0x7fffffu) | 0x800000u;
    const unsigned shift = 126u - e;  // 14 + (113 - e) + ... : aligns to 2^-24 units
    const unsigned q = m >> shift;
    const unsigned rem = m & ((1u << shift) - 1u);
    const unsigned half = 1u << (shift - 1u);
    unsigned r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
    return (unsigned short)(sign | r);
  }
  const unsigned rounding = 0xfffu + ((a >> 13) & 1u);
  return (unsigned short)(sign | ((a - 0x38000000u + rounding) >> 13));
}

GDPA_HD float io_to_float(int dtype, unsigned short h) {
  return dtype == kFP16 ? fp16_bits_to_float(h) : bf16_bits_to_float(h);
}
GDPA_HD unsigned short float_to_io(int dtype, float f) {
  return dtype == kFP16 ? float_to_fp16_bits(f) : float_to_bf16_bits(f);
}
// Round a float through the io dtype and back (what the tensor cores see of P and dS).
GDPA_HD float round_io(int dtype, float f) { return io_to_float(dtype, float_to_io(dtype, f)); }

}  // namespace gdpa
