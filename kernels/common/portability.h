// portability.h — lets one header serve g++ (host tests, CPU reference), nvcc and NVRTC.
//
// NVRTC compiles our kernels at run time without the system or toolkit headers, so nothing
// included from kernels/ or ptx/ may pull in <cstdint>, <cmath> or <cuda_bf16.h>.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GDPA_HD __host__ __device__ __forceinline__
#define GDPA_DEVICE __device__ __forceinline__
#else
#define GDPA_HD inline
#define GDPA_DEVICE inline
#endif

// True while compiling device code (the MUFU/PTX forms exist only there).
#if defined(__CUDA_ARCH__)
#define GDPA_DEVICE_CODE 1
#else
#define GDPA_DEVICE_CODE 0
#endif

// A compile-time bool as a type, so a generic lambda can take it as an argument and instantiate a
// straight-line body per value (`if (x) body(BoolConstant<true>{}); else body(BoolConstant<false>{})`):
// the kernels branch between whole wgmma sequences, never inside one (a branch joining while a
// wgmma is in flight makes ptxas insert warpgroup.arrive fences). NVRTC has no <type_traits>.
template <bool B>
struct BoolConstant {
  static constexpr bool value = B;
};
