// The Hopper forward kernel without a GPU: its shared-memory plan, NVRTC compilation of its
// variants for sm_90a, and the SASS the design promises (HGMMA, UTMALDG, UTMASTG, SYNCS, USETMAXREG, no
// local-memory spills).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>
#include <utility>

#include "../../host/compile.h"
#include "../../host/generator.h"
#include "../../host/problem.h"
#include "../../host/sm90.h"
#include "../../kernels/sm90/act_mix.h"
#include "../../kernels/sm90/fwd_config.h"
#include "../../kernels/sm90/fwd_tail_config.h"
#include "../../ptx/smem_desc.h"
#include "sass_tools.h"

using namespace gdpa;

TEST_CASE("sm90 forward shared-memory plan: 1024-aligned tiles, fits the 227 KB a CTA may use") {
  for (int d : {64, 128})
    for (int flags : {0, int(sm90::kFwdDefaultFlags)}) {
      const sm90::FwdSmemPlan s = sm90::fwd_smem_plan(d, flags);
      CHECK(s.q_off % 1024 == 0);
      CHECK(s.k_off % 1024 == 0);
      CHECK(s.v_off % 1024 == 0);
      CHECK(s.k_off - s.q_off == sm90::fwd_q_stages(flags) * sm90::kFwdBlockM * d * 2);
      CHECK(s.kv_stages == sm90::kFwdKvStages);
      CHECK(!s.o_in_q);
      CHECK(s.o_off % 1024 == 0);  // the O staging panels are TMA store sources in the 128-byte swizzle
      CHECK(s.o_bytes == 64 * d * 2);
      CHECK(s.bar_off - s.o_off == 2 * 64 * d * 2);
      CHECK(s.bar_off % 8 == 0);
      CHECK(sm90::fwd_smem_request(d, flags) <= 227 * 1024);
    }
  // 3 warpgroups: 1 producer + 2 consumers of 64 rows.
  CHECK(sm90::kFwdThreads == 384);
  CHECK(sm90::kFwdBlockM == 128);
  // kFwdThreeConsumers: 1 producer + 3 consumers, 192 query rows, 64 keys per step, four K/V stages;
  // with the outer pipeline two Q stages that also hold the staged O, without it one Q stage and
  // O buffers of their own.
  for (int outer : {0, int(sm90::kFwdOuterPipeline)}) {
    const int three = sm90::kFwdThreeConsumers | sm90::kFwdKvReuse | outer;
    CHECK(sm90::fwd_threads(three) == 512);
    CHECK(sm90::fwd_block_m(three) == 192);
    CHECK(sm90::fwd_q_stages(three) == (outer ? 2 : 1));
    CHECK(sm90::fwd_kv_stages(three) == 4);
    CHECK(sm90::fwd_o_in_q(three) == (outer != 0));
    for (int d : {64, 128}) {
      const sm90::FwdSmemPlan s = sm90::fwd_smem_plan(d, three);
      CHECK(s.q_bytes == 192 * d * 2);
      CHECK(s.kv_bytes == 64 * d * 2);
      CHECK(s.k_off - s.q_off == (outer ? 2 : 1) * s.q_bytes);
      CHECK(s.v_off - s.k_off == 4 * s.kv_bytes);
      CHECK(s.k_off % 1024 == 0);
      CHECK(s.v_off % 1024 == 0);
      CHECK(s.o_off % 1024 == 0);
      CHECK(s.bar_off - s.o_off == (outer ? 0 : 3 * 64 * d * 2));
      // A warpgroup's rows of a Q stage, where it stages O, start on a 1024-byte boundary.
      CHECK(64 * 128 % 1024 == 0);
      CHECK(sm90::fwd_smem_request(d, three) <= 227 * 1024);
    }
  }
}

