// softmax_reference.h — CPU reference of ordinary softmax attention on the same jagged layout.
//
// Not GDPA: the softmax variant of the Hopper kernel is checked against it (same masks, GQA,
// kv_index and scales semantics as reference.h, out_scale unused). Per query row:
//   O[i] = sum_j softmax_j(logit_scale * S[i, j] over allowed j) V[j];  a row with no allowed key
//   (Lk = 0, or a mask that allows nothing) is 0.
//   kExact: fp64 throughout (row max subtracted for range, which changes nothing mathematically).
//   kEmulateKernel: what a FlashAttention-style kernel rounds: S in fp32, P = exp(S - rowmax) in
//   fp32, rounded to the io dtype for the PV product, O = fp32(sum P V) * (1 / l) with l the row
//   sum of the unrounded fp32 P held in fp32, then one cast to the io dtype. The kernel's online
//   rescaling by exp(m_old - m_new) is not emulated: it moves results by fp32 ulps, far below
//   the io rounding this mode exists to reproduce.
#pragma once
#include <vector>

#include "reference.h"

namespace gdpa {

void reference_softmax_forward(const ProblemDesc& p, const float* q, const float* k,
                               const float* v, RefMode mode, double* out,
                               const std::vector<int>* only_batches = nullptr, int threads = 0);

}  // namespace gdpa
