#include "ein/npy.hpp"

namespace ein::npy {

size_t elementSize(ElementType type) {
  switch (type) {
    case ElementType::F16: return 2;
    case ElementType::F32: return 4;
    case ElementType::F64: return 8;
    case ElementType::I32: return 4;
    case ElementType::I64: return 8;
    case ElementType::Bool: return 1;
  }
  return 0;
}

const char *elementTypeName(ElementType type) {
  switch (type) {
    case ElementType::F16: return "float16";
    case ElementType::F32: return "float32";
    case ElementType::F64: return "float64";
    case ElementType::I32: return "int32";
    case ElementType::I64: return "int64";
    case ElementType::Bool: return "bool";
  }
  return "unknown";
}

std::optional<DType> toDType(ElementType type) {
  switch (type) {
    case ElementType::F16: return DType::F16;
    case ElementType::F32: return DType::F32;
    case ElementType::F64: return std::nullopt;
    case ElementType::I32: return DType::I32;
    case ElementType::I64: return DType::I64;
    case ElementType::Bool: return DType::Bool;
  }
  return std::nullopt;
}

std::optional<ElementType> fromDType(DType dtype) {
  switch (dtype) {
    case DType::F32: return ElementType::F32;
    case DType::F16: return ElementType::F16;
    case DType::BF16: return std::nullopt;
    case DType::I8: return std::nullopt;  // only an int8 artifact's weights: never an input or an output
    case DType::I32: return ElementType::I32;
    case DType::I64: return ElementType::I64;
    case DType::Bool: return ElementType::Bool;
  }
  return std::nullopt;
}

int64_t Array::numElements() const {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

}  // namespace ein::npy