TEST_CASE("sm90 forward compiles for sm_90a with the instructions the design needs") {
  ProblemDesc p;
  p.cu_seqlens_q = p.cu_seqlens_k = {0, 1};
  struct V {
    DType dt;
    int d;
    Activation a;
    MaskKind m;
    int max_local;  // LDL + STL instructions allowed
    int act_mix;    // Sm90Options::act_mix (-1: the default)
  };
  // The benchmark variant and a D = 64 one keep every register; the heaviest combination (the
  // 10-FMA gelu_poly with a two-sided window mask) spills a few loop-carried scalars, a handful of
  // local accesses per tile against ~16k instructions per tile, never a fragment register (13 with
  // kFwdSkipEmptyHalf's per-tile flag, 4 without). The
  // mixed fast_gelu at D = 128 keeps one per-tile predicate (the outer-pipeline test) in local
  // memory: one store and one load per tile.
  const V variants[] = {{kBF16, 128, kFastGelu, kMaskNone, 0, -1},  {kFP16, 64, kSilu, kMaskCausal, 0, -1},
                        {kBF16, 128, kGeluPoly, kMaskWindow, 16, -1}, {kBF16, 128, kFastGelu, kMaskNone, 2, 4},
                        {kBF16, 64, kFastGelu, kMaskCausal, 0, 6}};
  for (const V& v : variants) {
    p.dtype = v.dt;
    p.head_dim = v.d;
    p.activation = v.a;
    p.mask = v.m;
    if (v.m == kMaskWindow) p.window_left = p.window_right = 16;
    Sm90Options opt;
    opt.act_mix = v.act_mix;
    const std::vector<KernelSource> srcs = sm90_kernel_sources(p, opt, false);
    REQUIRE(srcs.size() == 1);
    const CompiledKernel k = compile_kernel(srcs[0], 90);
    CAPTURE(srcs[0].name_expression);
    REQUIRE(k.cubin.size() > 1000);
    const std::string sass = disassemble(k.cubin);
    REQUIRE_MESSAGE(!sass.empty(), "cuobjdump is needed for this test (make test installs it)");
    CHECK(count_of(sass, "HGMMA.64x") >= 16);
    CHECK(count_of(sass, "UTMALDG.4D") >= 3);  // Q, K, V through the jagged maps (jagged_load.cuh)
    CHECK(count_of(sass, "UTMASTG.3D") >= 2);  // O leaves by TMA stores (epilogue.cuh store_block_tma)
    CHECK(count_of(sass, "STSM.16.M88.4") >= 2);  // staged by stmatrix (kFwdStmatrixO)
    CHECK(count_of(sass, "SYNCS.PHASECHK") >= 4);
    CHECK(count_of(sass, "SYNCS.ARRIVE") >= 2);
    CHECK(count_of(sass, "USETMAXREG") >= 2);
    CHECK(count_of(sass, "LDL") + count_of(sass, "STL") <= v.max_local);
  }
}

TEST_CASE("sm90 three-consumer-warpgroup forward compiles without local memory") {
  // Experimental (kFwdThreeConsumers): 160 registers per consumer thread; with 128 keys per step
  // it spilled 432 bytes in the activation, with 64 it keeps every register. Both forms: O staged
  // in the Q stage (the registry's sm90-three-wg, with kFwdOuterPipeline) and in buffers of its own.
  ProblemDesc p;
  p.cu_seqlens_q = p.cu_seqlens_k = {0, 1};
  Sm90Options opt;
  for (int outer : {0, int(sm90::kFwdOuterPipeline)})
    for (int d : {64, 128})
    for (MaskKind m : {kMaskNone, kMaskCausal}) {
      opt.fwd_flags = sm90::kFwdThreeConsumers | sm90::kFwdKvReuse | sm90::kFwdHalfFold | outer;
      p.head_dim = d;
      p.mask = m;
      const std::vector<KernelSource> srcs = sm90_kernel_sources(p, opt, false);
      REQUIRE(srcs.size() == 1);
      CAPTURE(srcs[0].name_expression);
      const std::string sass = disassemble(compile_kernel(srcs[0], 90).cubin);
      REQUIRE_MESSAGE(!sass.empty(), "cuobjdump is needed for this test (make test installs it)");
      CHECK(count_of(sass, "HGMMA.64x64x16") >= 4);  // S = Q K^T over 64 keys
      CHECK(count_of(sass, "USETMAXREG") >= 2);
      CHECK(count_of(sass, "LDL") + count_of(sass, "STL") == 0);
    }
}

TEST_CASE("mixed MUFU / FMA fast_gelu: the fraction is exact, spread out, and travels in FLAGS") {
  using namespace sm90;
  for (int mix = 0; mix <= kActMixMax; ++mix) {
    CAPTURE(mix);
    int n16 = 0, n8 = 0, longest_run = 0, run = 0;
    for (int b = 0; b < 16; ++b) {
      const bool alu = act_mix_alu_block(b, mix);
      n16 += alu;
      if (b < 8) n8 += alu;
      run = alu ? run + 1 : 0;
      longest_run = std::max(longest_run, run);
    }
    CHECK(n16 == mix);      // a forward row of 16 blocks (BlockN = 128)
    CHECK(n8 == mix / 2);   // a backward row of 8 blocks (64 queries)
    // Evenly spread: no two FMA blocks in a row while fewer than half of them are FMA blocks.
    if (mix <= 8) CHECK(longest_run <= 1);
    const int flags = with_act_mix(kFwdDefaultFlags | kFwdUnitLogitScale, mix);
    CHECK(act_mix_of(flags) == mix);
    CHECK((flags & ~kActMixMask) == (kFwdDefaultFlags | kFwdUnitLogitScale));
  }
  // Only fast_gelu has a MUFU form to mix: other activations keep one variant whatever act_mix says.
  ProblemDesc p;
  p.cu_seqlens_q = p.cu_seqlens_k = {0, 1};
  p.dtype = kBF16;
  p.head_dim = 128;
  Sm90Options opt;
  opt.act_mix = 4;
  p.activation = kGeluPoly;
  CHECK(sm90_kernel_sources(p, opt, false)[0].name_expression ==
        sm90_kernel_sources(p, Sm90Options{}, false)[0].name_expression);
  p.activation = kFastGelu;
  CHECK(sm90_kernel_sources(p, opt, false)[0].name_expression !=
        sm90_kernel_sources(p, Sm90Options{}, false)[0].name_expression);
}

