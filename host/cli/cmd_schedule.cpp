// gdpa schedule — per-SM load of each tile-scheduling policy on the benchmark sets (host only).
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "../bench.h"
#include "../scheduler.h"
#include "../sm90.h"
#include "args.h"
#include "commands.h"

namespace gdpa::cli {

int cmd_schedule(int argc, char** argv) {
  Args a(argc, argv, 0, {"help"});
  if (a.has("help")) {
    std::puts(
        "usage: gdpa schedule [--sms 132] [--block-m 128] [--block-n 128] [--seed N] [--self-kv dense|jagged]\n"
        "                     [--out DIR]\n"
        "  For every benchmark set and policy (grid, longest-first, zigzag), builds the forward and backward\n"
        "  tile lists and prints the per-SM load skew (max / mean of assigned work; 1.0 is balanced), then\n"
        "  each set's useful / computed score pairs when sequences are cut into whole tiles, and the bytes the\n"
        "  sm90 forward moves between L2 and the SMs over the set's minimum (whole 128-row tiles without K/V\n"
        "  reuse; 64-row halves without; 64-row halves with K/V kept resident; only the rows inside each\n"
        "  sequence with K/V kept, the kernel's default: its jagged maps read nothing past a sequence's end).\n"
        "  Last, the sm90 forward's own per-CTA schedule, its load modelled with a half-empty last query tile\n"
        "  at the cost its dealing assumes where the empty-half skip runs (0.75 of a whole one, 1 elsewhere):\n"
        "  dealt by that load (the default) and dealt in snake order.\n"
        "  Then issue 5's parity as the tile-time model bounds it (scheduler.h TileTimeModel): the s = 0.5\n"
        "  forward's fraction of its limit over the s = 1 forward's at each L, if both ran the model's steps\n"
        "  equally fast, with the limits at the reference ceilings of perf/TARGETS.md (750 TFLOP/s, 4.27 TB/s),\n"
        "  and the longest tile boundary at which half tiles at exactly half the steps still reach 0.90; the\n"
        "  \"+ busiest CTA\" column divides each set's rate by its modelled skew (a persistent kernel ends\n"
        "  with its busiest CTA). Last, the same bound with the experimental query-column tiles\n"
        "  (sm90-fwd-tails / -tails96: TileTimeModel's tail fields), and with such tails computed inside a\n"
        "  sibling whole tile's CTA (TileTimeModel::tails_need_sibling; built as sm90-fwd-sibling-tails,\n"
        "  which cuts a tail into pieces of at most 32 rows; measured on an H100 only).\n"
        "  --self-kv: the self sets' keys, as `gdpa bench --self-kv` (default dense: every Lk = L).\n"
        "  Writes experiments/results/schedule-*.json. No GPU needed.");
    return 0;
  }
  a.check_known({"help", "sms", "block-m", "block-n", "seed", "self-kv", "out"});
  const SelfKv self_kv = self_kv_from_name(a.get("self-kv", "dense"));
  const int sms = a.get_int("sms", 132), bm = a.get_int("block-m", 128), bn = a.get_int("block-n", 128);
  const uint64_t seed = uint64_t(a.get_int("seed", 1));
  Json rows = Json::array();
  std::printf("%-18s %-14s %10s %10s %10s %10s\n", "set", "policy", "fwd tiles", "fwd skew", "bwd tiles", "bwd skew");
  Json padding = Json::array();
  std::vector<std::string> padding_lines, traffic_lines, balance_lines;
  // Issue 5's parity under the tile-time model. Three models: the half tile at the 0.75 of a whole
  // one that the dealing assumes (thirty-ninth session's measurement; no boundary term needed); half
  // steps at exactly half with the measured boundary of 0.9 step; and with no boundary at all.
  const TileTimeModel parity_models[3] = {{0.0, 0.75}, {0.9, 0.5}, {0.0, 0.5}};
  const Ceilings reference{750.0, 4270.0};  // perf/TARGETS.md
  struct ParitySide {
    ProblemDesc problem;
    double limit = 0;
    double skew = 1.0;  // the sm90 forward's busiest CTA over the mean, modelled as its dealing does
    bool seen = false;
  };
  std::map<int, ParitySide> parity_dense, parity_half;  // by L: self s = 1, self s = 0.5
  for (const BenchSet& set : seed_bench_sets(self_kv)) {
    const ProblemDesc p = bench_problem(set, seed, default_bench_base());
    const double eff_f = tile_padding_efficiency(p, bm, bn), eff_b = tile_padding_efficiency(p, 64, bn);
    char line[160];
    std::snprintf(line, sizeof line, "%-18s %10.3f %10.3f", set.name.c_str(), eff_f, eff_b);
    padding_lines.push_back(line);
    // Forward L2 traffic over the minimum, four loading schemes (sm90.h sm90_forward_traffic); the
    // last is the kernel's: rows past a sequence's end are not read, K/V kept.
    double traffic[4];
    const struct {
      int rows;
      bool reuse;
    } schemes[4] = {{128, false}, {64, false}, {64, true}, {1, true}};
    for (int k = 0; k < 4; ++k) {
      const Sm90ForwardTraffic t = sm90_forward_traffic(p, sms, schemes[k].rows, schemes[k].reuse);
      traffic[k] = t.minimum_bytes > 0 ? t.loaded_bytes / t.minimum_bytes : 0;
    }
    std::snprintf(line, sizeof line, "%-18s %10.2f %10.2f %10.2f %10.2f", set.name.c_str(), traffic[0], traffic[1],
                  traffic[2], traffic[3]);
    traffic_lines.push_back(line);
    const Sm90ForwardBalance bal = sm90_forward_balance(p, sms);
    if (set.family == "self" && (set.sparsity == 1.0 || set.sparsity == 0.5))
      (set.sparsity == 1.0 ? parity_dense : parity_half)[set.max_len] =
          ParitySide{p, set_limit(p, false, reference).limit_tflops, bal.dealt_skew, true};
    std::snprintf(line, sizeof line, "%-18s %10.2f %10.3f %10.3f", set.name.c_str(), bal.half_tile_cost,
                  bal.dealt_skew, bal.snake_skew);
    balance_lines.push_back(line);
    padding.push(Json::object()
                     .set("set", Json::string(set.name))
                     .set("fwd_efficiency", Json::number(eff_f))
                     .set("bwd_efficiency", Json::number(eff_b))
                     .set("fwd_traffic_whole_tiles", Json::number(traffic[0]))
                     .set("fwd_traffic_halves", Json::number(traffic[1]))
                     .set("fwd_traffic_halves_kv_reuse", Json::number(traffic[2]))
                     .set("fwd_traffic_valid_rows_kv_reuse", Json::number(traffic[3]))
                     .set("sm90_fwd_half_tile_cost", Json::number(bal.half_tile_cost))
                     .set("sm90_fwd_modelled_skew", Json::number(bal.dealt_skew))
                     .set("sm90_fwd_modelled_skew_snake", Json::number(bal.snake_skew)));
    for (SchedulePolicy pol : {SchedulePolicy::kGridOrder, SchedulePolicy::kLongestFirst, SchedulePolicy::kZigzag}) {
      const auto f = build_forward_tiles(p, bm, bn, pol, sms);
      const auto b = build_backward_tiles(p, 64, bn, pol, sms);
      const LoadStats lf = per_sm_load(f, sms), lb = per_sm_load(b, sms);
      std::printf("%-18s %-14s %10zu %10.3f %10zu %10.3f\n", set.name.c_str(), schedule_policy_name(pol), f.size(),
                  lf.max_over_mean, b.size(), lb.max_over_mean);
      Json r = Json::object();
      r.set("set", Json::string(set.name))
          .set("policy", Json::string(schedule_policy_name(pol)))
          .set("sms", Json::number(sms))
          .set("fwd_tiles", Json::number(double(f.size())))
          .set("fwd_skew", Json::number(lf.max_over_mean))
          .set("bwd_tiles", Json::number(double(b.size())))
          .set("bwd_skew", Json::number(lb.max_over_mean));
      rows.push(r);
    }
  }
  // Padding: what whole tiles cost on jagged lengths, whatever the order they run in.
  std::printf("\nuseful / computed score pairs with whole tiles (fwd %d x %d, bwd 64 x %d):\n", bm, bn, bn);
  std::printf("%-18s %10s %10s\n", "set", "fwd", "bwd");
  for (const std::string& l : padding_lines) std::printf("%s\n", l.c_str());
  std::printf("\nsm90 forward, bytes between L2 and the SMs / the set's minimum (Q, K, V, O once):\n");
  std::printf("%-18s %10s %10s %10s %10s\n", "set", "128 rows", "64 rows", "+ K/V kept", "valid rows");
  for (const std::string& l : traffic_lines) std::printf("%s\n", l.c_str());
  std::printf("\nsm90 forward's per-CTA schedule, modelled load (max / mean) with a half-empty last tile at the cost:\n");
  std::printf("%-18s %10s %10s %10s\n", "set", "half cost", "dealt", "snake");
  for (const std::string& l : balance_lines) std::printf("%s\n", l.c_str());
  std::printf("\nissue 5's parity bound: (s = 0.5 fraction of limit) / (s = 1 fraction) at equal speed per modelled\n"
              "step; half tile = half-step share x a whole tile's steps, plus the boundary (criterion: >= 0.90):\n");
  std::printf("%-6s %14s %14s %14s %14s %16s\n", "L", "h 0.75", "+ busiest CTA", "0.5 + 0.9 bnd", "0.5, no bnd",
              "bnd for 0.90");
  Json parity = Json::array();
  for (const auto& [len, dense] : parity_dense) {
    const ParitySide& half = parity_half[len];
    if (!dense.seen || !half.seen) continue;
    double bound[3];
    for (int k = 0; k < 3; ++k)
      bound[k] = modelled_parity(half.problem, half.limit, dense.problem, dense.limit, bm, bn, parity_models[k]);
    // The longest tile boundary at which half tiles at exactly half the steps still reach the criterion.
    const double reach =
        largest_boundary_reaching(0.90, half.problem, half.limit, dense.problem, dense.limit, bm, bn, 0.5);
    char reach_text[32];
    if (reach < 0)
      std::snprintf(reach_text, sizeof reach_text, "none");
    else if (reach >= 2.0)  // the search's upper end: every boundary up to 2 steps reaches it
      std::snprintf(reach_text, sizeof reach_text, "any up to 2");
    else
      std::snprintf(reach_text, sizeof reach_text, "<= %.2f step", reach);
    // A persistent kernel ends with its busiest CTA: the first model again, over each set's modelled skew.
    const double with_skew = bound[0] * dense.skew / half.skew;
    std::printf("%-6d %14.3f %14.3f %14.3f %14.3f %16s\n", len, bound[0], with_skew, bound[1], bound[2], reach_text);
    parity.push(Json::object()
                    .set("len", Json::number(len))
                    .set("half_at_0.75", Json::number(bound[0]))
                    .set("half_at_0.75_busiest_cta", Json::number(with_skew))
                    .set("half_steps_0.5_boundary_0.9", Json::number(bound[1]))
                    .set("half_steps_0.5_no_boundary", Json::number(bound[2]))
                    .set("largest_boundary_for_0.90_with_half_steps_0.5", Json::number(reach)));
  }
  // The same bound with the query-column tiles (sm90-fwd-tails, -tails96): whole tiles keep the
  // 0.9-step boundary; a tail block's boundary partly hidden under the other consumer (0 or 0.45
  // step); its products at the main forward's rate per FLOP, or slower where shared memory bounds
  // them (32 columns 1.5x: 3 KB of operands per 16 tensor cycles; 64 columns 1.15x).
  struct TailModel {
    const char* key;
    const char* label;  // the column's heading
    int width;
    TileTimeModel m;
  };
  // The last four: the tails inside a sibling whole tile's CTA (no boundary of their own, no K / V
  // of their own); a sequence's only tile stays a half tile, at 0.7 of the steps plus the boundary:
  // 0.72-0.79 of a whole tile at L = 2048..256, the 0.75 the dealing assumes. Of those, the last two
  // are the kernel as built (sm90-fwd-sibling-tails: 32-row pieces, one whole tile before the tail
  // per piece), at the main forward's rate per FLOP and at the 32-column form's 1.5x.
  const TailModel tail_models[8] = {
      {"tails64_boundary_0", "64, bnd 0", 14, {0.9, 1.0, 64, 0.0, 1.0, 1.0}},
      {"tails64_boundary_0.45", "64, bnd 0.45", 14, {0.9, 1.0, 64, 0.45, 1.0, 1.0}},
      {"tails64_boundary_0.45_slower", "+ 1.5x / 1.15x", 16, {0.9, 1.0, 64, 0.45, 1.5, 1.15}},
      {"tails96_boundary_0.45_slower", "96, the same", 16, {0.9, 1.0, 96, 0.45, 1.5, 1.15}},
      {"tails64_in_sibling", "in sibling", 16, {0.9, 0.7, 64, 0.0, 1.0, 1.0, true}},
      {"tails64_in_sibling_slower", "+ 1.5x / 1.15x", 16, {0.9, 0.7, 64, 0.0, 1.5, 1.15, true}},
      {"pieces32_in_sibling", "32-row pieces", 15, {0.9, 0.7, 64, 0.0, 1.0, 1.0, true, 32}},
      {"pieces32_in_sibling_slower", "+ 1.5x", 8, {0.9, 0.7, 64, 0.0, 1.5, 1.5, true, 32}}};
  std::printf("\nthe same bound with the query-column tiles (whole tiles: 0.9-step boundary; a tail block: its\n"
              "columns' share of a whole tile's steps x the slowdown, plus its boundary; last four columns:\n"
              "the tails inside a sibling whole tile's CTA, a sequence's only tile a half tile; the last two\n"
              "as sm90-fwd-sibling-tails cuts them, in pieces of at most 32 rows, one whole tile per piece):\n");
  std::printf("%-6s", "L");
  for (const TailModel& t : tail_models) std::printf(" %*s", t.width, t.label);
  std::printf("\n");
  Json tail_parity = Json::array();
  for (const auto& [len, dense] : parity_dense) {
    const ParitySide& half = parity_half[len];
    if (!dense.seen || !half.seen) continue;
    Json row = Json::object().set("len", Json::number(len));
    std::printf("%-6d", len);
    for (const TailModel& t : tail_models) {
      // The dense set has no tail tile; its whole tiles keep the same boundary.
      const double v = modelled_parity(half.problem, half.limit, dense.problem, dense.limit, bm, bn, t.m);
      row.set(t.key, Json::number(v));
      std::printf(" %*.3f", t.width, v);
    }
    std::printf("\n");
    tail_parity.push(row);
  }
  Json root = Json::object();
  root.set("padding_efficiency", padding);
  root.set("parity_model", parity);
  root.set("parity_model_query_column_tiles", tail_parity);
  root.set("what", Json::string("per-SM load skew (max/mean of tile work) of each scheduling policy"))
      .set("block_m", Json::number(bm))
      .set("block_n", Json::number(bn))
      .set("self_kv", Json::string(self_kv_name(self_kv)))
      .set("rows", rows);
  DeviceInfo host_only;
  host_only.name = "host";
  const std::string path = write_results(a.get("out", "experiments/results"), "schedule", host_only, root);
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

}  // namespace gdpa::cli
