// test_npy.cpp — .npy v1.0 writing and reading (host/npy.h).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "../../host/npy.h"
#include "../../kernels/common/dtype.cuh"

using namespace gdpa;
namespace fs = std::filesystem;

namespace {

// A unique file path in the temp dir, removed at scope exit.
class TempFile {
 public:
  TempFile() {
    std::string tmpl = (fs::temp_directory_path() / "gdpa_npy_test_XXXXXX").string();
    const int fd = mkstemp(tmpl.data());
    REQUIRE(fd >= 0);
    close(fd);
    path_ = tmpl;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("npy header is byte-exact v1.0") {
  const std::string h = npy_header("<f4", {2, 3});
  // "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" is 59 bytes; 10 + 59 + '\n'
  // = 70, so 58 spaces pad the preamble to 128 and the header length field says 118 (0x76).
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string expected =
      std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(58, ' ') + "\n";
  CHECK(h.size() == 128);
  CHECK(h == expected);

  CHECK(npy_header("<i4", {5}).find("'shape': (5,), }") != std::string::npos);  // 1-tuple
  CHECK(npy_header("<f8", {}).find("'shape': (), }") != std::string::npos);     // scalar
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{}, {1}, {1152, 4, 128}, {123456789, 2, 3, 4, 5, 6, 7, 8}}) {
    const std::string x = npy_header("<f2", shape);
    CHECK(x.size() % 64 == 0);
    CHECK(x.back() == '\n');
    CHECK(size_t(uint8_t(x[8])) + (size_t(uint8_t(x[9])) << 8) == x.size() - 10);
  }
}

TEST_CASE("npy round trips: f4, f8, i4, fp16 as f2, bf16 widened to f4") {
  TempFile f;
  const std::vector<float> vf = {1.5f, -2.25f, 3e-8f, INFINITY, 0.0f, 42.0f};
  save_npy(f.path(), vf.data(), {2, 3});
  const std::string bytes = file_bytes(f.path());
  CHECK(bytes.size() == 128 + 6 * 4);
  NpyArray a = load_npy(f.path());
  CHECK(a.descr == "<f4");
  CHECK(a.shape == std::vector<int64_t>{2, 3});
  CHECK(a.as_float() == vf);

  const std::vector<double> vd = {1.0 / 3.0, -1e300};
  save_npy(f.path(), vd.data(), {2});
  a = load_npy(f.path());
  CHECK(a.descr == "<f8");
  REQUIRE(a.data.size() == 16);
  double d1;
  std::memcpy(&d1, a.data.data(), 8);
  CHECK(d1 == 1.0 / 3.0);

  const std::vector<int32_t> vi = {7, -8, 2147483647};
  save_npy(f.path(), vi.data(), {3, 1});
  a = load_npy(f.path());
  CHECK(a.descr == "<i4");
  CHECK(a.shape == std::vector<int64_t>{3, 1});
  CHECK(a.as_float() == std::vector<float>{7.0f, -8.0f, 2147483647.0f});

  const std::vector<uint16_t> h = {float_to_fp16_bits(1.0f), float_to_fp16_bits(-0.099975586f),
                                   float_to_fp16_bits(65504.0f), 0x0001};
  save_npy(f.path(), h.data(), {4}, kFP16);
  a = load_npy(f.path());
  CHECK(a.descr == "<f2");
  CHECK(a.data.size() == 8);
  const std::vector<float> hf = a.as_float();
  for (size_t i = 0; i < h.size(); ++i) CHECK(hf[i] == fp16_bits_to_float(h[i]));

  const std::vector<uint16_t> b = {float_to_bf16_bits(3.140625f), float_to_bf16_bits(-1e30f), 0x0001};
  save_npy(f.path(), b.data(), {1, 3}, kBF16);
  a = load_npy(f.path());
  CHECK(a.descr == "<f4");
  const std::vector<float> bf = a.as_float();
  for (size_t i = 0; i < b.size(); ++i) CHECK(bf[i] == bf16_bits_to_float(b[i]));  // exact
}

TEST_CASE("npy reader rejects what it cannot read") {
  TempFile f;
  { std::ofstream(f.path(), std::ios::binary) << "not a numpy file at all"; }
  CHECK_THROWS_WITH_AS(load_npy(f.path()), doctest::Contains("bad magic"), NpyError);

  const std::vector<float> v(10, 1.0f);
  save_npy(f.path(), v.data(), {10});
  fs::resize_file(f.path(), 128 + 20);  // half the data
  CHECK_THROWS_WITH_AS(load_npy(f.path()), doctest::Contains("its shape needs 40"), NpyError);

  { std::ofstream(f.path(), std::ios::binary) << npy_header("<c8", {1}) << std::string(8, '\0'); }
  CHECK_THROWS_WITH_AS(load_npy(f.path()), doctest::Contains("unsupported descr '<c8'"), NpyError);

  std::string fortran = npy_header("<f4", {1});
  fortran.replace(fortran.find("False"), 5, "True ");
  { std::ofstream(f.path(), std::ios::binary) << fortran << std::string(4, '\0'); }
  CHECK_THROWS_WITH_AS(load_npy(f.path()), doctest::Contains("Fortran order"), NpyError);

  CHECK_THROWS_AS(load_npy(f.path() + ".missing"), NpyError);
  CHECK_THROWS_AS(save_npy("/nonexistent-dir/x.npy", v.data(), {10}), NpyError);
}
