// generator.h — seeded, platform-independent benchmark problems and input data (spec section 5).
//
// Everything here is a pure function of its arguments and seed: std::mt19937_64 is specified
// bit-exactly by the standard, while std::uniform_int_distribution / std::normal_distribution are
// not (libstdc++ and libc++ give different numbers), so this file draws its own uniforms
// (rejection sampling) and normals (Box-Muller).
#pragma once
#include <cstdint>
#include <vector>

#include "problem.h"

namespace gdpa {

// Jagged sequence lengths from a density `sparsity` s in (0, 1] (spec 5):
//   s == 1    every length is max_len;
//   s >= 0.5  uniform integers in [max(floor((2s - 1) max_len), 1), max_len];
//   s <  0.5  uniform integers in [1, max(floor(2 s max_len), 1)].
// The floors allow 1e-9 of rounding error in the double products, so that s = 0.6, L = 1000 gives
// the intended 200 rather than floor(199.99999999999997). (The max(..., 1) on the upper end only
// matters for s < 1 / (2 max_len), where the spec's range would be empty.) Throws ProblemError for
// batch < 0, max_len < 1, s outside (0, 1].
std::vector<int> jagged_lengths(int batch, int max_len, double sparsity, uint64_t seed);

// {0, l0, l0 + l1, ...}: batch + 1 cumulative offsets.
std::vector<int> offsets_from_lengths(const std::vector<int>& lengths);

// The shape of a benchmark batch.
struct BatchShape {
  int batch = 1152;
  int max_len_q = 1024;   // L of the query side
  double sparsity = 1.0;  // density of the query lengths
  int fixed_len_k = 0;    // 0: self-attention, Lk(b) = Lq(b); > 0: every Lk(b) = fixed_len_k
                          // (cross-attention with short KV, spec 5: Lk = 256)
};

// A problem with `base`'s heads, head dim, dtype, activation, mask and scales, and the offsets
// drawn for `shape`. Throws ProblemError for a bad shape.
ProblemDesc make_problem(const BatchShape& shape, uint64_t seed, ProblemDesc base = ProblemDesc{});

// Writes n normal samples N(0, stddev^2) as io-dtype bits (round-to-nearest-even) into bits
// (resized to n). Work is cut into fixed chunks with their own seeds, so the result depends on
// (n, stddev, dtype, seed) only, never on `threads` (<= 0: one per hardware thread).
void fill_normal(std::vector<uint16_t>& bits, size_t n, double stddev, DType dtype, uint64_t seed,
                 int threads = 0);

// The io-dtype bits widened to float.
std::vector<float> to_float(const std::vector<uint16_t>& bits, DType dtype);

// Standard deviation of each element of Q and K in benchmark data. The spec asks for logits of
// about N(0, 1); a logit sums D products q*k, whose variance is D * var(q) * var(k), so each of Q
// and K needs variance 1/sqrt(D), i.e. standard deviation D^(-1/4) (the spec's "N(0, 1/sqrt(D))"
// names the variance). V and dO are N(0, 1).
double qk_stddev(int head_dim);

// Benchmark inputs for p: Q, K, V (and dO when with_dout) as io-dtype bits, each with its own
// stream derived from seed.
struct HostInputs {
  std::vector<uint16_t> q, k, v, dout;
};
HostInputs make_inputs(const ProblemDesc& p, uint64_t seed, bool with_dout, int threads = 0);

}  // namespace gdpa