// The forward flags the host picks for a bf16, D = 128 fast_gelu batch of two sequences of
// lengths len_a and len_b (self-attention), read off the kernel's name ("...,<flags>>").
// The SASS of a kernel compiled with ptxas's report, after checking the report: no spill and no
// serialized wgmma (ptxas's "Potential Performance Loss" notes, C7510 / C7511 / C7520).
static std::string clean_sass_of(KernelSource src) {
  src.options.push_back("-Xptxas=-v");
  const CompiledKernel ck = compile_kernel(src, 90);
  REQUIRE_MESSAGE(ck.log.find("registers") != std::string::npos, "no ptxas report in: ", ck.log);
  CAPTURE(ck.log);
  CHECK(ck.log.find("Potential Performance Loss") == std::string::npos);  // serialized wgmma
  CHECK(ck.log.find(" 0 bytes spill stores, 0 bytes spill loads") != std::string::npos);
  const std::string sass = disassemble(ck.cubin);
  REQUIRE_MESSAGE(!sass.empty(), "cuobjdump is needed for this test (make test installs it)");
  return sass;
}

// The tail forms' compile tests' batch: last query tiles of 20 and 40 rows (after one whole tile,
// and alone) and of 44 rows after two whole tiles, against 512 keys; bf16, D = 128, fast_gelu.
static ProblemDesc tails_compile_problem() {
  ProblemDesc p;
  p.dtype = kBF16;
  p.head_dim = 128;
  p.activation = kFastGelu;
  p.cu_seqlens_q = offsets_from_lengths({148, 40, 300});
  p.cu_seqlens_k = offsets_from_lengths({512, 512, 512});
  return p;
}

static int fwd_flags_for_lengths(int len_a, int len_b, const Sm90Options& opt) {
  ProblemDesc p;
  p.dtype = kBF16;
  p.head_dim = 128;
  p.activation = kFastGelu;
  p.cu_seqlens_q = p.cu_seqlens_k = {0, len_a, len_a + len_b};
  const std::string name = sm90_kernel_sources(p, opt, false)[0].name_expression;
  return std::stoi(name.substr(name.rfind(',') + 1));
}

// A mean-Lk rule of the default, seen from its two sides: `bit` set in the flags of the side where
// the rule turns it on, clear in the other's, and no other bit different.
static void check_only_bit_differs(int bit, int flags_on, int flags_off) {
  CHECK((flags_on & bit) != 0);
  CHECK((flags_off & bit) == 0);
  CHECK((flags_on & ~bit) == (flags_off & ~bit));
}

TEST_CASE("sm90 forward skips empty warpgroup halves by default wherever some tile has one") {
  using namespace sm90;
  auto flags_for = fwd_flags_for_lengths;  // self attention: Lk = Lq
  Sm90Options no_narrow;  // the lengths below also decide the narrow last key block's rule
  no_narrow.fwd_flags_drop = kFwdNarrowLastBlock;
  // At any mean Lk (the rule had a cap of 512 until the fortieth session): each pair's second
  // length ends 40 rows into its last tile, at mean Lk 362, 1096 and 3006.
  for (auto [a, b] : {std::pair{300, 424}, std::pair{1000, 1192}, std::pair{2900, 3112}})
    CHECK((flags_for(a, b, no_narrow) & kFwdSkipEmptyHalf) != 0);
  // Only where some tile has an empty half: a last query tile of 1..64 rows.
  check_only_bit_differs(kFwdSkipEmptyHalf, flags_for(384, 576, no_narrow), flags_for(384, 577, no_narrow));
  check_only_bit_differs(kFwdSkipEmptyHalf, flags_for(192, 512, no_narrow), flags_for(193, 512, no_narrow));
  check_only_bit_differs(kFwdSkipEmptyHalf, flags_for(2048, 2100, no_narrow), flags_for(2048, 2150, no_narrow));
  CHECK((flags_for(512, 512, Sm90Options{}) & kFwdSkipEmptyHalf) == 0);  // whole tiles only
  Sm90Options off;  // the ablation drops it, and explicit flags are used as given
  off.fwd_flags_drop = kFwdSkipEmptyHalf;
  CHECK((flags_for(384, 576, off) & kFwdSkipEmptyHalf) == 0);
  Sm90Options explicit_flags;
  explicit_flags.fwd_flags = kFwdDefaultFlags;
  CHECK((flags_for(512, 512, explicit_flags) & kFwdSkipEmptyHalf) != 0);
}

