#include "arrays.hpp"

#include <cstring>

namespace nb = nanobind;
using nb::dlpack::dtype_code;

namespace ein::python {
namespace {

// Copies dimension `axis` and those after it; `source` points at the first
// element of the slice, strides are in elements as DLPack gives them.
void copyAxis(const AnyArray &array, size_t axis, const std::byte *source, std::byte *&destination) {
  size_t itemsize = array.itemsize();
  // A last axis without gaps is one row: copy it at once.
  if (axis + 1 == array.ndim() && array.stride(axis) == 1) {
    std::memcpy(destination, source, array.shape(axis) * itemsize);
    destination += array.shape(axis) * itemsize;
    return;
  }
  if (axis == array.ndim()) {
    std::memcpy(destination, source, itemsize);
    destination += itemsize;
    return;
  }
  ptrdiff_t step = static_cast<ptrdiff_t>(array.stride(axis)) * static_cast<ptrdiff_t>(itemsize);
  for (size_t i = 0; i < array.shape(axis); ++i) copyAxis(array, axis + 1, source + i * step, destination);
}

}  // namespace

std::string dtypeText(nb::dlpack::dtype dtype) {
  const char *kind = "?";
  switch (static_cast<dtype_code>(dtype.code)) {
    case dtype_code::Int: kind = "int"; break;
    case dtype_code::UInt: kind = "uint"; break;
    case dtype_code::Float: kind = "float"; break;
    case dtype_code::Bfloat: kind = "bfloat"; break;
    case dtype_code::Complex: kind = "complex"; break;
    case dtype_code::Bool: return "bool";
    default: return "dtype code " + std::to_string(dtype.code) + " of " + std::to_string(dtype.bits) + " bits";
  }
  return kind + std::to_string(dtype.bits);
}

std::optional<ElementType> inputElementType(nb::dlpack::dtype dtype, DType expected) {
  if (dtype == numpyDType(expected)) return elementType(expected);
  if (dtype.lanes != 1) return std::nullopt;
  static constexpr std::pair<int, ElementType> kFloats[] = {
      {16, ElementType::F16}, {32, ElementType::F32}, {64, ElementType::F64}};
  static constexpr std::pair<int, ElementType> kInts[] = {
      {8, ElementType::I8}, {16, ElementType::I16}, {32, ElementType::I32}, {64, ElementType::I64}};
  static constexpr std::pair<int, ElementType> kUInts[] = {
      {8, ElementType::U8}, {16, ElementType::U16}, {32, ElementType::U32}, {64, ElementType::U64}};
  auto byBits = [&](const auto &table) -> std::optional<ElementType> {
    for (const auto &[bits, type] : table)
      if (dtype.bits == bits) return type;
    return std::nullopt;
  };
  switch (static_cast<dtype_code>(dtype.code)) {
    case dtype_code::Float: return byBits(kFloats);
    case dtype_code::Int: return byBits(kInts);
    case dtype_code::UInt: return byBits(kUInts);
    case dtype_code::Bfloat: return dtype.bits == 16 ? std::optional(ElementType::BF16) : std::nullopt;
    case dtype_code::Bool: return dtype.bits == 8 ? std::optional(ElementType::Bool) : std::nullopt;
    default: return std::nullopt;
  }
}

nb::dlpack::dtype numpyDType(DType dtype) {
  switch (dtype) {
    case DType::F32: return nb::dtype<float>();
    case DType::F16: return {static_cast<uint8_t>(dtype_code::Float), 16, 1};
    case DType::BF16: return nb::dtype<uint16_t>();
    case DType::I32: return nb::dtype<int32_t>();
    case DType::I64: return nb::dtype<int64_t>();
    case DType::Bool: return nb::dtype<bool>();
  }
  return nb::dtype<float>();
}

bool holds(nb::dlpack::dtype dtype, DType expected) {
  return inputElementType(dtype, expected) == elementType(expected);
}

std::optional<std::string> safetensorsDType(nb::dlpack::dtype dtype) {
  if (dtype.lanes != 1) return std::nullopt;
  switch (static_cast<dtype_code>(dtype.code)) {
    case dtype_code::Float:
      if (dtype.bits == 16 || dtype.bits == 32 || dtype.bits == 64) return "F" + std::to_string(dtype.bits);
      return std::nullopt;
    case dtype_code::Bfloat: return dtype.bits == 16 ? std::optional<std::string>("BF16") : std::nullopt;
    case dtype_code::Int:
    case dtype_code::UInt: {
      bool sizeKnown = dtype.bits == 8 || dtype.bits == 16 || dtype.bits == 32 || dtype.bits == 64;
      if (!sizeKnown) return std::nullopt;
      return (dtype.code == static_cast<uint8_t>(dtype_code::Int) ? "I" : "U") + std::to_string(dtype.bits);
    }
    case dtype_code::Bool: return dtype.bits == 8 ? std::optional<std::string>("BOOL") : std::nullopt;
    default: return std::nullopt;
  }
}

std::vector<int64_t> shapeOf(const AnyArray &array) {
  std::vector<int64_t> shape(array.ndim());
  for (size_t i = 0; i < array.ndim(); ++i) shape[i] = static_cast<int64_t>(array.shape(i));
  return shape;
}

bool isCContiguous(const AnyArray &array) {
  if (array.size() == 0) return true;
  int64_t expected = 1;
  for (size_t i = array.ndim(); i-- > 0;) {
    if (array.shape(i) != 1 && array.stride(i) != expected) return false;
    expected *= static_cast<int64_t>(array.shape(i));
  }
  return true;
}

void copyInCOrder(const AnyArray &array, std::byte *destination) {
  if (array.size() == 0) return;
  copyAxis(array, 0, static_cast<const std::byte *>(array.data()), destination);
}

}  // namespace ein::python
