// compile.cpp — NVRTC compilation of kernel variants with an on-disk cubin cache.
//
// Cache key: a 64-bit hash over (every file under <root>/kernels and <root>/ptx, the variant's own
// source file, the name expression, the NVRTC options, the arch, the NVRTC version). Any edit to
// a header therefore recompiles every variant, and an unchanged tree never recompiles. Entries
// are written as tmp file + rename, so concurrent compiles (threads or processes) never observe a
// half-written cubin; the cubin is renamed last, and its presence marks the entry complete.
#include "compile.h"

#include <nvrtc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace gdpa {

namespace fs = std::filesystem;

namespace {

// FNV-1a over the bytes, finished with a 64-bit avalanche mix. Each field is length-prefixed so
// that ("ab", "c") and ("a", "bc") hash differently.
class Hasher {
 public:
  void bytes(const void* data, size_t n) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
  }
  void u64(uint64_t v) { bytes(&v, sizeof(v)); }
  void field(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  uint64_t digest() const {
    uint64_t z = h_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return false;
  *out = ss.str();
  return true;
}

// Writes via a uniquely named tmp file and rename(2), which replaces atomically on POSIX.
bool write_file_atomic(const std::string& path, const void* data, size_t n) {
  static std::atomic<unsigned long> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return false;
    f.write(static_cast<const char*>(data), std::streamsize(n));
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

bool is_source_root(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir / "kernels", ec) && fs::is_directory(dir / "ptx", ec);
}

std::string find_source_root() {
  if (const char* env = std::getenv("GDPA_ROOT"); env && *env) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (is_source_root(dir)) return dir.string();
      if (dir == dir.root_path()) break;
    }
  }
  return fs::current_path(ec).string();
}

// Paths: set once lazily, or explicitly by the setters (tests).
struct Paths {
  std::mutex mutex;
  std::string root, cache;
  bool root_known = false, cache_known = false, cache_explicit = false;
};
Paths& paths() {
  static Paths p;
  return p;
}

// Hash of every file under <root>/kernels and <root>/ptx, sorted by relative path. Computed once
// per root and process: the tree is assumed not to change while a process runs.
uint64_t source_tree_hash(const std::string& root) {
  static std::mutex mutex;
  static std::map<std::string, uint64_t> memo;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = memo.find(root); it != memo.end()) return it->second;

  std::vector<std::string> files;
  for (const char* sub : {"kernels", "ptx"}) {
    std::error_code ec;
    const fs::path dir = fs::path(root) / sub;
    if (!fs::is_directory(dir, ec)) continue;
    for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
         !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file(ec)) files.push_back(fs::relative(it->path(), root, ec).generic_string());
    }
  }
  std::sort(files.begin(), files.end());
  Hasher h;
  h.u64(files.size());
  for (const std::string& rel : files) {
    std::string bytes;
    read_file(root + "/" + rel, &bytes);  // an unreadable file hashes as empty, still by name
    h.field(rel);
    h.field(bytes);
  }
  return memo[root] = h.digest();
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The arch-specific target ("a": wgmma and setmaxnreg on sm_90a, tcgen05 on sm_100a) where one
// exists: Hopper and the Blackwell generations. Ampere and Ada have none (there is no sm_80a),
// and the kernels that run there (baseline, unfused) need none.
std::string arch_name(int arch) {
  const bool has_arch_specific = arch == 90 || arch >= 100;
  return "sm_" + std::to_string(arch) + (has_arch_specific ? "a" : "");
}

// Destroys the program on every path out of compile_with_nvrtc.
struct ProgramGuard {
  nvrtcProgram prog = nullptr;
  ~ProgramGuard() {
    if (prog) nvrtcDestroyProgram(&prog);
  }
};

