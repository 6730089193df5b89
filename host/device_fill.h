// device_fill.h — fills device tensors with N(0, stddev) values in the io dtype (kernels/common/fill.cu).
#pragma once
#include <cstdint>

#include "driver.h"
#include "problem.h"

namespace gdpa {

void device_fill_normal(CUdeviceptr dst, size_t elements, double stddev, DType dtype, uint64_t seed, CUstream s,
                        int arch);

}  // namespace gdpa
