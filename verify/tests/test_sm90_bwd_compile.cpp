// test_sm90_bwd_compile.cpp — the Hopper backward without a GPU: its variants compile for sm_90a
// through NVRTC with no register spill and no serialized wgmma, and the host-side facts the kernel
// relies on hold (shared-memory plan, the dQ accumulator's slot and fragment layout, the mask
// intervals, the exactness of the tile ranges and the tile order that keeps the deterministic mode
// free of deadlocks). Correctness against the CPU reference is the GPU suite's job.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "../../host/compile.h"
#include "../../host/generator.h"
#include "../../host/sm90.h"
#include "../../host/scheduler.h"
#include "../../host/registry.h"
#include "../../host/sm90_bwd.h"
#include "../../kernels/common/masks.cuh"
#include "../../kernels/sm90/bwd_config.h"
#include "../../kernels/sm90/fwd_config.h"
#include "sass_tools.h"

using namespace gdpa;
using namespace gdpa::sm90;

namespace {

ProblemDesc problem(DType dtype, int head_dim, Activation act, MaskKind mask, const std::vector<int>& lq,
                    const std::vector<int>& lk, int heads_q = 4, int heads_kv = 2) {
  ProblemDesc p;
  p.dtype = dtype;
  p.head_dim = head_dim;
  p.activation = act;
  p.mask = mask;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.cu_seqlens_q = offsets_from_lengths(lq);
  p.cu_seqlens_k = offsets_from_lengths(lk);
  return p;
}

// The backward flags the host picks for `p` under `o`: the last template argument of the kernel name.
long long chosen_bwd_flags(const ProblemDesc& p, const Sm90Options& o) {
  const std::string n = sm90_backward_sources(p, o)[0].name_expression;
  return std::stoll(n.substr(n.rfind(',') + 1));
}

// Four heads, uniform 512 / 1024 / 512 sequences: the accumulator path with tile records.
ProblemDesc uniform_accumulator_problem(MaskKind mask = kMaskNone) {
  return problem(kBF16, 128, kFastGelu, mask, {512, 1024, 512}, {512, 1024, 512}, 4, 4);
}

std::string first_match(const std::string& log, const char* pattern) {
  std::smatch m;
  return std::regex_search(log, m, std::regex(pattern)) ? m.str(0) : std::string();
}

// Compiles every source for sm_90a with the ptxas report and checks what the report can show
// without a GPU: no spill, and no wgmma serialization (C7510-C7519 "Potential Performance Loss").
void compile_clean(const std::vector<KernelSource>& sources) {
  for (KernelSource src : sources) {
    src.options.push_back("-Xptxas=-v");
    CAPTURE(src.name_expression);
    const CompiledKernel k = compile_kernel(src, 90);
    CHECK(!k.cubin.empty());
    CHECK(!k.lowered_name.empty());
    REQUIRE_MESSAGE(k.log.find("registers") != std::string::npos, "no ptxas report in: ", k.log);
    const std::string spill = first_match(k.log, "[1-9][0-9]* bytes spill (stores|loads)");
    CHECK_MESSAGE(spill.empty(), src.name_expression, " spills: ", spill);
    const std::string serial = first_match(k.log, "Potential Performance Loss[^\n]*");
    CHECK_MESSAGE(serial.empty(), src.name_expression, ": ", serial);
    if (src.name_expression.find("gdpa_bwd<") == std::string::npos) continue;
    // The main kernel's SASS: the instructions the design rests on are there, and no local memory.
    const std::string sass = disassemble(k.cubin);
    if (sass.empty()) {
      MESSAGE("no cuobjdump: SASS checks of ", src.name_expression, " skipped");
      continue;
    }
    CHECK(count_of(sass, "HGMMA.64x") >= 24);     // one step at D = 64: S^T 4, dP^T 4, dV 4, dK 4, dQ 8
    CHECK(count_of(sass, ".tnspA.tnspB") >= 8);   // dQ = dS K: M-major dS^T, N-major K
    CHECK(count_of(sass, "UTMALDG.4D") >= 4);     // Q, dO, K, V through the jagged maps
    const std::string& name = src.name_expression;
    const long long flags = std::stoll(name.substr(name.rfind(',') + 1));
    if (flags & kBwdPair) {                           // dQ parts cross to the partner CTA instead
      CHECK(count_of(sass, "UBLKRED") == 0);
      CHECK(count_of(sass, "UBLKCP.S.S") >= 1);       // shared::cta -> the partner's shared memory
      CHECK(count_of(sass, "UCGABAR_WAIT") >= 1);     // the cluster barrier after the inits
    } else {
      CHECK(count_of(sass, "UBLKRED") >= 1);        // the dQ bulk reduce-add
    }
    CHECK(count_of(sass, "UTMASTG.3D") >= 2);     // dK and dV leave by TMA stores (epilogue.cuh)
    if ((flags & kBwdDqFinish) && (flags & kBwdDqTmaStore))
      CHECK(count_of(sass, "UTMASTG.3D") >= 3);   // and the writer's store of finished dQ blocks
    // dV / dK (and finished dQ blocks) staged, and each step's dS^T published, by stmatrix.x4:
    // D / 16 per block, 4 per dS^T half (epilogue.cuh store_pairs).
    const int stsm = count_of(sass, "STSM.16.M88.4");
    if (flags & kBwdStmatrix) CHECK(stsm >= 2 * (name.find(",64,") != std::string::npos ? 4 : 8));
    if (flags & kBwdStmatrixDs) CHECK(stsm >= 4);
    if (!(flags & (kBwdStmatrix | kBwdStmatrixDs))) CHECK(stsm == 0);
    CHECK(count_of(sass, "USETMAXREG") == 2);     // producer dec, consumers inc
    CHECK(count_of(sass, "SYNCS.PHASECHK") >= 6);
    CHECK(count_of(sass, "LDL") == 0);
    CHECK(count_of(sass, "STL") == 0);
  }
}

// Rounds (position / grid) of each (batch, head) group's tiles must not decrease with the KV tile
// index: the deadlock-freedom condition of the deterministic mode (host/sm90_bwd.cpp).
bool rounds_follow_kv_order(const std::vector<WorkTile>& tiles, int grid) {
  for (size_t i = 0; i < tiles.size(); ++i)
    for (size_t j = 0; j < tiles.size(); ++j)
      if (tiles[i].batch == tiles[j].batch && tiles[i].head == tiles[j].head && tiles[i].block < tiles[j].block &&
          i / size_t(grid) > j / size_t(grid))
        return false;
  return true;
}

}  // namespace

