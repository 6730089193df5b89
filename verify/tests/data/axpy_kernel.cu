// axpy_kernel.cu — a tiny kernel for the NVRTC and driver tests (verify/tests/test_compile.cpp,
// test_driver.cpp): y = kScale * x + y, with the add in inline PTX.
//
// The two includes prove both include styles the real kernels use: one relative to this file,
// one relative to the source root (-I<root>).
#include "../../../kernels/common/portability.h"
#include "kernels/common/enums.h"

#ifdef GDPA_TEST_SYNTAX_ERROR
this line is not C++;  // compile_kernel must report it with NVRTC's log
#endif

namespace gdpa_test {

template <int kScale>
__global__ void axpy(float* y, const float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float sum;
  asm("add.f32 %0, %1, %2;" : "=f"(sum) : "f"(float(kScale) * x[i]), "f"(y[i]));
  y[i] = sum + float(gdpa::kIdentity);  // kIdentity == 0: uses the root-relative include
}

}  // namespace gdpa_test