TEST_CASE("sm90 forward runs a narrow last key block by default only where some sequence has one") {
  using namespace sm90;
  auto flags_for = fwd_flags_for_lengths;  // self attention: Lk = Lq
  Sm90Options no_skip;  // the lengths below also decide the empty-half skip's rule
  no_skip.fwd_flags_drop = kFwdSkipEmptyHalf;
  // Some Lk % 128 in 1..64: on; only whole or more-than-half-full last blocks: off.
  check_only_bit_differs(kFwdNarrowLastBlock, flags_for(384, 576, no_skip), flags_for(384, 577, no_skip));
  CHECK((flags_for(512, 1024, Sm90Options{}) & kFwdNarrowLastBlock) == 0);
  CHECK((flags_for(2048, 2049, Sm90Options{}) & kFwdNarrowLastBlock) != 0);  // at any mean Lk
  Sm90Options off;  // the ablation
  off.fwd_flags_drop = kFwdNarrowLastBlock;
  check_only_bit_differs(kFwdNarrowLastBlock, flags_for(384, 576, Sm90Options{}), flags_for(384, 576, off));
  // The softmax variant and the three-warpgroup consumer have no narrow form.
  Sm90Options softmax;
  softmax.softmax = true;
  CHECK((flags_for(384, 576, softmax) & kFwdNarrowLastBlock) == 0);
  Sm90Options three;
  three.fwd_flags = kFwdThreeConsumers | kFwdKvReuse | kFwdNarrowLastBlock;
  CHECK((flags_for(384, 576, three) & kFwdNarrowLastBlock) == 0);
  // ...and only in the kernels that keep their registers with it (fwd_narrow_keeps_registers):
  // bf16, D = 128, fast_gelu, no mask, logit_scale 1, no act mix, pingpong and outer pipeline.
  const int base = kFwdDefaultFlags | kFwdUnitLogitScale;
  CHECK(fwd_narrow_keeps_registers(kBF16, kFastGelu, kMaskNone, 128, base));
  CHECK(fwd_narrow_keeps_registers(kBF16, kFastGelu, kMaskNone, 128, base & ~kFwdSkipEmptyHalf & ~kFwdWholeBatchBranch));
  CHECK_FALSE(fwd_narrow_keeps_registers(kFP16, kFastGelu, kMaskNone, 128, base));
  CHECK_FALSE(fwd_narrow_keeps_registers(kBF16, kFastGelu, kMaskNone, 64, base));
  CHECK_FALSE(fwd_narrow_keeps_registers(kBF16, kSilu, kMaskNone, 128, base));
  CHECK_FALSE(fwd_narrow_keeps_registers(kBF16, kFastGelu, kMaskCausal, 128, base));
  CHECK_FALSE(fwd_narrow_keeps_registers(kBF16, kFastGelu, kMaskNone, 128, base & ~kFwdUnitLogitScale));
  CHECK_FALSE(fwd_narrow_keeps_registers(kBF16, kFastGelu, kMaskNone, 128, base & ~kFwdPingpong));
  CHECK_FALSE(fwd_narrow_keeps_registers(kBF16, kFastGelu, kMaskNone, 128, base & ~kFwdOuterPipeline));
  CHECK_FALSE(fwd_narrow_keeps_registers(kBF16, kFastGelu, kMaskNone, 128, with_act_mix(base, 4)));
  Sm90Options no_pingpong, mix;
  no_pingpong.fwd_flags_drop = kFwdPingpong;
  mix.act_mix = 4;
  CHECK((flags_for(384, 576, no_pingpong) & kFwdNarrowLastBlock) == 0);
  CHECK((flags_for(384, 576, mix) & kFwdNarrowLastBlock) == 0);
  ProblemDesc p;
  p.cu_seqlens_q = p.cu_seqlens_k = {0, 384, 960};
  for (DType dt : {kBF16, kFP16})
    for (int d : {64, 128})
      for (MaskKind m : {kMaskNone, kMaskCausal})
        for (Activation a : {kFastGelu, kSilu})
          for (float scale : {1.0f, 0.75f}) {
            p.dtype = dt;
            p.head_dim = d;
            p.mask = m;
            p.activation = a;
            p.logit_scale = scale;
            const std::string name = sm90_kernel_sources(p, Sm90Options{}, false)[0].name_expression;
            CAPTURE(name);
            CHECK(((std::stoi(name.substr(name.rfind(',') + 1)) & kFwdNarrowLastBlock) != 0) ==
                  (dt == kBF16 && d == 128 && m == kMaskNone && a == kFastGelu && scale == 1.0f));
          }
}

