// test_problem.cpp — validation messages and FLOP counting of host/problem.h.
#include <doctest/doctest.h>

#include <chrono>
#include <limits>
#include <random>

#include "../../host/problem.h"
#include "../../kernels/common/masks.cuh"

using namespace gdpa;

namespace {

ProblemDesc small_problem() {
  ProblemDesc p;
  p.heads_q = 4;
  p.heads_kv = 2;
  p.head_dim = 64;
  p.cu_seqlens_q = {0, 3, 3, 10};
  p.cu_seqlens_k = {0, 5, 6, 6};
  return p;
}

double brute_force_pairs(const ProblemDesc& p) {
  double n = 0;
  for (int b = 0; b < p.batch(); ++b)
    for (int i = 0; i < p.len_q(b); ++i)
      for (int j = 0; j < p.len_k(b); ++j)
        n += mask_allowed(p.mask, i, j, p.len_q(b), p.len_k(b), p.window_left, p.window_right);
  return n;
}

std::string validate_message(const ProblemDesc& p, int64_t q_rows = -1, int64_t k_rows = -1, bool bwd = false) {
  try {
    validate(p, q_rows, k_rows, bwd);
  } catch (const ProblemError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("validate accepts a well-formed problem") {
  ProblemDesc p = small_problem();
  CHECK_NOTHROW(validate(p, 10, 6, true));
  p.mask = kMaskWindow;
  p.window_left = 2;
  CHECK_NOTHROW(validate(p));
  p.kv_index = {1, 0, 1};
  CHECK_NOTHROW(validate(p, 10, 6, false));
}

TEST_CASE("validate names each error in one line") {
  ProblemDesc p = small_problem();
  p.heads_q = 6;
  p.heads_kv = 4;
  CHECK(validate_message(p) == "heads_q (6) is not a multiple of heads_kv (4)");
  p = small_problem();
  p.heads_kv = 0;
  CHECK(validate_message(p) == "heads_kv must be positive (got 0)");
  p = small_problem();
  p.head_dim = 96;
  CHECK(validate_message(p) == "head_dim 96 is not supported (supported: 64, 128)");
  p = small_problem();
  p.dtype = DType(7);
  CHECK(validate_message(p) == "dtype 7 is not supported (supported: 0 = bf16, 1 = fp16)");
  p = small_problem();
  p.activation = Activation(13);
  CHECK(validate_message(p) == "activation 13 is out of range (0..12)");
  p = small_problem();
  p.mask = MaskKind(3);
  CHECK(validate_message(p).find("mask 3 is out of range") == 0);
  p = small_problem();
  p.mask = kMaskWindow;
  CHECK(validate_message(p).find("a window mask needs") == 0);
  p = small_problem();
  p.window_right = 4;
  CHECK(validate_message(p).find("are set but the mask is not a window") != std::string::npos);
  p = small_problem();
  p.logit_scale = std::numeric_limits<float>::infinity();
  CHECK(validate_message(p) == "logit_scale must be finite");

  p = small_problem();
  p.cu_seqlens_q = {0, 100, 1200, 1100, 1300};
  p.cu_seqlens_k = {0, 1, 2, 3, 4};
  CHECK(validate_message(p) == "cu_seqlens_q is not non-decreasing at index 3 (1200 > 1100)");
  p = small_problem();
  p.cu_seqlens_q = {2, 3, 3, 10};
  CHECK(validate_message(p) == "cu_seqlens_q must start at 0 (got 2)");
  p = small_problem();
  p.cu_seqlens_q = {0};
  CHECK(validate_message(p).find("cu_seqlens_q has 1 entries; it needs batch + 1 >= 2") == 0);
  p = small_problem();
  p.cu_seqlens_q = {0, 1000};
  p.cu_seqlens_k = {0, 5};
  CHECK(validate_message(p, 1024) == "cu_seqlens_q ends at 1000 but Q has 1024 rows");
  CHECK(validate_message(p, 1000, 6) == "cu_seqlens_k ends at 5 but K has 6 rows");
  p = small_problem();
  p.cu_seqlens_k = {0, 5, 6};
  CHECK(validate_message(p).find("cu_seqlens_k has 3 entries but cu_seqlens_q has 4") == 0);

  p = small_problem();
  p.kv_index = {0, 3, 1};
  CHECK(validate_message(p) == "kv_index[1] = 3 is out of range (3 KV sequences)");
  p.kv_index = {0, 1};
  CHECK(validate_message(p) == "kv_index has 2 entries but the batch has 3 query sequences");
  p.kv_index = {0, 1, 2};
  CHECK(validate_message(p, -1, -1, true).find("kv_index is forward-only") == 0);
  // Every message is one line.
  CHECK(validate_message(p, -1, -1, true).find('\n') == std::string::npos);
}

TEST_CASE("max lengths follow kv_index") {
  ProblemDesc p = small_problem();
  CHECK(p.max_len_q() == 7);
  CHECK(p.max_len_k() == 5);
  p.kv_index = {1, 1, 1};
  CHECK(p.max_len_k() == 1);
  CHECK(p.len_k(0) == 1);
  CHECK(p.k_begin(2) == 5);
}

TEST_CASE("some_last_tile_half_empty looks at the lengths of the side it is asked about") {
  ProblemDesc p;
  p.cu_seqlens_q = {0, 128, 320};  // lengths 128, 192: tails 0 and 64, the second tile half empty
  p.cu_seqlens_k = {0, 200, 456};  // lengths 200, 256: tails 72 and 0, no key tile is
  CHECK(some_last_tile_half_empty(p, false, 128));
  CHECK_FALSE(some_last_tile_half_empty(p, true, 128));
  p.cu_seqlens_k = {0, 200, 393};  // lengths 200, 193: tails 72 and 65, both past half: none
  CHECK_FALSE(some_last_tile_half_empty(p, true, 128));
  p.cu_seqlens_k = {0, 200, 385};  // lengths 200, 185: tail 57
  CHECK(some_last_tile_half_empty(p, true, 128));
  p.kv_index = {0, 0};  // both queries read KV sequence 0 (Lk = 200): none again
  CHECK_FALSE(some_last_tile_half_empty(p, true, 128));
}

TEST_CASE("allowed_pairs matches mask_allowed by brute force") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    ProblemDesc p;
    const int batch = 1 + int(rng() % 4);
    p.cu_seqlens_q = {0};
    p.cu_seqlens_k = {0};
    for (int b = 0; b < batch; ++b) {
      p.cu_seqlens_q.push_back(p.cu_seqlens_q.back() + int(rng() % 40));
      p.cu_seqlens_k.push_back(p.cu_seqlens_k.back() + int(rng() % 40));
    }
    p.mask = MaskKind(trial % 3);
    if (p.mask == kMaskWindow) {
      p.window_left = int(rng() % 12) - 3;  // includes unbounded (< 0) sides
      p.window_right = int(rng() % 12) - 3;
      if (p.window_left < 0 && p.window_right < 0) p.window_right = 0;
    }
    INFO("trial " << trial << " mask " << p.mask << " window " << p.window_left << "," << p.window_right);
    CHECK(allowed_pairs(p) == brute_force_pairs(p));
    CHECK(forward_flops(p) == 4.0 * p.heads_q * p.head_dim * brute_force_pairs(p));
  }
}

TEST_CASE("forward_flops by the seed's convention, fast at full size") {
  ProblemDesc p;
  p.heads_q = p.heads_kv = 4;
  p.head_dim = 128;
  const int batch = 1152, len = 2048;
  for (int b = 0; b <= batch; ++b) {
    p.cu_seqlens_q.push_back(b * len);
    p.cu_seqlens_k.push_back(b * len);
  }
  CHECK(forward_flops(p) == 4.0 * 4 * 128 * batch * double(len) * len);
  p.mask = kMaskCausal;
  const auto t0 = std::chrono::steady_clock::now();
  const double pairs = allowed_pairs(p);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(pairs == double(batch) * len * (len + 1) / 2);
  CHECK(ms < 1000.0);  // O(total rows), not O(L^2): about 2.4 M rows
}
