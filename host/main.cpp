// main.cpp — the `gdpa` command line: run, check, bench, info, kernels, precompile, schedule, accuracy.
//
// Every error a user can cause (bad offsets, unsupported head dim, no GPU, ...) ends here as one
// line on stderr and a non-zero exit code; nothing is allowed to crash or print a stack of noise.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/commands.h"

namespace {

const char* kUsage =
    "gdpa — Generalized Dot-Product Attention kernels (forward and backward, jagged batches)\n"
    "\n"
    "usage: gdpa <command> [options]    (gdpa <command> --help for its options)\n"
    "\n"
    "commands:\n"
    "  run         forward + backward on a production-like jagged batch with the best kernel for this GPU,\n"
    "              checked against the CPU reference on a sample of sequences (CPU reference only without a GPU)\n"
    "  check       GPU kernels against the fp64 CPU reference over the case matrix, forward and backward\n"
    "  bench       the seed's 12 benchmark sets for every kernel, with the GEMM ceiling; JSON results\n"
    "  info        GPU, SM count, clocks, driver, and which kernels exist for this arch\n"
    "  kernels     compile the default variant of every kernel family to .cubin and .ptx\n"
    "  precompile  fill the NVRTC cache with every variant `check` and `bench` need (no GPU needed)\n"
    "  schedule    per-SM load balance of the tile scheduling policies on the benchmark sets (no GPU needed)\n"
    "  accuracy    each activation's f and f' as the GPU computes them, against the fp64 definitions\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "run") return gdpa::cli::cmd_run(argc - 2, argv + 2);
    if (cmd == "check") return gdpa::cli::cmd_check(argc - 2, argv + 2);
    if (cmd == "bench") return gdpa::cli::cmd_bench(argc - 2, argv + 2);
    if (cmd == "accuracy") return gdpa::cli::cmd_accuracy(argc - 2, argv + 2);
    if (cmd == "info") return gdpa::cli::cmd_info(argc - 2, argv + 2);
    if (cmd == "kernels") return gdpa::cli::cmd_kernels(argc - 2, argv + 2);
    if (cmd == "precompile") return gdpa::cli::cmd_precompile(argc - 2, argv + 2);
    if (cmd == "schedule") return gdpa::cli::cmd_schedule(argc - 2, argv + 2);
    std::fprintf(stderr, "gdpa: unknown command '%s' (gdpa --help lists them)\n", cmd.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gdpa %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
