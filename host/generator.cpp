// generator.cpp — see generator.h.
#include "generator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>

#include "../kernels/common/dtype.cuh"

namespace gdpa {

namespace {

// Elements per independently seeded chunk of fill_normal: large enough that seeding is noise,
// small enough that two threads share a 1 M-element tensor evenly.
constexpr size_t kChunk = size_t(1) << 16;

// splitmix64: turns (seed, stream index) into well-spread seeds for independent engines.
uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform integer in [lo, hi] by rejection, so every value is exactly equally likely.
int64_t uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  const uint64_t span = uint64_t(hi - lo) + 1;  // >= 1
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % span;
  uint64_t x;
  do x = rng();
  while (x >= limit);
  return lo + int64_t(x % span);
}

void fill_chunk(uint16_t* out, size_t n, double stddev, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (size_t i = 0; i < n; i += 2) {
    // Box-Muller: two independent N(0, 1) from two uniforms, both cut from one 64-bit draw (the
    // engine is a third of the cost). 32 bits per uniform bound |z| by sqrt(2 ln 2^32) = 6.7,
    // far beyond what a bf16 benchmark tensor can tell apart from the true law. The radius
    // uniform lies in (0, 1], never 0, whose log would be -inf.
    const uint64_t bits = rng();
    const double u_radius = (double(bits >> 32) + 1.0) * 0x1.0p-32;
    const double u_angle = double(bits & 0xffffffffu) * 0x1.0p-32;
    const double r = std::sqrt(-2.0 * std::log(u_radius)) * stddev;
    const double t = kTwoPi * u_angle;
    out[i] = float_to_io(dtype, float(r * std::cos(t)));
    if (i + 1 < n) out[i + 1] = float_to_io(dtype, float(r * std::sin(t)));
  }
}

int resolve_threads(int threads) {
  return threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

std::vector<int> jagged_lengths(int batch, int max_len, double sparsity, uint64_t seed) {
  if (batch < 0) throw ProblemError("batch must be >= 0 (got " + std::to_string(batch) + ")");
  if (max_len < 1) throw ProblemError("max_len must be >= 1 (got " + std::to_string(max_len) + ")");
  if (!(sparsity > 0.0 && sparsity <= 1.0))
    throw ProblemError("sparsity must be in (0, 1] (got " + std::to_string(sparsity) + ")");
  std::vector<int> lengths(size_t(batch), max_len);
  if (sparsity == 1.0) return lengths;
  // The tolerance makes decimal densities give the bound the spec means: for s = 0.6 and L = 1000
  // the double product (2s - 1) L is 199.99999999999997, whose plain floor would be 199.
  auto floor_tol = [](double x) { return int64_t(std::floor(x + 1e-9)); };
  int64_t lo, hi;
  if (sparsity >= 0.5) {
    lo = std::max<int64_t>(floor_tol((2.0 * sparsity - 1.0) * max_len), 1);
    hi = max_len;
  } else {
    lo = 1;
    hi = std::max<int64_t>(floor_tol(2.0 * sparsity * max_len), 1);
  }
  std::mt19937_64 rng(seed);
  for (int& l : lengths) l = int(uniform_int(rng, lo, hi));
  return lengths;
}

std::vector<int> offsets_from_lengths(const std::vector<int>& lengths) {
  std::vector<int> cu(lengths.size() + 1, 0);
  int64_t total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0) throw ProblemError("length " + std::to_string(i) + " is negative");
    total += lengths[i];
    if (total > std::numeric_limits<int>::max())
      throw ProblemError("total length exceeds the int32 range of cu_seqlens");
    cu[i + 1] = int(total);
  }
  return cu;
}

ProblemDesc make_problem(const BatchShape& shape, uint64_t seed, ProblemDesc base) {
  if (shape.fixed_len_k < 0)
    throw ProblemError("fixed_len_k must be >= 0 (got " + std::to_string(shape.fixed_len_k) + ")");
  const std::vector<int> lq = jagged_lengths(shape.batch, shape.max_len_q, shape.sparsity, seed);
  base.cu_seqlens_q = offsets_from_lengths(lq);
  base.cu_seqlens_k = shape.fixed_len_k > 0
                          ? offsets_from_lengths(std::vector<int>(lq.size(), shape.fixed_len_k))
                          : base.cu_seqlens_q;
  base.kv_index.clear();
  return base;
}

void fill_normal(std::vector<uint16_t>& bits, size_t n, double stddev, DType dtype, uint64_t seed,
                 int threads) {
  bits.resize(n);
  const size_t chunks = (n + kChunk - 1) / kChunk;
  const size_t workers = std::min<size_t>(size_t(resolve_threads(threads)), chunks);
  // Chunk c always gets stream c of the seed, whichever thread draws it.
  auto work = [&](size_t first) {
    for (size_t c = first; c < chunks; c += workers) {
      const size_t begin = c * kChunk;
      fill_chunk(bits.data() + begin, std::min(kChunk, n - begin), stddev, dtype, mix_seed(seed, c));
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(work, t);
  if (workers > 0) work(0);
  for (std::thread& t : pool) t.join();
}

std::vector<float> to_float(const std::vector<uint16_t>& bits, DType dtype) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = io_to_float(dtype, bits[i]);
  return out;
}

double qk_stddev(int head_dim) { return std::pow(double(head_dim), -0.25); }

HostInputs make_inputs(const ProblemDesc& p, uint64_t seed, bool with_dout, int threads) {
  HostInputs in;
  const size_t nq = size_t(p.total_q()) * size_t(p.q_row());
  const size_t nk = size_t(p.total_k()) * size_t(p.k_row());
  const double s = qk_stddev(p.head_dim);
  fill_normal(in.q, nq, s, p.dtype, mix_seed(seed, 0x51), threads);
  fill_normal(in.k, nk, s, p.dtype, mix_seed(seed, 0x4b), threads);
  fill_normal(in.v, nk, 1.0, p.dtype, mix_seed(seed, 0x56), threads);
  if (with_dout) fill_normal(in.dout, nq, 1.0, p.dtype, mix_seed(seed, 0x64), threads);
  return in;
}

}  // namespace gdpa
