// scheduler.h — the host-side tile scheduler of the persistent kernels.
//
// The host lists every (batch, head, block) tile that exists, with its cost, and orders the list
// by a run-time policy; the kernel only walks the list. Keeping the policy on the host makes it
// an ablation switch and keeps the device loop free of scheduling arithmetic.
//
// THE CONTRACT between a tile list and a persistent kernel (every policy relies on it):
//   the kernel is launched with grid = persistent_grid(tiles.size(), num_sms) CTAs, and CTA c
//   processes tiles[c], tiles[c + grid], tiles[c + 2 * grid], ... in that order.
// `num_sms` below is that number of persistent workers: the SM count for one CTA per SM (pass
// 2 * SMs for two resident CTAs per SM). A list built for one worker count is balanced for that
// count only; any list is still correct (each tile runs exactly once) under any grid size.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "../kernels/common/params.h"
#include "problem.h"

namespace gdpa {

enum class SchedulePolicy {
  kGridOrder,     // (batch, head, block) nested, as a non-persistent grid would run them
  kLongestFirst,  // stable sort by cost, descending (LPT without regard to the striding)
  kZigzag,        // longest-first, dealt to the workers in snake order (see below)
};

// "grid", "longest-first", "zigzag"; parse_schedule_policy throws ProblemError on other names.
const char* schedule_policy_name(SchedulePolicy p);
SchedulePolicy parse_schedule_policy(const std::string& name);

// What a tile costs a worker: its inner-loop steps, at least 1, since a tile with no visible
// key (work 0) still runs its prologue and writes its zero output.
inline int tile_cost(const WorkTile& t) { return t.work > 0 ? t.work : 1; }

// Forward: one tile per (sequence b with Lq(b) > 0, query head, BlockM query rows). work = number
// of BlockN-aligned KV tiles the query rows can see under the mask (mask_key_range); 0 when none
// (the tile still exists: it writes zeros). Tiles with Lk(b) = 0 exist with work 0.
//
// Zigzag: the longest-first list is dealt round by round, num_sms tiles per round; in even rounds
// worker w gets the w-th tile of the round, in odd rounds the (num_sms-1-w)-th (a snake), which
// pairs big tiles with small ones. Position r * num_sms + w of the returned vector holds worker
// w's tile of round r, so the striding contract above delivers exactly that assignment. The last
// round, if partial (k < num_sms tiles), can only reach workers 0..k-1 under the contract; its
// tiles go largest-first to the least loaded of those workers.
std::vector<WorkTile> build_forward_tiles(const ProblemDesc& p, int block_m, int block_n,
                                          SchedulePolicy policy, int num_sms);

// Backward: one tile per (sequence b with Lk(b) > 0, KV head, BlockN key rows); tiles of sequences
// with Lq(b) = 0 exist with work 0 (they write zero dK, dV). work = number of BlockM-aligned query
// tiles that can see the keys (mask_query_range) times the group size (the G query heads of the
// KV head). Throws ProblemError when p has a kv_index (forward-only).
std::vector<WorkTile> build_backward_tiles(const ProblemDesc& p, int block_m, int block_n,
                                           SchedulePolicy policy, int num_sms);

// A tile list reordered by `policy` for `num_sms` workers (the two builders above end with it; a
// launcher that filters or regroups their grid-order list applies it afterwards).
std::vector<WorkTile> apply_policy(std::vector<WorkTile> tiles, SchedulePolicy policy, int num_sms);

// Grid of the persistent launch: one CTA per worker, fewer when there are fewer tiles.
inline unsigned persistent_grid(size_t num_tiles, int num_sms) {
  return unsigned(num_tiles < size_t(num_sms) ? num_tiles : size_t(num_sms));
}

// Per-worker sums of tile_cost under the striding contract (worker c gets tiles c, c + num_sms,
// ...). max_over_mean = max / mean over all num_sms workers (1 = perfect balance; idle workers
// count, so a list shorter than num_sms is unbalanced).
struct LoadStats {
  double max_over_mean = 1.0;
  double max_work = 0.0;
  double mean_work = 0.0;
};
LoadStats per_sm_load(const std::vector<WorkTile>& tiles, int num_sms);

// Useful score pairs over computed ones when every sequence is cut into block_m x block_n tiles
// with no mask: sum Lq Lk / sum ceil(Lq, block_m) ceil(Lk, block_n), ceil(x, b) rounding x up to a
// multiple of b. The FLOP convention counts only the useful pairs, so on jagged batches a kernel
// computing whole tiles can reach at most this fraction of its dense-tile speed. 1 when nothing
// is computed.
double tile_padding_efficiency(const ProblemDesc& p, int block_m, int block_n);

// A forward tile's time in inner steps, as the tile-boundary model has it: a tile of n key blocks
// takes n steps plus `boundary_steps` at its end (the O epilogue and the next tile's first
// activation, which nothing of its own hides: about 0.9 of a step in the sm90 forward, from its times
// at different key lengths, PERF_NOTES sixth and twentieth sessions), and
// a last query tile holding at most block_m / 2 rows takes half_step_share * n steps plus the same
// boundary (1: it costs what a whole tile does; 0.5: its steps run in exactly half the time).
struct TileTimeModel {
  double boundary_steps = 0.0;
  double half_step_share = 1.0;
  // The query-column tiles (kernels/sm90/fwd_tail.cu): with tail_rows > 0 the last tiles that
  // is_tail_tile names run instead as blocks of at most 64 rows, each of 32 columns (at most 32 rows)
  // or 64, taking columns / block_m of a whole tile's steps times that form's slowdown (its products
  // against the main forward's per FLOP), plus tail_boundary_steps (what of its boundary the other
  // consumer warpgroup does not hide); half_step_share no longer applies to them.
  int tail_rows = 0;
  double tail_boundary_steps = 0.0;
  double narrow_slowdown = 1.0;  // 32 columns
  double wide_slowdown = 1.0;    // 64 columns
  // The form sm90-fwd-sibling-tails builds (PERF_NOTES, "The L = 512 parity taken apart on the
  // H200"; the kernel cuts a tail into 32-row pieces, one per whole tile): the tail computed
  // as query columns inside the CTA of a whole tile of the same (sequence, head), from the K and V
  // that tile loads. Only a last tile with a whole tile before it (block > 0) can ride so; a
  // sequence's only tile stays in the main forward at half_step_share. (The kernel is stricter: a
  // tail of 33-64 rows needs two whole tiles, one per piece; build_sibling_tail_schedule.)
  bool tails_need_sibling = false;
  // With tails_need_sibling, piece_rows > 0 models the kernel as built: a tail is cut into pieces
  // of at most piece_rows rows, needs a whole tile before it per piece, and each piece takes
  // piece_rows / block_m of a whole tile's steps times narrow_slowdown.
  int piece_rows = 0;
};
// Useful score pairs per modelled step, over block_m x block_n pairs: sum Lq Lk / (block_m block_n
// sum of the tiles' modelled steps). A dense set of whole tiles of n blocks gives n / (n + boundary).
// The ratio of two sets' rates is the ratio of their speeds in useful FLOPs if the kernel runs the
// model's steps equally fast on both; the sm90 forward at s = 0.5 does (PERF_NOTES, forty-first
// session), which makes this the bound behind issue 5's parity at each L. Every pair of a sequence
// counts as useful (no mask). 0 when nothing is computed.
double modelled_useful_rate(const ProblemDesc& p, int block_m, int block_n, const TileTimeModel& m);

// Issue 5's parity as the model gives it for two sets of the same L: the set with half-empty tiles
// over the dense one, each rate over its set's limit (bench.h set_limit).
double modelled_parity(const ProblemDesc& half, double limit_half, const ProblemDesc& dense, double limit_dense,
                       int block_m, int block_n, const TileTimeModel& m);
// The largest boundary in [0, max_boundary] steps at which modelled_parity, with the half tiles'
// steps at m.half_step_share, still reaches `target` (the parity falls as the boundary grows):
// -1 when it falls short even with no boundary, max_boundary when it reaches it throughout.
double largest_boundary_reaching(double target, const ProblemDesc& half, double limit_half, const ProblemDesc& dense,
                                 double limit_dense, int block_m, int block_n, double half_step_share,
                                 double max_boundary = 2.0);

// A per-CTA schedule, the contract of the sm90 forward: CTA c runs tiles[cta_begin[c]] ..
// tiles[cta_begin[c + 1] - 1] in that order (cta_begin has ctas + 1 entries). Unlike the striding
// contract it can keep several tiles together on one CTA: the query tiles of one (sequence, head)
// whose keys fit in `resident_blocks` KV blocks form one unit, so the kernel loads their K and V
// once and keeps them in shared memory (cross-attention with short KV, short sequences).
struct CtaSchedule {
  std::vector<WorkTile> tiles;
  std::vector<int> cta_begin;
  int ctas() const { return cta_begin.empty() ? 0 : int(cta_begin.size()) - 1; }
};
// Units (single tiles, or the KV-sharing groups when resident_blocks > 0) are ordered by the
// policy exactly as build_forward_tiles orders tiles, then dealt: grid order and longest-first
// round-robin (what the striding contract gives), zigzag in snake order. num_ctas = min(units, SMs).
//
// half_tile_cost < 1 (zigzag only): a last query tile holding at most block_m / 2 rows costs that
// fraction of a whole tile of the same keys (the sm90 forward's empty-half skip makes it cheaper),
// and the units, still in the policy's order, go each to the CTA with the least modelled cost so
// far instead of the snake. The order is kept because the query tiles of a (sequence, head) share
// its K and V in L2 only while they run at about the same time on different CTAs; sorting the
// cheaper tiles last would leave each to fetch its keys from DRAM again.
//
// tail_rows > 0: the tiles is_tail_tile names for it are not dealt (the query-column tiles run
// them, build_tail_schedule).
CtaSchedule build_forward_schedule(const ProblemDesc& p, int block_m, int block_n, SchedulePolicy policy,
                                   int num_sms, int resident_blocks, double half_tile_cost = 1.0,
                                   int tail_rows = 0);

// The forward's sibling tails (kFwdSiblingTails, kernels/sm90/fwd_sibling_tail.cuh): a sequence's
// last query tile of at most block_m / 2 rows that sees keys is cut into pieces of at most
// piece_rows rows, each carried by a different whole tile of the same (sequence, head), the later
// ones first; where there are fewer whole tiles than pieces (or a mask), the tail stays a tile of
// its own. pieces[i] is main.tiles[i]'s piece (rows 0: none; first: its first row, sequence-local).
// The tiles are dealt as build_forward_schedule deals them (no K / V reuse), a host tile's
// modelled cost raised by piece_cost times its own per piece it carries.
struct SiblingPiece {
  int first = 0, rows = 0;
};
struct SiblingTailSchedule {
  CtaSchedule main;
  std::vector<SiblingPiece> pieces;
};
SiblingTailSchedule build_sibling_tail_schedule(const ProblemDesc& p, int block_m, int block_n, SchedulePolicy policy,
                                                int num_sms, double half_tile_cost, int piece_rows,
                                                double piece_cost);

// The forward's query-column tiles (kernels/sm90/fwd_tail.cu) take a sequence's last query tile
// of block_m rows when it holds at most tail_rows of them and sees a key (a tile with none writes
// zeros, which the main forward does).
bool is_tail_tile(const ProblemDesc& p, const WorkTile& t, int block_m, int tail_rows);
// Their schedule: the tiles is_tail_tile names, cut into blocks of 64 query rows (a tail tile's
// most; WorkTile::block counts 64-row blocks here), longest first by modelled cost (64-key blocks
// times the block's columns over 64: 32 columns for at most 32 rows, plus one key block for the
// boundary), each to the least loaded of `workers` workers (the tail kernel's consumer
// warpgroups, two per CTA): worker w runs tiles[cta_begin[w]] .. tiles[cta_begin[w + 1] - 1].
// cta_begin has workers + 1 entries.
CtaSchedule build_tail_schedule(const ProblemDesc& p, int block_m, int tail_rows, int workers);
// The same blocks for a tail kernel that runs beside the main forward on SMs of its own
// (Sm90Options::fwd_tail_sms), ordered so that each runs when the main forward is modelled to run
// the other query tiles of its (sequence, head): a tail block reads its sequence's whole K and V,
// which L2 still holds then, and from DRAM again if it runs apart from them (PERF_NOTES, "The tail
// kernel profiled"; measured slower than the default: 0.63x on 16 SMs). The blocks go, by
// tail_block_moments ascending, each to the least loaded worker, so every worker walks its list in
// the main forward's time order.
CtaSchedule build_tail_schedule_beside(const ProblemDesc& p, int block_m, int tail_rows, int workers,
                                       const CtaSchedule& main, double half_tile_cost);
// When in the main forward's run each tail block's (sequence, head) is modelled to be read, as a
// share of the busiest CTA's modelled time (0 = its start, 1 = its end): the mean of the midpoints
// of the (sequence, head)'s main tiles, each CTA running its tiles back to back at
// modelled_tile_cost. Blocks of a (sequence, head) with no main tile are spread evenly over (0, 1)
// in the order given.
std::vector<double> tail_block_moments(const ProblemDesc& p, int block_m, const std::vector<WorkTile>& blocks,
                                       const CtaSchedule& main, double half_tile_cost);
// The cost build_forward_schedule models for tile t (tile_cost, or half_tile_cost of it for a last
// tile of at most block_m / 2 rows).
double modelled_tile_cost(const ProblemDesc& p, const WorkTile& t, int block_m, double half_tile_cost);
// Per-CTA sums of tile_cost over a CtaSchedule (max / mean over the CTAs that exist).
LoadStats cta_load(const CtaSchedule& s);
// The same with modelled_tile_cost.
LoadStats modelled_cta_load(const ProblemDesc& p, const CtaSchedule& s, int block_m, double half_tile_cost);

}  // namespace gdpa
