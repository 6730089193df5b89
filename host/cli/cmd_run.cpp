// gdpa run — the main job: forward + backward on a production-like jagged batch with the best
// kernel for this GPU, timed, and checked against the CPU reference on a sample of sequences.
// Without a GPU: the CPU reference on a small problem, and a clear word on what needs the GPU.
#include <chrono>
#include <cstdio>
#include <string>

#include "../../kernels/common/activations.cuh"
#include "../../verify/compare.h"
#include "../../verify/reference.h"
#include "../bench.h"
#include "../check.h"
#include "../device_problem.h"
#include "../generator.h"
#include "../registry.h"
#include "args.h"
#include "commands.h"
#include "problem_args.h"

namespace gdpa::cli {

namespace {

const char* kHelp =
    "usage: gdpa run [problem options] [--kernel NAME] [--sample N] [--no-backward] [--save DIR]\n"
    "  Forward + backward on a jagged batch (default B = 1152, H = 4, D = 128, L = 1024, sparsity 0.5,\n"
    "  fast_gelu, bf16) with the best kernel for this GPU; prints time, TFLOP/s (seed convention) and the\n"
    "  error of N sampled sequences (default 8) against the fp64 CPU reference, next to the error an ideal\n"
    "  kernel with the same rounding would have. Without a GPU it runs the CPU reference on a small problem\n"
    "  (B = 8, L = 256) instead. --save DIR writes inputs and outputs of the check as .npy.\n";

// The problem and the forward's useful FLOPs (seed convention), exact: under a profiler the TFLOP/s
// printed later is of a replayed launch, so a script that wants work per cycle
// (experiments/parity_cycles.py) reads the "work:" line.
void print_problem(const ProblemDesc& p) {
  std::printf("problem: %s\n", describe(p).c_str());
  std::printf("work: forward %.6e FLOP (backward 2.5x)\n", forward_flops(p));
}

int run_cpu_only(const Args& a, const std::string& why) {
  ProblemDefaults d;
  d.batch = 8;
  d.len = 256;
  // The problem is checked first, so that bad input gets its error alone, not after a promise to run.
  const ProblemDesc p = problem_from_args(a, d);
  const bool backward = !a.has("no-backward") && p.kv_index.empty();
  validate(p, -1, -1, backward);
  std::printf("no usable GPU (%s)\n", why.c_str());
  std::puts("the fast kernels need an NVIDIA GPU with sm_90 (Hopper); running the fp64 CPU reference instead");
  const HostInputs in = make_inputs(p, seed_from_args(a), backward);
  const std::vector<float> q = to_float(in.q, p.dtype), k = to_float(in.k, p.dtype), v = to_float(in.v, p.dtype);
  const size_t nq = size_t(p.total_q()) * p.q_row(), nk = size_t(p.total_k()) * p.k_row();
  std::vector<double> exact(nq), emul(nq);
  const auto t0 = std::chrono::steady_clock::now();
  reference_forward(p, q.data(), k.data(), v.data(), RefMode::kExact, exact.data());
  const auto t1 = std::chrono::steady_clock::now();
  reference_forward(p, q.data(), k.data(), v.data(), RefMode::kEmulateKernel, emul.data());
  const double fwd_s = std::chrono::duration<double>(t1 - t0).count();
  const ErrorStats e = measure_error(emul.data(), exact.data(), nq);
  print_problem(p);
  std::printf("CPU reference forward (fp64): %.3f s, %.2f GFLOP/s; a kernel rounding like the GPU's would err by "
              "max %.3g (rel L2 %.3g)\n",
              fwd_s, forward_flops(p) / fwd_s / 1e9, e.max_abs, e.rel_l2);
  if (backward) {
    const std::vector<float> dout = to_float(in.dout, p.dtype);
    std::vector<double> dq(nq), dk(nk), dv(nk);
    const auto t2 = std::chrono::steady_clock::now();
    reference_backward(p, q.data(), k.data(), v.data(), dout.data(), RefMode::kExact, dq.data(), dk.data(), dv.data());
    const double bwd_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count();
    std::printf("CPU reference backward (fp64): %.3f s, %.2f GFLOP/s\n", bwd_s, 2.5 * forward_flops(p) / bwd_s / 1e9);
  }
  return 0;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  std::set<std::string> flags = {"help", "no-backward"};
  Args a(argc, argv, 0, flags);
  if (a.has("help")) {
    std::fputs(kHelp, stdout);
    std::fputs(kProblemHelp, stdout);
    return 0;
  }
  std::set<std::string> known = kProblemOptions;
  for (const char* o : {"help", "no-backward", "kernel", "sample", "save", "reps"}) known.insert(o);
  a.check_known(known);
  // A kernel name is checked before anything runs, also where no GPU would run it.
  if (a.has("kernel")) make_kernel(a.get("kernel", ""));
  std::string why;
  if (!gpu_available(&why)) return run_cpu_only(a, why);

  Context ctx(0);
  const DeviceInfo& dev = ctx.info();
  const ProblemDesc p = problem_from_args(a, ProblemDefaults{});
  const bool backward = !a.has("no-backward") && p.kv_index.empty();
  validate(p, -1, -1, backward);
  const std::string name = a.get("kernel", best_kernel_name(dev.arch()));
  auto kernel = make_kernel(name);
  std::string reason;
  if (!kernel->supports(p, dev.arch(), backward, &reason)) throw std::runtime_error(name + ": " + reason);
  std::printf("GPU %s (sm_%d, %d SMs); kernel %s\n", dev.name.c_str(), dev.arch(), dev.sm_count, kernel->name().c_str());
  print_problem(p);
  // The variants the run-time rules chose for this problem (e.g. whether the backward runs its KV
  // tiles in cluster pairs), so a profile or a sanitizer run can be checked to be on the path meant.
  for (bool bwd : {false, true}) {
    if (bwd && !backward) continue;
    std::string names;
    for (const std::string& v : row_variants(*kernel, p, bwd)) names += (names.empty() ? "" : ", ") + v;
    if (!names.empty()) std::printf("%s: %s\n", bwd ? "backward kernels" : "forward kernels", names.c_str());
  }

  Stream stream;
  const uint64_t seed = seed_from_args(a);
  {
    DeviceProblem dp(p, backward, seed, dev.arch(), stream.get());
    kernel->prepare(p, dev, backward);
    const DeviceTensors t = dp.view();
    const int reps = a.get_int("reps", 0);
    const Timing tf = time_enqueue([&](CUstream s) { kernel->forward(t, s); }, stream.get(), 2, reps);
    const double flops = forward_flops(p);
    std::printf("forward : %8.3f ms  %7.1f TFLOP/s  (median of %d, min %.3f max %.3f)\n", tf.median_ms,
                flops / tf.median_ms / 1e9, tf.reps, tf.min_ms, tf.max_ms);
    if (backward) {
      const Timing tb = time_enqueue([&](CUstream s) { kernel->backward(t, s); }, stream.get(), 2, reps);
      std::printf("backward: %8.3f ms  %7.1f TFLOP/s  (median of %d, min %.3f max %.3f)\n", tb.median_ms,
                  2.5 * flops / tb.median_ms / 1e9, tb.reps, tb.min_ms, tb.max_ms);
      std::printf("fwd+bwd : %8.3f ms  %7.1f TFLOP/s\n", tf.median_ms + tb.median_ms,
                  3.5 * flops / (tf.median_ms + tb.median_ms) / 1e9);
    }
  }
  // Correctness on host-generated inputs of the same problem, a sample of sequences.
  CheckCase c;
  c.label = "run";
  c.desc = p;
  c.seed = seed + 1;
  const int sample = a.get_int("sample", 8);
  bool ok = true;
  for (bool bwd : {false, true}) {
    if (bwd && !backward) continue;
    c.backward = bwd;
    const CheckOutcome o = run_check(*kernel, c, dev, sample, a.get("save", ""));
    std::printf("%s\n", o.line.c_str());
    ok = ok && o.pass;
  }
  return ok ? 0 : 1;
}

}  // namespace gdpa::cli
