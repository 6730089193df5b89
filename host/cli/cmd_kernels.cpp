// gdpa kernels / gdpa precompile — NVRTC compilation without a GPU.
#include <cstdio>
#include <fstream>
#include <sys/stat.h>
#include <thread>

#include "../bench.h"
#include "../check.h"
#include "../compile.h"
#include "../registry.h"
#include "args.h"
#include "commands.h"
#include "problem_args.h"

namespace gdpa::cli {

namespace {

// Default variant of every kernel family: the seed's benchmark configuration (bf16, D = 128,
// fast_gelu, no mask), forward and backward.
std::vector<KernelSource> default_sources() {
  std::vector<KernelSource> v;
  const ProblemDesc p = [] {
    ProblemDesc d = default_bench_base();
    d.cu_seqlens_q = {0, 1};
    d.cu_seqlens_k = {0, 1};
    return d;
  }();
  for (const std::string& n : all_kernel_names())
    for (const KernelSource& s : make_kernel(n)->sources(p, true)) v.push_back(s);
  return v;
}

// "gdpa::sm90::gdpa_fwd<0,128,3,0,7>" -> "sm90.gdpa_fwd_0_128_3_0_7"
std::string file_stem(const KernelSource& s) {
  std::string n = s.name_expression;
  if (n.rfind("gdpa::", 0) == 0) n = n.substr(6);
  std::string out;
  for (char c : n) {
    if (c == ':') {
      if (!out.empty() && out.back() != '.') out += '.';
    } else if (c == '<' || c == ',') {
      out += '_';
    } else if (c != '>' && c != ' ') {
      out += c;
    }
  }
  return out;
}

}  // namespace

int cmd_kernels(int argc, char** argv) {
  Args a(argc, argv, 0, {"help"});
  if (a.has("help")) {
    std::puts(
        "usage: gdpa kernels [--arch 90] [--out DIR]\n"
        "  Compiles the default variant of every kernel family (bf16, D = 128, fast_gelu, no mask; forward and\n"
        "  backward) for sm_<arch>a with NVRTC and writes DIR/<kernel>.cubin, .ptx and .log (ptxas report).\n"
        "  No GPU needed. Default DIR: build/kernels/sm_<arch>a");
    return 0;
  }
  a.check_known({"help", "arch", "out"});
  const int arch = a.get_int("arch", 90);
  const std::string dir = a.get("out", "build/kernels/sm_" + std::to_string(arch) + "a");
  ::mkdir("build", 0755);
  ::mkdir("build/kernels", 0755);
  ::mkdir(dir.c_str(), 0755);
  setenv("GDPA_PTXAS_VERBOSE", "1", 0);  // keep the register / spill report in the log
  const std::vector<KernelSource> srcs = default_sources();
  const std::vector<CompiledKernel> out = compile_many(srcs, arch, 0);
  for (size_t i = 0; i < srcs.size(); ++i) {
    const std::string stem = dir + "/" + file_stem(srcs[i]);
    std::ofstream(stem + ".cubin", std::ios::binary).write(out[i].cubin.data(), std::streamsize(out[i].cubin.size()));
    std::ofstream(stem + ".ptx") << out[i].ptx;
    std::ofstream(stem + ".log") << srcs[i].name_expression << "\n" << out[i].log;
    std::printf("%-60s %8zu bytes cubin%s\n", (stem + ".cubin").c_str(), out[i].cubin.size(),
                out[i].from_cache ? " (cached)" : "");
  }
  return 0;
}

int cmd_precompile(int argc, char** argv) {
  Args a(argc, argv, 0, {"help", "bench-only", "dry-run"});
  if (a.has("help")) {
    std::puts(
        "usage: gdpa precompile [--arch 90] [--kernels NAME,..] [--bench-only] [--dims D,..] [--acts NAME,..]\n"
        "                       [--dry-run]\n"
        "  Fills the NVRTC cache with every variant `gdpa check` and `gdpa bench` compile (default: all\n"
        "  kernels, the ablation variants too), in parallel. No GPU needed: a cache built here can travel\n"
        "  with the tree (GDPA_CACHE names another cache folder).\n"
        "  --kernels: only these kernels   --bench-only: only the benchmark's variants (not the check\n"
        "  matrix)   --dims: the benchmark's variants at these head dims (default 128)\n"
        "  --acts: the benchmark's variants with these activations (default: the benchmark's, fast_gelu),\n"
        "  as `gdpa bench --act NAME` compiles them\n"
        "  --dry-run: resolve the names and count the variants, compile nothing; an unknown kernel or\n"
        "  activation name is an error (exit 1), so scripts check their names here before they spend GPU time");
    return 0;
  }
  a.check_known({"help", "arch", "kernels", "bench-only", "dims", "acts", "dry-run"});
  const int arch = a.get_int("arch", 90);
  const bool bench_only = a.has("bench-only");
  std::vector<int> dims;
  for (const std::string& d : split_list(a.get("dims", "128"))) dims.push_back(std::stoi(d));
  // Resolved by the parser `gdpa bench --act` uses, so a name that passes here is one bench takes.
  std::vector<Activation> acts{default_bench_base().activation};
  if (a.has("acts")) {
    acts.clear();
    for (const std::string& n : split_list(a.get("acts", ""))) acts.push_back(activation_named(n));
  }
  std::vector<KernelSource> srcs;
  std::vector<std::string> names = all_kernel_names();
  for (const std::string& n : ablation_kernel_names()) names.push_back(n);
  if (a.has("kernels")) names = split_list(a.get("kernels", ""));
  for (const std::string& n : names) {
    auto k = make_kernel(n);
    for (bool bwd : {false, true}) {
      if (!bench_only)
        for (const CheckCase& c : check_matrix(bwd, 1))
          if (k->supports(c.desc, arch, bwd, nullptr))
            for (const KernelSource& s : k->sources(c.desc, bwd)) srcs.push_back(s);
      // Every set: the backward's rules pick its variant per problem (in-kernel dQ finish, pairs).
      for (int d : dims) {
        for (Activation act : acts) {
          ProblemDesc base = default_bench_base();
          base.head_dim = d;
          base.activation = act;
          // Both conventions of the self sets (`gdpa bench --self-kv`): their s = 0.5 kernels differ.
          for (SelfKv kv : {SelfKv::kDense, SelfKv::kJagged})
            for (const BenchSet& set : seed_bench_sets(kv)) {
              const ProblemDesc p = bench_problem(set, 1, base);
              if (k->supports(p, arch, bwd, nullptr))
                for (const KernelSource& s : k->sources(p, bwd)) srcs.push_back(s);
            }
        }
      }
    }
  }
  // Duplicates compile once: the cache serves the repeats.
  const std::vector<KernelSource> unique = unique_sources(srcs);
  if (a.has("dry-run")) {
    std::printf("%zu kernel name(s) and %zu activation(s) known; %zu variants for sm_%da (nothing compiled)\n",
                names.size(), acts.size(), unique.size(), arch);
    return 0;
  }
  std::printf("compiling %zu variants for sm_%da into %s\n", unique.size(), arch, cache_dir().c_str());
  std::fflush(stdout);
  const auto out = compile_many(unique, arch, 0);
  size_t cached = 0;
  for (const auto& o : out) cached += o.from_cache;
  std::printf("done: %zu compiled, %zu already cached\n", out.size() - cached, cached);
  return 0;
}

}  // namespace gdpa::cli
