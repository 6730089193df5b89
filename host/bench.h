// bench.h — the seed's benchmark sets (spec 5), timing, each set's physical limit, and the
// results table and JSON written by `gdpa bench` and the experiment scripts.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "driver.h"
#include "json.h"
#include "problem.h"

namespace gdpa {

struct BenchSet {
  std::string name;    // "self-s1.0-L1024", "self-s0.5-L256", "cross-Lk256-L512"
  std::string family;  // "self" or "cross"
  int max_len = 0;     // L (query side)
  double sparsity = 1.0;
  int len_k = 0;       // every sequence's Lk (dense KV: self L, cross 256); 0: Lk = Lq (jagged KV)
};

// How the self sets draw their keys. kDense is the seed's benchmark (spec 5: jagged queries,
// every Lk = L; Meta's benchmark draws K and V as [B * L] rows). kJagged gives every sequence as
// many keys as queries (Lk = Lq), jagged on both sides: the sets the project measured until its
// thirty-eighth session, still the ones that exercise the kernels' key-side edges (a last KV tile
// or key block partly past the end), which dense keys of a multiple of 128 never have.
enum class SelfKv { kDense, kJagged };
const char* self_kv_name(SelfKv kv);                // "dense" / "jagged"
SelfKv self_kv_from_name(const std::string& name);  // throws ProblemError on anything else

// The 12 sets: self s = 1.0 and 0.5 at L 256..2048, cross short-KV (Lk = 256) at Lq max 256..2048.
// The self sets differ between the two conventions only at s = 0.5.
std::vector<BenchSet> seed_bench_sets(SelfKv kv = SelfKv::kDense);
// B = 1152, Hq = Hkv = 4, D = 128, bf16, fast_gelu, scales 1, jagged lengths from `seed`.
ProblemDesc bench_problem(const BenchSet& s, uint64_t seed, const ProblemDesc& base);
ProblemDesc default_bench_base();

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
};
// Times `enqueue` with device events around each repetition, after `warmup` untimed calls.
// reps <= 0 picks the count from a time budget (at least 3, at most 30 repetitions).
Timing time_enqueue(const std::function<void(CUstream)>& enqueue, CUstream s, int warmup, int reps,
                    double budget_ms = 400.0);

// The same for several calls that are to be compared (the kernels of one bench set), timed in
// rounds: round r runs every call once, in the given order when r is even and in reverse when it
// is odd. A clock that drifts during the run, or a call that runs faster or slower right after
// another, then weighs on every call alike, instead of on whichever was timed first (timed one
// after another, the second of two kernels came out 2-3 % faster or slower than the first on the
// same set). reps <= 0: as many rounds as fit `budget_ms` per call on average, 3..30.
// GDPA_REP_TIMES=FILE appends each call's repetition times to FILE (bench.cpp, append_rep_times).
std::vector<Timing> time_interleaved(const std::vector<std::function<void(CUstream)>>& calls, CUstream s, int warmup,
                                     int reps, double budget_ms = 400.0);
// The call order of time_interleaved: `rounds` rounds of n calls, as indices.
std::vector<int> interleaved_order(int n, int rounds);

struct Ceilings {
  double gemm_tflops = 0;  // cuBLAS bf16 GEMM 8192^3, measured in the same run
  double copy_gbs = 0;     // device-to-device copy, bytes read + written per second / 1e9
};

// The fastest a set can run: its FLOPs at the GEMM ceiling or the bytes it must move at least
// once at the copy bandwidth, whichever takes longer (perf/TARGETS.md). limit_tflops = flops / floor.
struct SetLimit {
  double flops = 0, bytes = 0, limit_tflops = 0;
};
SetLimit set_limit(const ProblemDesc& p, bool backward, const Ceilings& c);

struct BenchRow {
  std::string set, kernel, direction;
  // The NVRTC kernels that ran for this row (name expressions; a backward row lists only what the
  // forward does not use): which variant a kernel's run-time rules chose is then in the JSON.
  std::vector<std::string> variants;
  Timing t;
  double tflops = 0;
  SetLimit limit;
};

class AttentionKernel;
// BenchRow::variants of kernel `k` on problem `p` in one direction.
std::vector<std::string> row_variants(const AttentionKernel& k, const ProblemDesc& p, bool backward);

Json bench_row_json(const BenchRow& r, const Ceilings& c);

// Rows whose median beats their set's physical limit by more than `slack` (a fraction): a timing
// fault (a launch that did not do its work), never a result. Empty when every row is plausible.
std::vector<std::string> impossible_rows(const std::vector<BenchRow>& rows, double slack = 0.05);
Json device_json(const DeviceInfo& d);
// Prints the rows as an aligned table with each kernel's fraction of the set's limit and of the
// GEMM ceiling.
void print_bench_table(const std::vector<BenchRow>& rows, const Ceilings& c);
// Writes `root` to <dir>/<stem>-<gpu>-<date>.json (creating dir) and returns the path.
std::string write_results(const std::string& dir, const std::string& stem, const DeviceInfo& d, const Json& root);

}  // namespace gdpa