CompiledKernel compile_with_nvrtc(const KernelSource& src, int arch, const std::string& path,
                                  const std::string& source, const std::vector<std::string>& options) {
  ProgramGuard guard;
  const std::string where = src.name_expression + " (" + src.file + ") for " + arch_name(arch);
  // The program is named by its full path so that its quoted includes ("../../ptx/x.cuh")
  // resolve relative to the file, as they would under nvcc.
  nvrtcResult r = nvrtcCreateProgram(&guard.prog, source.c_str(), path.c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS)
    throw CompileError("NVRTC cannot create a program for " + where + ": " + nvrtcGetErrorString(r));
  r = nvrtcAddNameExpression(guard.prog, src.name_expression.c_str());
  if (r != NVRTC_SUCCESS)
    throw CompileError("NVRTC rejects the name expression " + where + ": " + nvrtcGetErrorString(r));

  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(guard.prog, int(argv.size()), argv.data());

  CompiledKernel out;
  size_t log_size = 0;
  if (nvrtcGetProgramLogSize(guard.prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    nvrtcGetProgramLog(guard.prog, &out.log[0]);
    out.log.resize(log_size - 1);  // drop the terminating NUL
  }
  if (compiled != NVRTC_SUCCESS)
    throw CompileError(std::string("NVRTC failed (") + nvrtcGetErrorString(compiled) + ") on " +
                       where + ":\n" + out.log);

  const char* lowered = nullptr;
  r = nvrtcGetLoweredName(guard.prog, src.name_expression.c_str(), &lowered);
  if (r != NVRTC_SUCCESS || !lowered || !*lowered)
    throw CompileError("NVRTC has no lowered name for " + where + ": " + nvrtcGetErrorString(r));
  out.lowered_name = lowered;  // copied: the string dies with the program

  size_t cubin_size = 0;
  r = nvrtcGetCUBINSize(guard.prog, &cubin_size);
  if (r != NVRTC_SUCCESS || cubin_size == 0)
    throw CompileError("NVRTC produced no cubin for " + where +
                       " (a virtual arch gives PTX only; use the real sm_XXa target)");
  out.cubin.resize(cubin_size);
  nvrtcGetCUBIN(guard.prog, out.cubin.data());

  size_t ptx_size = 0;
  if (nvrtcGetPTXSize(guard.prog, &ptx_size) == NVRTC_SUCCESS && ptx_size > 1) {
    out.ptx.resize(ptx_size);
    nvrtcGetPTX(guard.prog, &out.ptx[0]);
    out.ptx.resize(ptx_size - 1);
  }
  return out;
}

bool load_cached(const std::string& stem, CompiledKernel* out) {
  std::string cubin, name;
  if (!read_file(stem + ".cubin", &cubin) || cubin.empty()) return false;
  if (!read_file(stem + ".name", &name) || name.empty()) return false;
  out->cubin.assign(cubin.begin(), cubin.end());
  out->lowered_name = name;
  read_file(stem + ".ptx", &out->ptx);  // optional parts
  read_file(stem + ".log", &out->log);
  out->from_cache = true;
  return true;
}

void store_cached(const std::string& dir, const std::string& stem, const CompiledKernel& k) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  // The cubin goes last: a reader that finds it finds the name, PTX and log too.
  const bool ok = write_file_atomic(stem + ".name", k.lowered_name.data(), k.lowered_name.size()) &&
                  write_file_atomic(stem + ".ptx", k.ptx.data(), k.ptx.size()) &&
                  write_file_atomic(stem + ".log", k.log.data(), k.log.size()) &&
                  write_file_atomic(stem + ".cubin", k.cubin.data(), k.cubin.size());
  static std::atomic<bool> warned{false};
  if (!ok && !warned.exchange(true))
    std::fprintf(stderr, "gdpa: cannot write the kernel cache in %s; compiling without it\n", dir.c_str());
}

}  // namespace

const std::string& source_root() {
  Paths& p = paths();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (!p.root_known) {
    p.root = find_source_root();
    p.root_known = true;
  }
  return p.root;
}

const std::string& cache_dir() {
  const std::string& root = source_root();
  Paths& p = paths();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (!p.cache_known) {
    const char* env = std::getenv("GDPA_CACHE");
    p.cache = env && *env ? std::string(env) : root + "/build/cache";
    p.cache_known = true;
  }
  return p.cache;
}

void set_source_root(const std::string& dir) {
  Paths& p = paths();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.root = dir;
  p.root_known = true;
  if (!p.cache_explicit) p.cache_known = false;  // re-derive <root>/build/cache (or $GDPA_CACHE)
}