TEST_CASE("sm90 forward with a narrow last key block: no spill or local memory, nothing serialized") {
  // The four default kernels with the narrow form (fwd_narrow_keeps_registers: bf16, D = 128,
  // fast_gelu, no mask): with and without the skip path (a last query tile of 1..64 rows) and the
  // whole-batch branch (mean Lk >= 192). The narrow block's S is an m64n64 product into the leading
  // half of S's registers (a view through a cast, fwd_consumer_ops.cuh leading): it must stay in registers,
  // and no wgmma may be serialized (ptxas C7511 met the narrow form in fp16, at D = 64, with other
  // activations and without the pingpong or the outer pipeline, which the rule leaves out).
  struct V {
    std::vector<int> q, k;
    bool skip, whole_batch;
  };
  const V variants[] = {{{0, 300, 600}, {0, 300, 600}, true, true},
                        {{0, 60, 120}, {0, 60, 120}, true, false},
                        {{0, 100, 200}, {0, 60, 120}, false, false},
                        {{0, 100, 200}, {0, 300, 600}, false, true}};
  for (const V& v : variants) {
    ProblemDesc p;
    p.dtype = kBF16;
    p.head_dim = 128;
    p.activation = kFastGelu;
    p.cu_seqlens_q = v.q;
    p.cu_seqlens_k = v.k;
    const std::vector<KernelSource> srcs = sm90_kernel_sources(p, Sm90Options{}, false);
    REQUIRE(srcs.size() == 1);
    const std::string& name = srcs[0].name_expression;
    CAPTURE(name);
    const int flags = std::stoi(name.substr(name.rfind(',') + 1));
    REQUIRE((flags & sm90::kFwdNarrowLastBlock) != 0);
    CHECK(((flags & sm90::kFwdSkipEmptyHalf) != 0) == v.skip);
    CHECK(((flags & sm90::kFwdWholeBatchBranch) != 0) == v.whole_batch);
    const std::string sass = clean_sass_of(srcs[0]);
    // The narrow QK^T: in both of the step's batches with the whole-batch branch, else in one.
    CHECK(count_of(sass, "HGMMA.64x64x16") == (v.whole_batch ? 16 : 8));
    CHECK(count_of(sass, "LDL") + count_of(sass, "STL") == 0);
  }
}

TEST_CASE("sm90 forward branches before the GEMM batch by default only from kFwdWholeBatchMinMeanLenK") {
  using namespace sm90;
  const int limit = kFwdWholeBatchMinMeanLenK;
  auto flags_for = fwd_flags_for_lengths;
  const int at_limit = flags_for(limit - 100, limit + 100, Sm90Options{});  // mean Lk = the limit
  const int below = flags_for(limit - 100, limit + 99, Sm90Options{});      // just below it
  check_only_bit_differs(kFwdWholeBatchBranch, at_limit, below);
  Sm90Options off;  // the ablation drops the switch and keeps the other rules
  off.fwd_flags_drop = kFwdWholeBatchBranch;
  CHECK(flags_for(limit - 100, limit + 100, off) == (at_limit & ~kFwdWholeBatchBranch));
  Sm90Options three;  // the three-warpgroup consumer has no such branch
  three.fwd_flags = kFwdThreeConsumers | kFwdWholeBatchBranch | kFwdKvReuse;
  CHECK((flags_for(limit, limit, three) & kFwdWholeBatchBranch) == 0);
}

TEST_CASE("sm90 forward takes tile records over the lanes by default, except with the window mask or softmax") {
  using namespace sm90;
  auto flags_with = [](MaskKind mask, const Sm90Options& opt) {
    ProblemDesc p;
    p.dtype = kBF16;
    p.head_dim = 128;
    p.activation = kFastGelu;
    p.mask = mask;
    p.window_left = 100;
    p.window_right = 20;
    p.cu_seqlens_q = p.cu_seqlens_k = {0, 300, 1000};
    const std::string name = sm90_kernel_sources(p, opt, false)[0].name_expression;
    return std::stoi(name.substr(name.rfind(',') + 1));
  };
  CHECK((flags_with(kMaskNone, Sm90Options{}) & kFwdRecordLanes) != 0);
  CHECK((flags_with(kMaskCausal, Sm90Options{}) & kFwdRecordLanes) != 0);
  CHECK((flags_with(kMaskWindow, Sm90Options{}) & kFwdRecordLanes) == 0);
  Sm90Options softmax;
  softmax.softmax = true;
  CHECK((flags_with(kMaskNone, softmax) & kFwdRecordLanes) == 0);
  Sm90Options off;  // the ablation drops exactly this switch
  off.fwd_flags_drop = kFwdRecordLanes;
  CHECK(flags_with(kMaskNone, off) == (flags_with(kMaskNone, Sm90Options{}) & ~kFwdRecordLanes));
  Sm90Options explicit_flags;  // explicit flags are used as given
  explicit_flags.fwd_flags = kFwdDefaultFlags;
  CHECK((flags_with(kMaskWindow, explicit_flags) & kFwdRecordLanes) != 0);
}

TEST_CASE("sm90 forward stages O by stmatrix by default, except in the three-warpgroup consumer") {
  using namespace sm90;
  auto flags_for = fwd_flags_for_lengths;
  Sm90Options off;  // the ablation
  off.fwd_flags_drop = kFwdStmatrixO;
  check_only_bit_differs(kFwdStmatrixO, flags_for(256, 300, Sm90Options{}), flags_for(256, 300, off));
  CHECK((flags_for(2048, 2048, Sm90Options{}) & kFwdStmatrixO) != 0);
  Sm90Options three;  // its O goes through the Q stage by 4-byte stores
  three.fwd_flags = kFwdThreeConsumers | kFwdKvReuse | kFwdStmatrixO;
  CHECK((flags_for(256, 300, three) & kFwdStmatrixO) == 0);
}

