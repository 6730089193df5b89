// enums.h — the compile-time choices every kernel variant is specialised on.
//
// Plain ints (not enum class) so they can be template arguments in NVRTC name expressions
// such as "gdpa_fwd_baseline<0,128,3,0>" and cross the host/device boundary unchanged.
#pragma once

namespace gdpa {

// Section 3 of the spec. The numbering is part of the kernel ABI (template arguments, cache keys).
enum Activation : int {
  kIdentity = 0,
  kGelu = 1,          // erf GELU, x Phi(x), to about 1e-6 relative (activations.cuh normal_cdf)
  kGeluTanh = 2,      // tanh GELU with accurate tanh
  kFastGelu = 3,      // tanh GELU with tanh.approx.f32 (MUFU)
  kFastGeluBf16 = 4,  // tanh GELU evaluated in packed bf16x2 with tanh.approx.bf16x2
  kGeluTaylor6 = 5,   // the paper's ALU-only degree-6 Taylor polynomial (accurate only for |x| <= 1)
  kGeluPoly = 6,      // this project's ALU-only GELU, accurate for every x (spec 3.1)
  kRelu = 7,
  kReluSquare = 8,
  kLeakyRelu = 9,
  kSilu = 10,         // accurate sigmoid
  kFastSilu = 11,     // sigmoid with ex2.approx + rcp.approx (MUFU)
  kHardswish = 12,
  kNumActivations = 13
};

enum MaskKind : int { kMaskNone = 0, kMaskCausal = 1, kMaskWindow = 2, kNumMaskKinds = 3 };

// Input/output element type of Q, K, V, O, dO, dQ, dK, dV.
enum DType : int { kBF16 = 0, kFP16 = 1, kNumDTypes = 2 };

}  // namespace gdpa
