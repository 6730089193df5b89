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
