#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <sys/stat.h>

#include "ceilings.h"
#include "generator.h"
#include "kernel_api.h"

namespace gdpa {

const char* self_kv_name(SelfKv kv) { return kv == SelfKv::kDense ? "dense" : "jagged"; }

SelfKv self_kv_from_name(const std::string& name) {
  if (name == "dense") return SelfKv::kDense;
  if (name == "jagged") return SelfKv::kJagged;
  throw ProblemError("--self-kv must be dense or jagged (got '" + name + "')");
}

std::vector<BenchSet> seed_bench_sets(SelfKv kv) {
  std::vector<BenchSet> v;
  char buf[64];
  for (double s : {1.0, 0.5})
    for (int L : {256, 512, 1024, 2048}) {
      std::snprintf(buf, sizeof buf, "self-s%.1f-L%d", s, L);
      v.push_back({buf, "self", L, s, kv == SelfKv::kDense ? L : 0});
    }
  for (int L : {256, 512, 1024, 2048}) {
    std::snprintf(buf, sizeof buf, "cross-Lk256-L%d", L);
    v.push_back({buf, "cross", L, 1.0, 256});
  }
  return v;
}

ProblemDesc default_bench_base() {
  ProblemDesc p;
  p.heads_q = p.heads_kv = 4;
  p.head_dim = 128;
  p.dtype = kBF16;
  p.activation = kFastGelu;
  return p;
}

ProblemDesc bench_problem(const BenchSet& s, uint64_t seed, const ProblemDesc& base) {
  BatchShape shape;
  shape.batch = 1152;
  shape.max_len_q = s.max_len;
  shape.sparsity = s.sparsity;
  shape.fixed_len_k = s.len_k;
  return make_problem(shape, seed, base);
}

Timing time_enqueue(const std::function<void(CUstream)>& enqueue, CUstream s, int warmup, int reps,
                    double budget_ms) {
  return time_interleaved({enqueue}, s, warmup, reps, budget_ms)[0];
}

std::vector<int> interleaved_order(int n, int rounds) {
  std::vector<int> order;
  order.reserve(size_t(std::max(n, 0)) * size_t(std::max(rounds, 0)));
  for (int r = 0; r < rounds; ++r)
    for (int j = 0; j < n; ++j) order.push_back(r % 2 == 0 ? j : n - 1 - j);
  return order;
}

namespace {

// GDPA_REP_TIMES=FILE: each timed call's repetitions, in the order they ran, appended to FILE as
// one line of milliseconds per call. A median hides how a set's speed moves while it runs (the
// GPU's clock falls once the power cap engages); this shows it without changing the timing.
void append_rep_times(const std::vector<std::vector<double>>& ms) {
  const char* path = std::getenv("GDPA_REP_TIMES");
  if (!path || !*path) return;
  std::ofstream f(path, std::ios::app);
  for (const std::vector<double>& call : ms) {
    for (size_t i = 0; i < call.size(); ++i) f << (i ? " " : "") << call[i];
    f << "\n";
  }
  if (!f) std::fprintf(stderr, "gdpa: cannot append the repetition times to %s\n", path);
}

}  // namespace

std::vector<Timing> time_interleaved(const std::vector<std::function<void(CUstream)>>& calls, CUstream s, int warmup,
                                     int reps, double budget_ms) {
  const int n = int(calls.size());
  for (const auto& call : calls)
    for (int i = 0; i < warmup; ++i) call(s);
  Event a, b;
  auto time_one = [&](int k) {
    a.record(s);
    calls[size_t(k)](s);
    b.record(s);
    b.synchronize();
    return double(b.ms_since(a));
  };
  if (reps <= 0 && n > 0) {  // one timed round decides how many fit the budget
    double round_ms = 0;
    for (int k = 0; k < n; ++k) round_ms += time_one(k);
    reps = int(std::clamp(budget_ms * n / std::max(1e-3, round_ms), 3.0, 30.0));
  }
  std::vector<std::vector<double>> ms(static_cast<size_t>(n));
  for (int k : interleaved_order(n, reps)) ms[size_t(k)].push_back(time_one(k));
  append_rep_times(ms);
  std::vector<Timing> out(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {
    const CeilingStats st = summarize_rates(ms[size_t(k)].data(), reps);  // median / min / max of any samples
    out[size_t(k)].reps = reps;
    out[size_t(k)].min_ms = st.min;
    out[size_t(k)].max_ms = st.max;
    out[size_t(k)].median_ms = st.median;
  }
  return out;
}

std::vector<std::string> impossible_rows(const std::vector<BenchRow>& rows, double slack) {
  std::vector<std::string> bad;
  for (const BenchRow& r : rows)
    if (r.limit.limit_tflops > 0 && r.tflops > (1.0 + slack) * r.limit.limit_tflops)
      bad.push_back(r.set + " " + r.kernel + " " + r.direction + ": " + std::to_string(r.tflops) + " TFLOP/s > limit " +
                    std::to_string(r.limit.limit_tflops));
  return bad;
}

SetLimit set_limit(const ProblemDesc& p, bool backward, const Ceilings& c) {
  SetLimit l;
  const double fwd = forward_flops(p);
  l.flops = backward ? 2.5 * fwd : fwd;
  const double nq = double(p.total_q()) * p.q_row() * 2.0;  // bytes of one [total_q, Hq, D] tensor
  const double nk = double(p.total_k()) * p.k_row() * 2.0;
  // Forward: read Q, K, V, write O. Backward: read Q, K, V, dO, write dQ, dK, dV.
  l.bytes = backward ? 3 * nq + 4 * nk : 2 * nq + 2 * nk;
  const double t_flops = c.gemm_tflops > 0 ? l.flops / (c.gemm_tflops * 1e12) : 0;
  const double t_bytes = c.copy_gbs > 0 ? l.bytes / (c.copy_gbs * 1e9) : 0;
  const double floor = std::max(t_flops, t_bytes);
  l.limit_tflops = floor > 0 ? l.flops / floor / 1e12 : 0;
  return l;
}

std::vector<std::string> row_variants(const AttentionKernel& k, const ProblemDesc& p, bool backward) {
  const std::vector<KernelSource> fwd = k.sources(p, false);
  std::vector<std::string> names;
  for (const KernelSource& s : k.sources(p, backward)) {
    const bool forward_one = backward && std::any_of(fwd.begin(), fwd.end(), [&](const KernelSource& f) {
                               return f.name_expression == s.name_expression;
                             });
    if (!forward_one) names.push_back(s.name_expression);
  }
  return names;
}

Json bench_row_json(const BenchRow& r, const Ceilings& c) {
  Json variants = Json::array();
  for (const std::string& v : r.variants) variants.push(Json::string(v));
  Json j = Json::object();
  j.set("set", Json::string(r.set))
      .set("kernel", Json::string(r.kernel))
      .set("direction", Json::string(r.direction))
      .set("variants", variants)
      .set("median_ms", Json::number(r.t.median_ms))
      .set("min_ms", Json::number(r.t.min_ms))
      .set("max_ms", Json::number(r.t.max_ms))
      .set("reps", Json::number(r.t.reps))
      .set("tflops", Json::number(r.tflops))
      .set("flops", Json::number(r.limit.flops))
      .set("bytes", Json::number(r.limit.bytes))
      .set("limit_tflops", Json::number(r.limit.limit_tflops))
      .set("fraction_of_limit", Json::number(r.limit.limit_tflops > 0 ? r.tflops / r.limit.limit_tflops : 0))
      .set("fraction_of_gemm", Json::number(c.gemm_tflops > 0 ? r.tflops / c.gemm_tflops : 0));
  return j;
}

Json device_json(const DeviceInfo& d) {
  Json j = Json::object();
  j.set("name", Json::string(d.name))
      .set("arch", Json::number(d.arch()))
      .set("sm_count", Json::number(d.sm_count))
      .set("max_sm_clock_mhz", Json::number(d.sm_clock_khz / 1000.0))
      .set("max_mem_clock_mhz", Json::number(d.mem_clock_khz / 1000.0))
      .set("driver_version", Json::number(d.driver_version));
  return j;
}

void print_bench_table(const std::vector<BenchRow>& rows, const Ceilings& c) {
  std::printf("\n%-18s %-24s %-4s %10s %9s %8s %8s %7s %7s\n", "set", "kernel", "dir", "median ms", "spread",
              "TFLOP/s", "limit", "%limit", "%GEMM");
  for (const BenchRow& r : rows) {
    const double spread = r.t.median_ms > 0 ? (r.t.max_ms - r.t.min_ms) / r.t.median_ms * 100.0 : 0;
    std::printf("%-18s %-24s %-4s %10.3f %8.1f%% %8.1f %8.1f %6.1f%% %6.1f%%\n", r.set.c_str(), r.kernel.c_str(),
                r.direction.c_str(), r.t.median_ms, spread, r.tflops, r.limit.limit_tflops,
                r.limit.limit_tflops > 0 ? 100.0 * r.tflops / r.limit.limit_tflops : 0.0,
                c.gemm_tflops > 0 ? 100.0 * r.tflops / c.gemm_tflops : 0.0);
  }
  std::printf("ceilings: cuBLAS bf16 GEMM 8192^3 = %.1f TFLOP/s, device copy = %.0f GB/s (same run)\n", c.gemm_tflops,
              c.copy_gbs);
}

std::string write_results(const std::string& dir, const std::string& stem, const DeviceInfo& d, const Json& root) {
  ::mkdir(dir.c_str(), 0755);
  std::string gpu = d.name;
  for (char& ch : gpu)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  // Names carry the second they were written in (experiments/plot.py parses them), so a second call
  // within the same second waits for the next one instead of overwriting the first's file.
  auto path_now = [&] {
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y%m%d-%H%M%S", std::gmtime(&now));
    return dir + "/" + stem + "-" + gpu + "-" + date + ".json";
  };
  std::string path = path_now();
  for (int tries = 0; std::ifstream(path).good() && tries < 3; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    path = path_now();
  }
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << root.dump();
  return path;
}

}  // namespace gdpa
