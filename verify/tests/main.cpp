// main.cpp — the doctest runner of `make test`.
//
// GPU tests live in TEST_SUITE("gpu"). On a machine without a usable GPU they are filtered out
// and reported as skipped (with the reason), so CI on CPU-only machines is green and honest about
// what it did not run. The closing line "N passed, N failed, N skipped" is what CI reads.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "../../host/driver.h"

namespace {

struct Tally {
  int passed = 0, failed = 0, skipped = 0;
};
Tally g_tally;

// Counts outcomes per test case (not per assertion) for the closing line.
struct TallyListener : doctest::IReporter {
  explicit TallyListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& st) override {
    if (st.testCaseSuccess)
      ++g_tally.passed;
    else
      ++g_tally.failed;
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override { ++g_tally.skipped; }
};

}  // namespace

DOCTEST_REGISTER_LISTENER("tally", 1, TallyListener);

int main(int argc, char** argv) {
  doctest::Context context;
  std::string why;
  const bool gpu = gdpa::gpu_available(&why);
  if (!gpu) {
    context.addFilter("test-suite-exclude", "gpu");
    std::printf("GPU tests skipped: %s\n", why.c_str());
  }
  context.applyCommandLine(argc, argv);
  const int rc = context.run();
  if (context.shouldExit()) return rc;
  std::printf("%d passed, %d failed, %d skipped\n", g_tally.passed, g_tally.failed, g_tally.skipped);
  return rc;
}
