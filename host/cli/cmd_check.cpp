// gdpa check — every GPU kernel against the CPU reference over the case matrix.
#include <cstdio>
#include <sstream>

#include "../check.h"
#include "../compile.h"
#include "../driver.h"
#include "../registry.h"
#include "args.h"
#include "commands.h"

namespace gdpa::cli {

namespace {

const char* kHelp =
    "usage: gdpa check [--kernel NAME[,NAME..]|all] [--fwd-only|--bwd-only] [--filter TEXT] [--seed N]\n"
    "                  [--save DIR]\n"
    "  Runs each kernel on the case matrix (every activation, D 64/128, bf16/fp16, masks none/causal/window,\n"
    "  GQA/MQA, Lq = 1, Lk = 0, lengths that are not tile multiples, both scales, kv_index) with fresh random\n"
    "  inputs and outputs poisoned before each launch, and judges each output against the fp64 CPU reference\n"
    "  by the error rule of verify/compare.h. Prints one line per case and 'N passed, N failed, N skipped'.\n"
    "  --kernel: default all kernels that run on this GPU (sm90, baseline, unfused-cublas)\n"
    "  --filter: only cases whose label or description contains TEXT (e.g. act=silu, D64, fp16, causal)\n"
    "  --save DIR: write inputs/outputs as .npy\n";

}  // namespace

int cmd_check(int argc, char** argv) {
  Args a(argc, argv, 0, {"help", "fwd-only", "bwd-only"});
  if (a.has("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  a.check_known({"help", "fwd-only", "bwd-only", "kernel", "filter", "seed", "save"});
  std::string why;
  if (!gpu_available(&why)) {
    std::fprintf(stderr, "gdpa check: needs a GPU: %s\n", why.c_str());
    return 1;
  }
  Context ctx(0);
  const DeviceInfo& dev = ctx.info();
  const std::string ksel = a.get("kernel", "all");
  const std::vector<std::string> names = ksel == "all" ? all_kernel_names() : split_list(ksel);
  const uint64_t seed = uint64_t(a.get_int("seed", int(time(nullptr) & 0x7fffffff)));
  const std::string filter = a.get("filter", "");
  std::printf("GPU %s (sm_%d); seed %llu (rerun with --seed to repeat these inputs)\n", dev.name.c_str(), dev.arch(),
              (unsigned long long)seed);

  std::vector<CheckCase> cases;
  for (bool bwd : {false, true}) {
    if ((bwd && a.has("fwd-only")) || (!bwd && a.has("bwd-only"))) continue;
    for (const CheckCase& c : check_matrix(bwd, seed))
      if (case_matches(c, filter)) cases.push_back(c);
  }
  int passed = 0, failed = 0, skipped = 0;
  for (const std::string& name : names) {
    auto kernel = make_kernel(name);
    // Compile every variant this kernel needs in parallel first; prepare() then loads from the cache.
    std::vector<KernelSource> sources;
    for (const CheckCase& c : cases)
      if (kernel->supports(c.desc, dev.arch(), c.backward, nullptr))
        for (const KernelSource& s : kernel->sources(c.desc, c.backward)) sources.push_back(s);
    if (!sources.empty()) compile_many(unique_sources(sources), dev.arch(), 0);
    for (const CheckCase& c : cases) {
      CheckOutcome o;
      try {
        o = run_check(*kernel, c, dev, 0, a.get("save", ""));
      } catch (const std::exception& e) {
        o.pass = false;
        o.line = std::string("FAIL ") + (c.backward ? "bwd " : "fwd ") + kernel->name() + " " + c.label + ": " + e.what();
      }
      std::printf("%s\n", o.line.c_str());
      std::fflush(stdout);
      if (o.skipped)
        ++skipped;
      else if (o.pass)
        ++passed;
      else
        ++failed;
    }
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}

}  // namespace gdpa::cli
