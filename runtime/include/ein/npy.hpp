// NumPy .npy files: the format ein-run reads inputs from and writes outputs
// to, and the tests compare results in. Reads versions 1.0, 2.0 and 3.0,
// little-endian, C order; writes version 1.0. Headers are validated strictly:
// a malformed or truncated file is an error, never an over-read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ein/status.hpp"
#include "ein/types.hpp"

namespace ein::npy {

// The element types read and written: ein's (types.hpp), every one but
// bf16, which NumPy lacks. The runtime converts them to a model's input types
// by its one policy (Session::setInput), so ein-run passes them on as read.
using ein::ElementType;

// NumPy's name of the type: "float32", "int64", "uint8", ...
const char *numpyName(ElementType type);
// The .npy type of an output; BF16 has none (ein-run writes it as float32).
std::optional<ElementType> fromDType(DType dtype);

struct Array {
  ElementType type = ElementType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // little-endian elements, C order

  int64_t numElements() const;
};

// Parses a whole file held in memory; `name` stands for it in messages.
StatusOr<Array> parse(std::span<const uint8_t> bytes, const std::string &name);
StatusOr<Array> read(const std::string &path);
Status write(const std::string &path, const Array &array);
// The bytes write() puts in a file.
std::vector<uint8_t> serialize(const Array &array);

// Every element as a double (bools as 0/1, f16 widened).
std::vector<double> toDouble(const Array &array);

// Element-wise |got - expected| <= atol + rtol * |expected| (numpy.allclose).
// NaN matches only NaN; an infinity matches only the same infinity.
struct Comparison {
  bool shapesMatch = true;
  bool allClose = true;
  size_t count = 0;       // elements compared
  size_t mismatches = 0;  // elements outside their tolerance
  // The element that exceeds its tolerance by the most (the first, on ties;
  // NaN and infinity mismatches count as infinitely far), or when all are
  // close, the one nearest its limit.
  size_t worstIndex = 0;
  std::vector<int64_t> worstPosition;  // row-major multi-index of worstIndex
  double worstGot = 0.0, worstExpected = 0.0;
  double atol = 0.0, rtol = 0.0;
  std::vector<int64_t> gotShape, expectedShape;

  // "worst: element [3, 7] (flat 55): got 0.125, expected 0.5 (|diff| 0.375,
  // tolerance 0.0001); 12 of 64 elements differ"
  std::string describe() const;
};
Comparison compare(const Array &got, const Array &expected, double atol, double rtol);

}  // namespace ein::npy
