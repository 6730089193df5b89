// test_check_matrix.cpp — `gdpa check`'s case matrix covers what the README and the issues promise,
// every case is a valid problem, and --filter selects by label or by description. No GPU needed.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "../../host/check.h"
#include "../../host/problem.h"

using namespace gdpa;

TEST_CASE("check matrix: every activation, both head dims and dtypes, every mask, GQA/MQA, edge lengths") {
  for (bool backward : {false, true}) {
    CAPTURE(backward);
    const std::vector<CheckCase> cases = check_matrix(backward, 7);
    std::set<int> acts, dims, dtypes, masks, groups;
    bool lq1 = false, lk0 = false, cross = false, scales = false, kv_index = false;
    for (const CheckCase& c : cases) {
      CAPTURE(c.label);
      CHECK(c.backward == backward);
      CHECK_NOTHROW(validate(c.desc));
      acts.insert(c.desc.activation);
      dims.insert(c.desc.head_dim);
      dtypes.insert(c.desc.dtype);
      masks.insert(c.desc.mask);
      groups.insert(c.desc.heads_q / c.desc.heads_kv);
      for (int b = 0; b < c.desc.batch(); ++b) {
        lq1 = lq1 || c.desc.len_q(b) == 1;
        lk0 = lk0 || c.desc.len_k(b) == 0;
        cross = cross || c.desc.len_q(b) != c.desc.len_k(b);
      }
      scales = scales || (c.desc.logit_scale != 1.0f && c.desc.out_scale != 1.0f);
      kv_index = kv_index || !c.desc.kv_index.empty();
    }
    CHECK(int(acts.size()) == kNumActivations);
    CHECK(dims == std::set<int>{64, 128});
    CHECK(dtypes.size() == 2);
    CHECK(int(masks.size()) == kNumMaskKinds);
    CHECK(groups == std::set<int>{1, 2, 4});
    CHECK(lq1);
    CHECK(lk0);
    CHECK(cross);
    CHECK(scales);
    CHECK(kv_index == !backward);  // kv_index is forward-only (spec)
  }
}

TEST_CASE("check --filter matches the label or the description") {
  const std::vector<CheckCase> cases = check_matrix(false, 7);
  auto count = [&](const std::string& text) {
    int n = 0;
    for (const CheckCase& c : cases) n += case_matches(c, text);
    return n;
  };
  CHECK(count("") == int(cases.size()));
  CHECK(count("act=silu") == 1);                 // a label
  // "D64" is only in descriptions, "D=64" only in labels: the five D = 64 cases either way.
  CHECK(count("D64") == 5);
  CHECK(count("D=64") == 5);
  CHECK(count("fp16") == 2);                     // "fp16" and "fp16 D=64 gelu_poly", by label and description
  CHECK(count("no such case") == 0);
}
