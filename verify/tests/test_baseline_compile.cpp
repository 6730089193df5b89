// test_baseline_compile.cpp — the baseline and unfused kernels compile for sm_90a without a GPU,
// with no register spills, and the host-side choices around them (variant names, supports(),
// the unfused chunk plan) hold. NVRTC needs no device, so this runs on every machine.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <stdlib.h>
#include <unistd.h>

#include "../../host/baseline.h"
#include "../../host/bench.h"
#include "../../host/ceilings.h"
#include "../../host/compile.h"
#include "../../host/registry.h"
#include "../../host/unfused_cublas.h"
#include "../../kernels/baseline/convert.cuh"
#include "../../kernels/baseline/layout.h"

using namespace gdpa;

namespace {

ProblemDesc variant(DType dtype, int head_dim, Activation act, MaskKind mask) {
  ProblemDesc p;
  p.dtype = dtype;
  p.head_dim = head_dim;
  p.activation = act;
  p.mask = mask;
  p.cu_seqlens_q = {0, 100, 300};
  p.cu_seqlens_k = {0, 100, 300};
  return p;
}

// Representative variants: both dtypes, both head dims, an MUFU activation, an erf one, an ALU
// polynomial, a piecewise one, and every mask kind.
std::vector<ProblemDesc> representative_variants() {
  return {variant(kBF16, 128, kFastGelu, kMaskNone), variant(kFP16, 64, kGelu, kMaskCausal),
          variant(kBF16, 64, kSilu, kMaskWindow), variant(kFP16, 128, kGeluPoly, kMaskCausal),
          variant(kBF16, 128, kReluSquare, kMaskWindow)};
}

// ptxas -v prints "N bytes spill stores, M bytes spill loads" per function; any non-zero count is
// a spill. Returns the first offending line, or "" when there is none.
std::string first_spill(const std::string& log) {
  static const std::regex spill("([1-9][0-9]*) bytes spill (stores|loads)");
  std::smatch m;
  return std::regex_search(log, m, spill) ? m.str(0) : std::string();
}

void compile_all(const std::vector<KernelSource>& sources) {
  for (KernelSource src : sources) {
    src.options.push_back("-Xptxas=-v");  // registers and spills into the log
    CAPTURE(src.name_expression);
    const CompiledKernel k = compile_kernel(src, 90);
    CHECK(!k.cubin.empty());
    CHECK(!k.lowered_name.empty());
    // The ptxas report must be there (a cached entry keeps its log), or the spill check is void.
    REQUIRE_MESSAGE(k.log.find("registers") != std::string::npos, "no ptxas report in: ", k.log);
    CHECK_MESSAGE(first_spill(k.log).empty(), src.name_expression, " spills: ", first_spill(k.log));
  }
}

}  // namespace

TEST_CASE("baseline kernel names are the documented name expressions") {
  ProblemDesc p = variant(kFP16, 64, kSilu, kMaskWindow);  // <1,64,10,2>
  const std::vector<KernelSource> fwd = baseline_kernel_sources(p, false);
  REQUIRE(fwd.size() == 1);
  CHECK(fwd[0].file == "kernels/baseline/gdpa_fwd.cu");
  CHECK(fwd[0].name_expression == "gdpa::baseline_fwd<1,64,10,2>");
  const std::vector<KernelSource> bwd = baseline_kernel_sources(p, true);
  REQUIRE(bwd.size() == 3);
  CHECK(bwd[1].file == "kernels/baseline/gdpa_bwd.cu");
  CHECK(bwd[1].name_expression == "gdpa::baseline_bwd_dkdv<1,64,10,2>");
  CHECK(bwd[2].name_expression == "gdpa::baseline_bwd_dq<1,64,10,2>");

  const std::vector<KernelSource> un = unfused_kernel_sources(p, true);
  REQUIRE(un.size() == 4);
  CHECK(un[0].name_expression == "gdpa::unfused_gather<64>");
  CHECK(un[1].name_expression == "gdpa::unfused_scatter<64>");
  CHECK(un[2].name_expression == "gdpa::unfused_act<1,10,2>");
  CHECK(un[3].name_expression == "gdpa::unfused_act_bwd<1,10,2>");
  CHECK(unfused_kernel_sources(p, false).size() == 3);
}

