// driver.h — the CUDA Driver API, loaded at run time, behind small RAII types.
//
// libcuda is dlopen'ed on first use rather than linked, so the `gdpa` binary and the test binary
// start on machines with no GPU and no driver: every CPU command works there, and the first GPU
// call throws CudaUnavailable with one clear line instead of the loader killing the process.
#pragma once
#include <cuda.h>  // types and enums only; no symbol from libcuda is linked

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gdpa {

// A failed Driver API call: names the call, the CUresult (e.g. CUDA_ERROR_ILLEGAL_ADDRESS) and where.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// No libcuda, no device, or cuInit failed: the message says which.
struct CudaUnavailable : CudaError {
  using CudaError::CudaError;
};

// True when libcuda loads, cuInit succeeds and there is at least one device. Never throws; *why
// gets the reason when false.
bool gpu_available(std::string* why = nullptr);

// Throws CudaError if r != CUDA_SUCCESS, naming `what` and the error.
void check_cu(CUresult r, const char* what, const char* file, int line);
#define GDPA_CU(call) ::gdpa::check_cu((call), #call, __FILE__, __LINE__)

// Table of the Driver API entry points this project uses, resolved with dlsym.
struct DriverApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuFuncGetAttribute)(int*, CUfunction_attribute, CUfunction);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**);
  CUresult (*cuOccupancyMaxActiveClusters)(int*, CUfunction, const CUlaunchConfig*);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int*, CUfunction, int, size_t);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                     const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                     const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
};

// Loads libcuda and cuInit's on first call; throws CudaUnavailable if that is impossible.
const DriverApi& cu();

// The exported names dlsym is asked for, one per DriverApi entry: the ABI names cuda.h maps the
// API names to (cuMemAlloc -> cuMemAlloc_v2), never the unversioned legacy entry points.
std::vector<std::string> driver_symbol_names();
// Tries `library` as the CUDA driver apart from cu(): loads it, resolves every entry, cuInit's and
// counts devices. Returns the one-line reason it is unusable, or "" when it works.
std::string driver_load_error(const std::string& library);
// The enumerator name of r, e.g. "CUDA_ERROR_ILLEGAL_ADDRESS"; known without a driver.
std::string cu_result_name(CUresult r);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int sm_clock_khz = 0;
  int mem_clock_khz = 0;
  int mem_bus_bits = 0;
  int l2_bytes = 0;
  int max_smem_optin = 0;  // bytes of dynamic shared memory a block may opt in to
  size_t total_mem = 0;
  int driver_version = 0;
  int arch() const { return cc_major * 10 + cc_minor; }  // 90 for Hopper
};

// The primary context of one device, made current on construction.
class Context {
 public:
  explicit Context(int ordinal = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  const DeviceInfo& info() const { return info_; }
  void synchronize() const;

 private:
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  DeviceInfo info_;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return ptr_; }
  void* vptr() const { return reinterpret_cast<void*>(ptr_); }
  size_t bytes() const { return bytes_; }
  void upload(const void* src, size_t bytes);  // synchronous: the data is on the device on return
  void download(void* dst, size_t bytes) const;
  template <class T> void upload(const std::vector<T>& v) { upload(v.data(), v.size() * sizeof(T)); }
  template <class T> void download(std::vector<T>& v) const { download(v.data(), v.size() * sizeof(T)); }
  void fill_u8(unsigned char value, CUstream s = nullptr);    // async
  void fill_u32(unsigned value, CUstream s = nullptr);        // async; bytes must be a multiple of 4

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return s_; }
  void synchronize() const;

 private:
  CUstream s_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent get() const { return e_; }
  void record(CUstream s) const;
  void synchronize() const;
  float ms_since(const Event& start) const;  // elapsed milliseconds start -> this

 private:
  CUevent e_ = nullptr;
};

// A loaded cubin and the function in it.
class Module {
 public:
  Module(const void* image, const std::string& function_name);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  CUfunction function() const { return fn_; }
  int registers_per_thread() const;
  int static_smem_bytes() const;
  int local_bytes_per_thread() const;  // > 0 means spills or a stack frame

 private:
  CUmodule mod_ = nullptr;
  CUfunction fn_ = nullptr;
};

struct LaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned cluster[3] = {1, 1, 1};  // all 1: no cluster attribute
  size_t dynamic_smem = 0;          // raises CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES if > 48 KB
  // Programmatic stream serialization: the kernel may start before the previous one in the stream
  // has finished, once every CTA of that one has run griddepcontrol.launch_dependents (or exited).
  bool programmatic = false;
};

// cuLaunchKernelEx with the shape above; args as for cuLaunchKernel. Throws on launch errors
// (the error of an asynchronous fault shows at the next synchronize, which also checks).
void launch(CUfunction fn, const LaunchShape& shape, CUstream stream, void** args);

// How many clusters of `shape` (its cluster, block and shared memory; the grid is ignored) the
// device can hold resident at once: the persistent grid of a cluster launch. 0 if none fits.
int max_active_clusters(CUfunction fn, const LaunchShape& shape);

// How many CTAs of `shape`'s block and dynamic shared memory one SM holds at once (0: none fits).
int max_active_blocks_per_sm(CUfunction fn, const LaunchShape& shape);

}  // namespace gdpa
