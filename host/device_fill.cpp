#include "device_fill.h"

#include <map>
#include <mutex>
#include <string>

#include "compile.h"

namespace gdpa {

void device_fill_normal(CUdeviceptr dst, size_t elements, double stddev, DType dtype, uint64_t seed, CUstream s,
                        int arch) {
  if (elements == 0) return;
  // One module per dtype, loaded on first use and deliberately never unloaded: a static owner
  // would unload it at exit, after the primary context is gone (CUDA_ERROR_CONTEXT_IS_DESTROYED);
  // the driver frees it with the context.
  static std::mutex mu;
  static std::map<int, Module*> modules;
  Module* m = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    Module*& slot = modules[int(dtype)];
    if (!slot) {
      KernelSource src{"kernels/common/fill.cu", "gdpa::fill_normal<" + std::to_string(int(dtype)) + ">", {}};
      const CompiledKernel ck = compile_kernel(src, arch);
      slot = new Module(ck.cubin.data(), ck.lowered_name);
    }
    m = slot;
  }
  unsigned short* ptr = reinterpret_cast<unsigned short*>(dst);
  unsigned long long n = elements;
  float sd = float(stddev);
  unsigned long long sd_seed = seed;
  void* args[] = {&ptr, &n, &sd, &sd_seed};
  LaunchShape shape;
  shape.grid[0] = 132 * 8;
  shape.block[0] = 256;
  launch(m->function(), shape, s, args);
}

}  // namespace gdpa