TEST_CASE("baseline forward variants compile for sm_90a without spills") {
  for (const ProblemDesc& p : representative_variants()) compile_all(baseline_kernel_sources(p, false));
}

TEST_CASE("baseline backward variants compile for sm_90a without spills") {
  for (const ProblemDesc& p : representative_variants()) {
    std::vector<KernelSource> s = baseline_kernel_sources(p, true);
    s.erase(s.begin());  // the forward is covered above
    compile_all(s);
  }
}

TEST_CASE("baseline and unfused kernels compile for Ampere and Ada, which have no arch-specific target") {
  // They promise "any sm_80+ GPU"; there is no sm_80a or sm_89a, so the compile must use sm_80 / sm_89.
  for (int arch : {80, 89}) {
    CAPTURE(arch);
    std::vector<KernelSource> srcs = baseline_kernel_sources(variant(kBF16, 128, kFastGelu, kMaskCausal), true);
    for (const KernelSource& s : unfused_kernel_sources(variant(kFP16, 64, kSilu, kMaskNone), true)) srcs.push_back(s);
    for (const KernelSource& src : srcs) {
      CAPTURE(src.name_expression);
      const CompiledKernel k = compile_kernel(src, arch);
      CHECK(k.cubin.size() > 100);
    }
  }
}

TEST_CASE("unfused elementwise kernels compile for sm_90a") {
  compile_all(unfused_kernel_sources(variant(kBF16, 128, kFastGelu, kMaskNone), true));
  compile_all(unfused_kernel_sources(variant(kFP16, 64, kGeluTanh, kMaskWindow), true));
}

TEST_CASE("baseline supports() draws the documented lines") {
  auto kernel = make_baseline_kernel();
  CHECK(kernel->name() == "baseline");
  std::string why;
  ProblemDesc p = variant(kBF16, 128, kFastGelu, kMaskNone);
  CHECK(kernel->supports(p, 90, true, &why));
  CHECK(kernel->supports(p, 80, true, &why));  // 149 KB fits sm_80's 163 KB
  CHECK_FALSE(kernel->supports(p, 75, false, &why));
  CHECK(why.find("sm_80") != std::string::npos);
  // sm_89 allows 99 KB per block: the D = 128 forward (85 KB) fits, the backward (149 KB) not.
  CHECK(kernel->supports(p, 89, false, &why));
  CHECK_FALSE(kernel->supports(p, 89, true, &why));
  CHECK(why.find("shared memory") != std::string::npos);
  CHECK(kernel->supports(variant(kBF16, 64, kFastGelu, kMaskNone), 89, true, &why));  // 85 KB

  ProblemDesc d96 = variant(kBF16, 96, kFastGelu, kMaskNone);
  CHECK_FALSE(kernel->supports(d96, 90, false, &why));
  ProblemDesc shared = p;
  shared.kv_index = {0, 0};
  CHECK(kernel->supports(shared, 90, false, &why));
  CHECK_FALSE(kernel->supports(shared, 90, true, &why));
  CHECK(why.find("kv_index") != std::string::npos);
}

TEST_CASE("baseline shared-memory budget matches the kernels' layout") {
  // Forward: Q and K/V tiles of 64 x (D + 4) floats and one 64 x 68 P tile.
  CHECK(baseline::fwd_smem_bytes(128) == 4 * (2 * 64 * 132 + 64 * 68));
  CHECK(baseline::fwd_smem_bytes(128) <= 2 * 114 * 1024);  // two CTAs per H100/H200 SM
  CHECK(baseline::bwd_smem_bytes(128) == 4 * (4 * 64 * 132 + 64 * 68));
  CHECK(baseline::bwd_smem_bytes(128) <= baseline_max_smem_optin(80));
  CHECK(baseline::tiles_for(0) == 0);
  CHECK(baseline::tiles_for(64) == 1);
  CHECK(baseline::tiles_for(65) == 2);
}

