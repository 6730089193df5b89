// convert.cuh — io-dtype bits to fp32 on the baseline kernels' staging path, host and device.
//
// dtype.cuh's fp16_bits_to_float is written for clarity (branches per class of value); staging a
// tile converts 64 x D elements per operand, so fp16 gets a five-operation path here. It must be
// bit-identical to dtype.cuh for all 65536 inputs (verify/tests/test_baseline_compile.cpp).
#pragma once
#include "../common/dtype.cuh"
#include "../common/portability.h"

namespace gdpa {
namespace baseline {

// fp16 -> fp32: the fp16 exponent and mantissa bits, shifted into an fp32 bit pattern, read as
// 2^(e - 127) * 1.m (or 2^-126 * 0.m for e = 0); one multiply by 2^112 rebiases them to the fp16
// value 2^(e - 15) * 1.m, exactly, for normals and subnormals alike (fp32 keeps its own denormals
// in the multiply: the kernels are built without flush-to-zero). Inf and NaN (e = 31) are mapped
// to the fp32 specials with the same payload.
GDPA_HD float fp16_bits_to_float_fast(unsigned h) {
  const unsigned magnitude = (h & 0x7fffu) << 13;
  float f = bits_float(magnitude) * 0x1p112f;
  if ((h & 0x7c00u) == 0x7c00u) f = bits_float(magnitude | 0x7f800000u);
  return bits_float(float_bits(f) | ((h & 0x8000u) << 16));
}

template <int DTYPE>
GDPA_HD float io_bits_to_float_fast(unsigned h) {
  return DTYPE == kFP16 ? fp16_bits_to_float_fast(h) : bf16_bits_to_float((unsigned short)h);
}

}  // namespace baseline
}  // namespace gdpa
