// test_compare.cpp — error statistics, the pass/fail rule, and the poison helpers.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "../../kernels/common/dtype.cuh"
#include "../compare.h"
#include "../reference.h"

using namespace gdpa;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

ErrorStats stats(double max_abs, double rel_l2, double ref_max_abs) {
  ErrorStats s;
  s.max_abs = max_abs;
  s.rel_l2 = rel_l2;
  s.ref_max_abs = ref_max_abs;
  s.count = 100;
  return s;
}

}  // namespace

TEST_CASE("compare: measure_error by hand") {
  const std::vector<float> got = {1.0f, 2.5f, 3.0f, -1.0f};
  const std::vector<double> ref = {1.0, 2.0, 4.0, -1.0};
  const ErrorStats s = measure_error(got.data(), ref.data(), got.size());
  CHECK(s.count == 4);
  CHECK(s.max_abs == 1.0);
  CHECK(s.worst_index == 2);
  CHECK(s.ref_max_abs == 4.0);
  CHECK(s.rel_l2 == doctest::Approx(std::sqrt(0.25 + 1.0) / std::sqrt(1 + 4 + 16 + 1.0)));
  CHECK(s.nonfinite == 0);
  CHECK(s.ref_nonfinite == 0);
  // The double overload gives the same numbers.
  const std::vector<double> gotd(got.begin(), got.end());
  const ErrorStats sd = measure_error(gotd.data(), ref.data(), gotd.size());
  CHECK(sd.max_abs == s.max_abs);
  CHECK(sd.rel_l2 == s.rel_l2);
  // A zero reference: any error is an infinite relative error, none is zero.
  const std::vector<double> zeros(3, 0.0);
  const std::vector<float> tiny = {0.0f, 1e-30f, 0.0f};
  CHECK(std::isinf(measure_error(tiny.data(), zeros.data(), 3).rel_l2));
  const std::vector<float> exact_zeros(3, 0.0f);
  CHECK(measure_error(exact_zeros.data(), zeros.data(), 3).rel_l2 == 0.0);
}

TEST_CASE("compare: non-finite values are classified, and the first failure is the worst") {
  const std::vector<double> ref = {1.0, kNaN, kInf, -kInf, 2.0, kNaN, 3.0};
  const std::vector<double> got = {1.5, kNaN, kInf, kInf, kNaN, 0.0, kInf};
  const ErrorStats s = measure_error(got.data(), ref.data(), got.size());
  CHECK(s.ref_nonfinite == 4);
  CHECK(s.mismatched_nonfinite == 2);  // -inf met +inf; NaN met 0
  CHECK(s.nonfinite == 2);             // NaN where 2.0, inf where 3.0
  CHECK(s.worst_index == 3);           // the first of those failures
  CHECK(s.max_abs == 0.5);             // only finite pairs enter the norms
  CHECK(s.ref_max_abs == 3.0);
}

TEST_CASE("compare: measure_error_rows looks only at the listed rows") {
  // 4 rows of width 2; rows 1 and 3 are garbage but not listed.
  const std::vector<double> ref = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> got = {1, 2.25f, 99, 99, 5.5f, 6, std::numeric_limits<float>::quiet_NaN(), 0};
  const std::vector<RowRange> rows = {{0, 1}, {2, 3}};
  const ErrorStats s = measure_error_rows(got.data(), ref.data(), 2, rows);
  CHECK(s.count == 4);
  CHECK(s.nonfinite == 0);
  CHECK(s.max_abs == 0.5);
  CHECK(s.worst_index == 4);  // index into the whole array
  CHECK(s.rel_l2 == doctest::Approx(std::sqrt(0.0625 + 0.25) / std::sqrt(1 + 4 + 25 + 36.0)));
  // With every row, row 3's NaN is found.
  CHECK(measure_error_rows(got.data(), ref.data(), 2, {{0, 4}}).nonfinite == 1);
}

TEST_CASE("compare: row ranges of sequences follow kv_index") {
  ProblemDesc p;
  p.cu_seqlens_q = {0, 3, 3, 7};
  p.cu_seqlens_k = {0, 5, 9};
  p.kv_index = {1, 0, 1};
  const std::vector<RowRange> q = query_rows_of(p, {0, 2});
  const std::vector<RowRange> k = key_rows_of(p, {0, 1});
  REQUIRE(q.size() == 2);
  CHECK((q[0].begin == 0 && q[0].end == 3 && q[1].begin == 3 && q[1].end == 7));
  REQUIRE(k.size() == 2);
  CHECK((k[0].begin == 5 && k[0].end == 9 && k[1].begin == 0 && k[1].end == 5));
}

TEST_CASE("compare: judge holds the kernel to a factor of the emulation's error") {
  const ErrorStats emu = stats(1e-3, 2e-3, 4.0);
  // 1.5x worse on both measures passes, 3x fails, on either measure alone too.
  CHECK(judge(stats(1.5e-3, 3e-3, 4.0), emu, kForwardErrorFactor).pass);
  CHECK_FALSE(judge(stats(3e-3, 6e-3, 4.0), emu, kForwardErrorFactor).pass);
  CHECK_FALSE(judge(stats(3e-3, 2e-3, 4.0), emu, kForwardErrorFactor).pass);
  CHECK_FALSE(judge(stats(1e-3, 6e-3, 4.0), emu, kForwardErrorFactor).pass);
  // The backward factor is looser: 3x passes there.
  CHECK(judge(stats(3e-3, 6e-3, 4.0), emu, kBackwardErrorFactor).pass);
  // The detail is one line with the numbers and the verdict.
  const Verdict v = judge(stats(3e-3, 6e-3, 4.0), emu, kForwardErrorFactor);
  CHECK(v.detail.rfind("FAIL", 0) == 0);
  CHECK(v.detail.find('\n') == std::string::npos);
  CHECK(v.detail.find("3.000e-03") != std::string::npos);
}