TEST_CASE("unfused plan keeps every chunk under the memory budget") {
  // The benchmark's largest self-attention set: 38 GB of bf16 scores if padded in one piece.
  ProblemDesc p;
  p.heads_q = p.heads_kv = 4;
  p.head_dim = 128;
  std::vector<int> lens(1152, 2048);
  p.cu_seqlens_q = {0};
  for (int l : lens) p.cu_seqlens_q.push_back(p.cu_seqlens_q.back() + l);
  p.cu_seqlens_k = p.cu_seqlens_q;
  const size_t budget = kUnfusedDefaultBudget;
  for (bool backward : {false, true}) {
    CAPTURE(backward);
    const UnfusedPlan plan = plan_unfused(p, backward, budget);
    CHECK(plan.lq == 2048);
    CHECK(plan.lk == 2048);
    CHECK(plan.lk_ld == 2048);
    REQUIRE(plan.chunk >= 1);
    CHECK(plan.chunk < 1152);  // it must actually chunk
    CHECK(plan.total_bytes() <= budget);
    CHECK(plan.bytes_per_sequence * size_t(plan.chunk + 1) > budget);  // and use the budget
    // Scores dominate: S (and dP) of 4 heads x 2048 x 2048 bf16 per sequence.
    const size_t scores = size_t(4) * 2048 * 2048 * 2 * (backward ? 2 : 1);
    CHECK(plan.bytes_per_sequence > scores);
  }
  // A budget below one sequence still makes progress one sequence at a time; a huge one takes all.
  CHECK(plan_unfused(p, false, 1).chunk == 1);
  CHECK(plan_unfused(p, true, size_t(1) << 50).chunk == 1152);

  // Odd key lengths get 16-byte score rows.
  ProblemDesc odd = p;
  odd.cu_seqlens_q = {0, 5, 8};
  odd.cu_seqlens_k = {0, 37, 38};
  const UnfusedPlan small = plan_unfused(odd, false, budget);
  CHECK(small.lq == 5);
  CHECK(small.lk == 37);
  CHECK(small.lk_ld == 40);
  CHECK(small.chunk == 2);
}

TEST_CASE("unfused supports() and name") {
  auto kernel = make_unfused_cublas_kernel();
  CHECK(kernel->name() == "unfused-cublas");
  std::string why;
  ProblemDesc p = variant(kBF16, 128, kFastGelu, kMaskCausal);
  CHECK(kernel->supports(p, 90, true, &why));
  CHECK_FALSE(kernel->supports(p, 75, false, &why));
  p.kv_index = {1, 0};
  CHECK(kernel->supports(p, 90, false, &why));
  CHECK_FALSE(kernel->supports(p, 90, true, &why));
}

TEST_CASE("bench refuses timings faster than the set's physical limit") {
  BenchRow ok, fast;
  ok.set = fast.set = "self-s0.5-L256";
  ok.kernel = fast.kernel = "sm90";
  ok.direction = fast.direction = "fwd";
  ok.limit.limit_tflops = fast.limit.limit_tflops = 365.0;
  ok.tflops = 209.0;
  fast.tflops = 1182.0;  // seen once (experiments/PERF_NOTES.md, "Timing fault"): no real result
  CHECK(impossible_rows({ok}).empty());
  const std::vector<std::string> bad = impossible_rows({ok, fast});
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].find("self-s0.5-L256 sm90 fwd") == 0);
  BenchRow edge = ok;
  edge.tflops = 1.04 * 365.0;  // within the 5 % the ceilings' own noise allows
  CHECK(impossible_rows({edge}).empty());
}