void set_cache_dir(const std::string& dir) {
  Paths& p = paths();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.cache = dir;
  p.cache_known = true;
  p.cache_explicit = true;
}

std::vector<std::string> nvrtc_options(const KernelSource& src, int arch) {
  std::vector<std::string> o = {
      "-std=c++17",
      "-arch=" + arch_name(arch),  // arch-specific where it exists: wgmma/setmaxnreg/tcgen05 need it
      "-I" + source_root(),        // "kernels/common/params.h" style includes
      "-lineinfo",                 // SASS <-> source in profilers, no run-time cost
      "-default-device",           // unannotated helpers in shared headers become device code
  };
  // No --use_fast_math: kernels pick their MUFU approximations explicitly per activation.
  if (env_flag("GDPA_PTXAS_VERBOSE")) o.push_back("-Xptxas=-v");  // registers and spills in the log
  o.insert(o.end(), src.options.begin(), src.options.end());
  return o;
}

CompiledKernel compile_kernel(const KernelSource& src, int arch) {
  if (arch < 50 || arch > 999) throw CompileError("arch " + std::to_string(arch) + " is not a CUDA arch");
  const std::string root = source_root();
  const std::string path = fs::path(src.file).is_absolute() ? src.file : root + "/" + src.file;
  std::string source;
  if (!read_file(path, &source))
    throw CompileError("cannot read kernel source " + path +
                       " (set GDPA_ROOT to the directory holding kernels/ and ptx/)");
  const std::vector<std::string> options = nvrtc_options(src, arch);

  const bool use_cache = !env_flag("GDPA_NO_CACHE");
  std::string dir, stem;
  if (use_cache) {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    Hasher h;
    h.u64(source_tree_hash(root));
    h.field(src.file);
    h.field(source);  // the variant's own file may live outside kernels/ (tests)
    h.field(src.name_expression);
    h.u64(options.size());
    // The include path names this checkout's absolute location; hashing it would tie the cache to
    // one directory, and `gdpa precompile` exists to build a cache that travels with the tree.
    for (const std::string& o : options) h.field(o == "-I" + root ? std::string("-I<source root>") : o);
    h.u64(uint64_t(arch));
    h.u64(uint64_t(major) * 1000 + uint64_t(minor));
    dir = cache_dir();
    stem = dir + "/" + hex64(h.digest());
    CompiledKernel hit;
    if (load_cached(stem, &hit)) return hit;
  }
  CompiledKernel k = compile_with_nvrtc(src, arch, path, source, options);
  if (use_cache) store_cached(dir, stem, k);
  return k;
}

std::vector<KernelSource> unique_sources(const std::vector<KernelSource>& srcs) {
  std::vector<KernelSource> unique;
  for (const KernelSource& s : srcs) {
    bool seen = false;
    for (const KernelSource& u : unique)
      if (u.file == s.file && u.name_expression == s.name_expression && u.options == s.options) seen = true;
    if (!seen) unique.push_back(s);
  }
  return unique;
}

std::vector<CompiledKernel> compile_many(const std::vector<KernelSource>& srcs, int arch, int threads) {
  const size_t n = srcs.size();
  std::vector<CompiledKernel> results(n);
  std::vector<std::exception_ptr> errors(n);
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  const size_t workers = std::min<size_t>(size_t(threads), n);

  source_root();  // resolve shared state once, before the workers race for it
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        results[i] = compile_kernel(srcs[i], arch);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(work);
  if (workers > 0) work();
  for (std::thread& t : pool) t.join();

  std::string first, failed;
  size_t failures = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!errors[i]) continue;
    std::string what;
    try {
      std::rethrow_exception(errors[i]);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "unknown error";
    }
    if (failures++ == 0) first = what;
    failed += (failed.empty() ? "" : ", ") + srcs[i].name_expression;
  }
  if (failures == 1) throw CompileError(first);
  if (failures > 1)
    throw CompileError(std::to_string(failures) + " variants failed (" + failed + "); the first:\n" + first);
  return results;
}

}  // namespace gdpa
