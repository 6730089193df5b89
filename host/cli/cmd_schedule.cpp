// gdpa schedule — per-SM load of each tile-scheduling policy on the benchmark sets (host only).
#include <cstdio>
#include <string>
#include <vector>

#include "../bench.h"
#include "../scheduler.h"
#include "args.h"
#include "commands.h"

namespace gdpa::cli {

int cmd_schedule(int argc, char** argv) {
  Args a(argc, argv, 0, {"help"});
  if (a.has("help")) {
    std::puts(
        "usage: gdpa schedule [--sms 132] [--block-m 128] [--block-n 128] [--seed N] [--out DIR]\n"
        "  For every benchmark set and policy (grid, longest-first, zigzag), builds the forward and backward\n"
        "  tile lists and prints the per-SM load skew (max / mean of assigned work; 1.0 is balanced), then\n"
        "  each set's useful / computed score pairs when sequences are cut into whole tiles.\n"
        "  Writes experiments/results/schedule-*.json. No GPU needed.");
    return 0;
  }
  a.check_known({"help", "sms", "block-m", "block-n", "seed", "out"});
  const int sms = a.get_int("sms", 132), bm = a.get_int("block-m", 128), bn = a.get_int("block-n", 128);
  const uint64_t seed = uint64_t(a.get_int("seed", 1));
  Json rows = Json::array();
  std::printf("%-18s %-14s %10s %10s %10s %10s\n", "set", "policy", "fwd tiles", "fwd skew", "bwd tiles", "bwd skew");
  Json padding = Json::array();
  std::vector<std::string> padding_lines;
  for (const BenchSet& set : seed_bench_sets()) {
    const ProblemDesc p = bench_problem(set, seed, default_bench_base());
    const double eff_f = tile_padding_efficiency(p, bm, bn), eff_b = tile_padding_efficiency(p, 64, bn);
    char line[160];
    std::snprintf(line, sizeof line, "%-18s %10.3f %10.3f", set.name.c_str(), eff_f, eff_b);
    padding_lines.push_back(line);
    padding.push(Json::object()
                     .set("set", Json::string(set.name))
                     .set("fwd_efficiency", Json::number(eff_f))
                     .set("bwd_efficiency", Json::number(eff_b)));
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
  Json root = Json::object();
  root.set("padding_efficiency", padding);
  root.set("what", Json::string("per-SM load skew (max/mean of tile work) of each scheduling policy"))
      .set("block_m", Json::number(bm))
      .set("block_n", Json::number(bn))
      .set("rows", rows);
  DeviceInfo host_only;
  host_only.name = "host";
  const std::string path = write_results(a.get("out", "experiments/results"), "schedule", host_only, root);
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

}  // namespace gdpa::cli