TEST_CASE("bench times the kernels of a set in rounds that alternate their order") {
  // Two kernels: A B, B A, A B, ... so that each is first in half of the rounds; three: the middle
  // one stays in the middle and the outer ones swap.
  CHECK(interleaved_order(2, 4) == std::vector<int>{0, 1, 1, 0, 0, 1, 1, 0});
  CHECK(interleaved_order(3, 2) == std::vector<int>{0, 1, 2, 2, 1, 0});
  CHECK(interleaved_order(1, 3) == std::vector<int>{0, 0, 0});
  CHECK(interleaved_order(2, 0).empty());
  // Every call is timed exactly `rounds` times.
  const std::vector<int> o = interleaved_order(4, 7);
  for (int k = 0; k < 4; ++k) CHECK(std::count(o.begin(), o.end(), k) == 7);
}

TEST_CASE("bench sets: the self sets' keys are dense by default (spec 5), jagged on request") {
  const std::vector<BenchSet> dense = seed_bench_sets(), jagged = seed_bench_sets(SelfKv::kJagged);
  REQUIRE(dense.size() == 12);
  REQUIRE(jagged.size() == 12);
  for (size_t i = 0; i < dense.size(); ++i) {
    CHECK(dense[i].name == jagged[i].name);
    const ProblemDesc d = bench_problem(dense[i], 7, default_bench_base());
    const ProblemDesc j = bench_problem(jagged[i], 7, default_bench_base());
    CHECK(d.cu_seqlens_q == j.cu_seqlens_q);  // the same query lengths under both
    bool jagged_q = false;
    for (int b = 0; b < d.batch(); ++b) {
      const int want_k = dense[i].family == "cross" ? 256 : dense[i].max_len;
      CHECK(d.len_k(b) == want_k);
      CHECK(j.len_k(b) == (dense[i].family == "cross" ? 256 : j.len_q(b)));
      CHECK(d.len_q(b) >= 1);
      CHECK(d.len_q(b) <= dense[i].max_len);
      jagged_q = jagged_q || d.len_q(b) != dense[i].max_len;
    }
    CHECK(jagged_q == (dense[i].sparsity < 1.0));
  }
  CHECK(std::string(self_kv_name(SelfKv::kDense)) == "dense");
  CHECK(self_kv_from_name("jagged") == SelfKv::kJagged);
  CHECK_THROWS_AS(self_kv_from_name("Dense"), ProblemError);
}

TEST_CASE("bench rows record the kernel variants the run-time rules chose") {
  // The sm90 backward's in-kernel dQ finish and its cluster pairs depend on the problem
  // (bwd_config.h kBwdDqFinishMaxMeanLenK, kBwdPairMinMeanLenQ): the JSON must say which variant
  // each set ran.
  auto k = make_kernel("sm90");
  // self s = 0.5, L = 256 with jagged keys (mean Lk 128): the ordered in-kernel finish
  ProblemDesc p = bench_problem(seed_bench_sets(SelfKv::kJagged)[4], 1, default_bench_base());
  const std::vector<std::string> fwd = row_variants(*k, p, false), bwd = row_variants(*k, p, true);
  REQUIRE(fwd.size() == 1);
  CHECK(fwd[0].find("gdpa_fwd<") != std::string::npos);
  REQUIRE(bwd.size() == 2);  // the backward and its dQ pass, not the forward again
  CHECK(bwd[0].find("gdpa_bwd<0,128,3,0,317759582>") != std::string::npos);  // kBwdSkipEmptyHalf (jagged), no kBwdDeferDq
  CHECK(bwd[1].find("gdpa_bwd_dq_convert<0,128,true>") != std::string::npos);
  p = bench_problem(seed_bench_sets()[0], 1, default_bench_base());  // self s = 1, L = 256: cluster pairs
  const std::vector<std::string> pair = row_variants(*k, p, true);
  REQUIRE(pair.size() == 1);  // no dQ pass
  // early act, two stages, dV in dS; both ranks' late store waits, rank 1's dV in dS (4 steps per KV tile)
  CHECK(pair[0].find("gdpa_bwd<0,128,3,0,3803611263>") != std::string::npos);
  p = bench_problem(seed_bench_sets()[3], 1, default_bench_base());  // self s = 1, L = 2048: no finish
  const std::vector<std::string> follow = row_variants(*k, p, true);
  REQUIRE(follow.size() == 2);
  // the dQ follower beside it; tile records, dV in V's rows, the first step's initialisation
  CHECK(follow[0].find("gdpa_bwd<0,128,3,0,4556152855>") != std::string::npos);
  CHECK(follow[1].find("gdpa_bwd_dq_follow<0,128>") != std::string::npos);
  // The seed's s = 0.5 L = 256 (dense keys, every Lk = 256, mean Lq 128.5) takes the pairs of
  // self s = 1 L = 256 (kBwdPairMinMeanLenQ), and from L = 512 the accumulator path with the follower.
  p = bench_problem(seed_bench_sets()[4], 1, default_bench_base());
  CHECK(row_variants(*k, p, true)[0].find("gdpa_bwd<0,128,3,0,3803611263>") != std::string::npos);
  p = bench_problem(seed_bench_sets()[5], 1, default_bench_base());
  CHECK(row_variants(*k, p, true)[0].find("gdpa_bwd<0,128,3,0,4556152855>") != std::string::npos);
  BenchRow r;
  r.variants = bwd;
  const std::string json = bench_row_json(r, Ceilings{}).dump();
  CHECK(json.find("\"variants\"") != std::string::npos);
  CHECK(json.find("gdpa_bwd_dq_convert") != std::string::npos);
}