TEST_CASE("sm90 forward branching before the GEMM batch: no arrive inside it, nothing serialized") {
  // The default from a mean Lk of 192 (kFwdWholeBatchBranch) against the same kernel without it.
  // Without it, ptxas closes each step's branchy PV with an extra HGMMA.64x8 (and fences between
  // QK^T and PV); with it, only the finish's keeps its (it must: fwd_consumer.cuh). Neither may
  // serialize the wgmmas (C7514: a WARPGROUP.DEPBAR after every HGMMA) or use local memory.
  ProblemDesc p;
  p.dtype = kBF16;
  p.head_dim = 128;
  p.activation = kFastGelu;
  p.cu_seqlens_q = p.cu_seqlens_k = {0, 2048};
  Sm90Options off;
  off.fwd_flags_drop = sm90::kFwdWholeBatchBranch;
  std::string sass[2];
  for (int with : {0, 1}) {
    const std::vector<KernelSource> srcs = sm90_kernel_sources(p, with ? Sm90Options{} : off, false);
    REQUIRE(srcs.size() == 1);
    CAPTURE(srcs[0].name_expression);
    const std::string& name = srcs[0].name_expression;
    REQUIRE(((std::stoi(name.substr(name.rfind(',') + 1)) & sm90::kFwdWholeBatchBranch) != 0) == (with == 1));
    sass[with] = disassemble(compile_kernel(srcs[0], 90).cubin);
    REQUIRE_MESSAGE(!sass[with].empty(), "cuobjdump is needed for this test (make test installs it)");
    CHECK(count_of(sass[with], "HGMMA.64x128x16") >= 64);
    CHECK(count_of(sass[with], "WARPGROUP.DEPBAR") <= 24);
    CHECK(count_of(sass[with], "LDL") + count_of(sass[with], "STL") == 0);
  }
  CHECK(count_of(sass[1], "HGMMA.64x8x16") <= 2);
  CHECK(count_of(sass[1], "HGMMA.64x8x16") < count_of(sass[0], "HGMMA.64x8x16"));
  CHECK(count_of(sass[1], "WARPGROUP.ARRIVE") < count_of(sass[0], "WARPGROUP.ARRIVE"));
}

TEST_CASE("sm90 forward loads only the 64-row halves of a query tile that hold its rows") {
  using sm90::fwd_load_boxes;
  CHECK(sm90::kFwdLoadRows == 64);
  CHECK(fwd_load_boxes(128, 1) == 1);
  CHECK(fwd_load_boxes(128, 64) == 1);
  CHECK(fwd_load_boxes(128, 65) == 2);
  CHECK(fwd_load_boxes(128, 128) == 2);
  CHECK(fwd_load_boxes(128, 1000) == 2);  // interior tiles and blocks: whole
  CHECK(fwd_load_boxes(64, 17) == 1);
  CHECK(fwd_load_boxes(64, 64) == 1);
}

TEST_CASE("sm90 forward traffic model: rows loaded per tile, K/V kept for a pair, against the minimum") {
  // Sequence 0: Lq = Lk = 60, one tile and one key block. Sequence 1: Lq = Lk = 200, two query
  // tiles (128 and 72 rows) and two key blocks (128 and 72 keys). One head, D = 128: a row is 256 B.
  ProblemDesc p;
  p.heads_q = p.heads_kv = 1;
  p.head_dim = 128;
  p.cu_seqlens_q = p.cu_seqlens_k = offsets_from_lengths({60, 200});
  const double row = 256.0;
  // Whole 128-row tiles: seq 0 loads Q 128 + K, V 2 x 128 and stores O 60; seq 1 loads Q 2 x 128
  // and, per tile, K, V 2 x (128 + 128), and stores O 200.
  const Sm90ForwardTraffic whole = sm90_forward_traffic(p, 1, 128, false);
  CHECK(whole.loaded_bytes == (128 + 256 + 60 + 256 + 1024 + 200) * row);
  CHECK(whole.minimum_bytes == (2 * 260 + 2 * 260) * row);
  // 64-row halves: seq 0's Q, K and V shrink to 64 rows; seq 1's 72-row edges still need both halves.
  CHECK(sm90_forward_traffic(p, 1, 64, false).loaded_bytes == (64 + 128 + 60 + 256 + 1024 + 200) * row);
  // K/V kept: seq 1's second tile reads the first one's two blocks from shared memory.
  CHECK(sm90_forward_traffic(p, 1, 64, true).loaded_bytes == (64 + 128 + 60 + 256 + 512 + 200) * row);
  // The jagged maps (load_rows 1): only the rows a tile holds move. Seq 0: Q, K, V 60 rows each;
  // seq 1: Q 128 + 72, K and V 128 + 72 once (kept for the second tile).
  CHECK(sm90_forward_traffic(p, 1, 1, true).loaded_bytes == (60 + 120 + 60 + 200 + 400 + 200) * row);
  CHECK_THROWS_AS(sm90_forward_traffic(p, 1, 48, true), ProblemError);
}

