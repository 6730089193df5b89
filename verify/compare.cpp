// compare.cpp — error statistics and the pass/fail rule (see compare.h).
#include "compare.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace gdpa {
namespace {

// Running sums for one comparison; finish() turns them into ErrorStats.
struct Accumulator {
  ErrorStats st;
  double diff2 = 0, ref2 = 0;
  bool have_failure_index = false;
  bool seen_finite = false;

  void add(double g, double r, size_t index) {
    ++st.count;
    if (!std::isfinite(r)) {
      ++st.ref_nonfinite;
      // NaN must meet NaN; an infinity must meet the same infinity.
      const bool same = std::isnan(r) ? std::isnan(g) : g == r;
      if (!same) {
        ++st.mismatched_nonfinite;
        mark_failure(index);
      }
      return;
    }
    if (std::fabs(r) > st.ref_max_abs) st.ref_max_abs = std::fabs(r);
    if (!std::isfinite(g)) {
      ++st.nonfinite;
      mark_failure(index);
      return;
    }
    const double d = std::fabs(g - r);
    if (d > st.max_abs || !seen_finite) {
      st.max_abs = d;
      if (!have_failure_index) st.worst_index = index;
    }
    seen_finite = true;
    diff2 += d * d;
    ref2 += r * r;
  }

  void mark_failure(size_t index) {
    if (!have_failure_index) st.worst_index = index;
    have_failure_index = true;
  }

  ErrorStats finish() {
    if (ref2 > 0)
      st.rel_l2 = std::sqrt(diff2) / std::sqrt(ref2);
    else
      st.rel_l2 = diff2 > 0 ? std::numeric_limits<double>::infinity() : 0.0;
    return st;
  }
};

template <typename T>
ErrorStats measure_all(const T* got, const double* ref, size_t n) {
  Accumulator acc;
  for (size_t i = 0; i < n; ++i) acc.add(double(got[i]), ref[i], i);
  return acc.finish();
}

template <typename T>
ErrorStats measure_rows(const T* got, const double* ref, size_t width,
                        const std::vector<RowRange>& rows) {
  Accumulator acc;
  for (const RowRange& r : rows)
    for (size_t i = r.begin * width; i < r.end * width; ++i) acc.add(double(got[i]), ref[i], i);
  return acc.finish();
}

}  // namespace

ErrorStats measure_error(const float* got, const double* ref, size_t n) {
  return measure_all(got, ref, n);
}
ErrorStats measure_error(const double* got, const double* ref, size_t n) {
  return measure_all(got, ref, n);
}
ErrorStats measure_error_rows(const float* got, const double* ref, size_t row_width,
                              const std::vector<RowRange>& rows) {
  return measure_rows(got, ref, row_width, rows);
}
ErrorStats measure_error_rows(const double* got, const double* ref, size_t row_width,
                              const std::vector<RowRange>& rows) {
  return measure_rows(got, ref, row_width, rows);
}

std::vector<RowRange> query_rows_of(const ProblemDesc& p, const std::vector<int>& batches) {
  std::vector<RowRange> out;
  for (int b : batches) out.push_back({size_t(p.cu_seqlens_q[b]), size_t(p.cu_seqlens_q[b + 1])});
  return out;
}

std::vector<RowRange> key_rows_of(const ProblemDesc& p, const std::vector<int>& batches) {
  std::vector<RowRange> out;
  for (int b : batches) {
    const int s = p.kv_seq(b);
    out.push_back({size_t(p.cu_seqlens_k[s]), size_t(p.cu_seqlens_k[s + 1])});
  }
  return out;
}

Verdict judge(const ErrorStats& kernel, const ErrorStats& emulated, double factor,
              double abs_floor_rel) {
  const double ref_max = kernel.ref_max_abs > emulated.ref_max_abs ? kernel.ref_max_abs
                                                                   : emulated.ref_max_abs;
  const double abs_limit = std::fmax(factor * emulated.max_abs, abs_floor_rel * ref_max);
  const double rel_limit = std::fmax(factor * emulated.rel_l2, abs_floor_rel);
  const bool finite_ok = kernel.nonfinite == 0 && kernel.mismatched_nonfinite == 0;
  const bool abs_ok = kernel.max_abs <= abs_limit;
  const bool rel_ok = kernel.rel_l2 <= rel_limit;
  const bool pass = finite_ok && abs_ok && rel_ok;

  char line[512];
  std::snprintf(line, sizeof line,
                "%s: max_abs %.3e %s %.3e (emu %.3e x %.1f), rel_l2 %.3e %s %.3e (emu %.3e), "
                "ref_max %.3e, n %zu, nonfinite %zu, ref_nonfinite %zu, mismatched %zu, worst@%zu",
                pass ? "PASS" : "FAIL", kernel.max_abs, abs_ok ? "<=" : ">", abs_limit,
                emulated.max_abs, factor, kernel.rel_l2, rel_ok ? "<=" : ">", rel_limit,
                emulated.rel_l2, ref_max, kernel.count, kernel.nonfinite, kernel.ref_nonfinite,
                kernel.mismatched_nonfinite, kernel.worst_index);
  return {pass, line};
}

void fill_poison16(unsigned short* bits, size_t n) {
  for (size_t i = 0; i < n; ++i) bits[i] = kPoisonBits16;
}

size_t count_poison16(const unsigned short* bits, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; ++i) c += bits[i] == kPoisonBits16;
  return c;
}

size_t count_nan_where_ref_finite(const float* got, const double* ref, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; ++i) c += std::isnan(got[i]) && std::isfinite(ref[i]);
  return c;
}

}  // namespace gdpa
