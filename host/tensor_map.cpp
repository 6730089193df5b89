// tensor_map.cpp — see tensor_map.h.
#include "tensor_map.h"

#include <cstdio>
#include <string>
#include <vector>

#include "../kernels/sm90/jagged_window.h"
#include "driver.h"

namespace gdpa {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw ProblemError("tensor map: " + msg); }

std::string str(uint64_t v) { return std::to_string(v); }

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

void check_positive(int64_t v, const char* what) {
  if (v <= 0) fail(std::string(what) + " must be positive (got " + std::to_string(v) + ")");
}

}  // namespace

int swizzle_span_bytes(CUtensorMapSwizzle s) {
  switch (s) {
    case CU_TENSOR_MAP_SWIZZLE_NONE: return 0;
    case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
    default: return 128;  // 128B and its 32B/64B-atom variants
  }
}

void require_16_byte_aligned(const DeviceTensors& t, bool backward, const std::string& who) {
  struct Named {
    const char* name;
    CUdeviceptr ptr;
  };
  const Named fwd[] = {{"Q", t.q}, {"K", t.k}, {"V", t.v}, {"O", t.out}};
  const Named bwd[] = {{"Q", t.q}, {"K", t.k}, {"V", t.v}, {"dO", t.dout}, {"dQ", t.dq}, {"dK", t.dk}, {"dV", t.dv}};
  auto check = [&](const Named& n) {
    if (n.ptr % 16)
      throw ProblemError(who + ": " + n.name + " at " + hex(n.ptr) +
                         " is not 16-byte aligned (TMA and 16-byte vector accesses need it)");
  };
  if (backward)
    for (const Named& n : bwd) check(n);
  else
    for (const Named& n : fwd) check(n);
}

void check_tensor_map_args(const TensorMapArgs& a) {
  if (a.rank < 1 || a.rank > 5) fail("rank " + str(a.rank) + " is outside 1..5");
  if (a.base % 16) fail("base address " + hex(a.base) + " is not 16-byte aligned");
  for (cuuint32_t i = 0; i < a.rank; ++i) {
    if (a.dims[i] == 0 || a.dims[i] > (uint64_t(1) << 32))
      fail("dim " + str(i) + " = " + str(a.dims[i]) + " is outside 1..2^32 (an empty tensor has no map)");
    if (a.box[i] == 0 || a.box[i] > 256) fail("box dim " + str(i) + " = " + str(a.box[i]) + " is outside 1..256");
    if (a.element_strides[i] == 0 || a.element_strides[i] > 8)
      fail("element stride " + str(i) + " = " + str(a.element_strides[i]) + " is outside 1..8");
  }
  for (cuuint32_t i = 0; i + 1 < a.rank; ++i) {
    if (a.strides[i] % 16) fail("stride " + str(i) + " of " + str(a.strides[i]) + " bytes is not a multiple of 16");
    if (a.strides[i] >= (uint64_t(1) << 40)) fail("stride " + str(i) + " of " + str(a.strides[i]) + " bytes is >= 2^40");
  }
  const uint64_t inner_bytes = uint64_t(a.box[0]) * uint64_t(a.element_bytes);
  if (a.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && inner_bytes % 16)
    fail("inner box of " + str(inner_bytes) + " bytes is not a multiple of 16");
  const int span = swizzle_span_bytes(a.swizzle);
  if (a.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && span > 0 && inner_bytes > uint64_t(span))
    fail("inner box of " + str(inner_bytes) + " bytes exceeds the " + std::to_string(span) +
         "-byte swizzle span");
}

TensorMapArgs tensor_map_args_3d(CUdeviceptr base, DType dtype, int64_t rows, int heads, int head_dim,
                                 int box_rows, int box_cols, CUtensorMapSwizzle swizzle) {
  if (dtype != kBF16 && dtype != kFP16) fail("dtype " + std::to_string(int(dtype)) + " is not bf16 or fp16");
  check_positive(rows, "rows");
  check_positive(heads, "heads");
  check_positive(head_dim, "head_dim");
  check_positive(box_rows, "box_rows");
  check_positive(box_cols, "box_cols");
  TensorMapArgs a;
  a.dtype = dtype == kFP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  a.element_bytes = 2;
  a.rank = 3;
  a.base = base;
  a.dims[0] = cuuint64_t(head_dim);
  a.dims[1] = cuuint64_t(heads);
  a.dims[2] = cuuint64_t(rows);
  a.strides[0] = cuuint64_t(head_dim) * 2;          // next head
  a.strides[1] = cuuint64_t(heads) * head_dim * 2;  // next token
  a.box[0] = cuuint32_t(box_cols);
  a.box[1] = 1;
  a.box[2] = cuuint32_t(box_rows);
  for (int i = 0; i < 3; ++i) a.element_strides[i] = 1;
  a.swizzle = swizzle;
  check_tensor_map_args(a);
  return a;
}

