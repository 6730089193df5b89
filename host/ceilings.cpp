// ceilings.cpp — measured GEMM and copy ceilings (see ceilings.h).
#include "ceilings.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../kernels/common/dtype.cuh"
#include "unfused_cublas.h"

namespace gdpa {

namespace {

// Untimed runs until the GPU has been busy for this long: clocks ramp up within a few ms, and the
// first cuBLAS call also loads its kernels.
constexpr float kWarmupMs = 100.0f;
constexpr int kMaxWarmupRuns = 1000;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// n values uniform in [-1, 1) as io-dtype bits: cheap to draw, never zero in bulk, and a GEMM of
// them stays far from fp16 overflow (|C| ~ sqrt(n / 9)).
std::vector<uint16_t> random_io(size_t n, DType dtype, uint64_t seed) {
  std::vector<uint16_t> out(n);
  uint64_t state = seed;
  for (size_t i = 0; i < n; i += 2) {
    const uint64_t r = splitmix64(state);
    for (size_t e = 0; e < 2 && i + e < n; ++e) {
      const float u = float((r >> (32 * e + 8)) & 0xffffffu) * (1.0f / 16777216.0f);  // [0, 1)
      out[i + e] = float_to_io(dtype, 2.0f * u - 1.0f);
    }
  }
  return out;
}

// Warm-up, then `reps` timed runs of op(stream), each between its own event pair; returns ms.
template <class Op>
std::vector<double> time_reps(const Op& op, int reps, CUstream stream) {
  if (reps < 1) throw std::invalid_argument("ceilings: reps must be >= 1");
  Event start, stop;
  float warm = 0.0f;
  for (int i = 0; i < kMaxWarmupRuns && warm < kWarmupMs; ++i) {
    start.record(stream);
    op(stream);
    stop.record(stream);
    stop.synchronize();
    warm += stop.ms_since(start);
  }
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    start.record(stream);
    op(stream);
    stop.record(stream);
    stop.synchronize();
    ms.push_back(double(stop.ms_since(start)));
  }
  return ms;
}

// Converts per-rep times to rates (work / time) and summarises them.
CeilingStats rates_from_ms(const std::vector<double>& ms, double work_per_ms) {
  std::vector<double> rates;
  for (double t : ms) rates.push_back(t > 0 ? work_per_ms / t : 0.0);
  return summarize_rates(rates.data(), int(rates.size()));
}

}  // namespace

CeilingStats summarize_rates(const double* samples, int n) {
  if (n < 1) throw std::invalid_argument("ceilings: no samples");
  std::vector<double> v(samples, samples + n);
  std::sort(v.begin(), v.end());
  CeilingStats s;
  s.reps = n;
  s.min = v.front();
  s.max = v.back();
  s.median = n % 2 ? v[size_t(n / 2)] : 0.5 * (v[size_t(n / 2 - 1)] + v[size_t(n / 2)]);
  return s;
}

CeilingStats measure_gemm_ceiling(int n, int reps, CUstream stream, DType dtype, int device_ordinal) {
  if (n < 16) throw std::invalid_argument("ceilings: GEMM size must be >= 16, got " + std::to_string(n));
  const size_t elems = size_t(n) * size_t(n);
  DeviceBuffer a(elems * 2), b(elems * 2), c(elems * 2);
  a.upload(random_io(elems, dtype, 1));
  b.upload(random_io(elems, dtype, 2));
  CublasHandle handle(device_ordinal);

  RowMajorGemm g;
  g.m = g.n = g.k = n;
  g.a = a.ptr();
  g.b = b.ptr();
  g.c = c.ptr();
  g.lda = g.ldb = g.ldc = n;
  g.batch = 1;
  const auto op = [&](CUstream s) { gemm_row_major(handle, dtype, g, s); };
  const double flops = 2.0 * double(n) * double(n) * double(n);
  return rates_from_ms(time_reps(op, reps, stream), flops / 1e12 * 1e3);  // TFLOP per ms -> TFLOP/s
}

double measure_gemm_ceiling_tflops(int n, int reps, CUstream stream, DType dtype, int device_ordinal) {
  return measure_gemm_ceiling(n, reps, stream, dtype, device_ordinal).median;
}

CeilingStats measure_copy_bandwidth(size_t bytes, int reps, CUstream stream) {
  if (bytes == 0) throw std::invalid_argument("ceilings: copy size must be > 0");
  DeviceBuffer src(bytes), dst(bytes);
  src.fill_u8(0xA5, stream);
  const auto op = [&](CUstream s) { GDPA_CU(cu().cuMemcpyDtoDAsync(dst.ptr(), src.ptr(), bytes, s)); };
  const double moved = 2.0 * double(bytes);                                // read + written
  return rates_from_ms(time_reps(op, reps, stream), moved / 1e9 * 1e3);   // GB per ms -> GB/s
}

double measure_copy_bandwidth_gbs(size_t bytes, int reps, CUstream stream) {
  return measure_copy_bandwidth(bytes, reps, stream).median;
}

}  // namespace gdpa
