// fill.cu — random benchmark inputs generated on the GPU.
//
// The benchmark tensors are gigabytes (B = 1152 sequences of up to 2048 tokens, 4 heads x 128);
// drawing them on the host would cost more than the benchmark. Each element is a pure function of
// (seed, index): a counter-based hash feeds Box-Muller, so the values do not depend on the launch
// shape. Correctness checks still use host-generated inputs (host/generator.h), which the CPU
// reference reads directly.
#include "dtype.cuh"

namespace gdpa {

__device__ __forceinline__ unsigned long long splitmix64(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// dst[i] = N(0, stddev) rounded to the io dtype, for i < n.
template <int DTYPE>
__global__ void fill_normal(unsigned short* dst, unsigned long long n, float stddev, unsigned long long seed) {
  const unsigned long long stride = 2ull * gridDim.x * blockDim.x;
  for (unsigned long long i = 2ull * (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x); i < n; i += stride) {
    const unsigned long long h = splitmix64(seed ^ splitmix64(i));
    // Two uniforms in (0, 1]: 24 bits each, never 0 so the log is finite.
    const float u1 = (float((h >> 40) & 0xFFFFFF) + 1.0f) * (1.0f / 16777216.0f);
    const float u2 = float((h >> 8) & 0xFFFFFF) * (1.0f / 16777216.0f);
    const float r = sqrtf(-2.0f * logf(u1)) * stddev;
    const float a = 6.283185307179586f * u2;
    dst[i] = float_to_io(DTYPE, r * cosf(a));
    if (i + 1 < n) dst[i + 1] = float_to_io(DTYPE, r * sinf(a));
  }
}

}  // namespace gdpa