TEST_CASE("sm90 forward query-column tiles: the plan fits, the kernel keeps its registers, nothing serialized") {
  using namespace sm90;
  const TailSmemPlan s = tail_smem_plan(128);
  CHECK(s.q_bytes == 64 * 128 * 2);
  CHECK(s.kv_bytes == 64 * 128 * 2);
  CHECK(s.p_bytes == 64 * 64 * 2);
  CHECK(s.consumer_bytes % 1024 == 0);
  CHECK(s.k_off % 1024 == 0);
  CHECK(s.v_off % 1024 == 0);
  CHECK(s.p_off % 1024 == 0);
  CHECK(tail_smem_request(128) <= 227 * 1024);
  CHECK(tail_cols(1) == 32);
  CHECK(tail_cols(32) == 32);
  CHECK(tail_cols(33) == 64);
  CHECK(tail_cols(64) == 64);
  // The variant's sources: the main forward without the empty-half skip (no main tile has an
  // empty half left), then the tail kernel, for a batch with last tiles of 20 and 40 rows.
  ProblemDesc p = tails_compile_problem();
  Sm90Options o;
  o.fwd_tail_rows = 64;
  REQUIRE(sm90_fwd_tails_apply(o, p));
  const std::vector<KernelSource> srcs = sm90_kernel_sources(p, o, false);
  REQUIRE(srcs.size() == 2);
  const std::string& main_name = srcs[0].name_expression;
  const int main_flags = std::stoi(main_name.substr(main_name.rfind(',') + 1));
  CHECK((main_flags & kFwdSkipEmptyHalf) == 0);
  CHECK((main_flags & kFwdAllowDependents) != 0);  // the tail kernel launches behind it
  {
    const std::string def = sm90_kernel_sources(p, Sm90Options{}, false).at(0).name_expression;
    CHECK((std::stoi(def.substr(def.rfind(',') + 1)) & kFwdAllowDependents) == 0);
  }
  CHECK(srcs[1].file == "kernels/sm90/fwd_tail.cu");
  const std::string sass = clean_sass_of(srcs[1]);
  // Per tile form: S^T in D / 16 = 8 wgmmas, written twice (the first block and the loop's next
  // block), and O^T in 2 x 4, written twice (the loop and the last block): 32 per form.
  CHECK(count_of(sass, "HGMMA.64x32x16") == 32);
  CHECK(count_of(sass, "HGMMA.64x64x16") == 32);
  CHECK(count_of(sass, "LDL") + count_of(sass, "STL") == 0);
  CHECK(count_of(sass, "UTMALDG.4D") >= 3);  // Q, K, V through the jagged maps
  CHECK(count_of(sass, "SYNCS.PHASECHK") >= 4);
  CHECK(count_of(sass, "SYNCS.ARRIVE") >= 2);
  CHECK(count_of(sass, "USETMAXREG") >= 2);
  CHECK(count_of(sass, "STSM.16.MT88") >= 8);  // stmatrix .trans: P^T and O, both column forms
  // Masks and other head dims keep the main forward's half tiles.
  p.mask = kMaskCausal;
  CHECK_FALSE(sm90_fwd_tails_apply(o, p));
  p.mask = kMaskNone;
  p.head_dim = 64;
  CHECK_FALSE(sm90_fwd_tails_apply(o, p));
}

TEST_CASE("sm90 forward sibling tails: the plan fits, the kernel keeps its registers, nothing serialized") {
  using namespace sm90;
  ProblemDesc p = tails_compile_problem();
  Sm90Options o;
  o.fwd_sibling_tails = true;
  REQUIRE(sm90_fwd_sibling_tails_apply(o, p));
  const std::vector<KernelSource> srcs = sm90_kernel_sources(p, o, false);
  REQUIRE(srcs.size() == 1);
  const std::string& name = srcs[0].name_expression;
  const int flags = std::stoi(name.substr(name.rfind(',') + 1));
  CHECK((flags & kFwdSiblingTails) != 0);
  // What the fourth warpgroup's registers and shared memory cost (fwd_config.h).
  CHECK((flags & (kFwdIntraOverlap | kFwdNarrowLastBlock | kFwdKvReuse)) == 0);
  CHECK((flags & kFwdOuterPipeline) != 0);
  CHECK((flags & kFwdSkipEmptyHalf) != 0);  // the 40-query sequence stays a half tile
  CHECK(fwd_threads(flags) == 512);
  const FwdSmemPlan plan = fwd_smem_plan(128, flags);
  CHECK(plan.o_in_q);
  CHECK(plan.tail_q_off % 1024 == 0);
  CHECK(plan.tail_p_off % 1024 == 0);
  CHECK(plan.tail_p_off - plan.tail_q_off == 64 * 128 * 2);
  CHECK(plan.bar_off - plan.tail_p_off == kFwdPieceRows * 128 * 2);
  CHECK(fwd_smem_request(128, flags) <= 227 * 1024);
  const std::string sass = clean_sass_of(srcs[0]);
  // The pieces: per key block two S^T halves of D / 16 = 8 wgmmas and O^T in 2 x 8, one copy.
  CHECK(count_of(sass, "HGMMA.64x32x16") == 32);
  CHECK(count_of(sass, "LDL") + count_of(sass, "STL") == 0);
  CHECK(count_of(sass, "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xc8") == 1);  // consumers: 200
  CHECK(count_of(sass, "USETMAXREG.DEALLOC.CTAPOOL 0x58") == 1);         // tail warpgroup: 88
  CHECK(count_of(sass, "USETMAXREG.DEALLOC.CTAPOOL 0x18") == 1);         // producer: 24
  CHECK(count_of(sass, "STSM.16.MT88") == 8);  // stmatrix .trans: P^T (2 x 2) and O (2 x 2)
  // Masks, other head dims, the softmax variant and the query-column tiles keep the default.
  p.mask = kMaskCausal;
  CHECK_FALSE(sm90_fwd_sibling_tails_apply(o, p));
  p.mask = kMaskNone;
  p.head_dim = 64;
  CHECK_FALSE(sm90_fwd_sibling_tails_apply(o, p));
  p.head_dim = 128;
  o.fwd_tail_rows = 64;
  CHECK_FALSE(sm90_fwd_sibling_tails_apply(o, p));
  o.fwd_tail_rows = 0;
  o.softmax = true;
  CHECK_FALSE(sm90_fwd_sibling_tails_apply(o, p));
}

