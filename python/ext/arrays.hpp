// Arrays from Python (NumPy, DLPack, the buffer protocol) as the runtime and
// the compiler take them: element types, C-order bytes, and where a copy is
// needed (non-contiguous views).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/ndarray.h>

#include "ein/types.hpp"

namespace ein::python {

// Any CPU array, any dtype and strides; read only.
using AnyArray = nanobind::ndarray<nanobind::ro, nanobind::device::cpu>;
// A CPU array that may be written (out= buffers).
using WritableArray = nanobind::ndarray<nanobind::device::cpu>;

// NumPy's name for an array's element type: "float32", "int64", "bfloat16", ...
std::string dtypeText(nanobind::dlpack::dtype dtype);
// What an array of `dtype` given for an input of `expected` holds, for the
// runtime to convert by its one policy (ein/types.hpp): any float, integer
// or bool type, or bf16 as NumPy's uint16 bit patterns for a bf16 input.
std::optional<ElementType> inputElementType(nanobind::dlpack::dtype dtype, DType expected);
// How the runtime's element type comes back to NumPy: bf16, which NumPy
// lacks, as its uint16 bit patterns.
nanobind::dlpack::dtype numpyDType(DType dtype);
// Whether an array of `dtype` holds elements of the runtime's `expected`
// type: the same encoding, or bf16 as NumPy's uint16 bit patterns.
bool holds(nanobind::dlpack::dtype dtype, DType expected);
// The safetensors spelling ("F32", "BF16", "I64", "BOOL") for weights.
std::optional<std::string> safetensorsDType(nanobind::dlpack::dtype dtype);

std::vector<int64_t> shapeOf(const AnyArray &array);
// Whether the elements lie in C order without gaps (sizes 0 and 1 aside).
bool isCContiguous(const AnyArray &array);
// Copies the elements in C order to `destination` (array.nbytes() bytes).
void copyInCOrder(const AnyArray &array, std::byte *destination);

}  // namespace ein::python
