// sm90.h — the hand-scheduled Hopper kernels (kernels/sm90/) behind the AttentionKernel interface.
#pragma once
#include <memory>
#include <vector>

#include "compile.h"
#include "kernel_api.h"
#include "scheduler.h"

namespace gdpa {

struct Sm90Options {
  int fwd_flags = -1;  // kernels/sm90/fwd_config.h FwdFlags; -1 = kFwdDefaultFlags and the rules
                       // that depend on the problem (fwd_config.h: both mean-Lk limits)
  // With fwd_flags = -1: switches removed from the defaults before those rules apply (an ablation
  // that changes exactly one switch; explicit fwd_flags would bypass the rules).
  int fwd_flags_drop = 0;
  // kernels/sm90/bwd_config.h BwdFlags; -1 = the defaults plus the problem-dependent rules (the
  // in-kernel dQ finish only for a mean Lk <= kBwdDqFinishMaxMeanLenK). Explicit flags are used as
  // given, except that kBwdDqFinish is dropped without `deterministic` (it needs the fixed order).
  long long bwd_flags = -1;
  // With bwd_flags = -1: switches removed from the defaults before the rules above apply, so an
  // ablation changes exactly one switch (explicit bwd_flags would bypass the rules).
  long long bwd_flags_drop = 0;
  SchedulePolicy policy = SchedulePolicy::kZigzag;
  // Backward: dQ blocks are added in a fixed KV order, so dQ is bit-identical run to run. The
  // default: with the first adder storing instead of the accumulator being zeroed, it measured no
  // slower than the unordered adds (experiments/PERF_NOTES.md).
  bool deterministic = true;
  bool softmax = false;        // forward only: ordinary softmax attention (kFwdSoftmax), not GDPA
  int act_mix = -1;            // fast_gelu only: sixteenths of the elements on the FMA pipe
                               // (kernels/sm90/act_mix.h); -1 = act_mix_default for the head dim
  // Backward with kBwdDqFollow: SMs left out of the persistent grid for the dQ follower; 0 = the
  // default rule (host/sm90_bwd.cpp sm90_bwd_follow_sms).
  int dq_follow_sms = 0;
  std::string label;           // name() suffix for ablation variants, e.g. "no-pingpong"
  // Backward profiling (kBwdTrace, kernels/sm90/trace.cuh): after every backward the launcher
  // waits for it and writes the first CTAs' event trace to this .npy file. Empty: no trace, unless
  // explicit bwd_flags ask for kBwdTrace (then the file is kDefaultBwdTracePath).
  std::string bwd_trace;
  // Forward profiling (kFwdTrace): the same after every forward; explicit fwd_flags with kFwdTrace
  // and no file name write kDefaultFwdTracePath.
  std::string fwd_trace;
  // Forward, zigzag: the modelled cost of a last query tile of at most 64 rows against a whole one
  // (build_forward_schedule's half_tile_cost); 1 deals the snake. Negative: the default, 0.75
  // where the problem takes the empty-half skip and 1 elsewhere (sm90.cpp fwd_half_tile_cost).
  double fwd_half_tile_cost = -1.0;
  // Forward: a sequence's last query tile of at most this many rows (64 or 96) runs as
  // query-column tiles of at most 64 rows each (kernels/sm90/fwd_tail.cu) in a second kernel
  // behind the main one, where the problem allows it (sm90_fwd_tails_apply); 0: none.
  // Experimental: the registry's sm90-fwd-tails (64) and sm90-fwd-tails96.
  int fwd_tail_rows = 0;
  // With fwd_tail_rows: 0 runs the query-column tiles behind the main forward, on every SM as its
  // CTAs leave; N > 0 runs them beside it from the start, on N SMs of their own, the main forward
  // on the others, each tile when the main forward reads its (sequence, head)
  // (build_tail_schedule_beside). Experimental: the registry's sm90-fwd-tails-sideN.
  int fwd_tail_sms = 0;
  // Forward: a sequence's last query rows, at most 64 after its whole query tiles, computed as
  // query columns inside the CTAs of those whole tiles (kFwdSiblingTails,
  // kernels/sm90/fwd_sibling_tail.cuh), where the problem allows it (sm90_fwd_sibling_tails_apply).
  // Experimental: the registry's sm90-fwd-sibling-tails.
  bool fwd_sibling_tails = false;
};
// Whether the sibling tails run for problem p under options o: asked for (the option, or explicit
// fwd_flags with kFwdSiblingTails), GDPA (not the softmax variant), D = 128, no mask, and no
// query-column tiles behind the main forward.
bool sm90_fwd_sibling_tails_apply(const Sm90Options& o, const ProblemDesc& p);
// Whether the query-column tiles run for problem p under options o: asked for, GDPA (not the
// softmax variant), D = 128, no mask.
bool sm90_fwd_tails_apply(const Sm90Options& o, const ProblemDesc& p);
// Where a trace goes when nobody named a file ($GDPA_BWD_TRACE / $GDPA_FWD_TRACE for the registry's
// names).
constexpr const char* kDefaultBwdTracePath = "bwd-trace.npy";
constexpr const char* kDefaultFwdTracePath = "fwd-trace.npy";

std::unique_ptr<AttentionKernel> make_sm90_kernel(const Sm90Options& opt = {});

// `flags` with the mixed MUFU / FMA bits (kernels/sm90/act_mix.h) this problem gets: only
// fast_gelu has a MUFU form to mix; act_mix < 0 takes act_mix_default for the head dim.
long long sm90_with_act_mix(long long flags, const Sm90Options& opt, const ProblemDesc& p, bool backward);

// What the sm90 forward moves between L2 and the SMs for problem p under its default schedule
// (zigzag on `num_sms` SMs), next to the least any kernel must (Q, K, V read once, O written once;
// the benchmark's byte count). Q is loaded per query tile and K, V per visited key block, in boxes
// of `load_rows` rows covering the rows a tile or block holds (128 gives whole tiles; 1 models the
// kernel's jagged maps, whose rows past a sequence's end are zero-filled without an L2 read, so only
// the rows the tile holds move); with `kv_reuse` the tiles that keep the previous tile's K/V
// resident load none. O
// counts its valid rows. These are the SM side's requests to L2, the busiest unit of the forward
// at L = 256 (ncu); DRAM fills and write-backs come on top.
struct Sm90ForwardTraffic {
  double loaded_bytes = 0;   // Q, K, V brought to shared memory, O stored
  double minimum_bytes = 0;  // Q, K, V, O once
};
Sm90ForwardTraffic sm90_forward_traffic(const ProblemDesc& p, int num_sms, int load_rows, bool kv_reuse);

// The sm90 forward's per-CTA schedule for problem p on num_sms CTAs (the default flags' rules,
// zigzag), its per-CTA load modelled with the half-tile cost its dealing uses where the empty-half
// skip runs (sm90.cpp fwd_half_tile_cost; 1 where it does not): as the default deals it, and as
// the snake would. max / mean over the CTAs.
struct Sm90ForwardBalance {
  double half_tile_cost = 1.0;
  double dealt_skew = 1.0;
  double snake_skew = 1.0;
};
Sm90ForwardBalance sm90_forward_balance(const ProblemDesc& p, int num_sms);

// The exact variants prepare() would compile, for ahead-of-time compilation (`make kernels`).
std::vector<KernelSource> sm90_kernel_sources(const ProblemDesc& p, const Sm90Options& opt, bool backward);

}  // namespace gdpa