TensorMapArgs tensor_map_args_jagged(CUdeviceptr base, DType dtype, int64_t rows, int heads, int head_dim,
                                     int64_t window, int box_rows, int box_cols, CUtensorMapSwizzle swizzle) {
  TensorMapArgs a = tensor_map_args_3d(base, dtype, rows, heads, head_dim, box_rows, box_cols, swizzle);
  check_positive(window, "window");
  const uint64_t row_bytes = a.strides[1];
  if (uint64_t(window) * row_bytes > base)
    fail("window of " + str(uint64_t(window)) + " rows reaches below address 0 from base " + hex(base));
  a.rank = 4;
  a.base = base - uint64_t(window) * row_bytes;  // token r is at {.., window + r - end, end}
  a.dims[2] = cuuint64_t(window);
  a.dims[3] = cuuint64_t(rows) + 1;  // `end` runs to total_rows inclusive
  a.strides[2] = row_bytes;          // both row coordinates step one token
  a.box[3] = 1;
  a.element_strides[3] = 1;
  check_tensor_map_args(a);
  return a;
}

TensorMapArgs tensor_map_args_2d_f32(CUdeviceptr base, int64_t rows, int64_t cols, int box_rows,
                                     int box_cols, CUtensorMapSwizzle swizzle) {
  check_positive(rows, "rows");
  check_positive(cols, "cols");
  check_positive(box_rows, "box_rows");
  check_positive(box_cols, "box_cols");
  TensorMapArgs a;
  a.dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  a.element_bytes = 4;
  a.rank = 2;
  a.base = base;
  a.dims[0] = cuuint64_t(cols);
  a.dims[1] = cuuint64_t(rows);
  a.strides[0] = cuuint64_t(cols) * 4;
  a.box[0] = cuuint32_t(box_cols);
  a.box[1] = cuuint32_t(box_rows);
  a.element_strides[0] = a.element_strides[1] = 1;
  a.swizzle = swizzle;
  check_tensor_map_args(a);
  return a;
}

DeviceBuffer zero_rows_buffer() {
  DeviceBuffer b(size_t(sm90::kJaggedZeroBytes));
  b.upload(std::vector<unsigned char>(size_t(sm90::kJaggedZeroBytes), 0));
  return b;
}

void set_jagged_load_params(GdpaParams& params, const DeviceBuffer& zeros) {
  params.load_window_q = sm90::jagged_window(params.max_seqlen_q);
  params.load_window_k = sm90::jagged_window(params.max_seqlen_k);
  params.zero_rows = zeros.vptr();
}

CUtensorMap encode_tensor_map(const TensorMapArgs& a) {
  check_tensor_map_args(a);
  CUtensorMap map;  // cuda.h gives the type the alignment the encoder requires
  GDPA_CU(cu().cuTensorMapEncodeTiled(&map, a.dtype, a.rank, reinterpret_cast<void*>(a.base), a.dims,
                                      a.strides, a.box, a.element_strides, a.interleave, a.swizzle,
                                      a.l2_promotion, a.oob_fill));
  return map;
}

CUtensorMap make_tensor_map_3d(CUdeviceptr base, DType dtype, int64_t rows, int heads, int head_dim,
                               int box_rows, int box_cols, CUtensorMapSwizzle swizzle) {
  return encode_tensor_map(tensor_map_args_3d(base, dtype, rows, heads, head_dim, box_rows, box_cols, swizzle));
}

CUtensorMap make_tensor_map_jagged(CUdeviceptr base, DType dtype, int64_t rows, int heads, int head_dim,
                                   int64_t window, int box_rows, int box_cols, CUtensorMapSwizzle swizzle) {
  return encode_tensor_map(
      tensor_map_args_jagged(base, dtype, rows, heads, head_dim, window, box_rows, box_cols, swizzle));
}

CUtensorMap make_tensor_map_2d_f32(CUdeviceptr base, int64_t rows, int64_t cols, int box_rows,
                                   int box_cols, CUtensorMapSwizzle swizzle) {
  return encode_tensor_map(tensor_map_args_2d_f32(base, rows, cols, box_rows, box_cols, swizzle));
}

}  // namespace gdpa
