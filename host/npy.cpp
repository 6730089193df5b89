// npy.cpp — see npy.h.
#include "npy.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "../kernels/common/dtype.cuh"

namespace gdpa {

namespace {

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;  // NumPy aligns the data start so memory-mapped arrays are aligned

// .npy stores little-endian data; the project targets x86-64 and aarch64 Linux, both little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy.cpp writes host-order data as '<' types");

std::string shape_tuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";  // Python's one-element tuple
  return s + ")";
}

size_t element_count(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw NpyError("npy: negative dimension " + std::to_string(d));
    n *= size_t(d);
  }
  return n;
}

size_t descr_bytes(const std::string& descr) {
  if (descr == "<f2" || descr == "<u2" || descr == "<i2") return 2;
  if (descr == "<f4" || descr == "<i4" || descr == "<u4") return 4;
  if (descr == "<f8" || descr == "<i8" || descr == "<u8") return 8;
  if (descr == "|u1" || descr == "|i1" || descr == "|b1") return 1;
  throw NpyError("npy: unsupported descr '" + descr + "'");
}

void write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
               const void* data, size_t bytes) {
  const std::string header = npy_header(descr, shape);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw NpyError("npy: cannot open " + path + " for writing");
  f.write(header.data(), std::streamsize(header.size()));
  if (bytes) f.write(static_cast<const char*>(data), std::streamsize(bytes));
  f.close();
  if (!f) throw NpyError("npy: writing " + path + " failed");
}

// Value of `key` in the header dict: the text after "'key':" up to the next top-level comma.
std::string dict_value(const std::string& dict, const std::string& key, const std::string& path) {
  const std::string k = "'" + key + "':";
  const size_t at = dict.find(k);
  if (at == std::string::npos) throw NpyError("npy: " + path + " has no '" + key + "' in its header");
  size_t i = dict.find_first_not_of(' ', at + k.size());
  if (i == std::string::npos) throw NpyError("npy: " + path + " has a truncated header");
  const size_t end = dict[i] == '(' ? dict.find(')', i) + 1 : dict.find_first_of(",}", i);
  if (end == std::string::npos || end == 0) throw NpyError("npy: " + path + " has a malformed header");
  return dict.substr(i, end - i);
}

}  // namespace

std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_tuple(shape) + ", }";
  // magic (6) + version (2) + length (2) + dict + padding + '\n' is a multiple of kAlign.
  const size_t unpadded = kMagicLen + 2 + 2 + dict.size() + 1;
  dict.append((kAlign - unpadded % kAlign) % kAlign, ' ');
  dict.push_back('\n');
  if (dict.size() > 0xffff) throw NpyError("npy: header of " + std::to_string(dict.size()) + " bytes exceeds v1.0");
  std::string out(kMagic, kMagicLen);
  out.push_back(char(1));  // major version
  out.push_back(char(0));  // minor version
  out.push_back(char(dict.size() & 0xff));
  out.push_back(char(dict.size() >> 8));
  return out + dict;
}

void save_npy(const std::string& path, const uint16_t* bits, const std::vector<int64_t>& shape, DType dtype) {
  const size_t n = element_count(shape);
  if (dtype == kFP16) return write_npy(path, "<f2", shape, bits, n * 2);
  if (dtype != kBF16) throw NpyError("npy: dtype " + std::to_string(int(dtype)) + " is not bf16 or fp16");
  std::vector<float> widened(n);
  for (size_t i = 0; i < n; ++i) widened[i] = bf16_bits_to_float(bits[i]);
  write_npy(path, "<f4", shape, widened.data(), n * 4);
}

void save_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  write_npy(path, "<f4", shape, data, element_count(shape) * 4);
}
void save_npy(const std::string& path, const double* data, const std::vector<int64_t>& shape) {
  write_npy(path, "<f8", shape, data, element_count(shape) * 8);
}
void save_npy(const std::string& path, const int32_t* data, const std::vector<int64_t>& shape) {
  write_npy(path, "<i4", shape, data, element_count(shape) * 4);
}

size_t NpyArray::count() const { return element_count(shape); }

std::vector<float> NpyArray::as_float() const {
  const size_t n = count();
  std::vector<float> out(n);
  auto read = [&](auto tag) {
    using T = decltype(tag);
    if (data.size() < n * sizeof(T)) throw NpyError("npy: array data is shorter than its shape");
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
      out[i] = float(v);
    }
  };
  if (descr == "<f4") read(float{});
  else if (descr == "<f8") read(double{});
  else if (descr == "<i4") read(int32_t{});
  else if (descr == "<u2") read(uint16_t{});
  else if (descr == "<f2") {
    if (data.size() < n * 2) throw NpyError("npy: array data is shorter than its shape");
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, data.data() + i * 2, 2);
      out[i] = fp16_bits_to_float(h);
    }
  } else {
    throw NpyError("npy: cannot convert descr '" + descr + "' to float");
  }
  return out;
}

NpyArray load_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw NpyError("npy: cannot open " + path);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < kMagicLen + 4 || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    throw NpyError("npy: " + path + " is not a .npy file (bad magic)");
  const unsigned major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, pos = 0;
  if (major == 1) {
    header_len = size_t(static_cast<unsigned char>(bytes[8])) | size_t(static_cast<unsigned char>(bytes[9])) << 8;
    pos = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw NpyError("npy: " + path + " is truncated");
    for (int i = 0; i < 4; ++i) header_len |= size_t(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    pos = 12;
  } else {
    throw NpyError("npy: " + path + " has unsupported format version " + std::to_string(major));
  }
  if (bytes.size() < pos + header_len) throw NpyError("npy: " + path + " is truncated in its header");
  const std::string dict = bytes.substr(pos, header_len);

  NpyArray a;
  std::string descr = dict_value(dict, "descr", path);
  if (descr.size() < 2 || descr.front() != '\'' || descr.back() != '\'')
    throw NpyError("npy: " + path + " has a malformed descr " + descr);
  a.descr = descr.substr(1, descr.size() - 2);
  if (dict_value(dict, "fortran_order", path) != "False")
    throw NpyError("npy: " + path + " is in Fortran order (only C order is read)");
  const std::string tuple = dict_value(dict, "shape", path);
  for (size_t i = 1; i < tuple.size();) {
    const size_t j = tuple.find_first_of(",)", i);
    const std::string item = tuple.substr(i, j - i);
    if (item.find_first_not_of(' ') != std::string::npos) a.shape.push_back(std::stoll(item));
    if (j == std::string::npos || tuple[j] == ')') break;
    i = j + 1;
  }
  const size_t data_bytes = a.count() * descr_bytes(a.descr);
  const size_t start = pos + header_len;
  if (bytes.size() < start + data_bytes)
    throw NpyError("npy: " + path + " holds " + std::to_string(bytes.size() - start) + " data bytes, its shape needs " +
                   std::to_string(data_bytes));
  a.data.assign(bytes.begin() + std::ptrdiff_t(start), bytes.begin() + std::ptrdiff_t(start + data_bytes));
  return a;
}

}  // namespace gdpa
