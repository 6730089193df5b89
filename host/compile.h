// compile.h — kernel variants compiled at run time with NVRTC, cached on disk.
//
// Every kernel is a template whose arguments fix dtype, head dim, activation, mask and ablation
// switches (kernels/*/). A variant is one instantiation named by an NVRTC name expression, e.g.
// "gdpa::baseline_fwd<0,128,3,0>". The cubin is cached under the cache directory with a key made
// of the hash of every source file under kernels/ and ptx/, the name expression, the arch and the
// options, so an edit to any header recompiles and an unchanged tree never does.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace gdpa {

struct KernelSource {
  std::string file;             // path relative to the source root, e.g. "kernels/sm90/gdpa_fwd.cu"
  std::string name_expression;  // template instantiation to compile and look up
  std::vector<std::string> options;  // extra NVRTC options, e.g. "-DGDPA_SOMETHING=1"
};

struct CompiledKernel {
  std::string lowered_name;  // mangled name for cuModuleGetFunction
  std::vector<char> cubin;
  std::string ptx;           // empty when loaded from cache without PTX
  std::string log;           // NVRTC + ptxas log (register and spill report with -Xptxas -v)
  bool from_cache = false;
};

// Directory holding kernels/ and ptx/: $GDPA_ROOT, else the nearest directory above the
// executable that holds both, else the current directory.
const std::string& source_root();
// $GDPA_CACHE, else <source_root>/build/cache.
const std::string& cache_dir();

// Compiles (or loads from the cache) one variant for `arch` (90 -> sm_90a, 100 -> sm_100a: the
// arch-specific targets, which wgmma / setmaxnreg / tcgen05 require). Throws CompileError with
// the NVRTC log on failure.
CompiledKernel compile_kernel(const KernelSource& src, int arch);

struct CompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The variants of `srcs` without repeats (same file, name expression and options), first
// occurrences in order: two workers must never compile the same variant into the same cache entry.
std::vector<KernelSource> unique_sources(const std::vector<KernelSource>& srcs);

// Compiles several variants on `threads` worker threads (<= 0: one per hardware thread) and
// returns them in the order given. If any fail, throws one CompileError carrying the first
// failure's log and the names of all failed variants.
std::vector<CompiledKernel> compile_many(const std::vector<KernelSource>& srcs, int arch,
                                         int threads = 0);

// The NVRTC options compile_kernel passes for `src` and `arch`, in order (part of the cache key).
std::vector<std::string> nvrtc_options(const KernelSource& src, int arch);

// Overrides of $GDPA_ROOT / $GDPA_CACHE, for tests and tools. Call before compiling, not while
// another thread compiles. Setting the root also resets a cache dir that was derived from it.
void set_source_root(const std::string& dir);
void set_cache_dir(const std::string& dir);

}  // namespace gdpa
