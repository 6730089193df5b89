// gdpa accuracy — each activation's f and f', evaluated on this GPU as the kernels evaluate them,
// against the fp64 definitions: the accuracy column beside the activation timings of
// experiments/ablate_activation.sh and ablate_act_mix.sh.
#include <algorithm>
#include <cstdio>
#include <string>

#include "../../kernels/common/activations.cuh"
#include "../accuracy.h"
#include "../bench.h"
#include "../json.h"
#include "args.h"
#include "commands.h"
#include "problem_args.h"

namespace gdpa::cli {

namespace {

Json bands_json(const std::vector<ErrorBand>& bands) {
  Json arr = Json::array();
  for (const ErrorBand& b : bands) {
    Json o = Json::object();
    o.set("abs_x_max", Json::number(b.bound));
    o.set("max_abs_err_f", Json::number(b.max_abs_f));
    o.set("worst_x_f", Json::number(b.worst_x_f));
    o.set("max_abs_err_df", Json::number(b.max_abs_df));
    o.set("worst_x_df", Json::number(b.worst_x_df));
    arr.push(o);
  }
  return arr;
}

// One activation: the headline numbers as flat fields (what experiments/plot.py draws: every
// numeric field whose name holds "err"), the full bands under "detail".
Json row_json(const std::string& name, const std::vector<ErrorBand>& own, const std::vector<ErrorBand>& gelu,
              const std::vector<ErrorBand>& gelu_tanh) {
  Json o = Json::object();
  o.set("activation", Json::string(name));
  if (!own.empty()) {
    o.set("f_err_own_x8", Json::number(own.back().max_abs_f));
    o.set("df_err_own_x8", Json::number(own.back().max_abs_df));
  }
  if (gelu.size() >= 2) {
    o.set("f_err_vs_erf_gelu_x4", Json::number(gelu[1].max_abs_f));
    o.set("df_err_vs_erf_gelu_x4", Json::number(gelu[1].max_abs_df));
  }
  Json detail = Json::object();
  detail.set("vs_own_definition", bands_json(own));
  if (!gelu.empty()) detail.set("vs_erf_gelu", bands_json(gelu));
  if (!gelu_tanh.empty()) detail.set("vs_tanh_gelu", bands_json(gelu_tanh));
  o.set("detail", detail);
  return o;
}

// Element-wise worst of two measurements: the mixed fast_gelu evaluates each score with exactly
// one of its two forms, so its error is bounded by, and reaches, the larger of theirs.
std::vector<ErrorBand> worse_of(const std::vector<ErrorBand>& a, const std::vector<ErrorBand>& b) {
  std::vector<ErrorBand> r = a;
  for (size_t i = 0; i < r.size() && i < b.size(); ++i) {
    if (b[i].max_abs_f > r[i].max_abs_f) r[i].max_abs_f = b[i].max_abs_f, r[i].worst_x_f = b[i].worst_x_f;
    if (b[i].max_abs_df > r[i].max_abs_df) r[i].max_abs_df = b[i].max_abs_df, r[i].worst_x_df = b[i].worst_x_df;
  }
  return r;
}

void print_row(const std::string& name, const std::vector<ErrorBand>& own, const std::vector<ErrorBand>& gelu) {
  std::printf("%-22s", name.c_str());
  for (const ErrorBand& b : own) std::printf(" %9.2e %9.2e", b.max_abs_f, b.max_abs_df);
  for (const ErrorBand& b : gelu) std::printf(" %9.2e %9.2e", b.max_abs_f, b.max_abs_df);
  std::printf("\n");
}

}  // namespace

int cmd_accuracy(int argc, char** argv) {
  Args a(argc, argv, 0, {"help"});
  if (a.has("help")) {
    std::puts(
        "usage: gdpa accuracy [--acts NAME,..] [--out DIR] [--stem NAME]\n"
        "  Evaluates each activation's f and f' on the GPU (MUFU approximations included) on a 2^-10 grid\n"
        "  over [-8, 8] and prints the largest absolute error against its own fp64 definition and, for the\n"
        "  GELU family, against erf GELU, for |x| <= 1, 4 and 8. The row 'fast_gelu mixed' is the mixed\n"
        "  MUFU / FMA mode (kernels/sm90/act_mix.h): the worse of fast_gelu and gelu_poly, element by\n"
        "  element. Writes DIR/<stem>-<gpu>-<date>.json (default experiments/results, stem accuracy).");
    return 0;
  }
  a.check_known({"help", "acts", "out", "stem"});
  std::string why;
  if (!gpu_available(&why)) {
    std::fprintf(stderr, "gdpa accuracy: needs a GPU (the MUFU approximations exist only there): %s\n", why.c_str());
    return 1;
  }
  std::vector<int> acts;
  if (a.has("acts")) {
    for (const std::string& n : split_list(a.get("acts", ""))) acts.push_back(activation_named(n));
  } else {
    for (int act = 0; act < kNumActivations; ++act) acts.push_back(act);
  }
  Context ctx(0);
  const DeviceInfo& dev = ctx.info();
  Stream stream;

  std::printf("max |error| on %s; columns: f, f' for |x| <= 1, 4, 8 against the own definition, then the same\n"
              "against erf GELU (GELU family)\n",
              dev.name.c_str());
  Json rows = Json::array();
  std::vector<ActivationAccuracy> measured;
  for (int act : acts) {
    const ActivationAccuracy m = measure_activation_accuracy(act, dev.arch(), stream.get());
    measured.push_back(m);
    print_row(m.name, m.own, m.vs_gelu);
    rows.push(row_json(m.name, m.own, m.vs_gelu, m.vs_gelu_tanh));
  }
  auto find = [&](int act) -> const ActivationAccuracy* {
    for (const ActivationAccuracy& m : measured)
      if (m.activation == act) return &m;
    return nullptr;
  };
  const ActivationAccuracy* fg = find(kFastGelu);
  const ActivationAccuracy* gp = find(kGeluPoly);
  if (fg && gp) {
    // Its own definition is fast_gelu's (tanh GELU): the polynomial part is judged against that.
    const std::vector<ErrorBand> own_poly = gp->vs_gelu_tanh;
    const std::vector<ErrorBand> mixed_own = worse_of(fg->own, own_poly);
    const std::vector<ErrorBand> mixed_gelu = worse_of(fg->vs_gelu, gp->vs_gelu);
    print_row("fast_gelu mixed", mixed_own, mixed_gelu);
    rows.push(row_json("fast_gelu mixed", mixed_own, mixed_gelu, {}));
  }
  Json root = Json::object();
  root.set("gpu", Json::string(dev.name));
  root.set("grid", Json::string("x = -8 + i / 1024, i = 0..16384"));
  root.set("what", Json::string("activation accuracy: max |error| of f and f' as evaluated on the GPU"));
  root.set("rows", rows);
  const std::string path =
      write_results(a.get("out", "experiments/results"), a.get("stem", "accuracy"), dev, root);
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

}  // namespace gdpa::cli
