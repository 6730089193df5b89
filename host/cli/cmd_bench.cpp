// gdpa bench — the seed's benchmark sets for every kernel, with the ceilings of the same run.
#include <cstdio>
#include <sstream>

#include "../../kernels/common/activations.cuh"
#include "../bench.h"
#include "../ceilings.h"
#include "../compile.h"
#include "../device_problem.h"
#include "../registry.h"
#include "args.h"
#include "commands.h"
#include "problem_args.h"

namespace gdpa::cli {

namespace {

const char* kHelp =
    "usage: gdpa bench [--kernels NAME,..] [--sets TEXT,..] [--fwd-only|--bwd-only] [--reps N] [--seed N]\n"
    "                  [--out DIR] [--stem NAME] [--act NAME] [--dim D] [--len-k N] [--self-kv dense|jagged]\n"
    "                  [--interleave]\n"
    "  Times forward and backward on the seed's 12 sets (spec 5: B = 1152, H = 4, D = 128, bf16, fast_gelu;\n"
    "  self-attention s = 1.0 and 0.5 at L = 256..2048, cross-attention with Lk = 256), after measuring the\n"
    "  cuBLAS bf16 GEMM ceiling (8192^3) and the device copy bandwidth in the same run. Reports the median\n"
    "  (events around each call, after warm-up), TFLOP/s by the seed's FLOP convention, each set's physical\n"
    "  limit and the fraction of it and of the GEMM ceiling; writes JSON to DIR (default experiments/results).\n"
    "  --kernels: default every kernel that runs here (sm90, baseline, unfused-cublas); ablation variants:\n"
    "             sm90-no-pingpong, sm90-no-outer-pipeline, sm90-no-intra-overlap, sm90-grid-order,\n"
    "             sm90-longest-first, sm90-no-kv-reuse, sm90-no-half-fold, sm90-no-skip-empty-half,\n"
    "             sm90-no-whole-batch-branch, sm90-no-stmatrix-o, sm90-no-narrow-last-block,\n"
    "             sm90-no-record-lanes, sm90-no-tile-records, sm90-no-dq-fence-at-writer,\n"
    "             sm90-no-ds-fence-at-reader;\n"
    "             opt-in: sm90-act-mixN, sm90-softmax, sm90-three-wg (experimental: three consumer\n"
    "             warpgroups, forward only), sm90-fwd-tails, sm90-fwd-tails96, sm90-fwd-tails-sideN\n"
    "             (experimental: last query tiles as query-column tiles in a second kernel),\n"
    "             sm90-fwd-sibling-tails (experimental, slower than sm90 on an H100: last query rows as\n"
    "             query columns inside their sequence's whole tiles, a fourth warpgroup);\n"
    "             backward: sm90-unordered-dq (dQ added in arrival order, from the registers where the\n"
    "             mean Lk >= 384), sm90-unordered-no-red (the same through the writer's bulk reduce),\n"
    "             sm90-no-dq-finish, sm90-no-dq-pair, sm90-no-dq-tma-store,\n"
    "             sm90-no-dq-first, sm90-no-dq-two-stage, sm90-no-early-act, sm90-no-dk-in-ds, sm90-no-dv-in-v,\n"
    "             sm90-no-pair-two-stage, sm90-no-pair-dv-in-ds, sm90-no-pair-late-store-wait,\n"
    "             sm90-no-pair-rank1-dv-in-ds, sm90-no-pair-rank0-late-store-wait, sm90-no-first-step-init-acc,\n"
    "             sm90-no-stmatrix-grads, sm90-no-stmatrix-ds, sm90-no-dq-follow, sm90-no-bwd-record-lanes,\n"
    "             sm90-dq-finish-always,\n"
    "             sm90-dq-follow-always, sm90-follow-smsN (the follower on N SMs),\n"
    "             sm90-fwd-halfN (the forward's schedule with a half-empty last query tile at N / 100 of a\n"
    "             whole one; sm90-fwd-half100: the snake, without the dealing by load)\n"
    "  --sets: only sets whose name contains one of the comma-separated texts (e.g. self-s1.0,cross)\n"
    "  --reps: timed repetitions (default: as many as fit 400 ms, 3..30)\n"
    "  --len-k N: the cross sets with every Lk = N instead of 256 (named cross-LkN-L<L>)\n"
    "  --self-kv dense|jagged: the self sets' keys. dense (default, the seed's benchmark): every Lk = L,\n"
    "             only the queries jagged; jagged: every Lk = Lq (the sets measured before the thirty-eighth\n"
    "             session, and the ones with partial last KV tiles). The same at s = 1; the JSON says which.\n"
    "  --interleave: time the kernels of a set in rounds of one call each, their order reversed every\n"
    "             other round, instead of each alone for its whole budget. For comparing variants of\n"
    "             one kernel: a clock that drifts weighs on all alike (timed one after another, the\n"
    "             second of two kernels came out 2-3 % faster or slower). Not for absolute numbers next\n"
    "             to a kernel of lower power: between its calls the GPU leaves its power cap, and the\n"
    "             sm90 forward measured 5-14 % above its sustained speed when interleaved with\n"
    "             unfused-cublas.\n"
    "  GDPA_REP_TIMES=FILE: every timed call's repetition times (ms, in the order they ran) appended to\n"
    "             FILE, one line per kernel and direction of each set.\n";

bool selected(const std::string& name, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  for (const std::string& f : filters)
    if (name.find(f) != std::string::npos) return true;
  return false;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  Args a(argc, argv, 0, {"help", "fwd-only", "bwd-only", "interleave"});
  if (a.has("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  a.check_known({"help", "fwd-only", "bwd-only", "kernels", "sets", "reps", "seed", "out", "stem", "act", "dim", "len-k",
                 "self-kv", "interleave"});
  std::string why;
  if (!gpu_available(&why)) {
    std::fprintf(stderr, "gdpa bench: needs a GPU: %s\n", why.c_str());
    return 1;
  }
  Context ctx(0);
  const DeviceInfo& dev = ctx.info();
  Stream stream;
  const CUstream s = stream.get();
  const bool do_fwd = !a.has("bwd-only"), do_bwd = !a.has("fwd-only");
  const int reps = a.get_int("reps", 0);
  const bool interleave = a.has("interleave");
  const uint64_t seed = uint64_t(a.get_int("seed", 1));
  ProblemDesc base = default_bench_base();
  if (a.has("act")) {
    base.activation = activation_named(a.get("act", ""));
  }
  base.head_dim = a.get_int("dim", base.head_dim);
  const SelfKv self_kv = self_kv_from_name(a.get("self-kv", "dense"));

  std::vector<std::string> names;
  if (a.has("kernels")) {
    names = split_list(a.get("kernels", ""));
  } else {
    for (const std::string& n : all_kernel_names())
      if (make_kernel(n)->supports(base, dev.arch(), false, nullptr)) names.push_back(n);
  }

  // Every variant this run needs, compiled in parallel up front (the kernel variant depends on the
  // problem's dtype, D, activation, mask and scales, which are the same for all sets); prepare()
  // below then finds each in the cache instead of compiling one after another.
  {
    std::vector<KernelSource> srcs;
    const ProblemDesc p = bench_problem(seed_bench_sets(self_kv)[0], seed, base);
    for (const std::string& n : names) {
      auto k = make_kernel(n);
      const bool bwd = do_bwd && k->supports(p, dev.arch(), true, nullptr);
      if ((do_fwd && k->supports(p, dev.arch(), false, nullptr)) || bwd)
        for (const KernelSource& src : k->sources(p, bwd)) srcs.push_back(src);
    }
    if (!srcs.empty()) compile_many(unique_sources(srcs), dev.arch(), 0);
  }

  std::fprintf(stderr, "measuring ceilings (cuBLAS bf16 GEMM 8192^3, device copy)...\n");
  Ceilings c;
  c.gemm_tflops = measure_gemm_ceiling(8192, 10, s, kBF16).median;
  c.copy_gbs = measure_copy_bandwidth(size_t(2) << 30, 10, s).median;

  const std::vector<std::string> set_filters = split_list(a.get("sets", ""));
  std::vector<BenchRow> rows;
  Json jrows = Json::array();
  const int len_k = a.get_int("len-k", 0);
  for (BenchSet set : seed_bench_sets(self_kv)) {
    if (len_k > 0 && set.family == "cross") {
      set.len_k = len_k;
      set.name = "cross-Lk" + std::to_string(len_k) + "-L" + std::to_string(set.max_len);
    }
    if (!selected(set.name, set_filters)) continue;
    const ProblemDesc p = bench_problem(set, seed, base);
    validate(p);
    DeviceProblem dp(p, do_bwd, seed, dev.arch(), s);
    stream.synchronize();
    const DeviceTensors view = dp.view();
    // Every kernel of the set is prepared first. --interleave: all are timed in alternating rounds
    // (time_interleaved: none gains from being timed first or second). Otherwise each is timed
    // alone, back to back, as a kernel runs in sustained use.
    std::vector<std::unique_ptr<AttentionKernel>> kernels;
    std::vector<bool> fwd_ok, bwd_ok;
    for (const std::string& name : names) {
      auto k = make_kernel(name);
      const bool f = do_fwd && k->supports(p, dev.arch(), false, nullptr);
      const bool b = do_bwd && k->supports(p, dev.arch(), true, nullptr);
      if (!f && !b) continue;
      std::fprintf(stderr, "  %s: preparing %s...\n", set.name.c_str(), name.c_str());
      k->prepare(p, dev, b);
      kernels.push_back(std::move(k));
      fwd_ok.push_back(f);
      bwd_ok.push_back(b);
    }
    for (int dir = 0; dir < 2; ++dir) {
      const bool bwd = dir == 1;
      std::vector<size_t> timed;
      std::vector<std::function<void(CUstream)>> calls;
      for (size_t i = 0; i < kernels.size(); ++i) {
        if (!(bwd ? bwd_ok[i] : fwd_ok[i])) continue;
        AttentionKernel* k = kernels[i].get();
        if (bwd) k->forward(view, s);  // outputs the backward does not read, but a real step has them
        timed.push_back(i);
        calls.push_back([k, bwd, &view](CUstream st) { bwd ? k->backward(view, st) : k->forward(view, st); });
      }
      if (calls.empty()) continue;
      std::fprintf(stderr, "  %s: timing %zu kernel(s), %s%s...\n", set.name.c_str(), calls.size(), bwd ? "bwd" : "fwd",
                   interleave ? ", interleaved" : "");
      std::vector<Timing> times;
      if (interleave) {
        times = time_interleaved(calls, s, 2, reps);
      } else {
        for (const auto& call : calls) times.push_back(time_enqueue(call, s, 2, reps));
      }
      for (size_t j = 0; j < timed.size(); ++j) {
        const AttentionKernel& k = *kernels[timed[j]];
        BenchRow r;
        r.set = set.name;
        r.kernel = k.name();
        r.direction = bwd ? "bwd" : "fwd";
        r.variants = row_variants(k, p, bwd);
        r.t = times[j];
        r.limit = set_limit(p, bwd, c);
        r.tflops = r.limit.flops / (r.t.median_ms * 1e-3) / 1e12;
        rows.push_back(r);
        jrows.push(bench_row_json(r, c));
      }
    }
  }
  print_bench_table(rows, c);
  Json root = Json::object();
  Json ceil = Json::object();
  ceil.set("gemm_bf16_8192_tflops", Json::number(c.gemm_tflops)).set("copy_gbs", Json::number(c.copy_gbs));
  root.set("what", Json::string("gdpa bench: the seed's sets, B=1152, fast_gelu unless noted"))
      .set("device", device_json(dev))
      .set("activation", Json::string(activation_name(base.activation)))
      .set("head_dim", Json::number(base.head_dim))
      .set("seed", Json::number(double(seed)))
      .set("self_kv", Json::string(self_kv_name(self_kv)))
      .set("timing", Json::string(interleave ? "interleaved rounds" : "each kernel alone"))
      .set("ceilings", ceil)
      .set("rows", jrows);
  const std::string path =
      write_results(a.get("out", "experiments/results"), a.get("stem", "bench"), dev, root);
  std::printf("wrote %s\n", path.c_str());
  // The JSON is written either way, so a fault can be inspected; the exit code says it is not data.
  const std::vector<std::string> bad = impossible_rows(rows);
  for (const std::string& b : bad)
    std::fprintf(stderr, "gdpa bench: impossible timing (faster than the set's limit): %s\n", b.c_str());
  return bad.empty() ? 0 : 1;
}

}  // namespace gdpa::cli
