// pdl_kernels.cu — kernels for the programmatic-dependent-launch test (verify/tests/test_driver.cpp):
// does work behind a dependent grid in the stream wait for the grid it was launched behind, when the
// dependent never waits itself? The backward's dQ follower (kernels/sm90/dq_follow.cu) relies on it:
// the backward's last dK / dV stores may land after the follower's last dQ rows.
#include "ptx/common.cuh"

namespace gdpa_test {

// Allows its dependent at once, then spins for `ns` nanoseconds and marks its block done.
__global__ void slow_marker(int* done, long long ns) {
  gdpa::ptx::griddepcontrol_launch_dependents();
  const unsigned long long t0 = gdpa::ptx::global_timer_ns();
  while (gdpa::ptx::global_timer_ns() - t0 < (unsigned long long)ns) {
  }
  __threadfence();
  done[blockIdx.x] = 1;
}

// Launched behind slow_marker with programmatic stream serialization: returns at once, waiting for
// nothing.
__global__ void quick_dependent(int* started) { started[blockIdx.x] = 1; }

// An ordinary launch behind quick_dependent: copies what slow_marker left.
__global__ void copy_marks(const int* done, int* out, int n) {
  const int i = int(threadIdx.x);
  if (i < n) out[i] = done[i];
}

}  // namespace gdpa_test