TEST_CASE("sm90 backward: variant names and support") {
  ProblemDesc p = problem(kFP16, 64, kSilu, kMaskWindow, {100}, {100});
  p.logit_scale = 0.125f;
  Sm90Options opt;
  std::vector<KernelSource> src = sm90_backward_sources(p, opt);
  REQUIRE(src.size() == 2);
  CHECK(src[0].file == "kernels/sm90/gdpa_bwd.cu");
  // Default flags: kBwdDeferDq | kBwdHalfFold | kBwdDqFinish | kBwdPingpong | kBwdDqTmaStore |
  // kBwdStmatrix | kBwdStmatrixDs (3145728) | kBwdDsFenceAtReader (33554432; kBwdDqFenceAtWriter
  // only without the finish) (the kernel ignores the fold for fp16 and non-GELU;
  // kBwdDqFirst is for D = 128, kBwdDqTwoStage for the accumulator path; the ordered finish drops
  // kBwdDeferDq only without a mask), and with the ordered finish the next tile's record over the
  // lanes (kBwdRecordLanes, 268435456); the finishing kernel pairs with the zeros-only dq_convert.
  CHECK(src[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,313524317>");
  CHECK(src[1].file == "kernels/sm90/dq_convert.cu");
  CHECK(src[1].name_expression == "gdpa::sm90::gdpa_bwd_dq_convert<1,64,true>");
  opt.bwd_flags = 0;
  CHECK(sm90_backward_sources(p, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,0>");
  CHECK(sm90_backward_sources(p, opt)[1].name_expression == "gdpa::sm90::gdpa_bwd_dq_convert<1,64,false>");
  p.logit_scale = 1.0f;  // the unit-scale specialisation is added whatever the ablation flags
  CHECK(sm90_backward_sources(p, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,2>");
  opt.bwd_flags = -1;
  CHECK(sm90_backward_sources(p, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,313524319>");
  // The default leaves the in-kernel dQ finish off above a mean KV length of
  // kBwdDqFinishMaxMeanLenK; explicit flags are used as given.
  const int over = 2 * kBwdDqFinishMaxMeanLenK - 99;  // mean (100 + over) / 2 is just above the limit
  ProblemDesc long_kv = problem(kFP16, 64, kSilu, kMaskWindow, {100, over}, {100, over});
  CHECK(sm90_backward_sources(problem(kFP16, 64, kSilu, kMaskWindow, {100, over - 2}, {100, over - 2}), opt)[0]
            .name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,317718623>");  // logit_scale 1: + unit-scale
  // Without the finish the TMA store of finished blocks has nothing to do: its bit goes too; the
  // partial-sum buffer becomes the second dQ staging buffer (kBwdDqTwoStage, 16384), dK is
  // staged in the dS^T buffers (kBwdDkInDs, 65536), dS^T is published by 4-byte stores
  // (kBwdStmatrixDs, 2097152, only with the finish), and the writer fences the staged jobs
  // (kBwdDqFenceAtWriter, 16777216; explicit flags keep it with the finish, as below), and the
  // dQ blocks are converted beside the kernel by the follower (kBwdDqFollow, 67108864) instead of
  // the pass after it, and dV is staged in the warpgroup's rows of V (kBwdDvInV, 134217728, with
  // kBwdDkInDs).
  CHECK(sm90_backward_sources(long_kv, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,256983063>");
  CHECK(sm90_backward_sources(long_kv, opt)[1].file == "kernels/sm90/dq_follow.cu");
  CHECK(sm90_backward_sources(long_kv, opt)[1].name_expression == "gdpa::sm90::gdpa_bwd_dq_follow<1,64>");
  opt.bwd_flags_drop = kBwdDqFollow;  // the ablation: the pass after the kernel
  CHECK(sm90_backward_sources(long_kv, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,189874199>");
  CHECK(sm90_backward_sources(long_kv, opt)[1].name_expression == "gdpa::sm90::gdpa_bwd_dq_convert<1,64,false>");
  opt.bwd_flags_drop = 0;
  opt.bwd_flags = kBwdDefaultFlags;
  CHECK(sm90_backward_sources(long_kv, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,66060383>");
  opt.bwd_flags = -1;
  // An ablation drops one switch and keeps the problem rules (here: no finish at this mean Lk).
  opt.bwd_flags_drop = kBwdPingpong;
  CHECK(sm90_backward_sources(long_kv, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,256983047>");
  CHECK(sm90_backward_sources(p, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,313524303>");
  opt.bwd_flags_drop = kBwdDqTmaStore;  // finished blocks copied row by row by their consumers
  CHECK(sm90_backward_sources(p, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,313524255>");
  opt.bwd_flags_drop = 0;
  // The unordered mode has no last contributor to finish a block, and no semaphores for the
  // follower: both flags are dropped.
  opt.deterministic = false;
  CHECK(sm90_backward_sources(p, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,185679895>");
  CHECK(sm90_backward_sources(p, opt)[1].name_expression == "gdpa::sm90::gdpa_bwd_dq_convert<1,64,false>");
  // From a mean KV length of kBwdDqRedMinMeanLenK (here exactly that) the unordered mode adds dQ
  // from the registers (kBwdDqRed, 524288); an ablation can drop it; the deterministic mode never
  // has it.
  const int red_len = 2 * kBwdDqRedMinMeanLenK - 100;
  const ProblemDesc red_kv = problem(kFP16, 64, kSilu, kMaskWindow, {100, red_len}, {100, red_len});
  CHECK(sm90_backward_sources(red_kv, opt)[0].name_expression ==
        "gdpa::sm90::gdpa_bwd<1,64,10,2,173621271>");  // no writer fence
  CHECK(sm90_backward_sources(problem(kFP16, 64, kSilu, kMaskWindow, {100, red_len - 2}, {100, red_len - 2}), opt)[0]
            .name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,189874199>");
  opt.bwd_flags_drop = kBwdDqRed;
  CHECK(sm90_backward_sources(red_kv, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,189874199>");
  opt.bwd_flags_drop = 0;
  opt.deterministic = true;  // the ordered mode: no red adds, the follower
  CHECK(sm90_backward_sources(red_kv, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<1,64,10,2,256983063>");

  std::string why;
  CHECK(sm90_backward_supports(p, &why));
  p.head_dim = 96;
  CHECK_FALSE(sm90_backward_supports(p, &why));
  CHECK(why.find("96") != std::string::npos);
  p.head_dim = 128;
  p.kv_index = {0};
  CHECK_FALSE(sm90_backward_supports(p, &why));
  CHECK(why.find("forward-only") != std::string::npos);
}

TEST_CASE("sm90 backward: tile records on the accumulator path only where they measured faster") {
  // bwd_config.h kBwdAccRecordsMaxMeanLenK: deterministic, no KV tile with an empty half, mean Lk
  // at most 1536 (self s = 1 L = 512 / 1024); not at s = 0.5 (empty halves), not above the mean,
  // not in the unordered mode. Where dQ is finished in the kernel they stay on.
  const auto flags = chosen_bwd_flags;
  Sm90Options o;
  const ProblemDesc whole = uniform_accumulator_problem();
  CHECK((flags(whole, o) & kBwdDqFinish) == 0);
  CHECK((flags(whole, o) & kBwdTileRecords) != 0);
  // Jagged lengths whose last KV tiles hold more than 64 keys (1000 = 7 x 128 + 104): on.
  const ProblemDesc jagged = problem(kBF16, 128, kFastGelu, kMaskNone, {512, 1000, 512}, {512, 1000, 512}, 4, 4);
  CHECK_FALSE(sm90_bwd_has_empty_half(jagged));
  CHECK((flags(jagged, o) & kBwdTileRecords) != 0);
  const ProblemDesc half = problem(kBF16, 128, kFastGelu, kMaskNone, {512, 576, 512}, {512, 576, 512}, 4, 4);
  CHECK(sm90_bwd_has_empty_half(half));  // 576 = 4 x 128 + 64
  CHECK((flags(half, o) & kBwdTileRecords) == 0);
  const int over = kBwdAccRecordsMaxMeanLenK + 128;
  const ProblemDesc long_kv = problem(kBF16, 128, kFastGelu, kMaskNone, {over, over}, {over, over}, 4, 4);
  CHECK((flags(long_kv, o) & kBwdTileRecords) == 0);
  o.deterministic = false;
  CHECK((flags(whole, o) & kBwdTileRecords) == 0);
  o.deterministic = true;
  o.bwd_flags_drop = kBwdTileRecords;  // the ablation
  CHECK((flags(whole, o) & kBwdTileRecords) == 0);
  o.bwd_flags_drop = 0;
  const ProblemDesc short_kv = problem(kBF16, 128, kFastGelu, kMaskNone, {100, 60}, {100, 60}, 4, 4);
  CHECK((flags(short_kv, o) & kBwdDqFinish) != 0);
  CHECK((flags(short_kv, o) & kBwdTileRecords) != 0);
  // kBwdRecordLanes: by default with the ordered finish only (not on the accumulator path, not in
  // pairs), and only with the records it reads; explicit flags take it as given.
  CHECK((flags(whole, o) & kBwdRecordLanes) == 0);
  CHECK((flags(short_kv, o) & kBwdRecordLanes) != 0);
  const ProblemDesc pair = problem(kBF16, 128, kFastGelu, kMaskNone, {300, 260}, {200, 256}, 4, 4);
  CHECK((flags(pair, o) & kBwdPair) != 0);
  CHECK((flags(pair, o) & kBwdRecordLanes) == 0);
  o.bwd_flags_drop = kBwdRecordLanes;  // the ablation
  CHECK((flags(short_kv, o) & kBwdRecordLanes) == 0);
  o.bwd_flags_drop = kBwdTileRecords;
  CHECK((flags(short_kv, o) & kBwdRecordLanes) == 0);
  o.bwd_flags_drop = 0;
  o.bwd_flags = kBwdDefaultFlags | kBwdRecordLanes;
  CHECK((flags(whole, o) & kBwdRecordLanes) != 0);
  o.bwd_flags = (kBwdDefaultFlags & ~kBwdTileRecords) | kBwdRecordLanes;
  CHECK((flags(whole, o) & kBwdRecordLanes) == 0);
}

TEST_CASE("sm90 backward: the first step initialises dV / dK where the accumulator path reads records") {
  // bwd_config.h kBwdFirstStepInitAcc: by default on the accumulator path with tile records (the
  // sets where it measured faster), nowhere else; an ablation drops it, explicit flags take it as
  // given where the deferred job keeps the first step apart.
  const auto flags = chosen_bwd_flags;
  Sm90Options o;
  const ProblemDesc whole = uniform_accumulator_problem();
  CHECK((flags(whole, o) & kBwdTileRecords) != 0);
  CHECK((flags(whole, o) & kBwdFirstStepInitAcc) != 0);
  const ProblemDesc half = problem(kBF16, 128, kFastGelu, kMaskNone, {512, 576, 512}, {512, 576, 512}, 4, 4);
  CHECK((flags(half, o) & kBwdDqFinish) == 0);  // the accumulator path without records (an empty half)
  CHECK((flags(half, o) & kBwdFirstStepInitAcc) == 0);
  const int over = kBwdAccRecordsMaxMeanLenK + 128;
  const ProblemDesc long_kv = problem(kBF16, 128, kFastGelu, kMaskNone, {over, over}, {over, over}, 4, 4);
  CHECK((flags(long_kv, o) & kBwdFirstStepInitAcc) == 0);
  const ProblemDesc short_kv = problem(kBF16, 128, kFastGelu, kMaskNone, {100, 60}, {100, 60}, 4, 4);
  CHECK((flags(short_kv, o) & kBwdDqFinish) != 0);  // the ordered finish: off
  CHECK((flags(short_kv, o) & kBwdFirstStepInitAcc) == 0);
  const ProblemDesc pair = problem(kBF16, 128, kFastGelu, kMaskNone, {300, 260}, {200, 256}, 4, 4);
  CHECK((flags(pair, o) & kBwdPair) != 0);  // pairs: off (0.96x at L = 256)
  CHECK((flags(pair, o) & kBwdFirstStepInitAcc) == 0);
  const ProblemDesc masked = uniform_accumulator_problem(kMaskCausal);
  CHECK(((flags(masked, o) & kBwdTileRecords) != 0) == ((flags(masked, o) & kBwdFirstStepInitAcc) != 0));
  o.bwd_flags_drop = kBwdFirstStepInitAcc;  // the ablation drops only its own bit
  CHECK(flags(whole, o) == (flags(whole, Sm90Options()) & ~kBwdFirstStepInitAcc));
  o.bwd_flags_drop = kBwdTileRecords;  // without the records: off
  CHECK((flags(whole, o) & kBwdFirstStepInitAcc) == 0);
  o.bwd_flags_drop = 0;
  o.deterministic = false;  // the unordered mode keeps the tile list
  CHECK((flags(whole, o) & kBwdFirstStepInitAcc) == 0);
  o.deterministic = true;
  o.bwd_flags = kBwdDefaultFlags | kBwdFirstStepInitAcc;  // explicit: the ordered finish takes it too
  CHECK((flags(short_kv, o) & kBwdFirstStepInitAcc) != 0);
  o.bwd_flags = (kBwdDefaultFlags & ~kBwdDeferDq) | kBwdFirstStepInitAcc;  // no deferred job: cleared
  CHECK((flags(short_kv, o) & kBwdFirstStepInitAcc) == 0);
}

TEST_CASE("sm90: the unit logit-scale specialisation follows the problem, explicit flags too") {
  // The bit makes the kernels skip the logit multiply: with any other scale it would give wrong
  // results without an error, so the host sets it exactly when logit_scale == 1.
  ProblemDesc p = problem(kBF16, 128, kFastGelu, kMaskNone, {300, 200}, {300, 200}, 4, 4);
  Sm90Options o;
  o.bwd_flags = kBwdDefaultFlags | kBwdUnitLogitScale;
  o.fwd_flags = kFwdDefaultFlags | kFwdUnitLogitScale;
  auto last = [](const std::string& n) { return std::stoll(n.substr(n.rfind(',') + 1)); };
  CHECK((last(sm90_backward_sources(p, o)[0].name_expression) & kBwdUnitLogitScale) != 0);
  CHECK((last(sm90_kernel_sources(p, o, false)[0].name_expression) & kFwdUnitLogitScale) != 0);
  p.logit_scale = 0.5f;
  CHECK((last(sm90_backward_sources(p, o)[0].name_expression) & kBwdUnitLogitScale) == 0);
  CHECK((last(sm90_kernel_sources(p, o, false)[0].name_expression) & kFwdUnitLogitScale) == 0);
  o.bwd_flags = o.fwd_flags = -1;
  CHECK((last(sm90_backward_sources(p, o)[0].name_expression) & kBwdUnitLogitScale) == 0);
  CHECK((last(sm90_kernel_sources(p, o, false)[0].name_expression) & kFwdUnitLogitScale) == 0);
}

TEST_CASE("sm90 backward: KV tiles run in cluster pairs exactly where every sequence has two") {
  const std::vector<int> lq = {700, 0, 500};  // mean 400: enough steps per KV tile (kBwdPairMinMeanLenQ)
  ProblemDesc p = problem(kBF16, 128, kFastGelu, kMaskNone, lq, {129, 160, 256});
  CHECK(sm90_bwd_pair_eligible(p));
  CHECK_FALSE(sm90_bwd_pair_eligible(problem(kBF16, 128, kFastGelu, kMaskNone, lq, {128, 200, 256})));
  CHECK_FALSE(sm90_bwd_pair_eligible(problem(kBF16, 128, kFastGelu, kMaskNone, lq, {129, 200, 257})));
  CHECK_FALSE(sm90_bwd_pair_eligible(problem(kBF16, 128, kFastGelu, kMaskCausal, lq, {129, 200, 256})));
  CHECK(sm90_bwd_pair_eligible(problem(kBF16, 64, kFastGelu, kMaskNone, lq, {129, 200, 256})));  // D = 64: jobs alternate
  Sm90Options opt;
  // Default flags (3145821 with the two stmatrix bits; kBwdDqFirst only with the ordered finish)
  // + unit scale (2) + kBwdPair (32)
  // + kBwdEarlyAct (32768, where dQ is finished in the kernel) + kBwdPairTwoStage (131072) and
  // kBwdPairDvInDs (262144), pairs only; no dq_convert pass; + kBwdSkipEmptyHalf (4194304): Lk =
  // 129 and 160 leave the second half of rank 1's KV tile empty.
  std::vector<KernelSource> src = sm90_backward_sources(p, opt);
  REQUIRE(src.size() == 1);
  CHECK(src[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,49709183>");
  // kBwdSkipEmptyHalf only where some KV tile has an empty second half (Lk % 128 in 1..64).
  CHECK(sm90_bwd_has_empty_half(p));
  const ProblemDesc whole_halves = problem(kBF16, 128, kFastGelu, kMaskNone, lq, {256, 200, 250});  // 0, 72, 122
  CHECK_FALSE(sm90_bwd_has_empty_half(whole_halves));
  CHECK(sm90_bwd_has_empty_half(problem(kBF16, 128, kFastGelu, kMaskNone, lq, {256, 192, 250})));  // 64: empty
  CHECK(sm90_backward_sources(whole_halves, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,45514879>");
  opt.deterministic = false;  // pairs add in one fixed order anyway: kept
  CHECK(sm90_backward_sources(p, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,49709183>");
  opt.deterministic = true;
  // Rank 1's late wait for its epilogue's stores (kBwdPairLateStoreWait, 536870912): by default
  // only up to kBwdPairLateStoreWaitMaxStepsPerTile query steps per KV tile (above: 12.5, off;
  // here G = 1 and a mean Lq of 267: 4.2).
  const ProblemDesc few_steps_pairs =
      problem(kBF16, 128, kFastGelu, kMaskNone, {300, 0, 500}, {256, 200, 250}, 2, 2);
  // With it at D = 128 rank 1's dV in the dS^T halves (kBwdPairRank1DvInDs, 1073741824) and rank 0's
  // late wait (kBwdPairRank0LateStoreWait, 2147483648).
  CHECK(sm90_backward_sources(few_steps_pairs, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,3803611263>");
  opt.bwd_flags_drop = kBwdPairRank1DvInDs;  // its ablation keeps both late waits
  CHECK(sm90_backward_sources(few_steps_pairs, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,2729869439>");
  opt.bwd_flags_drop = kBwdPairRank0LateStoreWait;  // rank 0's ablation keeps rank 1's forms
  CHECK(sm90_backward_sources(few_steps_pairs, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,1656127615>");
  opt.bwd_flags_drop = kBwdPairLateStoreWait;  // the late wait's ablation: none of the three
  CHECK(sm90_backward_sources(few_steps_pairs, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,45514879>");
  opt.bwd_flags_drop = 0;
  ProblemDesc few_steps_d64 = few_steps_pairs;  // D = 64: the late wait without rank 1's dV in dS^T
  few_steps_d64.head_dim = 64;
  const std::string d64 = sm90_backward_sources(few_steps_d64, opt)[0].name_expression;
  const long long d64_flags = std::stoll(d64.substr(d64.rfind(',') + 1));
  CHECK((d64_flags & kBwdPairLateStoreWait) != 0);
  CHECK((d64_flags & kBwdPairRank1DvInDs) == 0);
  CHECK((d64_flags & kBwdPairRank0LateStoreWait) == 0);
  ProblemDesc few_steps_gqa = few_steps_pairs;  // G = 2: 8.3 steps per KV tile
  few_steps_gqa.heads_q = 4;  // (the unit-scale and other bits as above)
  few_steps_gqa.heads_kv = 2;
  CHECK(sm90_backward_sources(few_steps_gqa, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,45514879>");
  opt.bwd_flags = kBwdDefaultFlags | kBwdPairLateStoreWait;  // explicit flags keep it only with pairs
  CHECK(sm90_backward_sources(few_steps_pairs, opt)[0].name_expression.find(",536") == std::string::npos);
  opt.bwd_flags = -1;
  opt.bwd_flags_drop = kBwdPair;  // the ablation: the ordered finish through the accumulator
  src = sm90_backward_sources(p, opt);
  REQUIRE(src.size() == 2);
  CHECK(src[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,317759583>");  // with kBwdEarlyAct
  // Above a mean Lk of kBwdDqFinishMaxMeanLenK (192; here 195) the same ablation adds through the
  // accumulator with two staging buffers and the dQ job first (kBwdDqFirst, 8192, with the writer's
  // fence), the follower and dV staged in V's rows (kBwdDvInV, 134217728).
  CHECK(sm90_backward_sources(problem(kBF16, 128, kFastGelu, kMaskNone, lq, {129, 200, 256}), opt)[0].name_expression ==
        "gdpa::sm90::gdpa_bwd<0,128,3,0,256991255>");
  opt.bwd_flags_drop = kBwdDqFinish;  // no finishing code, so no pairs either; two staging buffers
  CHECK(sm90_backward_sources(p, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,256991255>");
  opt.bwd_flags_drop = kBwdDqFinish | kBwdDqFenceAtWriter;  // every thread fences: no dQ job first either
  CHECK(sm90_backward_sources(p, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,240205847>");
  opt.bwd_flags_drop = 0;
  // Short queries (mean Lq 123 < kBwdPairMinMeanLenQ): eligible, but the default keeps the ordered
  // finish (deferred: G = 2 gives 3.9 steps per KV tile). From a mean of 128 (here 200) it takes the pairs.
  const ProblemDesc short_q = problem(kBF16, 128, kFastGelu, kMaskNone, {250, 0, 120}, {129, 160, 256});
  CHECK(sm90_bwd_pair_eligible(short_q));
  CHECK(sm90_backward_sources(short_q, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,317759583>");
  CHECK((chosen_bwd_flags(problem(kBF16, 128, kFastGelu, kMaskNone, {400, 0, 200}, {129, 160, 256}), opt) & kBwdPair) != 0);
  // With at most kBwdUndeferredMaxStepsPerTile query steps per KV tile on average (here mean Lq
  // 87 and G = 2: 2.7) the ordered finish drops the deferred dQ job (kBwdDeferDq, 1); with a mask
  // it keeps it.
  const ProblemDesc few_steps = problem(kBF16, 128, kFastGelu, kMaskNone, {60, 50, 150}, {129, 160, 100});
  CHECK(sm90_backward_sources(few_steps, opt)[0].name_expression == "gdpa::sm90::gdpa_bwd<0,128,3,0,317759582>");
  const std::string causal =
      sm90_backward_sources(problem(kBF16, 128, kFastGelu, kMaskCausal, {60, 50, 150}, {129, 160, 100}), opt)[0]
          .name_expression;
  CHECK(causal.find(",3,1,") != std::string::npos);                       // mask 1
  CHECK(std::stoll(causal.substr(causal.rfind(',') + 1)) % 2 == 1);  // flags odd: deferred
  // Explicit flags with pairs on a problem the pairs cannot take: refused by supports() with the
  // reason (gdpa check skips the case), not left to the kernel's static_assert at compile time.
  {
    const auto pair_kernel = make_kernel("sm90-bwd-flags" + std::to_string(kBwdDefaultFlags | kBwdPair));
    std::string why;
    CHECK(pair_kernel->supports(whole_halves, 90, true, &why));
    CHECK_FALSE(pair_kernel->supports(problem(kBF16, 128, kFastGelu, kMaskCausal, lq, {129, 200, 256}), 90, true, &why));
    CHECK(why.find("kBwdPair") != std::string::npos);
    why.clear();
    CHECK_FALSE(pair_kernel->supports(problem(kBF16, 128, kFastGelu, kMaskNone, lq, {129, 200, 300}), 90, true, &why));
    CHECK(why.find("(128, 256]") != std::string::npos);
    CHECK(pair_kernel->supports(problem(kBF16, 128, kFastGelu, kMaskCausal, lq, {129, 200, 256}), 90, false, &why));
  }
  // A pair launch walks one entry per (sequence, KV head): KV tile 0 of each.
  p.heads_q = 4;
  p.heads_kv = 2;
  const std::vector<WorkTile> tiles = build_backward_tiles(p, kBwdBlockM, kBwdBlockN, SchedulePolicy::kGridOrder, 8);
  CHECK(tiles.size() == 3 * 2 * 2);
  const std::vector<WorkTile> items = sm90_bwd_pair_items(tiles);
  REQUIRE(items.size() == 3 * 2);
  for (const WorkTile& t : items) CHECK(t.block == 0);
}

TEST_CASE("sm90 backward: shared-memory plan") {
  for (int d : {64, 128}) {
    CAPTURE(d);
    const BwdSmemPlan s = bwd_smem_plan(d);
    for (int off : {s.k_off, s.v_off, s.q_off, s.do_off, s.ds_off, s.dq_off}) CHECK(off % 1024 == 0);
    CHECK(s.q_bytes % 1024 == 0);
    CHECK(s.ds_bytes == kBwdBlockN * 128);  // one 128-byte swizzle row (64 queries) per key
    CHECK(s.v_off - s.k_off == kBwdBlockN * d * 2);
    CHECK(s.partial_off - s.dq_off == 2 * kBwdDqJobBytes);  // staging, then the partial sums (kBwdDqFinish)
    CHECK(s.bar_off - s.partial_off == 2 * kBwdDqJobBytes);
    CHECK(s.bar_off % 8 == 0);
    CHECK(bwd_smem_request(d) <= 227 * 1024);  // Hopper's per-block opt-in limit
  }
  CHECK(bwd_smem_request(128) > 222 * 1024);  // K, V, 2 x (Q, dO), 2 x dS^T, 2 x dQ staging, 2 x partial
}

TEST_CASE("sm90 backward: dQ accumulator fragment layout is a bijection matching the wgmma layout") {
  std::vector<int> seen_index(kBwdDqJobFloats, 0), seen_cell(kBwdDqJobFloats, 0);
  for (int tid = 0; tid < 128; ++tid) {
    for (int r = 0; r < 32; ++r) {
      const int idx = dq_frag_index(tid, r), row = dq_frag_row(tid, r), col = dq_frag_col(tid, r);
      REQUIRE(idx >= 0);
      REQUIRE(idx < kBwdDqJobFloats);
      REQUIRE(row >= 0);
      REQUIRE(row < 64);
      REQUIRE(col >= 0);
      REQUIRE(col < 64);
      ++seen_index[size_t(idx)];
      ++seen_cell[size_t(row * 64 + col)];
      // PTX ISA m64nNk16 accumulator: warp w rows 16w.., lane = 4g + t, register pairs along columns.
      const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
      CHECK(row == 16 * w + g + ((r % 4) >= 2 ? 8 : 0));
      CHECK(col == 8 * (r / 4) + 2 * t + r % 2);
    }
    // registers 4k..4k+3 form one float4 at [k][tid]: 16-byte aligned, consecutive threads adjacent
    for (int k = 0; k < 8; ++k) CHECK(dq_frag_index(tid, 4 * k) == (k * 128 + tid) * 4);
  }
  CHECK(std::all_of(seen_index.begin(), seen_index.end(), [](int c) { return c == 1; }));
  CHECK(std::all_of(seen_cell.begin(), seen_cell.end(), [](int c) { return c == 1; }));
}

TEST_CASE("sm90 backward: dQ slots of different sequences never overlap") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int batch = 1 + int(rng() % 9);
    std::vector<int> lq(static_cast<size_t>(batch));
    for (int& l : lq) l = (rng() % 4 == 0) ? 0 : int(rng() % 300);
    const std::vector<int> cu = offsets_from_lengths(lq);
    const long long slots = dq_num_slots(cu.back(), batch);
    std::vector<int> owner(size_t(slots), -1);
    for (int b = 0; b < batch; ++b) {
      const int tiles = (lq[size_t(b)] + kBwdBlockM - 1) / kBwdBlockM;
      for (int m = 0; m < tiles; ++m) {
        const long long s = dq_slot_begin(cu[size_t(b)], b) + m;
        REQUIRE(s >= 0);
        REQUIRE(s < slots);
        CHECK(owner[size_t(s)] == -1);
        owner[size_t(s)] = b;
      }
    }
    // dq_convert finds the owner as the last b whose first slot is <= s.
    for (long long s = 0; s < slots; ++s) {
      int b = 0;
      for (int c = 0; c < batch; ++c)
        if (dq_slot_begin(cu[size_t(c)], c) <= s) b = c;
      if (owner[size_t(s)] >= 0) CHECK(owner[size_t(s)] == b);
    }
    CHECK(slots <= cu.back() / kBwdBlockM + batch);  // at most one padding slot per sequence
  }
  CHECK(dq_block_offset(3, 2, 4, 1, 128) == ((3 * 4 + 2) * 2 + 1) * 4096LL);
}

TEST_CASE("sm90 backward: the per-key query interval is exactly mask_allowed") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const int mask = int(rng() % 3);
    const int lq = int(rng() % 90), lk = int(rng() % 90);
    const int left = int(rng() % 40) - 10, right = int(rng() % 40) - 10;  // < 0: unbounded
    for (int key = -2; key < lk + 3; ++key) {
      int lo = 0, count = 0;
      bwd_query_interval(mask, key, lq, lk, left, right, &lo, &count);
      REQUIRE(count >= 0);
      for (int q = -3; q < lq + 3; ++q) {
        const bool inside = unsigned(q - lo) < unsigned(count);
        CAPTURE(mask);
        CAPTURE(lq);
        CAPTURE(lk);
        CAPTURE(left);
        CAPTURE(right);
        CAPTURE(key);
        CAPTURE(q);
        REQUIRE(inside == mask_allowed(mask, q, key, lq, lk, left, right));
      }
    }
  }
}

// The deterministic mode's semaphore count assumes: KV tile n visits query tile m (the kernel's
// mask_query_range) exactly when n lies in m's KV range (mask_key_range), and that range is
// contiguous, so the contributors before n number n - first / BlockN. A mismatch would hang.
TEST_CASE("sm90 backward: KV tile and query tile ranges describe the same pairs") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const int mask = int(rng() % 3);
    const int lq = 1 + int(rng() % 700), lk = 1 + int(rng() % 700);
    const int left = int(rng() % 300) - 50, right = int(rng() % 300) - 50;
    const int mt = (lq + kBwdBlockM - 1) / kBwdBlockM, nt = (lk + kBwdBlockN - 1) / kBwdBlockN;
    for (int n = 0; n < nt; ++n) {
      int qlo, qhi;
      mask_query_range(mask, n * kBwdBlockN, std::min(lk, (n + 1) * kBwdBlockN), lq, lk, left, right, &qlo, &qhi);
      for (int m = 0; m < mt; ++m) {
        const bool visits = qhi > qlo && m >= qlo / kBwdBlockM && m < (qhi + kBwdBlockM - 1) / kBwdBlockM;
        int klo, khi;
        mask_key_range(mask, m * kBwdBlockM, std::min(lq, (m + 1) * kBwdBlockM), lq, lk, left, right, &klo, &khi);
        const bool in_range = khi > klo && n >= klo / kBwdBlockN && n < (khi + kBwdBlockN - 1) / kBwdBlockN;
        // and both equal "some allowed pair in the rectangle"
        bool any = false;
        for (int i = m * kBwdBlockM; i < std::min(lq, (m + 1) * kBwdBlockM) && !any; ++i)
          for (int j = n * kBwdBlockN; j < std::min(lk, (n + 1) * kBwdBlockN) && !any; ++j)
            any = mask_allowed(mask, i, j, lq, lk, left, right);
        CAPTURE(mask);
        CAPTURE(lq);
        CAPTURE(lk);
        CAPTURE(left);
        CAPTURE(right);
        CAPTURE(n);
        CAPTURE(m);
        REQUIRE(visits == in_range);
        REQUIRE(visits == any);
      }
    }
  }
}

TEST_CASE("sm90 backward: tile records agree with the scheduler's tiles, one per KV tile of a pair") {
  // Jagged GQA batches under each mask: every record's step count is the scheduler's work for its
  // tile, its rows and lengths are the sequence's, and its query range holds exactly the query
  // tiles that see a key of the tile (the previous test's relation).
  for (int mask : {int(kMaskNone), int(kMaskCausal), int(kMaskWindow)}) {
    ProblemDesc p;
    p.heads_q = 6;
    p.heads_kv = 2;
    p.head_dim = 128;
    p.mask = MaskKind(mask);
    p.window_left = 150;
    p.window_right = 40;
    p.cu_seqlens_q = offsets_from_lengths({300, 1, 0, 700, 129});
    p.cu_seqlens_k = offsets_from_lengths({200, 64, 90, 700, 0});
    const std::vector<WorkTile> tiles = build_backward_tiles(p, kBwdBlockM, kBwdBlockN, SchedulePolicy::kZigzag, 3);
    const std::vector<BwdTileRecord> r = backward_records(p, tiles, false);
    REQUIRE(r.size() == tiles.size());
    for (size_t i = 0; i < tiles.size(); ++i) {
      const WorkTile& w = tiles[i];
      CAPTURE(mask);
      CAPTURE(i);
      CHECK(r[i].batch == w.batch);
      CHECK(r[i].kv_head == w.head);
      CHECK(r[i].n0 == w.block * kBwdBlockN);
      CHECK(r[i].k_row == p.cu_seqlens_k[size_t(w.batch)] + r[i].n0);
      CHECK(r[i].q_seq_row == p.cu_seqlens_q[size_t(w.batch)]);
      CHECK(r[i].len_q == p.len_q(w.batch));
      CHECK(r[i].len_k == p.len_k(w.batch));
      CHECK(r[i].steps == w.work);
      CHECK(r[i].steps == (r[i].m_end - r[i].m_begin) * p.group());
    }
  }
  // Pairs: entry e (KV tile 0 of a sequence) has records 2 e and 2 e + 1, KV tiles 0 and 1.
  ProblemDesc p;
  p.heads_q = p.heads_kv = 2;
  p.head_dim = 128;
  p.cu_seqlens_q = offsets_from_lengths({300, 77});
  p.cu_seqlens_k = offsets_from_lengths({200, 256});
  REQUIRE(sm90_bwd_pair_eligible(p));
  const std::vector<WorkTile> all = build_backward_tiles(p, kBwdBlockM, kBwdBlockN, SchedulePolicy::kGridOrder, 2);
  const std::vector<WorkTile> items = sm90_bwd_pair_items(all);
  const std::vector<BwdTileRecord> r = backward_records(p, items, true);
  REQUIRE(r.size() == 2 * items.size());
  for (size_t e = 0; e < items.size(); ++e)
    for (int rank = 0; rank < 2; ++rank) {
      const BwdTileRecord& t = r[2 * e + size_t(rank)];
      CHECK(t.batch == items[e].batch);
      CHECK(t.n0 == rank * kBwdBlockN);
      const auto same = std::find_if(all.begin(), all.end(), [&](const WorkTile& w) {
        return w.batch == items[e].batch && w.head == items[e].head && w.block == rank;
      });
      REQUIRE(same != all.end());
      CHECK(t.steps == same->work);
    }
}

TEST_CASE("sm90 backward: deterministic tile order keeps every KV group in increasing rounds") {
  // Window masks make the edge tiles of a sequence cheaper than the middle ones, so the zigzag
  // (longest-first) list puts a group's tile 0 after its tile 1: the order the kernel could
  // deadlock on. The reordering must fix it and keep the tiles and each group's positions.
  ProblemDesc p = problem(kBF16, 128, kFastGelu, kMaskWindow, {2000, 1500, 900, 3000}, {2000, 1500, 900, 3000});
  p.window_left = 200;
  p.window_right = 100;
  const int sms = 8;
  std::vector<WorkTile> tiles = build_backward_tiles(p, kBwdBlockM, kBwdBlockN, SchedulePolicy::kZigzag, sms);
  const int grid = int(persistent_grid(tiles.size(), sms));
  CHECK_FALSE(rounds_follow_kv_order(tiles, grid));  // the hazard is real for this input
  std::vector<WorkTile> fixed = tiles;
  sm90_bwd_order_for_determinism(fixed);
  CHECK(rounds_follow_kv_order(fixed, grid));
  REQUIRE(fixed.size() == tiles.size());
  for (size_t i = 0; i < tiles.size(); ++i) {  // same group at every position
    CHECK(fixed[i].batch == tiles[i].batch);
    CHECK(fixed[i].head == tiles[i].head);
  }
  std::multiset<std::tuple<int, int, int, int>> a, b;
  for (const WorkTile& t : tiles) a.insert({t.batch, t.head, t.block, t.work});
  for (const WorkTile& t : fixed) b.insert({t.batch, t.head, t.block, t.work});
  CHECK(a == b);
  // Orders that already follow KV order are left alone.
  std::vector<WorkTile> grid_order = build_backward_tiles(p, kBwdBlockM, kBwdBlockN, SchedulePolicy::kGridOrder, sms);
  std::vector<WorkTile> same = grid_order;
  sm90_bwd_order_for_determinism(same);
  for (size_t i = 0; i < same.size(); ++i) CHECK(same[i].block == grid_order[i].block);
}

TEST_CASE("sm90 backward kernels compile for sm_90a without spills") {
  const std::vector<int> lens = {100, 300};
  // Both dtypes and head dims, both flag settings, every mask; a MUFU activation, the ALU
  // polynomial, the packed bf16 form, a sigmoid and piecewise ones. (Known exceptions, not
  // compiled here: erf GELU at D = 64, erf GELU with a mask at D = 128 and fast_gelu_bf16 with a
  // mask at D = 128 spill 4-24 bytes: ptxas fills all 240 registers with the unrolled activation
  // and spills loop scalars or packed constants, reloaded once per step.)
  const struct {
    DType dtype;
    int d;
    Activation act;
    MaskKind mask;
    long long flags;
    float logit_scale;  // 1: the unit-scale specialisation
  } variants[] = {
      {kBF16, 128, kFastGelu, kMaskNone, -1, 1.0f},   {kFP16, 64, kGeluPoly, kMaskCausal, -1, 1.0f},
      {kBF16, 64, kSilu, kMaskWindow, 0, 0.5f},       {kFP16, 128, kReluSquare, kMaskWindow, -1, 0.5f},
      {kBF16, 128, kFastGeluBf16, kMaskNone, -1, 1.0f}, {kBF16, 128, kHardswish, kMaskCausal, -1, 0.5f},
      {kBF16, 128, kFastGelu, kMaskCausal, -1, 1.0f},  // with act_mix 4 below: mixed MUFU / FMA
  };
  std::vector<KernelSource> sources;
  for (const auto& v : variants) {
    ProblemDesc p = problem(v.dtype, v.d, v.act, v.mask, lens, lens);
    p.logit_scale = v.logit_scale;
    Sm90Options opt;
    opt.bwd_flags = v.flags;
    if (v.act == kFastGelu && v.mask == kMaskCausal) opt.act_mix = 4;
    for (const KernelSource& s : sm90_backward_sources(p, opt))
      if (std::none_of(sources.begin(), sources.end(),
                       [&](const KernelSource& o) { return o.name_expression == s.name_expression; }))
        sources.push_back(s);
  }
  {  // KV pairs (kBwdPair): the cluster variant, which has no dq_convert pass
    for (int d : {64, 128}) {
      const std::vector<KernelSource> pair =
          sm90_backward_sources(problem(kBF16, d, kFastGelu, kMaskNone, {600, 500}, {200, 256}), Sm90Options{});
      REQUIRE(pair.size() == 1);
      sources.push_back(pair[0]);
    }
    // A few query steps per KV tile (G = 1, mean Lq 275): rank 1's late store wait (kBwdPairLateStoreWait)
    // and its dV in the dS^T halves (kBwdPairRank1DvInDs), with rank 0's late wait (kBwdPairRank0LateStoreWait).
    const std::vector<KernelSource> late =
        sm90_backward_sources(problem(kBF16, 128, kFastGelu, kMaskNone, {300, 250}, {200, 256}, 2, 2), Sm90Options{});
    REQUIRE(late.size() == 1);
    CHECK(late[0].name_expression.find(",3803611263>") != std::string::npos);  // and both late waits
    sources.push_back(late[0]);
    // The profiling variant (kBwdTrace): its tracer must not cost the consumers a spill either.
    Sm90Options traced;
    traced.bwd_trace = "unused.npy";
    sources.push_back(
        sm90_backward_sources(problem(kBF16, 128, kFastGelu, kMaskNone, {600, 500}, {200, 256}), traced)[0]);
  }
  CHECK(sources.size() == 15);  // 11 main variants + dq_convert for 4 (dtype, D) pairs
  compile_clean(sources);
}

TEST_CASE("sm90 backward: the activation under dP^T only where its variants were measured clean") {
  // kBwdEarlyAct: the default where dQ is finished in the kernel (pairs, the ordered finish), at
  // D = 128, for the activations of bwd_early_act_fits; the host clears the bit elsewhere, explicit
  // flags included, so a variant name never carries a bit its kernel ignores.
  const std::vector<int> lq = {700, 0, 500}, lk = {129, 160, 256};  // cluster pairs
  auto early = [&](const ProblemDesc& p, const Sm90Options& opt) {  // the FLAGS argument of gdpa_bwd<...>
    const std::string name = sm90_backward_sources(p, opt)[0].name_expression;
    const size_t comma = name.rfind(','), close = name.rfind('>');
    REQUIRE(name.find("gdpa_bwd<") != std::string::npos);
    return (std::stoll(name.substr(comma + 1, close - comma - 1)) & kBwdEarlyAct) != 0;
  };
  const Sm90Options def;
  CHECK(early(problem(kBF16, 128, kFastGelu, kMaskNone, lq, lk), def));
  CHECK(early(problem(kFP16, 128, kSilu, kMaskNone, lq, lk), def));
  CHECK_FALSE(early(problem(kBF16, 64, kFastGelu, kMaskNone, lq, lk), def));   // D = 64: not measured
  CHECK_FALSE(early(problem(kBF16, 128, kGelu, kMaskNone, lq, lk), def));      // spilled with it
  CHECK_FALSE(early(problem(kBF16, 128, kGeluPoly, kMaskNone, lq, lk), def));  // spilled in the loop
  CHECK_FALSE(early(problem(kBF16, 128, kHardswish, kMaskNone, lq, lk), def)); // serialized
  // The ordered finish (mean Lk <= 192, no pairs) keeps it; the accumulator path does not.
  CHECK(early(problem(kBF16, 128, kFastGelu, kMaskCausal, {300, 200}, {100, 150}), def));
  CHECK_FALSE(early(problem(kBF16, 128, kFastGelu, kMaskNone, {700, 500}, {700, 500}), def));
  Sm90Options explicit_flags;
  explicit_flags.bwd_flags = kBwdDefaultFlags & ~kBwdDqFinish;  // used as given...
  CHECK(early(problem(kBF16, 128, kFastGelu, kMaskNone, {700, 500}, {700, 500}), explicit_flags));
  CHECK_FALSE(early(problem(kBF16, 128, kGelu, kMaskNone, {700, 500}, {700, 500}), explicit_flags));  // ...but this
}

TEST_CASE("sm90 backward: the stmatrix staging where it measured faster and compiled clean") {
  // kBwdStmatrix everywhere, kBwdStmatrixDs where dQ is finished in the kernel, except the ordered
  // finish at D = 128 with the activations that keep act' apart from dP^T (they spilled with
  // either bit); explicit flags are used as given.
  auto flags_of = [](const ProblemDesc& p, const Sm90Options& opt) {
    const std::string name = sm90_backward_sources(p, opt)[0].name_expression;
    const size_t comma = name.rfind(','), close = name.rfind('>');
    return std::stoll(name.substr(comma + 1, close - comma - 1)) & (kBwdStmatrix | kBwdStmatrixDs);
  };
  const long long both = kBwdStmatrix | kBwdStmatrixDs;
  const Sm90Options def;
  const std::vector<int> lq = {700, 0, 500}, lk = {129, 160, 256};  // cluster pairs
  CHECK(flags_of(problem(kBF16, 128, kFastGelu, kMaskNone, lq, lk), def) == both);
  CHECK(flags_of(problem(kBF16, 128, kGelu, kMaskNone, lq, lk), def) == both);  // pairs: no spill added
  // The ordered finish (mean Lk <= 192, no pairs).
  CHECK(flags_of(problem(kBF16, 128, kFastGelu, kMaskCausal, {300, 200}, {100, 150}), def) == both);
  CHECK(flags_of(problem(kBF16, 128, kGeluPoly, kMaskCausal, {300, 200}, {100, 150}), def) == 0);
  CHECK(flags_of(problem(kBF16, 128, kGelu, kMaskNone, {300, 200}, {100, 150}), def) == 0);
  CHECK(flags_of(problem(kBF16, 64, kGelu, kMaskNone, {300, 200}, {100, 150}), def) == both);  // D = 64: clean
  // The accumulator path: dV / dK only.
  CHECK(flags_of(problem(kBF16, 128, kFastGelu, kMaskNone, {700, 500}, {700, 500}), def) == kBwdStmatrix);
  Sm90Options explicit_flags;
  explicit_flags.bwd_flags = kBwdDefaultFlags;
  CHECK(flags_of(problem(kBF16, 128, kGelu, kMaskNone, {300, 200}, {100, 150}), explicit_flags) == both);
}

TEST_CASE("sm90 backward: registry variants with dropped or explicit flags") {
  const ProblemDesc p = problem(kBF16, 128, kFastGelu, kMaskNone, {700, 0, 500}, {129, 160, 256});  // pairs
  auto bwd_name = [&](const std::string& kernel) {  // sources() lists the forward's too
    for (const KernelSource& s : make_kernel(kernel)->sources(p, true))
      if (s.name_expression.find("gdpa_bwd<") != std::string::npos) return s.name_expression;
    return std::string("(no backward)");
  };
  // Pairs and the ordered finish take the activation under dP^T (kBwdEarlyAct, 32768) by default;
  // pairs stage rank 0's jobs in two buffers (kBwdPairTwoStage, 131072) and its dV in the dS^T
  // buffers (kBwdPairDvInDs, 262144).
  CHECK(bwd_name("sm90") == "gdpa::sm90::gdpa_bwd<0,128,3,0,49709183>");
  CHECK(bwd_name("sm90-no-early-act") == "gdpa::sm90::gdpa_bwd<0,128,3,0,49676415>");
  CHECK(bwd_name("sm90-no-pair-two-stage") == "gdpa::sm90::gdpa_bwd<0,128,3,0,49315967>");  // and no dV in dS
  CHECK(bwd_name("sm90-no-pair-dv-in-ds") == "gdpa::sm90::gdpa_bwd<0,128,3,0,49447039>");
  // Tile records (kBwdTileRecords, 8388608) by default only where dQ is finished in the kernel.
  CHECK(bwd_name("sm90-no-tile-records") == "gdpa::sm90::gdpa_bwd<0,128,3,0,41320575>");
  CHECK(bwd_name("sm90-no-dq-tma-store") == "gdpa::sm90::gdpa_bwd<0,128,3,0,49709119>");
  // Without pairs: the ordered finish, with the dQ job first (kBwdDqFirst, only there by default).
  CHECK(bwd_name("sm90-no-dq-pair") == "gdpa::sm90::gdpa_bwd<0,128,3,0,317759583>");
  CHECK(bwd_name("sm90-no-dq-first") == "gdpa::sm90::gdpa_bwd<0,128,3,0,49709183>");  // pairs: no change
  CHECK(bwd_name("sm90-no-stmatrix-grads") == "gdpa::sm90::gdpa_bwd<0,128,3,0,48660607>");
  CHECK(bwd_name("sm90-no-stmatrix-ds") == "gdpa::sm90::gdpa_bwd<0,128,3,0,47612031>");
  // The dS^T halves fenced by their readers (kBwdDsFenceAtReader, 33554432) everywhere; the dQ
  // jobs fenced by the writer (kBwdDqFenceAtWriter, 16777216) only on the accumulator path.
  CHECK(bwd_name("sm90-no-ds-fence-at-reader") == "gdpa::sm90::gdpa_bwd<0,128,3,0,16154751>");
  CHECK(bwd_name("sm90-no-dq-fence-at-writer") == "gdpa::sm90::gdpa_bwd<0,128,3,0,49709183>");  // pairs: no change
  CHECK(bwd_name("sm90-bwd-flags50331677") == "gdpa::sm90::gdpa_bwd<0,128,3,0,50331679>");  // both, explicit
  CHECK(bwd_name("sm90-bwd-flags3571837") == "gdpa::sm90::gdpa_bwd<0,128,3,0,3571839>");  // seven digits
  CHECK(bwd_name("sm90-no-dq-two-stage") == "gdpa::sm90::gdpa_bwd<0,128,3,0,49709183>");  // the finish's: no change
  CHECK(bwd_name("sm90-bwd-flags163965") == "gdpa::sm90::gdpa_bwd<0,128,3,0,163967>");
  CHECK(bwd_name("sm90-bwd-flags426109") == "gdpa::sm90::gdpa_bwd<0,128,3,0,426111>");
  CHECK(bwd_name("sm90-bwd-flags295037") == "gdpa::sm90::gdpa_bwd<0,128,3,0,32895>");  // dV in dS needs two buffers
  CHECK(bwd_name("sm90-bwd-flags131165") == "gdpa::sm90::gdpa_bwd<0,128,3,0,95>");  // no pairs: cleared
  // Explicit flags are used as given (plus the unit-scale specialisation), rules or not.
  CHECK(bwd_name("sm90-bwd-flags29") == "gdpa::sm90::gdpa_bwd<0,128,3,0,31>");
  CHECK(bwd_name("sm90-bwd-flags125") == "gdpa::sm90::gdpa_bwd<0,128,3,0,127>");
  CHECK(bwd_name("sm90-bwd-flags8317") == "gdpa::sm90::gdpa_bwd<0,128,3,0,8319>");
  CHECK(bwd_name("sm90-bwd-flags16405") == "gdpa::sm90::gdpa_bwd<0,128,3,0,16407>");
  // ... except a bit the kernel would ignore: two staging buffers need the finish off.
  CHECK(bwd_name("sm90-bwd-flags16477") == "gdpa::sm90::gdpa_bwd<0,128,3,0,95>");
  CHECK_THROWS(make_kernel("sm90-bwd-flags256"));  // bits 8..12 are the activation mix's
  CHECK_THROWS(make_kernel("sm90-bwd-flags123456"));
  CHECK_THROWS(make_kernel("sm90-bwd-flags8589934592"));   // bit 33: no such switch
  // Bit 32 (kBwdFirstStepInitAcc) with the deferred job kept, without it cleared.
  CHECK(bwd_name("sm90-bwd-flags4294967297") == "gdpa::sm90::gdpa_bwd<0,128,3,0,4294967299>");
  CHECK(bwd_name("sm90-bwd-flags4294967296") == "gdpa::sm90::gdpa_bwd<0,128,3,0,2>");
  CHECK_THROWS(make_kernel("sm90-bwd-flags1234567890123456789"));  // more than 18 digits
  CHECK(bwd_name("sm90-bwd-flags1610612765") ==  // ten digits: bit 30 (kBwdPairRank1DvInDs), no pairs: cleared
        "gdpa::sm90::gdpa_bwd<0,128,3,0,31>");
  CHECK_THROWS(make_kernel("sm90-bwd-flags"));
  CHECK_THROWS(make_kernel("sm90-bwd-flags0x1"));
  // The other numbered family, parsed the same way.
  CHECK(make_kernel("sm90-act-mix4")->name().find("act-mix4") != std::string::npos);
  CHECK_THROWS(make_kernel("sm90-act-mix17"));
  CHECK_THROWS(make_kernel("sm90-act-mix123"));
  // The forward schedule's half-tile cost, in hundredths from 1 to 100.
  CHECK(make_kernel("sm90-fwd-half75")->name() == "sm90-fwd-half75");
  CHECK(make_kernel("sm90-fwd-half100")->name() == "sm90-fwd-half100");
  CHECK_THROWS(make_kernel("sm90-fwd-half0"));
  CHECK_THROWS(make_kernel("sm90-fwd-half101"));
  CHECK_THROWS(make_kernel("sm90-fwd-half1000"));
}
