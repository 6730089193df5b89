// act_mix.h — the mixed MUFU / FMA evaluation of fast_gelu in the Hopper kernels.
//
// fast_gelu spends one MUFU op (tanh.approx.f32) and about six FMA-pipe ops per score. An SM issues
// 16 MUFU ops per cycle against 128 FMA-pipe lanes, so MUFU is the narrower pipe, most of all at
// D = 64 where each GEMM step is half as long. The mixed mode sends a fixed fraction of each
// thread's elements to gelu_poly (FMA only, about 11 ops, within 1.4e-4 of erf GELU everywhere,
// docs/gelu_poly.md) and the rest to the MUFU form, so both pipes share the work (FA4 does the same
// with exp2 in its softmax). Both forms approximate GELU to a few 1e-4, far below the bf16 rounding
// of P; the CPU reference checks the kernel against fast_gelu's definition either way.
//
// The choice is per 8-column block of the accumulator fragment (one packed register pair of a
// thread's row), so it is fixed at compile time after unrolling: no branch, no divergence.
// The fraction travels in bits 8..12 of the kernels' FLAGS template argument as sixteenths.
// Compiles under g++, nvcc and NVRTC.
#pragma once
#include "../common/portability.h"

namespace gdpa::sm90 {

constexpr int kActMixShift = 8;
constexpr int kActMixMask = 31 << kActMixShift;
constexpr int kActMixMax = 16;  // every block on the FMA pipe

// Both kernels' flags: the forward's are an int, the backward's 64 bits wide (bwd_config.h).
GDPA_HD constexpr int act_mix_of(long long flags) { return int(flags >> kActMixShift) & 31; }
template <class Flags>
GDPA_HD constexpr Flags with_act_mix(Flags flags, int sixteenths) {
  return (flags & ~Flags(kActMixMask)) | (Flags(sixteenths) << kActMixShift);
}

// Block `block` (0-based) of a row goes to the FMA pipe when the running count floor(b * mix / 16)
// steps up at it: exactly floor(n * mix / 16) of n blocks, spread evenly over the row so the MUFU
// and FMA work interleave in the instruction stream.
GDPA_HD constexpr bool act_mix_alu_block(int block, int sixteenths) {
  return (block + 1) * sixteenths / 16 != block * sixteenths / 16;
}

// The fraction `sm90` uses when fast_gelu is asked for and no variant names one. Measured with
// experiments/ablate_act_mix.sh on the H200 (experiments/results/ablation-actmix-d*.json): every
// mix of 2-6 sixteenths was slower than none in the forward (2-8 % at D = 128, 3-8 % at D = 64,
// except cross Lk = 256 at D = 64: 5 % faster) and within noise in the backward. gelu_poly's ~11
// FMA-pipe ops per score cost more than the MUFU op they replace: the FMA pipe is not idle
// either. So the mixed mode stays a variant (sm90-act-mixN) and the default is all-MUFU.
GDPA_HD constexpr int act_mix_default(int /*head_dim*/, bool /*backward*/) { return 0; }

}  // namespace gdpa::sm90
