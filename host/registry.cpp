#include "registry.h"

#include <cstdlib>
#include <stdexcept>

#include "../kernels/sm90/act_mix.h"
#include "../kernels/sm90/bwd_config.h"
#include "../kernels/sm90/fwd_config.h"
#include "baseline.h"
#include "sm90.h"
#include "unfused_cublas.h"

namespace gdpa {

namespace {

struct Ablation {
  const char* name;
  int fwd_drop;  // forward switches removed from its defaults (its problem rules still apply)
  SchedulePolicy policy;
  long long bwd_drop = 0;  // backward switches removed from its defaults (its problem rules still apply)
};

// Each row switches exactly one optimization off (issue: ablations isolate each one).
const Ablation kAblations[] = {
    {"sm90-no-pingpong", sm90::kFwdPingpong, SchedulePolicy::kZigzag, sm90::kBwdPingpong},
    {"sm90-no-outer-pipeline", sm90::kFwdOuterPipeline, SchedulePolicy::kZigzag},
    {"sm90-no-intra-overlap", sm90::kFwdIntraOverlap, SchedulePolicy::kZigzag},
    {"sm90-no-kv-reuse", sm90::kFwdKvReuse, SchedulePolicy::kZigzag},
    {"sm90-no-half-fold", sm90::kFwdHalfFold, SchedulePolicy::kZigzag, sm90::kBwdHalfFold},
    {"sm90-no-skip-empty-half", sm90::kFwdSkipEmptyHalf, SchedulePolicy::kZigzag, sm90::kBwdSkipEmptyHalf},
    {"sm90-no-whole-batch-branch", sm90::kFwdWholeBatchBranch, SchedulePolicy::kZigzag},
    {"sm90-no-stmatrix-o", sm90::kFwdStmatrixO, SchedulePolicy::kZigzag},
    {"sm90-no-narrow-last-block", sm90::kFwdNarrowLastBlock, SchedulePolicy::kZigzag},
    {"sm90-no-record-lanes", sm90::kFwdRecordLanes, SchedulePolicy::kZigzag},
    {"sm90-no-bwd-record-lanes", 0, SchedulePolicy::kZigzag, sm90::kBwdRecordLanes},
    {"sm90-no-tile-records", 0, SchedulePolicy::kZigzag, sm90::kBwdTileRecords},
    {"sm90-no-dq-fence-at-writer", 0, SchedulePolicy::kZigzag, sm90::kBwdDqFenceAtWriter},
    {"sm90-no-ds-fence-at-reader", 0, SchedulePolicy::kZigzag, sm90::kBwdDsFenceAtReader},
    {"sm90-no-dq-finish", 0, SchedulePolicy::kZigzag, sm90::kBwdDqFinish},
    {"sm90-no-dq-pair", 0, SchedulePolicy::kZigzag, sm90::kBwdPair},
    {"sm90-no-pair-two-stage", 0, SchedulePolicy::kZigzag, sm90::kBwdPairTwoStage},
    {"sm90-no-pair-dv-in-ds", 0, SchedulePolicy::kZigzag, sm90::kBwdPairDvInDs},
    {"sm90-no-pair-late-store-wait", 0, SchedulePolicy::kZigzag, sm90::kBwdPairLateStoreWait},
    {"sm90-no-pair-rank1-dv-in-ds", 0, SchedulePolicy::kZigzag, sm90::kBwdPairRank1DvInDs},
    {"sm90-no-pair-rank0-late-store-wait", 0, SchedulePolicy::kZigzag, sm90::kBwdPairRank0LateStoreWait},
    {"sm90-no-first-step-init-acc", 0, SchedulePolicy::kZigzag, sm90::kBwdFirstStepInitAcc},
    {"sm90-no-dq-tma-store", 0, SchedulePolicy::kZigzag, sm90::kBwdDqTmaStore},
    {"sm90-no-dq-first", 0, SchedulePolicy::kZigzag, sm90::kBwdDqFirst},
    {"sm90-no-dq-two-stage", 0, SchedulePolicy::kZigzag, sm90::kBwdDqTwoStage},
    {"sm90-no-early-act", 0, SchedulePolicy::kZigzag, sm90::kBwdEarlyAct},
    {"sm90-no-dk-in-ds", 0, SchedulePolicy::kZigzag, sm90::kBwdDkInDs},
    {"sm90-no-dv-in-v", 0, SchedulePolicy::kZigzag, sm90::kBwdDvInV},
    {"sm90-no-stmatrix-grads", 0, SchedulePolicy::kZigzag, sm90::kBwdStmatrix},
    {"sm90-no-stmatrix-ds", 0, SchedulePolicy::kZigzag, sm90::kBwdStmatrixDs},
    {"sm90-no-dq-follow", 0, SchedulePolicy::kZigzag, sm90::kBwdDqFollow},
    {"sm90-grid-order", 0, SchedulePolicy::kGridOrder},
    {"sm90-longest-first", 0, SchedulePolicy::kLongestFirst},
};

// `name` is `prefix` followed by 1..max_digits decimal digits (at most 18: no overflow) whose value
// is at most `max_value`: that value in *n.
bool numbered_variant(const std::string& name, const std::string& prefix, size_t max_digits, long long* n,
                      long long max_value) {
  if (name.compare(0, prefix.size(), prefix) != 0 || name.size() <= prefix.size() ||
      name.size() > prefix.size() + max_digits ||
      name.find_first_not_of("0123456789", prefix.size()) != std::string::npos)
    return false;
  const long long v = std::stoll(name.substr(prefix.size()));
  if (v > max_value) return false;
  *n = v;
  return true;
}
bool numbered_variant(const std::string& name, const std::string& prefix, size_t max_digits, int* n) {
  long long v = 0;
  if (!numbered_variant(name, prefix, max_digits, &v, 2147483647LL)) return false;
  *n = int(v);
  return true;
}

}  // namespace

std::unique_ptr<AttentionKernel> make_kernel(const std::string& name) {
  if (name == "baseline") return make_baseline_kernel();
  if (name == "unfused-cublas") return make_unfused_cublas_kernel();
  if (name == "sm90") return make_sm90_kernel();
  if (name == "sm90-softmax") {  // softmax attention in the same kernel: the freed-resources ablation
    Sm90Options o;
    o.softmax = true;
    o.label = "softmax";
    return make_sm90_kernel(o);
  }
  if (name == "sm90-dq-finish-always") {  // backward: kBwdDqFinish also where the default leaves it off
    Sm90Options o;
    o.bwd_flags = sm90::kBwdDefaultFlags;  // explicit flags bypass the default's mean-Lk rule
    o.label = "dq-finish-always";
    return make_sm90_kernel(o);
  }
  if (name == "sm90-dq-follow-always") {  // backward: the accumulator path and its follower at every Lk
    Sm90Options o;
    o.bwd_flags = sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish;  // explicit: no finish, no pairs
    o.label = "dq-follow-always";
    return make_sm90_kernel(o);
  }
  if (name == "sm90-unordered-dq") {  // backward: dQ adds in whatever order they come (not bit-reproducible)
    Sm90Options o;
    o.deterministic = false;
    o.label = "unordered-dq";
    return make_sm90_kernel(o);
  }
  if (name == "sm90-unordered-no-red") {  // the same, dQ added by the writer's bulk reduce (no kBwdDqRed)
    Sm90Options o;
    o.deterministic = false;
    o.bwd_flags_drop = sm90::kBwdDqRed;
    o.label = "unordered-no-red";
    return make_sm90_kernel(o);
  }
  int n = 0;
  // sm90-fwd-halfN: the forward's schedule models a half-empty last query tile at N hundredths of a
  // whole one (host/scheduler.h half_tile_cost); 100 is the snake.
  if (numbered_variant(name, "sm90-fwd-half", 3, &n) && n >= 1 && n <= 100) {
    Sm90Options o;
    o.fwd_half_tile_cost = n / 100.0;
    o.label = name.substr(5);
    return make_sm90_kernel(o);
  }
  // sm90-follow-smsN: the backward's dQ follower on N SMs instead of the default rule's.
  if (numbered_variant(name, "sm90-follow-sms", 2, &n) && n >= 1) {
    Sm90Options o;
    o.dq_follow_sms = n;
    o.label = name.substr(5);
    return make_sm90_kernel(o);
  }
  // sm90-act-mixN: fast_gelu with N sixteenths of its elements on the FMA pipe (act_mix.h).
  if (numbered_variant(name, "sm90-act-mix", 2, &n) && n <= sm90::kActMixMax) {
    Sm90Options o;
    o.act_mix = n;
    o.label = name.substr(5);
    return make_sm90_kernel(o);
  }
  // Profiling (kernels/sm90/trace.cuh): the trace files are $GDPA_FWD_TRACE and $GDPA_BWD_TRACE.
  auto trace_path = [](const char* var, const char* fallback) {
    const char* path = std::getenv(var);
    return std::string(path != nullptr && *path != '\0' ? path : fallback);
  };
  auto bwd_trace_path = [&] { return trace_path("GDPA_BWD_TRACE", kDefaultBwdTracePath); };
  auto fwd_trace_path = [&] { return trace_path("GDPA_FWD_TRACE", kDefaultFwdTracePath); };
  if (name == "sm90-bwd-trace") {  // the default kernel, traced
    Sm90Options o;
    o.bwd_trace = bwd_trace_path();
    o.label = "bwd-trace";
    return make_sm90_kernel(o);
  }
  if (name == "sm90-three-wg") {  // experimental: three consumer warpgroups, steps in series
    Sm90Options o;
    o.fwd_flags = sm90::kFwdThreeConsumers | sm90::kFwdOuterPipeline | sm90::kFwdKvReuse | sm90::kFwdHalfFold;
    o.label = "three-wg";
    return make_sm90_kernel(o);
  }
  // Experimental: last query tiles of at most 64 (96) rows as query-column tiles (fwd_tail.cu).
  if (name == "sm90-fwd-tails" || name == "sm90-fwd-tails96") {
    Sm90Options o;
    o.fwd_tail_rows = name == "sm90-fwd-tails" ? 64 : 96;
    o.label = name.substr(5);
    return make_sm90_kernel(o);
  }
  // Experimental: a sequence's last query rows as query columns inside its whole tiles' CTAs.
  if (name == "sm90-fwd-sibling-tails") {
    Sm90Options o;
    o.fwd_sibling_tails = true;
    o.label = name.substr(5);
    return make_sm90_kernel(o);
  }
  // sm90-fwd-tails-sideN: the query-column tiles of at most 64 rows beside the main forward, on N
  // SMs of their own.
  if (numbered_variant(name, "sm90-fwd-tails-side", 2, &n) && n >= 1) {
    Sm90Options o;
    o.fwd_tail_rows = 64;
    o.fwd_tail_sms = n;
    o.label = name.substr(5);
    return make_sm90_kernel(o);
  }
  if (name == "sm90-fwd-trace") {
    Sm90Options o;
    o.fwd_trace = fwd_trace_path();
    o.label = "fwd-trace";
    return make_sm90_kernel(o);
  }
  // sm90-fwd-flagsN: the forward with explicit flags N (kernels/sm90/fwd_config.h FwdFlags).
  if (numbered_variant(name, "sm90-fwd-flags", 9, &n) && (n & ~sm90::kFwdAllFlags) == 0) {
    Sm90Options o;
    o.fwd_flags = n;
    if (n & sm90::kFwdTrace) o.fwd_trace = fwd_trace_path();
    o.label = name.substr(5);
    return make_sm90_kernel(o);
  }
  // sm90-bwd-flagsN: the backward with explicit flags N (kernels/sm90/bwd_config.h BwdFlags), used as
  // given instead of the defaults and the problem rules: for experiments outside the rules' range.
  long long bits = 0;  // 64-bit flags (bwd_config.h)
  if (numbered_variant(name, "sm90-bwd-flags", 18, &bits, (1LL << 62) - 1) && (bits & ~sm90::kBwdAllFlags) == 0) {
    Sm90Options o;
    o.bwd_flags = bits;
    if (bits & sm90::kBwdTrace) o.bwd_trace = bwd_trace_path();  // any explicit variant can be traced
    o.label = name.substr(5);
    return make_sm90_kernel(o);
  }
  for (const Ablation& a : kAblations) {
    if (name == a.name) {
      Sm90Options o;
      o.fwd_flags_drop = a.fwd_drop;
      o.bwd_flags_drop = a.bwd_drop;
      o.policy = a.policy;
      o.label = std::string(a.name).substr(5);
      return make_sm90_kernel(o);
    }
  }
  throw std::runtime_error("unknown kernel '" + name +
                           "' (known: baseline, unfused-cublas, sm90, sm90-<ablation>, sm90-act-mix0..16, "
                           "sm90-three-wg, sm90-fwd-tails, sm90-fwd-tails96, sm90-fwd-tails-sideN, sm90-fwd-sibling-tails, sm90-follow-smsN, sm90-fwd-halfN, sm90-fwd-flagsN / sm90-bwd-flagsN with N made of the bits of "
                           "kFwdAllFlags / kBwdAllFlags, sm90-fwd-trace, sm90-bwd-trace)");
}

std::vector<std::string> all_kernel_names() { return {"sm90", "baseline", "unfused-cublas"}; }

std::vector<std::string> ablation_kernel_names() {
  std::vector<std::string> v = {"sm90-unordered-dq",     "sm90-unordered-no-red", "sm90-dq-finish-always",
                                "sm90-dq-follow-always", "sm90-softmax",          "sm90-act-mix4",
                                "sm90-three-wg",         "sm90-fwd-tails",        "sm90-fwd-sibling-tails"};
  for (const Ablation& a : kAblations) v.push_back(a.name);
  return v;
}

std::string best_kernel_name(int arch) { return arch == 90 ? "sm90" : "baseline"; }

}  // namespace gdpa
