// compare.h — how a kernel's output is judged against the CPU reference.
//
// The rule (in the manner of FBGEMM's HSTU attention tests): a kernel may not be much worse than
// an ideal kernel with the same number formats. Both the kernel output and the rounding-emulating
// reference (RefMode::kEmulateKernel) are measured against the exact fp64 reference, and the
// kernel's error must stay within `factor` times the emulation's, for the largest absolute error
// and for the relative L2 error. A fixed absolute tolerance would be either too loose for small
// outputs or too strict for long sequences (O grows with Lk because nothing normalises it), while
// this ratio scales with the problem by construction.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "../host/problem.h"

namespace gdpa {

// Forward: the kernel and the emulation round the same P to the io dtype and cast O once, so their
// errors are near-identical in size; they differ by fp32 vs fp64 accumulation (about 1e-7
// relative) and by P values that fall on the other side of a rounding boundary when S differs in
// its last fp32 bit. Two independent errors of equal size reach sqrt(2) in L2 and 2 at the max.
inline constexpr double kForwardErrorFactor = 2.0;
// Backward: more rounded stages per output (P, dP in fp32, dS rounded, then dQ/dK/dV summed over
// Lq or Lk terms in fp32 in the kernel's order, dQ through atomics), and dS = f'(S) * dP amplifies
// a flipped rounding of S; double the forward margin.
inline constexpr double kBackwardErrorFactor = 4.0;

struct ErrorStats {
  double max_abs = 0;      // max |got - ref| over elements where both are finite
  double rel_l2 = 0;       // ||got - ref||_2 / ||ref||_2 over the same elements (inf if ref is 0
                           // there and got is not)
  double ref_max_abs = 0;  // max |ref| over finite ref elements
  size_t count = 0;        // elements compared
  size_t nonfinite = 0;    // got is NaN/Inf where ref is finite (always a failure)
  size_t ref_nonfinite = 0;         // ref is NaN/Inf
  size_t mismatched_nonfinite = 0;  // ref is NaN/Inf and got is not the same (NaN vs NaN, or the
                                    // same signed Inf)
  size_t worst_index = 0;  // first nonfinite failure if any, else the element of max_abs
};

ErrorStats measure_error(const float* got, const double* ref, size_t n);
ErrorStats measure_error(const double* got, const double* ref, size_t n);

// Element rows [begin, end) of a row-major array with `row_width` elements per row.
struct RowRange {
  size_t begin;
  size_t end;
};

// Same statistics over the listed rows only (sampled checks: the reference computed with
// only_batches). worst_index is an index into the whole array.
ErrorStats measure_error_rows(const float* got, const double* ref, size_t row_width,
                              const std::vector<RowRange>& rows);
ErrorStats measure_error_rows(const double* got, const double* ref, size_t row_width,
                              const std::vector<RowRange>& rows);

// Token rows of the query sequences `batches` (for O and dQ) and of the KV sequences they read
// (for dK and dV); row width is p.q_row() and p.k_row() respectively.
std::vector<RowRange> query_rows_of(const ProblemDesc& p, const std::vector<int>& batches);
std::vector<RowRange> key_rows_of(const ProblemDesc& p, const std::vector<int>& batches);

struct Verdict {
  bool pass;
  std::string detail;  // one line with the numbers
};

// Pass when: no non-finite value where the reference is finite, every non-finite reference value
// matched, and
//   kernel.max_abs <= max(factor * emulated.max_abs, abs_floor_rel * ref_max_abs)
//   kernel.rel_l2  <= max(factor * emulated.rel_l2,  abs_floor_rel)
// The floor keeps an emulation that happens to be exact (identity on small integers, an output of
// zeros) from demanding a bit-exact kernel. Outputs that overflow the io dtype even in the
// emulation (fp16 beyond 65504) are outside this rule; such a test needs its own expectation.
Verdict judge(const ErrorStats& kernel_vs_exact, const ErrorStats& emulated_vs_exact, double factor,
              double abs_floor_rel = 1e-6);

// Unwritten outputs. GPU tests fill every output with kPoisonBits16 before a launch; 0xFFFF is a
// NaN in both bf16 and fp16 with the sign bit set, while a NaN the kernel computes is stored
// through cvt, which canonicalises it (sign bit clear); an element still holding exactly 0xFFFF
// was almost certainly never stored. Any NaN where the reference is finite fails judge() anyway.
inline constexpr unsigned short kPoisonBits16 = 0xFFFF;
void fill_poison16(unsigned short* bits, size_t n);
size_t count_poison16(const unsigned short* bits, size_t n);
// After conversion to float the poison is only a NaN: count NaNs where the reference is finite.
size_t count_nan_where_ref_finite(const float* got, const double* ref, size_t n);

}  // namespace gdpa
