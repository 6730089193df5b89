// ceilings.h — the two hardware ceilings every benchmark reports next to its kernels, measured in
// the same run (clocks and thermals drift between runs, so only same-run ratios are comparable):
//   - the dense GEMM ceiling: cuBLAS n x n x n in the io dtype with fp32 accumulation, TFLOP/s;
//   - the copy bandwidth: device-to-device memcpy, counting bytes read plus bytes written, GB/s.
// A set's physical limit is its FLOPs at the first or its compulsory bytes at the second.
#pragma once
#include <cstddef>

#include "driver.h"
#include "../kernels/common/enums.h"

namespace gdpa {

// Per-repetition rates of one measurement.
struct CeilingStats {
  double median = 0;
  double min = 0;
  double max = 0;
  int reps = 0;
};

// cuBLAS GEMM C = A B, all n x n in `dtype`, fp32 compute, on random (never zero: a zero operand
// draws less power and clocks higher) data. Warm-up first, then `reps` timed GEMMs, each between
// its own pair of events. Rates are 2 n^3 / time in TFLOP/s. Needs a current Context on device
// `device_ordinal` (cuBLAS is pointed at it with cudaSetDevice).
CeilingStats measure_gemm_ceiling(int n = 8192, int reps = 20, CUstream stream = nullptr,
                                  DType dtype = kBF16, int device_ordinal = 0);
double measure_gemm_ceiling_tflops(int n = 8192, int reps = 20, CUstream stream = nullptr,
                                   DType dtype = kBF16, int device_ordinal = 0);

// cuMemcpyDtoDAsync of `bytes`, timed per repetition after warm-up. Rates are 2 * bytes / time
// (each byte is read once and written once) in GB/s (1e9 bytes per second).
CeilingStats measure_copy_bandwidth(size_t bytes = size_t(1) << 30, int reps = 20,
                                    CUstream stream = nullptr);
double measure_copy_bandwidth_gbs(size_t bytes = size_t(1) << 30, int reps = 20,
                                  CUstream stream = nullptr);

// Median, min and max of `n` samples (n >= 1); the median of an even count is the mean of the
// middle two. Exposed for the unit tests.
CeilingStats summarize_rates(const double* samples, int n);

}  // namespace gdpa
