// test_tensor_map.cpp — TMA encode arguments and their hardware rules (host/tensor_map.h).
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "../../host/driver.h"
#include "../../host/tensor_map.h"

using namespace gdpa;

namespace {
std::string rule_violation(const std::function<void()>& f) {
  try {
    f();
  } catch (const ProblemError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("3-D map over a packed jagged tensor") {
  const TensorMapArgs a = tensor_map_args_3d(0x10000, kBF16, 1000, 4, 128, 64);
  CHECK(a.rank == 3);
  CHECK(a.dtype == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  CHECK(a.element_bytes == 2);
  CHECK(a.base == 0x10000);
  CHECK(a.dims[0] == 128);  // head_dim innermost
  CHECK(a.dims[1] == 4);    // heads
  CHECK(a.dims[2] == 1000); // tokens
  CHECK(a.strides[0] == 256);   // next head: head_dim * 2 bytes
  CHECK(a.strides[1] == 1024);  // next token: heads * head_dim * 2 bytes
  CHECK(a.box[0] == 64);
  CHECK(a.box[1] == 1);
  CHECK(a.box[2] == 64);
  CHECK(a.element_strides[0] == 1);
  CHECK(a.element_strides[2] == 1);
  CHECK(a.swizzle == CU_TENSOR_MAP_SWIZZLE_128B);
  CHECK(a.l2_promotion == CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  CHECK(a.oob_fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // zeros past the last row
  CHECK(a.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE);

  const TensorMapArgs h = tensor_map_args_3d(0x10000, kFP16, 7, 1, 64, 128, 64);
  CHECK(h.dtype == CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  CHECK(h.strides[0] == 128);
  CHECK(h.strides[1] == 128);
}

TEST_CASE("jagged 4-D map: two aliased row coordinates, base moved back by the window") {
  // 300 tokens, 4 heads, D = 128: a token is 1024 bytes. Window 256 (the longest sequence).
  const TensorMapArgs a = tensor_map_args_jagged(0x100000, kBF16, 300, 4, 128, 256, 64);
  CHECK(a.rank == 4);
  CHECK(a.base == 0x100000 - 256 * 1024);
  CHECK(a.dims[0] == 128);
  CHECK(a.dims[1] == 4);
  CHECK(a.dims[2] == 256);  // the window: coordinate 2 of a token at or past `end` is >= 256
  CHECK(a.dims[3] == 301);  // `end` itself, 0 .. total
  CHECK(a.strides[0] == 256);
  CHECK(a.strides[1] == 1024);
  CHECK(a.strides[2] == 1024);  // both row coordinates step one token
  CHECK(a.box[0] == 64);
  CHECK(a.box[1] == 1);
  CHECK(a.box[2] == 64);
  CHECK(a.box[3] == 1);
  CHECK(a.element_strides[3] == 1);
  CHECK(a.oob_fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // zeros
  // Token r of a sequence ending at e sits at coordinates {.., window + r - e, e}: the same byte
  // address as token r of the 3-D map.
  const uint64_t r = 130, e = 200, c2 = 256 + r - e, c3 = e;
  CHECK(a.base + c2 * a.strides[1] + c3 * a.strides[2] == 0x100000 + r * 1024);
  CHECK(rule_violation([] { tensor_map_args_jagged(0x100000, kBF16, 300, 4, 128, 0, 64); }).find("window") !=
        std::string::npos);
  CHECK(rule_violation([] { tensor_map_args_jagged(0x1000, kBF16, 300, 4, 128, 256, 64); }).find("below address 0") !=
        std::string::npos);
}

TEST_CASE("the jagged loads' parameters come from the longest sequences in the parameter block") {
  GdpaParams params{};
  params.max_seqlen_q = 330;
  params.max_seqlen_k = 0;  // no keys at all: a map dimension cannot be 0
  const DeviceBuffer none;  // no allocation without a GPU: its address is null
  set_jagged_load_params(params, none);
  CHECK(params.load_window_q == 330);
  CHECK(params.load_window_k == 1);
  CHECK(params.zero_rows == nullptr);
}

TEST_CASE("2-D fp32 map for the dQ accumulator") {
  const TensorMapArgs a = tensor_map_args_2d_f32(0x2000, 4096, 512, 64, 32, CU_TENSOR_MAP_SWIZZLE_128B);
  CHECK(a.rank == 2);
  CHECK(a.dtype == CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  CHECK(a.element_bytes == 4);
  CHECK(a.dims[0] == 512);
  CHECK(a.dims[1] == 4096);
  CHECK(a.strides[0] == 2048);
  CHECK(a.box[0] == 32);
  CHECK(a.box[1] == 64);
  CHECK(tensor_map_args_2d_f32(0x2000, 10, 128, 8, 128).swizzle == CU_TENSOR_MAP_SWIZZLE_NONE);
}

TEST_CASE("hardware rules are checked without a GPU, one line each") {
  CHECK(rule_violation([] { tensor_map_args_3d(0x10008, kBF16, 100, 4, 128, 64); }) ==
        "tensor map: base address 0x10008 is not 16-byte aligned");
  CHECK(rule_violation([] { tensor_map_args_3d(0x10000, kBF16, 100, 4, 128, 300); }) ==
        "tensor map: box dim 2 = 300 is outside 1..256");
  CHECK(rule_violation([] { tensor_map_args_3d(0x10000, kBF16, 100, 4, 128, 64, 128); }) ==
        "tensor map: inner box of 256 bytes exceeds the 128-byte swizzle span");
  CHECK(rule_violation([] { tensor_map_args_3d(0x10000, kBF16, 100, 4, 128, 64, 64, CU_TENSOR_MAP_SWIZZLE_64B); }) ==
        "tensor map: inner box of 128 bytes exceeds the 64-byte swizzle span");
  CHECK(rule_violation([] { tensor_map_args_3d(0x10000, kBF16, 100, 4, 128, 64, 4, CU_TENSOR_MAP_SWIZZLE_NONE); }) ==
        "tensor map: inner box of 8 bytes is not a multiple of 16");
  CHECK(rule_violation([] { tensor_map_args_3d(0x10000, kBF16, 0, 4, 128, 64); }) ==
        "tensor map: rows must be positive (got 0)");
  CHECK(rule_violation([] { tensor_map_args_3d(0x10000, DType(5), 10, 4, 128, 64); }) ==
        "tensor map: dtype 5 is not bf16 or fp16");
  CHECK(rule_violation([] { tensor_map_args_2d_f32(0x10000, 10, 3, 8, 4); }) ==
        "tensor map: stride 0 of 12 bytes is not a multiple of 16");
  CHECK(rule_violation([] { tensor_map_args_2d_f32(0x10000, 10, 64, 8, 2); }) ==
        "tensor map: inner box of 8 bytes is not a multiple of 16");
  // A head_dim of 4 makes the token stride 32 bytes but the head stride 8: not TMA-addressable.
  CHECK(rule_violation([] { tensor_map_args_3d(0x10000, kBF16, 10, 4, 4, 8, 8, CU_TENSOR_MAP_SWIZZLE_NONE); }) ==
        "tensor map: stride 0 of 8 bytes is not a multiple of 16");

  TensorMapArgs a = tensor_map_args_3d(0x10000, kBF16, 100, 4, 128, 64);
  a.dims[2] = (uint64_t(1) << 32) + 1;
  CHECK(rule_violation([&] { check_tensor_map_args(a); }).find("dim 2 = 4294967297 is outside") != std::string::npos);
  a = tensor_map_args_3d(0x10000, kBF16, 100, 4, 128, 64);
  a.strides[1] = uint64_t(1) << 40;
  CHECK(rule_violation([&] { check_tensor_map_args(a); }) == "tensor map: stride 1 of 1099511627776 bytes is >= 2^40");
  a = tensor_map_args_3d(0x10000, kBF16, 100, 4, 128, 64);
  a.element_strides[1] = 9;
  CHECK(rule_violation([&] { check_tensor_map_args(a); }) == "tensor map: element stride 1 = 9 is outside 1..8");
  a.rank = 6;
  CHECK(rule_violation([&] { check_tensor_map_args(a); }) == "tensor map: rank 6 is outside 1..5");
  CHECK(swizzle_span_bytes(CU_TENSOR_MAP_SWIZZLE_NONE) == 0);
  CHECK(swizzle_span_bytes(CU_TENSOR_MAP_SWIZZLE_32B) == 32);
  CHECK(swizzle_span_bytes(CU_TENSOR_MAP_SWIZZLE_128B) == 128);
}

TEST_CASE("every tensor a Hopper kernel touches must be 16-byte aligned, and the error names it") {
  DeviceTensors t;
  t.q = 0x10000;
  t.k = 0x20000;
  t.v = 0x30000;
  t.out = 0x40000;
  t.dout = 0x50000;
  t.dq = 0x60000;
  t.dk = 0x70000;
  t.dv = 0x80000;
  CHECK_NOTHROW(require_16_byte_aligned(t, false, "sm90 forward"));
  CHECK_NOTHROW(require_16_byte_aligned(t, true, "sm90 backward"));
  auto message = [](const DeviceTensors& bad, bool backward) {
    try {
      require_16_byte_aligned(bad, backward, "sm90");
    } catch (const ProblemError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  DeviceTensors bad = t;
  bad.out += 2;  // one bf16 element off
  CHECK(message(bad, false).find("O at 0x40002 is not 16-byte aligned") != std::string::npos);
  CHECK(message(bad, true) == "no error");  // the backward does not touch O
  bad = t;
  bad.dq += 8;
  CHECK(message(bad, true).find("dQ at 0x60008") != std::string::npos);
  CHECK(message(bad, false) == "no error");
  bad = t;
  bad.k += 4;
  CHECK(message(bad, false).find("sm90: K at") == 0);
}

TEST_CASE("encoding without a driver fails cleanly") {
  std::string why;
  if (gpu_available(&why)) return;  // covered by the gpu suite below
  CHECK_THROWS_AS(make_tensor_map_3d(0x10000, kBF16, 100, 4, 128, 64), CudaUnavailable);
  // Rule violations are reported before the driver is needed.
  CHECK_THROWS_AS(make_tensor_map_3d(0x10001, kBF16, 100, 4, 128, 64), ProblemError);
}

TEST_SUITE("gpu") {
  TEST_CASE("tensor maps encode on a real allocation") {
    Context ctx;
    if (ctx.info().arch() < 90) return;  // TMA needs sm_90
    const int rows = 1000, heads = 4, dim = 128;
    DeviceBuffer q(size_t(rows) * heads * dim * 2);
    const CUtensorMap m = make_tensor_map_3d(q.ptr(), kBF16, rows, heads, dim, 128);
    bool nonzero = false;
    for (auto word : m.opaque) nonzero |= word != 0;
    CHECK(nonzero);
    // The driver takes the jagged view's aliased row strides and its base before the buffer.
    CHECK_NOTHROW(make_tensor_map_jagged(q.ptr(), kBF16, rows, heads, dim, 300, 64));
    DeviceBuffer acc(size_t(rows) * heads * dim * 4);
    CHECK_NOTHROW(make_tensor_map_2d_f32(acc.ptr(), rows, heads * dim, 64, 32, CU_TENSOR_MAP_SWIZZLE_128B));
  }
}
