// gdpa info — what this machine can run.
#include <cstdio>

#include "../compile.h"
#include "../driver.h"
#include "../registry.h"
#include "args.h"
#include "commands.h"

namespace gdpa::cli {

int cmd_info(int argc, char** argv) {
  Args a(argc, argv, 0, {"help"});
  if (a.has("help")) {
    std::puts("usage: gdpa info\n  prints the GPU, its SM count and clocks, the driver, and which kernels run on it");
    return 0;
  }
  a.check_known({"help"});
  std::printf("source root: %s\nkernel cache: %s\n", source_root().c_str(), cache_dir().c_str());
  std::string why;
  if (!gpu_available(&why)) {
    std::printf("GPU: none (%s)\n", why.c_str());
    std::puts("kernels: the CPU reference runs here; the fast kernels need an NVIDIA GPU with sm_90 (Hopper)");
    return 0;
  }
  Context ctx(0);
  const DeviceInfo& d = ctx.info();
  std::printf("GPU: %s (sm_%d), %d SMs, max SM clock %d MHz, memory clock %d MHz, %d-bit bus, L2 %d MB\n",
              d.name.c_str(), d.arch(), d.sm_count, d.sm_clock_khz / 1000, d.mem_clock_khz / 1000, d.mem_bus_bits,
              d.l2_bytes >> 20);
  std::printf("memory: %.1f GiB, max shared memory per block (opt-in): %d KB, driver %d.%d\n",
              double(d.total_mem) / (1 << 30), d.max_smem_optin / 1024, d.driver_version / 1000,
              (d.driver_version % 1000) / 10);
  const ProblemDesc probe;
  for (const std::string& name : all_kernel_names()) {
    auto k = make_kernel(name);
    std::string reason;
    const bool f = k->supports(probe, d.arch(), false, &reason);
    std::string reason_b;
    const bool b = k->supports(probe, d.arch(), true, &reason_b);
    std::printf("  %-16s forward %-3s backward %-3s %s\n", name.c_str(), f ? "yes" : "no", b ? "yes" : "no",
                f ? (b ? "" : reason_b.c_str()) : reason.c_str());
  }
  std::printf("best kernel here: %s\n", best_kernel_name(d.arch()).c_str());
  return 0;
}

}  // namespace gdpa::cli
