#include "problem_args.h"

#include <sstream>
#include <stdexcept>
#include <vector>

#include "../../kernels/common/activations.cuh"
#include "../generator.h"

namespace gdpa::cli {

const std::set<std::string> kProblemOptions = {"batch", "heads",  "kv-heads",    "dim",       "len",
                                               "len-k", "sparsity", "act",       "dtype",     "mask",
                                               "window", "logit-scale", "out-scale", "seed", "offsets-q",
                                               "offsets-k", "kv-index"};

const char* kProblemHelp =
    "problem options:\n"
    "  --batch B            sequences (default 1152)\n"
    "  --heads H            query heads (default 4)\n"
    "  --kv-heads H         KV heads (default = heads; heads % kv-heads must be 0)\n"
    "  --dim D              head dim: 64 or 128 (default 128)\n"
    "  --len L              max query length (default 1024)\n"
    "  --len-k L            fixed KV length (cross attention); default: self attention, Lk = Lq, jagged\n"
    "                       as the queries (the benchmark's self sets keep keys dense: --len-k L)\n"
    "  --sparsity s         jagged density in (0, 1] (spec 5; default 0.5)\n"
    "  --act NAME           identity gelu gelu_tanh fast_gelu fast_gelu_bf16 gelu_taylor6 gelu_poly relu\n"
    "                       relu_square leaky_relu silu fast_silu hardswish (default fast_gelu)\n"
    "  --dtype bf16|fp16    (default bf16)\n"
    "  --mask none|causal|window   --window LEFT,RIGHT (-1 = unbounded)\n"
    "  --logit-scale x --out-scale y   (default 1, 1)\n"
    "  --offsets-q 0,a,b,.. --offsets-k 0,c,d,..   explicit cumulative offsets instead of generated lengths\n"
    "  --kv-index i,j,..    query sequence b reads KV sequence kv-index[b] (forward only)\n"
    "  --seed N             (default 1)\n";

namespace {

std::vector<int> int_list(const std::string& name, const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int x = 0;
    try {
      x = std::stoi(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw ProblemError("--" + name + ": '" + item + "' is not an integer");
    v.push_back(x);
  }
  return v;
}

}  // namespace

uint64_t seed_from_args(const Args& a) { return uint64_t(a.get_int("seed", 1)); }

Activation activation_named(const std::string& name, const std::string& hint) {
  const int id = activation_from_name(name.c_str());
  if (id < 0) throw ProblemError("unknown activation '" + name + "'" + hint);
  return Activation(id);
}

ProblemDesc problem_from_args(const Args& a, const ProblemDefaults& d) {
  ProblemDesc p;
  p.heads_q = a.get_int("heads", d.heads);
  p.heads_kv = a.get_int("kv-heads", p.heads_q);
  p.head_dim = a.get_int("dim", d.dim);
  p.activation = activation_named(a.get("act", "fast_gelu"), " (see --help)");
  const std::string dt = a.get("dtype", "bf16");
  if (dt == "bf16")
    p.dtype = kBF16;
  else if (dt == "fp16")
    p.dtype = kFP16;
  else
    throw ProblemError("unsupported dtype '" + dt + "' (supported: bf16, fp16)");
  const std::string mask = a.get("mask", "none");
  if (mask == "none")
    p.mask = kMaskNone;
  else if (mask == "causal")
    p.mask = kMaskCausal;
  else if (mask == "window")
    p.mask = kMaskWindow;
  else
    throw ProblemError("unknown mask '" + mask + "' (none, causal, window)");
  if (a.has("window")) {
    const std::vector<int> w = int_list("window", a.get("window", ""));
    if (w.size() != 2) throw ProblemError("--window takes LEFT,RIGHT");
    p.window_left = w[0];
    p.window_right = w[1];
  }
  p.logit_scale = float(a.get_double("logit-scale", 1.0));
  p.out_scale = float(a.get_double("out-scale", 1.0));
  if (a.has("offsets-q")) {
    p.cu_seqlens_q = int_list("offsets-q", a.get("offsets-q", ""));
    p.cu_seqlens_k = a.has("offsets-k") ? int_list("offsets-k", a.get("offsets-k", "")) : p.cu_seqlens_q;
  } else {
    BatchShape shape;
    shape.batch = a.get_int("batch", d.batch);
    shape.max_len_q = a.get_int("len", d.len);
    shape.sparsity = a.get_double("sparsity", d.sparsity);
    shape.fixed_len_k = a.get_int("len-k", d.len_k);
    if (shape.batch <= 0) throw ProblemError("--batch must be positive");
    if (shape.max_len_q <= 0) throw ProblemError("--len must be positive");
    if (!(shape.sparsity > 0 && shape.sparsity <= 1)) throw ProblemError("--sparsity must be in (0, 1]");
    p = make_problem(shape, seed_from_args(a), p);
  }
  if (a.has("kv-index")) p.kv_index = int_list("kv-index", a.get("kv-index", ""));
  return p;
}

}  // namespace gdpa::cli
