// test_reference.cpp — the CPU reference against hand results, independent formulas and calculus.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../../host/generator.h"
#include "../../kernels/common/activations.cuh"
#include "../../kernels/common/dtype.cuh"
#include "../compare.h"
#include "../reference.h"
#include "../softmax_reference.h"

using namespace gdpa;

namespace {

ProblemDesc make_problem(const std::vector<int>& lq, const std::vector<int>& lk, int hq, int hkv,
                         int dim, Activation act, MaskKind mask = kMaskNone) {
  ProblemDesc p;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.head_dim = dim;
  p.activation = act;
  p.mask = mask;
  p.cu_seqlens_q = offsets_from_lengths(lq);
  p.cu_seqlens_k = offsets_from_lengths(lk);
  return p;
}

struct Tensors {
  std::vector<float> q, k, v, dout;
};

// Values representable in p.dtype, drawn like the benchmark data (spec 5): Q, K ~ N(0, 1/sqrt(D))
// so logits are about N(0, 1), V and dO ~ N(0, 1).
Tensors random_tensors(const ProblemDesc& p, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> qk(0.0f, 1.0f / std::sqrt(std::sqrt(float(p.head_dim))));
  std::normal_distribution<float> unit(0.0f, 1.0f);
  Tensors t;
  auto fill = [&](std::vector<float>& x, size_t n, std::normal_distribution<float>& dist) {
    x.resize(n);
    for (float& e : x) e = round_io(p.dtype, dist(gen));
  };
  fill(t.q, size_t(p.total_q() * p.q_row()), qk);
  fill(t.k, size_t(p.total_k() * p.k_row()), qk);
  fill(t.v, size_t(p.total_k() * p.k_row()), unit);
  fill(t.dout, size_t(p.total_q() * p.q_row()), unit);
  return t;
}

// Values on the grid k / 4096 in [-1, 1]: x +- 2^-10 is exact in float, so a finite-difference
// step is exactly the step taken.
Tensors grid_tensors(const ProblemDesc& p, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> grid(-4096, 4096);
  Tensors t;
  auto fill = [&](std::vector<float>& x, size_t n) {
    x.resize(n);
    for (float& e : x) e = float(grid(gen)) / 4096.0f;
  };
  fill(t.q, size_t(p.total_q() * p.q_row()));
  fill(t.k, size_t(p.total_k() * p.k_row()));
  fill(t.v, size_t(p.total_k() * p.k_row()));
  fill(t.dout, size_t(p.total_q() * p.q_row()));
  return t;
}

std::vector<double> forward(const ProblemDesc& p, const Tensors& t, RefMode mode, int threads = 0) {
  std::vector<double> o(size_t(p.total_q() * p.q_row()), 0.0);
  reference_forward(p, t.q.data(), t.k.data(), t.v.data(), mode, o.data(), nullptr, threads);
  return o;
}

struct Grads {
  std::vector<double> dq, dk, dv;
};

Grads backward(const ProblemDesc& p, const Tensors& t, RefMode mode, int threads = 0) {
  Grads g;
  g.dq.assign(size_t(p.total_q() * p.q_row()), 0.0);
  g.dk.assign(size_t(p.total_k() * p.k_row()), 0.0);
  g.dv.assign(size_t(p.total_k() * p.k_row()), 0.0);
  reference_backward(p, t.q.data(), t.k.data(), t.v.data(), t.dout.data(), mode, g.dq.data(),
                     g.dk.data(), g.dv.data(), nullptr, threads);
  return g;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double scale = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::fmax(scale, std::fabs(b[i]));
    diff = std::fmax(diff, std::fabs(a[i] - b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// One-hot probe of a mask: Q and K rows are e_0 (every logit is 1, relu(1) = 1) and V row j is
// e_j with D = Lk, so O[i][j] is 1 exactly when (i, j) is allowed and 0 otherwise.
std::vector<std::vector<int>> mask_pattern(MaskKind mask, int lq, int lk, int left, int right) {
  ProblemDesc p = make_problem({lq}, {lk}, 1, 1, lk, kRelu, mask);
  p.window_left = left;
  p.window_right = right;
  Tensors t;
  t.q.assign(size_t(lq * lk), 0.0f);
  t.k.assign(size_t(lk * lk), 0.0f);
  t.v.assign(size_t(lk * lk), 0.0f);
  for (int i = 0; i < lq; ++i) t.q[size_t(i * lk)] = 1.0f;
  for (int j = 0; j < lk; ++j) {
    t.k[size_t(j * lk)] = 1.0f;
    t.v[size_t(j * lk + j)] = 1.0f;
  }
  const std::vector<double> o = forward(p, t, RefMode::kExact);
  std::vector<std::vector<int>> pattern(static_cast<size_t>(lq), std::vector<int>(static_cast<size_t>(lk)));
  for (int i = 0; i < lq; ++i)
    for (int j = 0; j < lk; ++j) {
      const double x = o[size_t(i * lk + j)];
      REQUIRE((x == 0.0 || x == 1.0));
      pattern[size_t(i)][size_t(j)] = int(x);
    }
  return pattern;
}

using Pattern = std::vector<std::vector<int>>;

}  // namespace

TEST_CASE("reference: one query, two keys, checked by hand") {
  // q = (1, 2); k0 = (1, 0), k1 = (0.5, -1); v0 = (1, 2), v1 = (3, -1): logits 1 and -1.5.
  ProblemDesc p = make_problem({1}, {2}, 1, 1, 2, kIdentity);
  Tensors t;
  t.q = {1, 2};
  t.k = {1, 0, 0.5f, -1};
  t.v = {1, 2, 3, -1};
  auto run = [&](Activation act, float ls, float os, RefMode mode) {
    p.activation = act;
    p.logit_scale = ls;
    p.out_scale = os;
    return forward(p, t, mode);
  };
  // identity: 1 * v0 - 1.5 * v1
  CHECK(run(kIdentity, 1, 1, RefMode::kExact) == std::vector<double>{-3.5, 3.5});
  CHECK(run(kIdentity, 1, 1, RefMode::kEmulateKernel) == std::vector<double>{-3.5, 3.5});
  // relu drops the negative logit
  CHECK(run(kRelu, 1, 1, RefMode::kExact) == std::vector<double>{1, 2});
  // relu_square with logit_scale 2 (logits 2, -3) and out_scale 0.5: P = (2, 0)
  CHECK(run(kReluSquare, 2, 0.5f, RefMode::kExact) == std::vector<double>{2, 4});
  // leaky_relu: P = (1, -0.015)
  const std::vector<double> leaky = run(kLeakyRelu, 1, 1, RefMode::kExact);
  CHECK(leaky[0] == doctest::Approx(1 - 0.045).epsilon(1e-12));
  CHECK(leaky[1] == doctest::Approx(2 + 0.015).epsilon(1e-12));
  // erf GELU from its definition
  auto gelu = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
  const std::vector<double> g = run(kGelu, 1, 1, RefMode::kExact);
  CHECK(g[0] == doctest::Approx(gelu(1) * 1 + gelu(-1.5) * 3).epsilon(1e-12));
  CHECK(g[1] == doctest::Approx(gelu(1) * 2 - gelu(-1.5) * 1).epsilon(1e-12));
}

TEST_CASE("reference: any head_dim works, D = 1 and D = 3") {
  for (int dim : {1, 3}) {
    ProblemDesc p = make_problem({3}, {4}, 1, 1, dim, kSilu);
    const Tensors t = random_tensors(p, 7u + unsigned(dim));
    const std::vector<double> o = forward(p, t, RefMode::kExact);
    auto silu = [](double x) { return x / (1 + std::exp(-x)); };
    for (int i = 0; i < 3; ++i)
      for (int d = 0; d < dim; ++d) {
        double want = 0;
        for (int j = 0; j < 4; ++j) {
          double s = 0;
          for (int e = 0; e < dim; ++e) s += double(t.q[size_t(i * dim + e)]) * t.k[size_t(j * dim + e)];
          want += silu(s) * t.v[size_t(j * dim + d)];
        }
        CHECK(o[size_t(i * dim + d)] == doctest::Approx(want).epsilon(1e-12));
      }
  }
}

TEST_CASE("reference: identity activation equals (Q K^T) V computed directly") {
  const ProblemDesc p = make_problem({5, 0, 7}, {6, 3, 9}, 2, 2, 5, kIdentity);
  const Tensors t = random_tensors(p, 11);
  const std::vector<double> o = forward(p, t, RefMode::kExact);
  // Straight from the spec's index formulas, with its own loop order (d outer, j inner).
  std::vector<double> want(o.size(), 0.0);
  const int D = 5, H = 2;
  for (int b = 0; b < p.batch(); ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < p.len_q(b); ++i)
        for (int d = 0; d < D; ++d) {
          double sum = 0;
          for (int j = 0; j < p.len_k(b); ++j) {
            const int qi = p.cu_seqlens_q[size_t(b)] + i, kj = p.cu_seqlens_k[size_t(b)] + j;
            double s = 0;
            for (int e = 0; e < D; ++e) s += double(t.q[size_t((qi * H + h) * D + e)]) * t.k[size_t((kj * H + h) * D + e)];
            sum += s * t.v[size_t((kj * H + h) * D + d)];
          }
          want[size_t(((p.cu_seqlens_q[size_t(b)] + i) * H + h) * D + d)] = sum;
        }
  CHECK(max_rel_diff(o, want) < 1e-13);
}

TEST_CASE("reference: causal mask is bottom-right aligned") {
  CHECK(mask_pattern(kMaskCausal, 3, 3, -1, -1) == Pattern{{1, 0, 0}, {1, 1, 0}, {1, 1, 1}});
  // Lq < Lk: d0 = 2, the last query row sees every key.
  CHECK(mask_pattern(kMaskCausal, 2, 4, -1, -1) == Pattern{{1, 1, 1, 0}, {1, 1, 1, 1}});
  // Lq > Lk: d0 = -2, the first two query rows see nothing and give zero rows.
  CHECK(mask_pattern(kMaskCausal, 4, 2, -1, -1) == Pattern{{0, 0}, {0, 0}, {1, 0}, {1, 1}});
  CHECK(mask_pattern(kMaskNone, 2, 3, -1, -1) == Pattern{{1, 1, 1}, {1, 1, 1}});
}

TEST_CASE("reference: window mask, both sides bounded and one side unbounded") {
  // window(1, 0): i - 1 <= j <= i
  CHECK(mask_pattern(kMaskWindow, 4, 4, 1, 0) ==
        Pattern{{1, 0, 0, 0}, {1, 1, 0, 0}, {0, 1, 1, 0}, {0, 0, 1, 1}});
  // window(0, 1) with Lq < Lk: d0 = 3, i + 3 <= j <= i + 4 (clipped at Lk)
  CHECK(mask_pattern(kMaskWindow, 2, 5, 0, 1) == Pattern{{0, 0, 0, 1, 1}, {0, 0, 0, 0, 1}});
  // window(1, 1) with Lq < Lk: d0 = 2, i + 1 <= j <= i + 3
  CHECK(mask_pattern(kMaskWindow, 2, 4, 1, 1) == Pattern{{0, 1, 1, 1}, {0, 0, 1, 1}});
  // left unbounded: j <= i + 1
  CHECK(mask_pattern(kMaskWindow, 3, 3, -1, 1) == Pattern{{1, 1, 0}, {1, 1, 1}, {1, 1, 1}});
  // right unbounded: j >= i - 1
  CHECK(mask_pattern(kMaskWindow, 3, 3, 1, -1) == Pattern{{1, 1, 1}, {1, 1, 1}, {0, 1, 1}});
  // both unbounded is no mask
  CHECK(mask_pattern(kMaskWindow, 2, 3, -1, -1) == Pattern{{1, 1, 1}, {1, 1, 1}});
}

TEST_CASE("reference: GQA and MQA equal MHA with K/V heads repeated; dK, dV sum over the group") {
  for (int hkv : {2, 1}) {
    const int hq = 4, G = hq / hkv, D = 3;
    ProblemDesc gqa = make_problem({4, 6}, {5, 6}, hq, hkv, D, kGelu, kMaskCausal);
    const Tensors t = random_tensors(gqa, 21);
    ProblemDesc mha = gqa;
    mha.heads_kv = hq;
    Tensors tm = t;  // K and V with every KV head repeated G times
    tm.k.clear();
    tm.v.clear();
    for (int r = 0; r < gqa.total_k(); ++r)
      for (int h = 0; h < hq; ++h)
        for (int d = 0; d < D; ++d) {
          tm.k.push_back(t.k[size_t((r * hkv + h / G) * D + d)]);
          tm.v.push_back(t.v[size_t((r * hkv + h / G) * D + d)]);
        }
    // Forward and dQ do the same arithmetic either way: equal to the bit.
    CHECK(same_bits(forward(gqa, t, RefMode::kExact), forward(mha, tm, RefMode::kExact)));
    const Grads gg = backward(gqa, t, RefMode::kExact);
    const Grads gm = backward(mha, tm, RefMode::kExact);
    CHECK(same_bits(gg.dq, gm.dq));
    std::vector<double> dk_sum(gg.dk.size(), 0.0), dv_sum(gg.dv.size(), 0.0);
    for (int r = 0; r < gqa.total_k(); ++r)
      for (int h = 0; h < hq; ++h)
        for (int d = 0; d < D; ++d) {
          dk_sum[size_t((r * hkv + h / G) * D + d)] += gm.dk[size_t((r * hq + h) * D + d)];
          dv_sum[size_t((r * hkv + h / G) * D + d)] += gm.dv[size_t((r * hq + h) * D + d)];
        }
    CHECK(max_rel_diff(gg.dk, dk_sum) < 1e-13);
    CHECK(max_rel_diff(gg.dv, dv_sum) < 1e-13);
  }
}

TEST_CASE("reference: kv_index makes query sequences read shared KV sequences") {
  ProblemDesc shared = make_problem({3, 4, 2}, {5, 2}, 2, 1, 4, kGeluTanh, kMaskCausal);
  shared.kv_index = {1, 0, 1};
  const Tensors t = random_tensors(shared, 31);
  // The same problem with each query sequence owning a private copy of its KV sequence.
  ProblemDesc copied = make_problem({3, 4, 2}, {2, 5, 2}, 2, 1, 4, kGeluTanh, kMaskCausal);
  Tensors tc = t;
  tc.k.clear();
  tc.v.clear();
  for (int b = 0; b < 3; ++b) {
    const int s = shared.kv_index[size_t(b)];
    const size_t from = size_t(shared.cu_seqlens_k[size_t(s)] * shared.k_row());
    const size_t to = size_t(shared.cu_seqlens_k[size_t(s) + 1] * shared.k_row());
    tc.k.insert(tc.k.end(), t.k.begin() + long(from), t.k.begin() + long(to));
    tc.v.insert(tc.v.end(), t.v.begin() + long(from), t.v.begin() + long(to));
  }
  for (RefMode mode : {RefMode::kExact, RefMode::kEmulateKernel})
    CHECK(same_bits(forward(shared, t, mode), forward(copied, tc, mode)));
  // kv_index is forward-only (spec 4): the backward refuses it instead of racing on shared dK.
  CHECK_THROWS_AS(backward(shared, t, RefMode::kExact), std::invalid_argument);
}

TEST_CASE("reference: Lk = 0 gives zero rows, Lq = 0 gives nothing, dK/dV of unread keys are 0") {
  const double sentinel = -12345.0;
  ProblemDesc p = make_problem({2, 0, 3}, {0, 4, 3}, 2, 2, 3, kSilu);
  const Tensors t = random_tensors(p, 41);
  std::vector<double> o(size_t(p.total_q() * p.q_row()), sentinel);
  reference_forward(p, t.q.data(), t.k.data(), t.v.data(), RefMode::kExact, o.data());
  for (size_t e = 0; e < size_t(2 * p.q_row()); ++e) CHECK(o[e] == 0.0);   // sequence 0: Lk = 0
  for (size_t e = size_t(2 * p.q_row()); e < o.size(); ++e) CHECK(o[e] != 0.0);  // sequence 2
  CHECK(o.size() == size_t(5 * p.q_row()));  // sequence 1 has no rows to write

  Grads g;
  g.dq.assign(size_t(p.total_q() * p.q_row()), sentinel);
  g.dk.assign(size_t(p.total_k() * p.k_row()), sentinel);
  g.dv.assign(size_t(p.total_k() * p.k_row()), sentinel);
  for (RefMode mode : {RefMode::kExact, RefMode::kEmulateKernel}) {
    reference_backward(p, t.q.data(), t.k.data(), t.v.data(), t.dout.data(), mode, g.dq.data(),
                       g.dk.data(), g.dv.data());
    for (size_t e = 0; e < size_t(2 * p.q_row()); ++e) CHECK(g.dq[e] == 0.0);
    // sequence 1's four keys are read by no query row
    for (size_t e = 0; e < size_t(4 * p.k_row()); ++e) {
      CHECK(g.dk[e] == 0.0);
      CHECK(g.dv[e] == 0.0);
    }
    for (size_t e = size_t(4 * p.k_row()); e < g.dk.size(); ++e) CHECK(g.dv[e] != 0.0);
  }
}

TEST_CASE("reference: logit_scale applies before the activation and out_scale after it") {
  ProblemDesc p = make_problem({4, 3}, {5, 3}, 2, 1, 4, kGelu, kMaskCausal);
  const Tensors t = grid_tensors(p, 51);
  ProblemDesc scaled = p;
  scaled.logit_scale = 0.5f;
  scaled.out_scale = 3.0f;
  // Reference problem: the logit scale folded into Q (a power of two, so exact), out_scale 1.
  Tensors folded = t;
  for (float& x : folded.q) x *= 0.5f;
  const std::vector<double> o = forward(scaled, t, RefMode::kExact);
  const std::vector<double> o1 = forward(p, folded, RefMode::kExact);
  std::vector<double> o1x3 = o1;
  for (double& x : o1x3) x *= 3.0;
  CHECK(max_rel_diff(o, o1x3) < 1e-14);
  // Backward: L = 3 L1(Q / 2 ...) so dQ = 3 * 0.5 * dQ1, dK = 3 * dK1, dV = 3 * dV1.
  const Grads g = backward(scaled, t, RefMode::kExact);
  const Grads g1 = backward(p, folded, RefMode::kExact);
  auto times = [](std::vector<double> x, double c) {
    for (double& e : x) e *= c;
    return x;
  };
  CHECK(max_rel_diff(g.dq, times(g1.dq, 1.5)) < 1e-14);
  CHECK(max_rel_diff(g.dk, times(g1.dk, 3.0)) < 1e-14);
  CHECK(max_rel_diff(g.dv, times(g1.dv, 3.0)) < 1e-14);
}

TEST_CASE("reference: backward equals central finite differences of sum(O * dO)") {
  // Smooth activations only: a finite difference across a kink (relu, leaky_relu) measures
  // nothing. Small problem with GQA, a causal and an unmasked sequence, and non-unit scales.
  const Activation acts[] = {kIdentity, kGelu,   kGeluTanh, kGeluTaylor6, kGeluPoly,
                             kSilu,     kReluSquare, kHardswish};
  for (Activation act : acts) {
    CAPTURE(int(act));
    ProblemDesc p = make_problem({3, 2}, {4, 2}, 2, 1, 3, act, kMaskCausal);
    p.logit_scale = 1.25f;
    p.out_scale = 0.75f;
    Tensors t = grid_tensors(p, 61u + unsigned(act));
    const Grads g = backward(p, t, RefMode::kExact, 1);
    auto loss = [&]() {
      const std::vector<double> o = forward(p, t, RefMode::kExact, 1);
      double l = 0;
      for (size_t e = 0; e < o.size(); ++e) l += o[e] * t.dout[e];
      return l;
    };
    const float h = 1.0f / 1024.0f;
    auto check_tensor = [&](std::vector<float>& x, const std::vector<double>& grad) {
      for (size_t e = 0; e < x.size(); ++e) {
        const float x0 = x[e];
        x[e] = x0 + h;
        const double up = loss();
        x[e] = x0 - h;
        const double down = loss();
        x[e] = x0;
        const double fd = (up - down) / (2.0 * double(h));
        // Truncation error of a central difference is h^2 f''' / 6, about 1e-7 here.
        CHECK(std::fabs(fd - grad[e]) <= 2e-6 * (1.0 + std::fabs(grad[e])));
      }
    };
    check_tensor(t.q, g.dq);
    check_tensor(t.k, g.dk);
    check_tensor(t.v, g.dv);
  }
}

TEST_CASE("reference: emulated mode differs from exact by the io rounding, not more") {
  for (DType dtype : {kBF16, kFP16}) {
    CAPTURE(int(dtype));
    ProblemDesc p = make_problem({40, 24}, {64, 48}, 2, 2, 16, kGelu, kMaskCausal);
    p.dtype = dtype;
    const Tensors t = random_tensors(p, 71);
    const std::vector<double> exact = forward(p, t, RefMode::kExact);
    const std::vector<double> emu = forward(p, t, RefMode::kEmulateKernel);
    // Bound from the rounding model: O is rounded once (half an ulp of |O|) and each P_j once
    // (half an ulp of |P_j V_j|), unit roundoff u = 2^-8 (bf16) or 2^-11 (fp16); fp32 S and the
    // fp32 activation add far less. Allow 2x of that model.
    const double u = dtype == kBF16 ? 1.0 / 256 : 1.0 / 2048;
    const int D = 16, H = 2;
    size_t worse = 0;
    for (int b = 0; b < p.batch(); ++b)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < p.len_q(b); ++i)
          for (int d = 0; d < D; ++d) {
            const int qi = p.cu_seqlens_q[size_t(b)] + i;
            double mag = 0;  // sum_j |P_j V_j| over the keys the causal mask allows
            for (int j = 0; j < p.len_k(b); ++j) {
              if (j > i + p.len_k(b) - p.len_q(b)) continue;
              const int kj = p.cu_seqlens_k[size_t(b)] + j;
              double s = 0;
              for (int e = 0; e < D; ++e) s += double(t.q[size_t((qi * H + h) * D + e)]) * t.k[size_t((kj * H + h) * D + e)];
              mag += std::fabs(act_f_exact(kGelu, s) * t.v[size_t((kj * H + h) * D + d)]);
            }
            const size_t idx = size_t((qi * H + h) * D + d);
            const double bound = 2 * u * (std::fabs(exact[idx]) + mag) + 1e-12;
            worse += std::fabs(emu[idx] - exact[idx]) > bound;
          }
    CHECK(worse == 0);
    // ...and the rounding does happen: outputs are io values and the error is of that size.
    for (double x : emu) CHECK(double(round_io(dtype, float(x))) == x);
    const ErrorStats st = measure_error(emu.data(), exact.data(), emu.size());
    CHECK(st.rel_l2 > 0.05 * u);
    CHECK(st.rel_l2 < 2 * u);

    const Grads ge = backward(p, t, RefMode::kExact);
    const Grads gm = backward(p, t, RefMode::kEmulateKernel);
    const ErrorStats sq = measure_error(gm.dq.data(), ge.dq.data(), ge.dq.size());
    const ErrorStats sk = measure_error(gm.dk.data(), ge.dk.data(), ge.dk.size());
    const ErrorStats sv = measure_error(gm.dv.data(), ge.dv.data(), ge.dv.size());
    for (const ErrorStats* s : {&sq, &sk, &sv}) {
      CHECK(s->rel_l2 > 0.05 * u);
      CHECK(s->rel_l2 < 4 * u);
    }
  }
}

TEST_CASE("reference: emulated mode takes exactly the kernel's rounding steps") {
  // The emulation written out again from the contract in reference.h, element by element, with
  // the same summation orders (d ascending in dots, j ascending in O and dQ, heads then rows in
  // dK and dV), so the results must agree to the bit. Dropping any one rounding breaks this.
  for (DType dtype : {kBF16, kFP16}) {
    CAPTURE(int(dtype));
    ProblemDesc p = make_problem({3, 4}, {5, 4}, 2, 1, 4, kFastGeluBf16, kMaskCausal);
    p.dtype = dtype;
    p.logit_scale = 0.7f;
    p.out_scale = 1.3f;
    const Tensors t = random_tensors(p, 75);
    const int D = 4, Hq = 2;
    const int act = p.activation;
    std::vector<double> o(size_t(p.total_q() * p.q_row())), dq(o.size());
    std::vector<double> dk(size_t(p.total_k() * p.k_row()), 0.0), dv(dk.size(), 0.0);
    auto qv = [&](const std::vector<float>& x, int row, int h, int d) {
      return double(x[size_t((row * Hq + h) * D + d)]);
    };
    auto kv = [&](const std::vector<float>& x, int row, int d) { return double(x[size_t(row * D + d)]); };
    for (int b = 0; b < p.batch(); ++b) {
      const int lq = p.len_q(b), lk = p.len_k(b), q0 = p.cu_seqlens_q[size_t(b)],
                k0 = p.cu_seqlens_k[size_t(b)];
      std::vector<double> dk_acc(size_t(lk * D), 0.0), dv_acc(size_t(lk * D), 0.0);
      for (int h = 0; h < Hq; ++h)
        for (int i = 0; i < lq; ++i) {
          std::vector<double> o_acc(size_t(D), 0.0), dq_acc(size_t(D), 0.0);
          for (int j = 0; j <= i + lk - lq; ++j) {
            double s = 0, dp = 0;
            for (int d = 0; d < D; ++d) s += qv(t.q, q0 + i, h, d) * kv(t.k, k0 + j, d);
            for (int d = 0; d < D; ++d) dp += qv(t.dout, q0 + i, h, d) * kv(t.v, k0 + j, d);
            const float sf = float(s) * p.logit_scale;
            const double pr = round_io(dtype, p.out_scale * act_f_rt(act, sf));
            const double dsr =
                round_io(dtype, (p.logit_scale * p.out_scale) * act_df_rt(act, sf) * float(dp));
            for (int d = 0; d < D; ++d) {
              o_acc[size_t(d)] += pr * kv(t.v, k0 + j, d);
              dq_acc[size_t(d)] += dsr * kv(t.k, k0 + j, d);
              dk_acc[size_t(j * D + d)] += dsr * qv(t.q, q0 + i, h, d);
              dv_acc[size_t(j * D + d)] += pr * qv(t.dout, q0 + i, h, d);
            }
          }
          for (int d = 0; d < D; ++d) {
            o[size_t(((q0 + i) * Hq + h) * D + d)] = round_io(dtype, float(o_acc[size_t(d)]));
            dq[size_t(((q0 + i) * Hq + h) * D + d)] = round_io(dtype, float(dq_acc[size_t(d)]));
          }
        }
      for (int e = 0; e < lk * D; ++e) {
        dk[size_t(k0 * D + e)] = round_io(dtype, float(dk_acc[size_t(e)]));
        dv[size_t(k0 * D + e)] = round_io(dtype, float(dv_acc[size_t(e)]));
      }
    }
    CHECK(same_bits(forward(p, t, RefMode::kEmulateKernel), o));
    const Grads g = backward(p, t, RefMode::kEmulateKernel);
    CHECK(same_bits(g.dq, dq));
    CHECK(same_bits(g.dk, dk));
    CHECK(same_bits(g.dv, dv));
  }
}

TEST_CASE("reference: only_batches writes exactly the rows of those sequences") {
  ProblemDesc p = make_problem({3, 5, 2, 4}, {4, 5, 3, 6}, 2, 1, 3, kFastGelu, kMaskCausal);
  const Tensors t = random_tensors(p, 81);
  const std::vector<int> only = {2, 0, 2};  // unsorted with a repeat on purpose
  const std::vector<int> chosen = {0, 2};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto in_rows = [](const std::vector<RowRange>& rows, size_t row) {
    for (const RowRange& r : rows)
      if (row >= r.begin && row < r.end) return true;
    return false;
  };
  const std::vector<RowRange> qrows = query_rows_of(p, chosen), krows = key_rows_of(p, chosen);

  const std::vector<double> full = forward(p, t, RefMode::kEmulateKernel);
  std::vector<double> part(full.size(), nan);
  reference_forward(p, t.q.data(), t.k.data(), t.v.data(), RefMode::kEmulateKernel, part.data(),
                    &only);
  for (size_t e = 0; e < full.size(); ++e) {
    if (in_rows(qrows, e / size_t(p.q_row())))
      CHECK(part[e] == full[e]);
    else
      CHECK(std::isnan(part[e]));
  }

  const Grads gf = backward(p, t, RefMode::kEmulateKernel);
  Grads gp;
  gp.dq.assign(gf.dq.size(), nan);
  gp.dk.assign(gf.dk.size(), nan);
  gp.dv.assign(gf.dv.size(), nan);
  reference_backward(p, t.q.data(), t.k.data(), t.v.data(), t.dout.data(), RefMode::kEmulateKernel,
                     gp.dq.data(), gp.dk.data(), gp.dv.data(), &only);
  for (size_t e = 0; e < gf.dq.size(); ++e) {
    if (in_rows(qrows, e / size_t(p.q_row())))
      CHECK(gp.dq[e] == gf.dq[e]);
    else
      CHECK(std::isnan(gp.dq[e]));
  }
  for (size_t e = 0; e < gf.dk.size(); ++e) {
    if (in_rows(krows, e / size_t(p.k_row()))) {
      CHECK(gp.dk[e] == gf.dk[e]);
      CHECK(gp.dv[e] == gf.dv[e]);
    } else {
      CHECK(std::isnan(gp.dk[e]));
      CHECK(std::isnan(gp.dv[e]));
    }
  }
  const std::vector<int> bad = {4};
  CHECK_THROWS_AS(reference_forward(p, t.q.data(), t.k.data(), t.v.data(), RefMode::kExact,
                                    part.data(), &bad),
                  std::invalid_argument);
}

TEST_CASE("reference: the thread count does not change a single bit") {
  ProblemDesc p = make_problem({9, 17, 1, 12, 6}, {11, 17, 5, 3, 6}, 4, 2, 8, kGeluPoly, kMaskWindow);
  p.window_left = 4;
  p.window_right = 2;
  const Tensors t = random_tensors(p, 91);
  for (RefMode mode : {RefMode::kExact, RefMode::kEmulateKernel}) {
    const std::vector<double> o1 = forward(p, t, mode, 1);
    const Grads g1 = backward(p, t, mode, 1);
    for (int threads : {2, 3, 7}) {
      CHECK(same_bits(o1, forward(p, t, mode, threads)));
      const Grads gn = backward(p, t, mode, threads);
      CHECK(same_bits(g1.dq, gn.dq));
      CHECK(same_bits(g1.dk, gn.dk));
      CHECK(same_bits(g1.dv, gn.dv));
    }
  }
}

TEST_CASE("reference: a NaN input reaches the rows that read it and no row the mask hides it from") {
  ProblemDesc p = make_problem({4}, {4}, 1, 1, 2, kGelu, kMaskCausal);
  Tensors t = random_tensors(p, 101);
  t.v[2 * 2 + 1] = std::numeric_limits<float>::quiet_NaN();  // key row 2, component 1
  const std::vector<double> o = forward(p, t, RefMode::kEmulateKernel);
  // Rows 0 and 1 cannot see key 2 (causal); rows 2 and 3 can.
  CHECK(std::isfinite(o[0 * 2 + 1]));
  CHECK(std::isfinite(o[1 * 2 + 1]));
  CHECK(std::isnan(o[2 * 2 + 1]));
  CHECK(std::isnan(o[3 * 2 + 1]));
  // Component 0 never touches the NaN.
  for (int i = 0; i < 4; ++i) CHECK(std::isfinite(o[size_t(i * 2)]));
}

TEST_CASE("reference: kFastGeluBf16 pairs act lane by lane, so the elementwise form is exact") {
  // reference.cpp evaluates that activation elementwise with act_f_rt although the kernels
  // compute (S[i, j], S[i, j + 1]) in one bf16x2 instruction; this holds that equivalence.
  std::mt19937 gen(5);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (int n = 0; n < 2000; ++n) {
    const float a = dist(gen), b = dist(gen);
    float ya, yb;
    act_f2<kFastGeluBf16>(a, b, &ya, &yb);
    CHECK(ya == act_f_rt(kFastGeluBf16, a));
    CHECK(yb == act_f_rt(kFastGeluBf16, b));
  }
}

TEST_CASE("softmax reference: by hand, and masked-out rows give zeros") {
  // Same data as the GDPA hand test: logits 1 and -1.5, scaled by 2 -> 2 and -3.
  ProblemDesc p = make_problem({1}, {2}, 1, 1, 2, kIdentity);
  p.logit_scale = 2.0f;
  const std::vector<float> q = {1, 2}, k = {1, 0, 0.5f, -1}, v = {1, 2, 3, -1};
  std::vector<double> o(2);
  reference_softmax_forward(p, q.data(), k.data(), v.data(), RefMode::kExact, o.data());
  const double w0 = 1 / (1 + std::exp(-5.0)), w1 = 1 - w0;
  CHECK(o[0] == doctest::Approx(w0 * 1 + w1 * 3).epsilon(1e-14));
  CHECK(o[1] == doctest::Approx(w0 * 2 - w1 * 1).epsilon(1e-14));

  // Causal with Lq > Lk: the first query row sees no key and must be 0, not NaN (0/0).
  ProblemDesc c = make_problem({3}, {2}, 1, 1, 2, kIdentity, kMaskCausal);
  const std::vector<float> q3 = {1, 0, 0, 1, 1, 1};
  std::vector<double> oc(6, -1.0);
  for (RefMode mode : {RefMode::kExact, RefMode::kEmulateKernel}) {
    reference_softmax_forward(c, q3.data(), k.data(), v.data(), mode, oc.data());
    CHECK(oc[0] == 0.0);
    CHECK(oc[1] == 0.0);
    CHECK(oc[2] == v[0]);  // row 1 sees key 0 only: weight 1
    CHECK(oc[3] == v[1]);
    const double s0 = 1 * 1 + 1 * 0, s1 = 1 * 0.5 - 1 * 1;  // row 2 sees both keys
    const double a = 1 / (1 + std::exp(s1 - s0));
    CHECK(oc[4] == doctest::Approx(a * 1 + (1 - a) * 3).epsilon(mode == RefMode::kExact ? 1e-14 : 1e-2));
  }
}

TEST_CASE("softmax reference: emulated is the exact rounded, rows sum like a softmax") {
  ProblemDesc p = make_problem({30, 20}, {50, 20}, 2, 1, 16, kIdentity, kMaskWindow);
  p.window_left = 10;
  p.window_right = 3;
  p.logit_scale = 0.25f;
  Tensors t = random_tensors(p, 111);
  // With V = 1 everywhere each output is the sum of a row's weights: 1 (or 0 for empty rows).
  std::vector<float> ones(t.v.size(), 1.0f);
  std::vector<double> o(size_t(p.total_q() * p.q_row()));
  reference_softmax_forward(p, t.q.data(), t.k.data(), ones.data(), RefMode::kExact, o.data());
  for (double x : o) CHECK(x == doctest::Approx(1.0).epsilon(1e-14));

  std::vector<double> exact(o.size()), emu(o.size()), emu3(o.size());
  reference_softmax_forward(p, t.q.data(), t.k.data(), t.v.data(), RefMode::kExact, exact.data());
  reference_softmax_forward(p, t.q.data(), t.k.data(), t.v.data(), RefMode::kEmulateKernel,
                            emu.data(), nullptr, 1);
  reference_softmax_forward(p, t.q.data(), t.k.data(), t.v.data(), RefMode::kEmulateKernel,
                            emu3.data(), nullptr, 3);
  CHECK(same_bits(emu, emu3));
  for (double x : emu) CHECK(double(round_io(p.dtype, float(x))) == x);
  const ErrorStats st = measure_error(emu.data(), exact.data(), emu.size());
  CHECK(st.rel_l2 > 1e-4);
  CHECK(st.rel_l2 < 1e-2);

  // The emulation's steps written out again (softmax_reference.h), same summation orders:
  // fp32 logits, fp32 exp against the row max, P rounded for PV, fp32 row sum of unrounded P.
  const int D = 16, Hq = 2;
  std::vector<double> want(emu.size(), 0.0);
  for (int b = 0; b < p.batch(); ++b)
    for (int h = 0; h < Hq; ++h)
      for (int i = 0; i < p.len_q(b); ++i) {
        const int qi = p.cu_seqlens_q[size_t(b)] + i, d0 = p.len_k(b) - p.len_q(b);
        std::vector<float> sf;
        std::vector<int> js;
        for (int j = 0; j < p.len_k(b); ++j) {
          if (j < i + d0 - p.window_left || j > i + d0 + p.window_right) continue;
          const int kj = p.cu_seqlens_k[size_t(b)] + j;
          double s = 0;
          for (int d = 0; d < D; ++d) s += double(t.q[size_t((qi * Hq + h) * D + d)]) * t.k[size_t(kj * D + d)];
          sf.push_back(float(s) * p.logit_scale);
          js.push_back(kj);
        }
        if (js.empty()) continue;
        float m = -INFINITY;
        for (float x : sf) m = x > m ? x : m;
        double l = 0;
        std::vector<double> acc(size_t(D), 0.0);
        for (size_t n = 0; n < js.size(); ++n) {
          const float pf = std::exp(sf[n] - m);
          l += pf;
          for (int d = 0; d < D; ++d) acc[size_t(d)] += double(round_io(p.dtype, pf)) * t.v[size_t(js[n] * D + d)];
        }
        for (int d = 0; d < D; ++d)
          want[size_t((qi * Hq + h) * D + d)] = round_io(p.dtype, float(acc[size_t(d)]) * (1.0f / float(l)));
      }
  CHECK(same_bits(emu, want));
}

TEST_CASE("reference: the unfused emulation rounds S once more, and only that") {
  // One query, one key, D = 1: S = q * k is computed by hand, so the three modes are checkable.
  ProblemDesc p = make_problem({1}, {1}, 1, 1, 1, kGeluTaylor6);
  const float q = 1.015625f, k = 1.015625f, v = 1.0f, dout = 1.0f;  // bf16-exact values
  const float s = q * k;                                            // 1.0314941..., not bf16-exact
  REQUIRE(round_io(kBF16, s) != s);
  double o_kernel = 0, o_unfused = 0;
  reference_forward(p, &q, &k, &v, RefMode::kEmulateKernel, &o_kernel);
  reference_forward(p, &q, &k, &v, RefMode::kEmulateUnfused, &o_unfused);
  CHECK(o_kernel == double(round_io(kBF16, round_io(kBF16, act_f_rt(kGeluTaylor6, s)))));
  CHECK(o_unfused == double(round_io(kBF16, round_io(kBF16, act_f_rt(kGeluTaylor6, round_io(kBF16, s))))));
  CHECK(o_kernel != o_unfused);  // the steep polynomial turns the extra rounding of S into a different P
  double dq[3], dk[3], dv[3];
  reference_backward(p, &q, &k, &v, &dout, RefMode::kEmulateUnfused, dq, dk, dv);
  const float ds = round_io(kBF16, act_df_rt(kGeluTaylor6, round_io(kBF16, s)) * round_io(kBF16, dout * v));
  CHECK(dq[0] == double(round_io(kBF16, ds * k)));
}