TEST_CASE("sm90 forward sibling tails: a record's piece bits round-trip, beside the K / V reuse bit") {
  using namespace sm90;
  for (int rows : {1, 17, kFwdPieceRows})
    for (int first : {0, 128, 32767, 32768, 40000, kFwdPieceMaxFirstRow}) {
      CAPTURE(rows);
      CAPTURE(first);
      const int flags = fwd_piece_bits(rows, first);
      CHECK(fwd_piece_rows(flags) == rows);
      CHECK(fwd_piece_first(flags) == first);
      CHECK((flags & kFwdTileReusesKv) == 0);
      CHECK(fwd_piece_rows(flags | kFwdTileReusesKv) == rows);
    }
  CHECK(fwd_piece_rows(kFwdTileReusesKv) == 0);  // a record without a piece
}

TEST_CASE("query-column tiles: transposed stmatrix stores put fragment (row, col) at [col][row]") {
  // Emulates stmatrix.x4.trans as PTX defines it: register j of lane l holds row l / 4, columns
  // 2 (l % 4) and + 1 of 8 x 8 matrix j, and the memory row that lane 8 j + c names receives column
  // c of matrix j. The registers are a wgmma accumulator's packed pairs 4m .. 4m + 3 (register r of
  // a thread: row 16 warp + lane / 4 + 8 ((r / 2) % 2), column 8 (r / 4) + 2 (lane % 4) + r % 2), so
  // the stores must leave fragment element (row, col) at stage row col, column col0 + row: P^T's
  // [query][key] and O's [query][head dim] layouts, in the 128B-swizzled panels of 64 rows.
  // Panels of 32 rows too: the sibling tails' P^T stage ([32 queries][128 keys], fwd_sibling_tail.cuh).
  using namespace sm90;
  for (int panel_rows : {64, 32})
  for (int n : {32, 64})
    for (int col0 : {0, 64}) {
      if (n > panel_rows) continue;
      CAPTURE(panel_rows);
      CAPTURE(n);
      CAPTURE(col0);
      std::vector<int> stage(size_t(2 * panel_rows * 64), -1);  // two panels of [panel_rows rows][64 entries]
      auto at = [&](int row, int col) -> int& {
        return stage[size_t(((col >> 6) * panel_rows * int(kSw128RowBytes) + int(sw128_offset(row, col & 63))) / 2)];
      };
      auto id = [](int frag_row, int frag_col) { return frag_row * 1000 + frag_col; };
      for (int warp = 0; warp < 4; ++warp)
        for (int lane = 0; lane < 32; ++lane)
          for (int m = 0; m < n / 16; ++m)
            for (int j = 0; j < 4; ++j)
              for (int half = 0; half < 2; ++half) {
                const int reg = 2 * (4 * m + j) + half;  // register of pair 4m + j
                const int frag_row = 16 * warp + lane / 4 + 8 * ((reg / 2) % 2);
                const int frag_col = 8 * (reg / 4) + 2 * (lane % 4) + reg % 2;
                const int r = lane / 4, c = 2 * (lane % 4) + half;  // place in matrix j
                const int namer = 8 * j + c;                        // the lane naming its memory row
                at(tail_trans_row(namer, m), col0 + tail_trans_col(namer, warp) + r) = id(frag_row, frag_col);
              }
      int wrong = 0;
      for (int q = 0; q < n; ++q)
        for (int k = 0; k < 64; ++k) wrong += at(q, col0 + k) != id(k, q);
      CHECK(wrong == 0);
    }
}
