// driver.cpp — libcuda loaded with dlopen, and the RAII types of driver.h on top of it.
//
// Why dlopen: linking -lcuda makes the loader refuse to start the binary where no driver is
// installed, and the CPU half of the suite (reference, unit tests, CLI help) must run there.
//
// Why the symbol names come from cuda.h's macros: cuda.h #defines many API names to versioned ABI
// names (cuMemAlloc -> cuMemAlloc_v2, cuEventDestroy -> cuEventDestroy_v2, ...). libcuda still
// exports the unversioned names, but with the OLD ABI (32-bit sizes, other semantics), so asking
// dlsym for "cuMemAlloc" would silently bind the wrong function. Stringizing the macro-expanded
// token gives exactly the name the header's prototype refers to, and a static_assert ties every
// table entry's type to that prototype.
#include "driver.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <type_traits>
#include <utility>

namespace gdpa {

namespace {

// Two levels so the argument is macro-expanded before it is turned into a string.
#define GDPA_STRINGIFY_EXPANDED(x) GDPA_STRINGIFY_RAW(x)
#define GDPA_STRINGIFY_RAW(x) #x

// Every DriverApi entry; X(name) is applied to the API name, which cuda.h may remap.
#define GDPA_DRIVER_ENTRY_POINTS(X)                                                              \
  X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet)           \
  X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)             \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent)                    \
  X(cuCtxSynchronize) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH)                 \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) X(cuMemsetD32Async) X(cuModuleLoadData)                \
  X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncSetAttribute) X(cuFuncGetAttribute)           \
  X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuOccupancyMaxActiveClusters) X(cuStreamCreate)        \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                                  \
  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy)                   \
  X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuTensorMapEncodeTiled)

// The table's pointer types must be the prototypes cuda.h declares for the names we resolve.
#define GDPA_CHECK_ENTRY_TYPE(fn)                                                        \
  static_assert(std::is_same<decltype(DriverApi::fn), decltype(&::fn)>::value,           \
                "DriverApi::" #fn " does not match the prototype in cuda.h");
GDPA_DRIVER_ENTRY_POINTS(GDPA_CHECK_ENTRY_TYPE)
#undef GDPA_CHECK_ENTRY_TYPE

constexpr const char* kDriverLibrary = "libcuda.so.1";
constexpr const char* kDriverLibraryFallback = "libcuda.so";  // dev-package symlink only

// A loaded driver, or the one-line reason there is none.
struct DriverState {
  DriverApi api{};
  void* handle = nullptr;
  std::string error;  // empty when usable
};

template <class Fn>
bool resolve(void* handle, Fn* slot, const char* symbol, std::string* error) {
  void* p = dlsym(handle, symbol);
  if (!p) {
    *error = std::string("the CUDA driver lacks ") + symbol +
             ": update the NVIDIA driver (CUDA 12.0 or newer is needed)";
    return false;
  }
  *slot = reinterpret_cast<Fn>(p);
  return true;
}

// Loads `library` (or, when library is empty, the standard names), resolves the table, runs cuInit
// and checks that at least one device exists.
DriverState load_driver(const std::string& library) {
  DriverState st;
  std::string shown = library.empty() ? kDriverLibrary : library;
  if (library.empty()) {
    st.handle = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!st.handle) st.handle = dlopen(kDriverLibraryFallback, RTLD_NOW | RTLD_LOCAL);
  } else {
    st.handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!st.handle) {
    st.error = "no CUDA driver found (" + shown +
               "): the GPU kernels need an NVIDIA GPU with sm_90 or newer and its driver";
    return st;
  }
#define GDPA_RESOLVE_ENTRY(fn)                                                                 \
  if (!resolve(st.handle, &st.api.fn, GDPA_STRINGIFY_EXPANDED(fn), &st.error)) {              \
    st.error += " (" + shown + ")";                                                            \
    return st;                                                                                 \
  }
  GDPA_DRIVER_ENTRY_POINTS(GDPA_RESOLVE_ENTRY)
#undef GDPA_RESOLVE_ENTRY

  const CUresult r = st.api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    st.error = "cuInit failed with " + cu_result_name(r) +
               ": the CUDA driver is installed but no usable NVIDIA GPU was found";
    return st;
  }
  int count = 0;
  const CUresult rc = st.api.cuDeviceGetCount(&count);
  if (rc != CUDA_SUCCESS || count == 0) {
    st.error = rc != CUDA_SUCCESS ? "cuDeviceGetCount failed with " + cu_result_name(rc)
                                  : std::string("the CUDA driver sees no GPU");
    return st;
  }
  return st;
}

