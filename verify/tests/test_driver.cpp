// test_driver.cpp — host/driver.h: clean failure without a GPU, error formatting, and (gpu suite)
// the RAII types on a real device.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "../../host/compile.h"
#include "../../host/driver.h"

using namespace gdpa;

TEST_CASE("driver entry points resolve to the ABI names cuda.h maps to") {
  const std::vector<std::string> names = driver_symbol_names();
  auto has = [&](const char* n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  // Resolving the unversioned legacy name of any of these would bind the old ABI.
  for (const char* versioned :
       {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoDAsync_v2",
        "cuDeviceTotalMem_v2", "cuDevicePrimaryCtxRelease_v2", "cuStreamDestroy_v2", "cuEventDestroy_v2",
        "cuEventElapsedTime_v2"}) {
    INFO(versioned);
    CHECK(has(versioned));
    CHECK_FALSE(has(std::string(versioned).substr(0, std::strlen(versioned) - 3).c_str()));
  }
  for (const char* plain : {"cuInit", "cuLaunchKernelEx", "cuMemsetD8Async", "cuMemsetD32Async",
                            "cuTensorMapEncodeTiled", "cuModuleLoadData", "cuGetErrorName"})
    CHECK(has(plain));
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  CHECK(names.size() == sizeof(DriverApi) / sizeof(void*));  // every table entry is resolved
}

TEST_CASE("a missing or incomplete driver library gives one clear line") {
  const std::string missing = driver_load_error("libgdpa_no_such_driver.so.1");
  CHECK(missing.find("no CUDA driver found (libgdpa_no_such_driver.so.1)") == 0);
  CHECK(missing.find("sm_90") != std::string::npos);
  // The C math library loads but is no driver: the first missing entry point is named.
  const std::string wrong = driver_load_error("libm.so.6");
  CHECK(wrong.find("the CUDA driver lacks cuGetErrorName") == 0);
  CHECK(wrong.find('\n') == std::string::npos);
}

TEST_CASE("without a GPU every entry point throws CudaUnavailable instead of crashing") {
  std::string why;
  if (gpu_available(&why)) {
    CHECK(why.empty());
    CHECK_NOTHROW(cu());
    return;
  }
  CHECK_FALSE(why.empty());
  CHECK(why.find('\n') == std::string::npos);
  CHECK_THROWS_AS(cu(), CudaUnavailable);
  CHECK_THROWS_WITH(cu(), why.c_str());
  CHECK_THROWS_AS(Context(0), CudaUnavailable);
  CHECK_THROWS_AS(DeviceBuffer(64), CudaUnavailable);
  CHECK_THROWS_AS(Stream(), CudaUnavailable);
  CHECK_THROWS_AS(Event(), CudaUnavailable);
  CHECK_NOTHROW(DeviceBuffer());  // an empty buffer needs no driver
  CHECK_FALSE(gpu_available());
}

TEST_CASE("check_cu names the call, the CUresult and the place") {
  CHECK_NOTHROW(check_cu(CUDA_SUCCESS, "cuInit(0)", "host/x.cpp", 1));
  CHECK_THROWS_WITH_AS(check_cu(CUDA_ERROR_ILLEGAL_ADDRESS, "cu().cuStreamSynchronize(s_)", "host/x.cpp", 12),
                       "CUDA error CUDA_ERROR_ILLEGAL_ADDRESS in cuStreamSynchronize(s_) at host/x.cpp:12",
                       CudaError);
  CHECK_THROWS_WITH(GDPA_CU(CUDA_ERROR_OUT_OF_MEMORY),
                    doctest::Contains("CUDA error CUDA_ERROR_OUT_OF_MEMORY in CUDA_ERROR_OUT_OF_MEMORY at "));
  CHECK(cu_result_name(CUDA_ERROR_INVALID_VALUE) == "CUDA_ERROR_INVALID_VALUE");
  CHECK(cu_result_name(CUDA_ERROR_NO_DEVICE) == "CUDA_ERROR_NO_DEVICE");
  CHECK(cu_result_name(CUresult(123456)) == "CUresult 123456");
}

TEST_CASE("launch shapes are checked before the driver is needed") {
  LaunchShape s;
  s.grid[0] = 3;
  s.cluster[0] = 2;
  CHECK_THROWS_WITH_AS(launch(nullptr, s, nullptr, nullptr),
                       "launch grid (3, 1, 1) is not a multiple of the cluster (2, 1, 1)", CudaError);
  s = LaunchShape{};
  s.block[1] = 0;
  CHECK_THROWS_WITH_AS(launch(nullptr, s, nullptr, nullptr), doctest::Contains("empty grid"), CudaError);
}

TEST_SUITE("gpu") {
  TEST_CASE("context reports the device") {
    Context ctx;
    const DeviceInfo& d = ctx.info();
    MESSAGE("GPU: " << d.name << ", sm_" << d.arch() << ", " << d.sm_count << " SMs");
    CHECK_FALSE(d.name.empty());
    CHECK(d.cc_major >= 7);
    CHECK(d.sm_count > 0);
    CHECK(d.sm_clock_khz > 0);
    CHECK(d.l2_bytes > 0);
    CHECK(d.max_smem_optin >= 48 * 1024);
    CHECK(d.total_mem > (size_t(1) << 30));
    CHECK(d.driver_version >= 12000);
    CHECK_THROWS_AS(Context(1 << 20), CudaError);
    CHECK_NOTHROW(ctx.synchronize());
  }

  TEST_CASE("buffers round-trip and fill") {
    Context ctx;
    std::vector<uint32_t> host(1 << 18);
    std::iota(host.begin(), host.end(), 7u);
    DeviceBuffer buf(host.size() * 4);
    buf.upload(host);
    std::vector<uint32_t> back(host.size(), 0);
    buf.download(back);
    CHECK(back == host);
    CHECK_THROWS_AS(buf.upload(host.data(), host.size() * 4 + 4), CudaError);

    DeviceBuffer moved = std::move(buf);
    CHECK(buf.ptr() == 0);
    CHECK(moved.bytes() == host.size() * 4);

    Stream s;
    moved.fill_u32(0xdeadbeefu, s.get());
    s.synchronize();
    moved.download(back);
    CHECK(std::all_of(back.begin(), back.end(), [](uint32_t v) { return v == 0xdeadbeefu; }));
    moved.fill_u8(0x5a, s.get());
    s.synchronize();
    moved.download(back);
    CHECK(std::all_of(back.begin(), back.end(), [](uint32_t v) { return v == 0x5a5a5a5au; }));
  }

  TEST_CASE("events time a stream") {
    Context ctx;
    Stream s;
    Event start, stop;
    DeviceBuffer buf(size_t(64) << 20);
    start.record(s.get());
    buf.fill_u8(1, s.get());
    stop.record(s.get());
    stop.synchronize();
    const float ms = stop.ms_since(start);
    CHECK(ms >= 0.0f);
    CHECK(ms < 1000.0f);
  }

  TEST_CASE("programmatic launch: work behind a dependent grid waits for the grid before it too") {
    // kernels/sm90/dq_follow.cu relies on it: the backward's follower may finish before the
    // backward's last dK / dV stores, and whatever the caller queues next must still see them.
    // slow_marker's blocks spin for 20 ms after allowing quick_dependent, which returns at once;
    // copy_marks, an ordinary launch behind quick_dependent, must see every block's mark.
    Context ctx;
    const int arch = ctx.info().arch();
    if (arch < 90) return;  // programmatic dependent launch is sm_90's
    const std::string file = "verify/tests/data/pdl_kernels.cu";
    const CompiledKernel slow = compile_kernel(KernelSource{file, "gdpa_test::slow_marker", {}}, arch);
    const CompiledKernel quick = compile_kernel(KernelSource{file, "gdpa_test::quick_dependent", {}}, arch);
    const CompiledKernel copy = compile_kernel(KernelSource{file, "gdpa_test::copy_marks", {}}, arch);
    Module slow_mod(slow.cubin.data(), slow.lowered_name), quick_mod(quick.cubin.data(), quick.lowered_name),
        copy_mod(copy.cubin.data(), copy.lowered_name);
    const int blocks = 4;
    DeviceBuffer done(blocks * 4), started(blocks * 4), out(blocks * 4);
    Stream s;
    done.fill_u32(0, s.get());
    started.fill_u32(0, s.get());
    out.fill_u32(7, s.get());
    CUdeviceptr pd = done.ptr(), ps = started.ptr(), po = out.ptr();
    long long ns = 20000000;
    int n = blocks;
    LaunchShape shape;
    shape.grid[0] = blocks;
    shape.block[0] = 32;
    void* slow_args[] = {&pd, &ns};
    launch(slow_mod.function(), shape, s.get(), slow_args);
    shape.programmatic = true;
    void* quick_args[] = {&ps};
    launch(quick_mod.function(), shape, s.get(), quick_args);
    shape = LaunchShape{};
    shape.block[0] = 32;
    void* copy_args[] = {&pd, &po, &n};
    launch(copy_mod.function(), shape, s.get(), copy_args);
    s.synchronize();
    std::vector<int> marks(blocks, 0), ran(blocks, 0);
    out.download(marks);
    started.download(ran);
    CHECK(ran == std::vector<int>(blocks, 1));
    CHECK(marks == std::vector<int>(blocks, 1));
  }

  TEST_CASE("compile, load and launch a kernel") {
    Context ctx;
    const int arch = ctx.info().arch();
    if (arch < 90) return;  // the suite compiles for the arch-specific sm_90a / sm_100a targets
    const CompiledKernel k =
        compile_kernel(KernelSource{"verify/tests/data/axpy_kernel.cu", "gdpa_test::axpy<3>", {}}, arch);
    Module mod(k.cubin.data(), k.lowered_name);
    CHECK(mod.registers_per_thread() > 0);
    CHECK(mod.local_bytes_per_thread() == 0);

    const int n = 1000;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
      x[i] = float(i);
      y[i] = 0.5f;
    }
    DeviceBuffer dx(n * 4), dy(n * 4);
    dx.upload(x);
    dy.upload(y);
    CUdeviceptr py = dy.ptr(), px = dx.ptr();
    int count = n;
    void* args[] = {&py, &px, &count};
    Stream s;
    LaunchShape shape;
    shape.grid[0] = 8;  // 8 x 128 >= 1000
    shape.block[0] = 128;
    shape.cluster[0] = 2;            // exercises the cluster attribute
    shape.dynamic_smem = 64 * 1024;  // exercises the > 48 KB opt-in
    launch(mod.function(), shape, s.get(), args);
    s.synchronize();
    dy.download(y);
    for (int i = 0; i < n; ++i) CHECK(y[i] == 3.0f * float(i) + 0.5f);
  }
}
