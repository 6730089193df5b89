// check.h — one kernel against the CPU reference on one problem: fresh random inputs, outputs
// poisoned before every launch, forward and (optionally) backward judged by the rule of
// verify/compare.h. Used by `gdpa check`, `gdpa run` and the GPU tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernel_api.h"

namespace gdpa {

struct CheckCase {
  std::string label;  // what the case varies, e.g. "act=silu", "mask=causal", "G=4"
  ProblemDesc desc;
  bool backward = false;
  uint64_t seed = 1;
};

struct CheckOutcome {
  bool pass = false;
  bool skipped = false;  // the kernel does not support the case (reason in `line`)
  std::string line;      // one line: verdict, case, errors
};

// The matrix of `gdpa check` (issue: every activation, D 64/128, bf16/fp16, the three masks,
// G = 1/2/4 and MQA, Lq = 1, Lk = 0, lengths that are not tile multiples, both scales, kv_index).
std::vector<CheckCase> check_matrix(bool backward, uint64_t seed);

// Runs one case. `sample_batches` > 0 checks only that many sequences (spread over the batch)
// against the reference: for problems too large for the CPU (gdpa run).
CheckOutcome run_check(AttentionKernel& kernel, const CheckCase& c, const DeviceInfo& dev, int sample_batches = 0,
                       const std::string& save_dir = "");

// A readable description of a problem: "bf16 D128 fast_gelu none Hq4/Hkv4 B6 Lq[1..300] Lk[0..300]".
std::string describe(const ProblemDesc& p);

// `gdpa check --filter`: the case's label or its description contains `text` ("" matches all), so
// "D64", "fp16", "causal" or "act=silu" all select what they say.
bool case_matches(const CheckCase& c, const std::string& text);

}  // namespace gdpa
