// The Hopper kernels on the GPU against the CPU reference (run where an sm_90 GPU is present;
// `gdpa check` runs the whole matrix, these are the cases `make test` repeats on every change).
#include <doctest/doctest.h>

#include <cstdio>

#include "../../host/check.h"
#include "../../host/driver.h"
#include "../../host/sm90.h"

using namespace gdpa;

namespace {

void run_cases(bool backward, const std::vector<std::string>& labels) {
  Context ctx(0);
  if (ctx.info().arch() != 90) {
    MESSAGE("not an sm_90 GPU: the sm90 kernels are not run here");
    return;
  }
  auto k = make_sm90_kernel();
  for (const CheckCase& c : check_matrix(backward, 20261129)) {
    bool wanted = false;
    for (const std::string& l : labels) wanted = wanted || c.label == l;
    if (!wanted) continue;
    const CheckOutcome o = run_check(*k, c, ctx.info());
    INFO(o.line);
    CHECK((o.pass || o.skipped));
  }
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("sm90 forward matches the CPU reference on jagged batches") {
    run_cases(false, {"act=fast_gelu", "act=gelu_poly", "act=silu", "D=64", "fp16", "mask=causal",
                      "mask=window(37,5)", "MQA G=4", "Lq=1 with an Lk=0", "scales", "kv_index", "cross Lk!=Lq"});
  }
  TEST_CASE("sm90 backward matches the CPU reference on jagged batches") {
    run_cases(true, {"act=fast_gelu", "act=gelu_poly", "D=64", "fp16", "mask=causal", "G=2", "Lq=1 with an Lk=0",
                     "scales"});
  }
}
