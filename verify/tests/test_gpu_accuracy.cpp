// test_gpu_accuracy.cpp — the activations as the GPU evaluates them (MUFU approximations
// included) stay within the accuracy the docs claim (needs a GPU; `gdpa accuracy` prints the same
// numbers). Bounds are the measured H200 values (experiments/results/accuracy-*.json) with a
// margin, so a change in an activation's code or constants that costs accuracy fails here.
#include <doctest/doctest.h>

#include "../../host/accuracy.h"
#include "../../host/driver.h"
#include "../../kernels/common/activations.cuh"

using namespace gdpa;

TEST_SUITE("gpu") {
  TEST_CASE("activations on the GPU: measured error bounds") {
    Context ctx{0};
    Stream stream;
    const int arch = ctx.info().arch();
    auto at8 = [](const std::vector<ErrorBand>& bands) {
      REQUIRE(bands.size() == 3);
      CHECK(bands.back().bound == 8.0);
      return bands.back();
    };
    // gelu_poly: within 1.4e-4 of erf GELU for every x (docs/gelu_poly.md), f' within 1e-3.
    const ActivationAccuracy poly = measure_activation_accuracy(kGeluPoly, arch, stream.get());
    CHECK(at8(poly.vs_gelu).max_abs_f <= 1.5e-4);
    CHECK(at8(poly.vs_gelu).max_abs_df <= 1e-3);
    // fast_gelu: tanh.approx.f32 keeps it within about 1e-5 of tanh GELU (measured 5.4e-6 / 1.6e-5).
    const ActivationAccuracy fast = measure_activation_accuracy(kFastGelu, arch, stream.get());
    CHECK(at8(fast.own).max_abs_f <= 2e-5);
    CHECK(at8(fast.own).max_abs_df <= 5e-5);
    // Exact forms are fp32-accurate: erf GELU and SiLU within 2e-6 over [-8, 8] (measured <= 9e-7;
    // erf GELU by normal_cdf 3.7e-7 / 1.8e-7, twenty-seventh session).
    for (int act : {int(kGelu), int(kSilu)}) {
      CAPTURE(act);
      const ActivationAccuracy a = measure_activation_accuracy(act, arch, stream.get());
      CHECK(at8(a.own).max_abs_f <= 2e-6);
      CHECK(at8(a.own).max_abs_df <= 2e-6);
    }
    // gelu_taylor6 is the paper's form: fine for |x| <= 1, useless beyond (this documents why the
    // project's gelu_poly exists).
    const ActivationAccuracy taylor = measure_activation_accuracy(kGeluTaylor6, arch, stream.get());
    CHECK(taylor.vs_gelu.front().max_abs_f <= 2e-3);
    CHECK(at8(taylor.vs_gelu).max_abs_f > 1.0);
  }
}