TEST_CASE("results files written within one second keep separate names") {
  char tmpl[] = "/tmp/gdpa-results-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  DeviceInfo d;
  d.name = "test GPU";
  const std::string a = write_results(dir, "stem", d, Json::object().set("n", Json::number(1)));
  const std::string b = write_results(dir, "stem", d, Json::object().set("n", Json::number(2)));
  CHECK(a != b);
  CHECK(a.find("/stem-test_GPU-") != std::string::npos);
  for (const std::string& path : {a, b}) {
    std::ifstream f(path);
    CHECK(f.good());
    std::remove(path.c_str());
  }
  ::rmdir(dir.c_str());
}

TEST_CASE("ceiling statistics: median, min and max of the per-rep rates") {
  const double odd[] = {3.0, 1.0, 2.0};
  const CeilingStats a = summarize_rates(odd, 3);
  CHECK(a.median == 2.0);
  CHECK(a.min == 1.0);
  CHECK(a.max == 3.0);
  CHECK(a.reps == 3);
  const double even[] = {10.0, 4.0, 6.0, 1.0};
  const CeilingStats b = summarize_rates(even, 4);
  CHECK(b.median == 5.0);  // mean of the middle two
  CHECK(b.min == 1.0);
  CHECK(b.max == 10.0);
  CHECK_THROWS(summarize_rates(even, 0));
}

TEST_CASE("baseline fast fp16 staging conversion is bit-identical to dtype.cuh") {
  // Every fp16 pattern: normals, subnormals, zeros, infinities and NaN payloads of both signs.
  int mismatches = 0;
  unsigned first_bad = 0;
  for (unsigned h = 0; h < 0x10000u; ++h) {
    const unsigned want = float_bits(fp16_bits_to_float((unsigned short)h));
    const unsigned got = float_bits(baseline::io_bits_to_float_fast<kFP16>(h));
    if (want != got && mismatches++ == 0) first_bad = h;
  }
  CHECK_MESSAGE(mismatches == 0, "first mismatch at fp16 bits ", first_bad);
  int bf16_mismatches = 0;
  for (unsigned h = 0; h < 0x10000u; ++h)
    bf16_mismatches += float_bits(baseline::io_bits_to_float_fast<kBF16>(h)) !=
                       float_bits(bf16_bits_to_float((unsigned short)h));
  CHECK(bf16_mismatches == 0);
}
