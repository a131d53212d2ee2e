// Reading and writing NumPy .npy files (C order, little-endian), the format
// ein-run takes inputs in and writes outputs in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ein/runtime.hpp"

namespace ein::npy {

struct Array {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // raw little-endian elements

  int64_t numElements() const;
};

// Parses a whole .npy file; a malformed or truncated one is an error. f64
// arrays are converted to f32 (the runtime's float type).
StatusOr<Array> parse(const uint8_t *bytes, size_t size, const std::string &name);
StatusOr<Array> read(const std::string &path);
Status write(const std::string &path, const Array &array);

// Elements as double, for comparisons.
std::vector<double> toDouble(const Array &array);

}  // namespace ein::npy
