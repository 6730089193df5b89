// npy.h — NumPy .npy files (format version 1.0), so notebooks can read tensors and results.
//
// Layout of a v1.0 file: the magic "\x93NUMPY", version bytes 1 0, a little-endian uint16 header
// length, then an ASCII Python dict literal {'descr': ..., 'fortran_order': False, 'shape': (...), }
// padded with spaces and ended by '\n' so that the data starts at a multiple of 64 bytes; then the
// raw C-order data.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../kernels/common/enums.h"

namespace gdpa {

struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The full preamble (magic through the final '\n') for a C-order array. Throws NpyError if the
// dict does not fit the 16-bit length of v1.0.
std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape);

// fp16 bits are written as '<f2'. NumPy has no bf16, so bf16 bits are widened to '<f4' (exact:
// every bf16 value is a float32 value).
void save_npy(const std::string& path, const uint16_t* bits, const std::vector<int64_t>& shape, DType dtype);
void save_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape);    // '<f4'
void save_npy(const std::string& path, const double* data, const std::vector<int64_t>& shape);   // '<f8'
void save_npy(const std::string& path, const int32_t* data, const std::vector<int64_t>& shape);  // '<i4'

struct NpyArray {
  std::string descr;  // '<f2', '<f4', '<f8', '<i4', '<u2', ...
  std::vector<int64_t> shape;
  std::vector<char> data;  // raw little-endian elements, C order
  size_t count() const;
  // Elements converted to float (from '<f2', '<f4', '<f8', '<i4', '<u2'); throws NpyError otherwise.
  std::vector<float> as_float() const;
};

// Reads a C-order .npy of versions 1.0 - 3.0 with one of the descrs above. Throws NpyError.
NpyArray load_npy(const std::string& path);

}  // namespace gdpa