// The process-wide driver, loaded once (function-local statics initialise thread-safely). The
// handle is never closed: driver state must outlive every static destructor that frees memory.
const DriverState& driver_state() {
  static const DriverState state = load_driver("");
  return state;
}

// "cu().cuStreamSynchronize(s_)" reads better as "cuStreamSynchronize(s_)".
std::string strip_table_prefix(const char* what) {
  std::string s = what ? what : "";
  for (const char* prefix : {"cu().", "api.", "api->", "::gdpa::cu()."}) {
    const std::string p = prefix;
    if (s.compare(0, p.size(), p) == 0) return s.substr(p.size());
  }
  return s;
}

}  // namespace

std::string cu_result_name(CUresult r) {
  switch (r) {
#define GDPA_NAME(e) \
  case e:            \
    return #e;
    GDPA_NAME(CUDA_SUCCESS)
    GDPA_NAME(CUDA_ERROR_INVALID_VALUE)
    GDPA_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    GDPA_NAME(CUDA_ERROR_NOT_INITIALIZED)
    GDPA_NAME(CUDA_ERROR_DEINITIALIZED)
    GDPA_NAME(CUDA_ERROR_STUB_LIBRARY)
    GDPA_NAME(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER)
    GDPA_NAME(CUDA_ERROR_DEVICE_UNAVAILABLE)
    GDPA_NAME(CUDA_ERROR_NO_DEVICE)
    GDPA_NAME(CUDA_ERROR_INVALID_DEVICE)
    GDPA_NAME(CUDA_ERROR_DEVICE_NOT_LICENSED)
    GDPA_NAME(CUDA_ERROR_INVALID_IMAGE)
    GDPA_NAME(CUDA_ERROR_INVALID_CONTEXT)
    GDPA_NAME(CUDA_ERROR_NO_BINARY_FOR_GPU)
    GDPA_NAME(CUDA_ERROR_ECC_UNCORRECTABLE)
    GDPA_NAME(CUDA_ERROR_UNSUPPORTED_LIMIT)
    GDPA_NAME(CUDA_ERROR_INVALID_PTX)
    GDPA_NAME(CUDA_ERROR_JIT_COMPILER_NOT_FOUND)
    GDPA_NAME(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    GDPA_NAME(CUDA_ERROR_INVALID_SOURCE)
    GDPA_NAME(CUDA_ERROR_FILE_NOT_FOUND)
    GDPA_NAME(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND)
    GDPA_NAME(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED)
    GDPA_NAME(CUDA_ERROR_OPERATING_SYSTEM)
    GDPA_NAME(CUDA_ERROR_INVALID_HANDLE)
    GDPA_NAME(CUDA_ERROR_ILLEGAL_STATE)
    GDPA_NAME(CUDA_ERROR_NOT_FOUND)
    GDPA_NAME(CUDA_ERROR_NOT_READY)
    GDPA_NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    GDPA_NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    GDPA_NAME(CUDA_ERROR_LAUNCH_TIMEOUT)
    GDPA_NAME(CUDA_ERROR_CONTEXT_IS_DESTROYED)
    GDPA_NAME(CUDA_ERROR_ASSERT)
    GDPA_NAME(CUDA_ERROR_HARDWARE_STACK_ERROR)
    GDPA_NAME(CUDA_ERROR_ILLEGAL_INSTRUCTION)
    GDPA_NAME(CUDA_ERROR_MISALIGNED_ADDRESS)
    GDPA_NAME(CUDA_ERROR_INVALID_ADDRESS_SPACE)
    GDPA_NAME(CUDA_ERROR_INVALID_PC)
    GDPA_NAME(CUDA_ERROR_LAUNCH_FAILED)
    GDPA_NAME(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
    GDPA_NAME(CUDA_ERROR_TENSOR_MEMORY_LEAK)
    GDPA_NAME(CUDA_ERROR_NOT_PERMITTED)
    GDPA_NAME(CUDA_ERROR_NOT_SUPPORTED)
    GDPA_NAME(CUDA_ERROR_SYSTEM_NOT_READY)
    GDPA_NAME(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
    GDPA_NAME(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
    GDPA_NAME(CUDA_ERROR_TIMEOUT)
    GDPA_NAME(CUDA_ERROR_INVALID_CLUSTER_SIZE)
    GDPA_NAME(CUDA_ERROR_FUNCTION_NOT_LOADED)
    GDPA_NAME(CUDA_ERROR_UNKNOWN)
#undef GDPA_NAME
    default:
      break;
  }
  // Codes newer than this table come from a newer driver, which then is the one loaded: ask it.
  const DriverState& st = driver_state();
  const char* name = nullptr;
  if (st.error.empty() && st.api.cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(int(r));
}

std::vector<std::string> driver_symbol_names() {
  std::vector<std::string> names;
#define GDPA_SYMBOL_NAME(fn) names.push_back(GDPA_STRINGIFY_EXPANDED(fn));
  GDPA_DRIVER_ENTRY_POINTS(GDPA_SYMBOL_NAME)
#undef GDPA_SYMBOL_NAME
  return names;
}

std::string driver_load_error(const std::string& library) {
  DriverState st = load_driver(library);
  if (st.handle) dlclose(st.handle);  // the process-wide handle holds its own reference
  return st.error;
}

bool gpu_available(std::string* why) {
  const DriverState& st = driver_state();
  if (why) *why = st.error;
  return st.error.empty();
}

const DriverApi& cu() {
  const DriverState& st = driver_state();
  if (!st.error.empty()) throw CudaUnavailable(st.error);
  return st.api;
}

void check_cu(CUresult r, const char* what, const char* file, int line) {
  if (r == CUDA_SUCCESS) return;
  throw CudaError("CUDA error " + cu_result_name(r) + " in " + strip_table_prefix(what) + " at " +
                  (file ? file : "?") + ":" + std::to_string(line));
}

// ---------------------------------------------------------------------------------------------
// Context

Context::Context(int ordinal) {
  const DriverApi& api = cu();
  int count = 0;
  GDPA_CU(api.cuDeviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count)
    throw CudaError("GPU ordinal " + std::to_string(ordinal) + " is out of range: the driver sees " +
                    std::to_string(count) + " GPU(s)");
  GDPA_CU(api.cuDeviceGet(&dev_, ordinal));
  GDPA_CU(api.cuDevicePrimaryCtxRetain(&ctx_, dev_));
  try {
    GDPA_CU(api.cuCtxSetCurrent(ctx_));
    auto attribute = [&](CUdevice_attribute a) {
      int v = 0;
      GDPA_CU(api.cuDeviceGetAttribute(&v, a, dev_));
      return v;
    };
    info_.ordinal = ordinal;
    char name[256] = {};
    GDPA_CU(api.cuDeviceGetName(name, int(sizeof(name)) - 1, dev_));
    info_.name = name;
    info_.cc_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    info_.cc_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    info_.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    info_.sm_clock_khz = attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    info_.mem_clock_khz = attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    info_.mem_bus_bits = attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    info_.l2_bytes = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    info_.max_smem_optin = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    GDPA_CU(api.cuDeviceTotalMem(&info_.total_mem, dev_));
    GDPA_CU(api.cuDriverGetVersion(&info_.driver_version));
  } catch (...) {
    api.cuDevicePrimaryCtxRelease(dev_);
    throw;
  }
}

Context::~Context() {
  // Destructors must not throw; a failed release at exit has nothing left to clean up.
  if (ctx_) cu().cuDevicePrimaryCtxRelease(dev_);
}

void Context::synchronize() const { GDPA_CU(cu().cuCtxSynchronize()); }

// ---------------------------------------------------------------------------------------------
// DeviceBuffer

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  // cuMemAlloc rejects 0 bytes; an empty buffer is a valid value (an empty jagged batch).
  if (bytes > 0) GDPA_CU(cu().cuMemAlloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cu().cuMemFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cu().cuMemFree(ptr_);
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

namespace {
void check_fits(size_t bytes, size_t capacity, const char* op) {
  if (bytes > capacity)
    throw CudaError(std::string(op) + " of " + std::to_string(bytes) +
                    " bytes does not fit a device buffer of " + std::to_string(capacity) + " bytes");
}
}  // namespace

void DeviceBuffer::upload(const void* src, size_t bytes) {
  check_fits(bytes, bytes_, "upload");
  if (!bytes) return;
  GDPA_CU(cu().cuMemcpyHtoD(ptr_, src, bytes));
  // From pageable memory cuMemcpyHtoD may return before its DMA has landed, and it is ordered only
  // in the legacy stream, which our CU_STREAM_NON_BLOCKING streams do not wait for: a kernel
  // launched right after could read the buffer's old contents (tile lists uploaded by prepare()).
  // Uploads happen at set-up time, so a full synchronization costs nothing that is timed.
  GDPA_CU(cu().cuCtxSynchronize());
}

void DeviceBuffer::download(void* dst, size_t bytes) const {
  check_fits(bytes, bytes_, "download");
  if (bytes) GDPA_CU(cu().cuMemcpyDtoH(dst, ptr_, bytes));
}

void DeviceBuffer::fill_u8(unsigned char value, CUstream s) {
  if (bytes_) GDPA_CU(cu().cuMemsetD8Async(ptr_, value, bytes_, s));
}

void DeviceBuffer::fill_u32(unsigned value, CUstream s) {
  if (bytes_ % 4)
    throw CudaError("fill_u32 on a buffer of " + std::to_string(bytes_) +
                    " bytes: the size must be a multiple of 4");
  if (bytes_) GDPA_CU(cu().cuMemsetD32Async(ptr_, value, bytes_ / 4, s));
}

// ---------------------------------------------------------------------------------------------
// Stream and Event

Stream::Stream() { GDPA_CU(cu().cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING)); }
Stream::~Stream() {
  if (s_) cu().cuStreamDestroy(s_);
}
void Stream::synchronize() const { GDPA_CU(cu().cuStreamSynchronize(s_)); }

Event::Event() { GDPA_CU(cu().cuEventCreate(&e_, CU_EVENT_DEFAULT)); }
Event::~Event() {
  if (e_) cu().cuEventDestroy(e_);
}
void Event::record(CUstream s) const { GDPA_CU(cu().cuEventRecord(e_, s)); }
void Event::synchronize() const { GDPA_CU(cu().cuEventSynchronize(e_)); }
float Event::ms_since(const Event& start) const {
  float ms = 0.0f;
  GDPA_CU(cu().cuEventElapsedTime(&ms, start.e_, e_));
  return ms;
}

// ---------------------------------------------------------------------------------------------
// Module

Module::Module(const void* image, const std::string& function_name) {
  const DriverApi& api = cu();
  GDPA_CU(api.cuModuleLoadData(&mod_, image));
  const CUresult r = api.cuModuleGetFunction(&fn_, mod_, function_name.c_str());
  if (r != CUDA_SUCCESS) {
    api.cuModuleUnload(mod_);
    throw CudaError("CUDA error " + cu_result_name(r) + " in cuModuleGetFunction: the cubin has no '" +
                    function_name + "'");
  }
}

Module::~Module() {
  if (mod_) cu().cuModuleUnload(mod_);
}

namespace {
int function_attribute(CUfunction fn, CUfunction_attribute a) {
  int v = 0;
  GDPA_CU(cu().cuFuncGetAttribute(&v, a, fn));
  return v;
}
}  // namespace

int Module::registers_per_thread() const { return function_attribute(fn_, CU_FUNC_ATTRIBUTE_NUM_REGS); }
int Module::static_smem_bytes() const {
  return function_attribute(fn_, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
}
int Module::local_bytes_per_thread() const {
  return function_attribute(fn_, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
}

// ---------------------------------------------------------------------------------------------
// launch

namespace {
std::string dims(const unsigned d[3]) {
  return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + ")";
}
}  // namespace

namespace {

// The launch configuration of `shape` (checked), with the function's dynamic shared memory opt-in
// raised; `attrs` must outlive the returned config, which points at it.
CUlaunchConfig launch_config(CUfunction fn, const LaunchShape& shape, CUstream stream, CUlaunchAttribute* attrs) {
  // Shape errors are caught here, before the driver, so they read as one clear line.
  for (int i = 0; i < 3; ++i) {
    if (shape.grid[i] == 0 || shape.block[i] == 0 || shape.cluster[i] == 0)
      throw CudaError("launch with an empty grid " + dims(shape.grid) + ", block " +
                      dims(shape.block) + " or cluster " + dims(shape.cluster));
    // A cluster tiles the grid exactly; the driver would only say CUDA_ERROR_INVALID_CLUSTER_SIZE.
    if (shape.grid[i] % shape.cluster[i])
      throw CudaError("launch grid " + dims(shape.grid) + " is not a multiple of the cluster " +
                      dims(shape.cluster));
  }
  if (shape.dynamic_smem > 0xffffffffu)
    throw CudaError("dynamic shared memory of " + std::to_string(shape.dynamic_smem) + " bytes");
  const DriverApi& api = cu();

  // Above 48 KB a kernel must opt in to dynamic shared memory (a CUDA rule kept for old binaries).
  if (shape.dynamic_smem > 48u * 1024u)
    GDPA_CU(api.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   int(shape.dynamic_smem)));

  CUlaunchConfig cfg = {};
  cfg.gridDimX = shape.grid[0];
  cfg.gridDimY = shape.grid[1];
  cfg.gridDimZ = shape.grid[2];
  cfg.blockDimX = shape.block[0];
  cfg.blockDimY = shape.block[1];
  cfg.blockDimZ = shape.block[2];
  cfg.sharedMemBytes = unsigned(shape.dynamic_smem);
  cfg.hStream = stream;
  const unsigned cluster_size = shape.cluster[0] * shape.cluster[1] * shape.cluster[2];
  if (cluster_size != 1) {
    // Clusters above 8 CTAs are "non-portable" and need an explicit opt-in per function.
    if (cluster_size > 8)
      GDPA_CU(api.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
    attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[0].value.clusterDim.x = shape.cluster[0];
    attrs[0].value.clusterDim.y = shape.cluster[1];
    attrs[0].value.clusterDim.z = shape.cluster[2];
    cfg.attrs = attrs;
    cfg.numAttrs = 1;
  }
  if (shape.programmatic) {
    attrs[cfg.numAttrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[cfg.numAttrs].value.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attrs;
    cfg.numAttrs += 1;
  }
  return cfg;
}

}  // namespace

void launch(CUfunction fn, const LaunchShape& shape, CUstream stream, void** args) {
  CUlaunchAttribute attrs[2] = {};
  const CUlaunchConfig cfg = launch_config(fn, shape, stream, attrs);
  GDPA_CU(cu().cuLaunchKernelEx(&cfg, fn, args, nullptr));
}

int max_active_clusters(CUfunction fn, const LaunchShape& shape) {
  CUlaunchAttribute attrs[2] = {};
  const CUlaunchConfig cfg = launch_config(fn, shape, nullptr, attrs);
  int n = 0;
  GDPA_CU(cu().cuOccupancyMaxActiveClusters(&n, fn, &cfg));
  return n;
}

int max_active_blocks_per_sm(CUfunction fn, const LaunchShape& shape) {
  CUlaunchAttribute attrs[2] = {};
  (void)launch_config(fn, shape, nullptr, attrs);  // checks the shape, raises the shared-memory opt-in
  int n = 0;
  GDPA_CU(cu().cuOccupancyMaxActiveBlocksPerMultiprocessor(
      &n, fn, int(shape.block[0] * shape.block[1] * shape.block[2]), shape.dynamic_smem));
  return n;
}

}  // namespace gdpa
