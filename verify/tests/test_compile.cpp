// test_compile.cpp — NVRTC compilation and the cubin cache (host/compile.h). No GPU needed:
// NVRTC compiles for sm_90a / sm_100a on any machine.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "../../host/compile.h"

using namespace gdpa;
namespace fs = std::filesystem;

namespace {

constexpr const char* kTestKernel = "verify/tests/data/axpy_kernel.cu";

// Sets an environment variable for one scope and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = std::string(old);
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A fresh, empty cache directory for one test; the previous cache dir comes back afterwards, so
// tests that run later compile into the real cache again.
class ScopedCache {
 public:
  ScopedCache() : previous_(cache_dir()) {
    std::string tmpl = (fs::temp_directory_path() / "gdpa_cache_test_XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    dir_ = tmpl;
    set_cache_dir(dir_);
  }
  ~ScopedCache() {
    set_cache_dir(previous_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string previous_, dir_;
};

KernelSource axpy(int scale, std::vector<std::string> options = {}) {
  return KernelSource{kTestKernel, "gdpa_test::axpy<" + std::to_string(scale) + ">", std::move(options)};
}

void require_test_kernel() {
  const fs::path p = fs::path(source_root()) / kTestKernel;
  INFO("source root '" << source_root() << "' must hold " << kTestKernel << " (set GDPA_ROOT)");
  REQUIRE(fs::exists(p));
}

bool is_elf(const std::vector<char>& b) {
  return b.size() > 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

}  // namespace

TEST_CASE("NVRTC options: arch-specific target, root include, no fast math") {
  const std::vector<std::string> o90 = nvrtc_options(axpy(1, {"-DX=1"}), 90);
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  CHECK(has(o90, "-arch=sm_90a"));
  CHECK(has(o90, "-std=c++17"));
  CHECK(has(o90, "-I" + source_root()));
  CHECK(has(o90, "-lineinfo"));
  CHECK(has(o90, "-default-device"));
  CHECK(o90.back() == "-DX=1");  // the variant's own options come last
  CHECK_FALSE(has(o90, "--use_fast_math"));
  CHECK(has(nvrtc_options(axpy(1), 100), "-arch=sm_100a"));
  {
    ScopedEnv verbose("GDPA_PTXAS_VERBOSE", "1");
    CHECK(has(nvrtc_options(axpy(1), 90), "-Xptxas=-v"));
  }
  {
    ScopedEnv quiet("GDPA_PTXAS_VERBOSE", nullptr);
    CHECK_FALSE(has(nvrtc_options(axpy(1), 90), "-Xptxas=-v"));
  }
}

TEST_CASE("compile a templated kernel with inline PTX for sm_90a and sm_100a") {
  require_test_kernel();
  ScopedCache cache;
  ScopedEnv no_bypass("GDPA_NO_CACHE", nullptr);
  for (int arch : {90, 100}) {
    INFO("arch " << arch);
    const CompiledKernel k = compile_kernel(axpy(2), arch);
    CHECK(is_elf(k.cubin));
    CHECK(k.lowered_name.find("axpy") != std::string::npos);
    CHECK(k.lowered_name.find("ILi2E") != std::string::npos);  // the template argument is mangled in
    CHECK(k.ptx.find("add.f32") != std::string::npos);         // the inline PTX made it through
    CHECK(k.ptx.find(".target sm_" + std::to_string(arch) + "a") != std::string::npos);
    CHECK_FALSE(k.from_cache);
  }
}

TEST_CASE("the cache hits on an identical request and misses on any change") {
  require_test_kernel();
  ScopedCache cache;
  ScopedEnv no_bypass("GDPA_NO_CACHE", nullptr);
  const CompiledKernel first = compile_kernel(axpy(1), 90);
  CHECK_FALSE(first.from_cache);
  const CompiledKernel again = compile_kernel(axpy(1), 90);
  CHECK(again.from_cache);
  CHECK(again.cubin == first.cubin);
  CHECK(again.lowered_name == first.lowered_name);
  CHECK(again.ptx == first.ptx);

  CHECK_FALSE(compile_kernel(axpy(1, {"-DGDPA_TEST_VARIANT=1"}), 90).from_cache);  // options
  CHECK_FALSE(compile_kernel(axpy(1), 100).from_cache);                            // arch
  CHECK_FALSE(compile_kernel(axpy(4), 90).from_cache);                             // name expression
  CHECK(compile_kernel(axpy(1, {"-DGDPA_TEST_VARIANT=1"}), 90).from_cache);

  // Entries are complete files: <key>.cubin/.name/.ptx/.log, no temporaries left behind.
  size_t cubins = 0;
  for (const auto& e : fs::directory_iterator(cache.dir())) {
    const std::string name = e.path().filename().string();
    CHECK(name.find(".tmp.") == std::string::npos);
    if (e.path().extension() == ".cubin") {
      ++cubins;
      CHECK(e.path().stem().string().size() == 16);  // 64-bit hex key
      CHECK(fs::exists(fs::path(e.path()).replace_extension(".name")));
    }
  }
  CHECK(cubins == 4);

  ScopedEnv bypass("GDPA_NO_CACHE", "1");
  CHECK_FALSE(compile_kernel(axpy(1), 90).from_cache);
}

TEST_CASE("compile errors carry the NVRTC log") {
  require_test_kernel();
  ScopedCache cache;
  try {
    compile_kernel(axpy(1, {"-DGDPA_TEST_SYNTAX_ERROR"}), 90);
    FAIL("a syntax error must throw");
  } catch (const CompileError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("gdpa_test::axpy<1>") != std::string::npos);
    CHECK(msg.find("axpy_kernel.cu(") != std::string::npos);  // NVRTC's "file(line): error" lines
    CHECK(msg.find("error") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(compile_kernel(KernelSource{"verify/tests/data/no_such_kernel.cu", "k", {}}, 90),
                       doctest::Contains("cannot read kernel source"), CompileError);
  CHECK_THROWS_AS(compile_kernel(axpy(1, {"--no-such-nvrtc-option"}), 90), CompileError);
}

TEST_CASE("compile_many compiles in parallel and keeps the order") {
  require_test_kernel();
  ScopedCache cache;
  ScopedEnv no_bypass("GDPA_NO_CACHE", nullptr);
  std::vector<KernelSource> srcs;
  for (int s = 1; s <= 5; ++s) srcs.push_back(axpy(s));
  srcs.push_back(axpy(2));  // a duplicate may race with its twin for the same cache entry
  const std::vector<CompiledKernel> ks = compile_many(srcs, 90, 3);
  REQUIRE(ks.size() == srcs.size());
  for (size_t i = 0; i < ks.size(); ++i) {
    INFO("variant " << i);
    CHECK(is_elf(ks[i].cubin));
    CHECK(ks[i].lowered_name.find("ILi" + std::to_string(i < 5 ? i + 1 : 2) + "E") != std::string::npos);
  }
  CHECK(ks[5].cubin == ks[1].cubin);
  // Everything is cached now, whatever the thread count.
  const std::vector<CompiledKernel> cached = compile_many(srcs, 90, 1);
  CHECK(std::all_of(cached.begin(), cached.end(), [](const CompiledKernel& k) { return k.from_cache; }));

  std::vector<KernelSource> broken = {axpy(1), axpy(2, {"-DGDPA_TEST_SYNTAX_ERROR"}),
                                      axpy(3, {"-DGDPA_TEST_SYNTAX_ERROR"})};
  CHECK_THROWS_WITH_AS(compile_many(broken, 90, 2),
                       doctest::Contains("2 variants failed (gdpa_test::axpy<2>, gdpa_test::axpy<3>)"),
                       CompileError);
  CHECK(compile_many({}, 90, 4).empty());
}