TEST_CASE("compare: judge fails any NaN/Inf where the reference is finite, however small the error") {
  const ErrorStats emu = stats(1e-3, 2e-3, 4.0);
  ErrorStats k = stats(0, 0, 4.0);
  CHECK(judge(k, emu, 2.0).pass);
  k.nonfinite = 1;
  CHECK_FALSE(judge(k, emu, 2.0).pass);
  k.nonfinite = 0;
  k.mismatched_nonfinite = 1;
  CHECK_FALSE(judge(k, emu, 2.0).pass);
  // Matched non-finite values (reference NaN, kernel NaN) are fine.
  k.mismatched_nonfinite = 0;
  k.ref_nonfinite = 3;
  CHECK(judge(k, emu, 2.0).pass);
}

TEST_CASE("compare: the floor keeps an exact emulation from demanding a bit-exact kernel") {
  const ErrorStats emu = stats(0, 0, 100.0);  // e.g. identity on small integers: no rounding
  // 1e-7 relative to the largest reference value is under the 1e-6 floor: passes.
  CHECK(judge(stats(1e-5, 1e-7, 100.0), emu, 2.0).pass);
  // 1e-5 relative is over it: fails, on max_abs and on rel_l2 separately.
  CHECK_FALSE(judge(stats(1e-3, 1e-7, 100.0), emu, 2.0).pass);
  CHECK_FALSE(judge(stats(1e-5, 1e-5, 100.0), emu, 2.0).pass);
  // A looser floor admits it.
  CHECK(judge(stats(1e-3, 1e-5, 100.0), emu, 2.0, 1e-4).pass);
  // An all-zero reference gives no floor: the kernel must be exact.
  CHECK_FALSE(judge(stats(1e-30, kInf, 0.0), stats(0, 0, 0.0), 2.0).pass);
  CHECK(judge(stats(0, 0, 0.0), stats(0, 0, 0.0), 2.0).pass);
}

TEST_CASE("compare: the rule on a real problem, with a stand-in kernel of scaled error") {
  ProblemDesc p;
  p.heads_q = 2;
  p.heads_kv = 1;
  p.head_dim = 32;
  p.activation = kGelu;
  p.mask = kMaskCausal;
  p.cu_seqlens_q = {0, 48, 80};
  p.cu_seqlens_k = {0, 64, 96};
  std::mt19937 gen(3);
  std::normal_distribution<float> qk(0.0f, 0.42f), unit(0.0f, 1.0f);
  std::vector<float> q(size_t(p.total_q() * p.q_row())), k(size_t(p.total_k() * p.k_row())),
      v(k.size());
  for (float& x : q) x = round_io(kBF16, qk(gen));
  for (float& x : k) x = round_io(kBF16, qk(gen));
  for (float& x : v) x = round_io(kBF16, unit(gen));
  std::vector<double> exact(q.size()), emu(q.size());
  reference_forward(p, q.data(), k.data(), v.data(), RefMode::kExact, exact.data());
  reference_forward(p, q.data(), k.data(), v.data(), RefMode::kEmulateKernel, emu.data());
  const ErrorStats emu_err = measure_error(emu.data(), exact.data(), exact.size());
  auto kernel_with_error = [&](double times) {
    std::vector<float> out(exact.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = float(exact[i] + times * (emu[i] - exact[i]));
    return measure_error(out.data(), exact.data(), out.size());
  };
  CHECK(judge(kernel_with_error(1.0), emu_err, kForwardErrorFactor).pass);
  CHECK(judge(kernel_with_error(1.8), emu_err, kForwardErrorFactor).pass);
  CHECK_FALSE(judge(kernel_with_error(3.0), emu_err, kForwardErrorFactor).pass);
  // One unwritten element (a NaN after conversion) fails however good the rest is.
  std::vector<float> out(exact.begin(), exact.end());
  out[17] = std::numeric_limits<float>::quiet_NaN();
  const ErrorStats one_nan = measure_error(out.data(), exact.data(), out.size());
  CHECK(one_nan.worst_index == 17);
  CHECK_FALSE(judge(one_nan, emu_err, kForwardErrorFactor).pass);
  CHECK(count_nan_where_ref_finite(out.data(), exact.data(), out.size()) == 1);
}

TEST_CASE("compare: the 16-bit poison pattern is a NaN in both io dtypes and is counted") {
  CHECK(std::isnan(bf16_bits_to_float(kPoisonBits16)));
  CHECK(std::isnan(fp16_bits_to_float(kPoisonBits16)));
  // A NaN the kernel computes does not convert to the poison pattern.
  CHECK(float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()) != kPoisonBits16);
  CHECK(float_to_fp16_bits(std::numeric_limits<float>::quiet_NaN()) != kPoisonBits16);
  std::vector<unsigned short> bits(10);
  fill_poison16(bits.data(), bits.size());
  CHECK(count_poison16(bits.data(), bits.size()) == 10);
  bits[3] = float_to_bf16_bits(1.0f);
  bits[9] = 0x7FFF;  // a stored NaN, not poison
  CHECK(count_poison16(bits.data(), bits.size()) == 8);
}
