#include "ein/npy.hpp"
#include "npy_descr.hpp"

namespace ein::npy {

namespace {

struct TypeName {
  ElementType type;
  const char *descr;  // the header's 'descr', little-endian
  const char *numpy;
};

constexpr TypeName kTypes[] = {
    {ElementType::F16, "<f2", "float16"}, {ElementType::F32, "<f4", "float32"}, {ElementType::F64, "<f8", "float64"},
    {ElementType::I8, "|i1", "int8"},     {ElementType::I16, "<i2", "int16"},   {ElementType::I32, "<i4", "int32"},
    {ElementType::I64, "<i8", "int64"},   {ElementType::U8, "|u1", "uint8"},    {ElementType::U16, "<u2", "uint16"},
    {ElementType::U32, "<u4", "uint32"},  {ElementType::U64, "<u8", "uint64"},  {ElementType::Bool, "|b1", "bool"},
};

}  // namespace

const char *numpyName(ElementType type) {
  for (const TypeName &entry : kTypes)
    if (entry.type == type) return entry.numpy;
  return "unknown";
}

const char *descrOf(ElementType type) {
  for (const TypeName &entry : kTypes)
    if (entry.type == type) return entry.descr;
  return "";
}

std::optional<ElementType> typeOfDescr(std::string_view descr) {
  for (const TypeName &entry : kTypes)
    if (descr == entry.descr) return entry.type;
  return std::nullopt;
}

std::string supportedDescrs() {
  std::string names;
  for (const TypeName &entry : kTypes) names += (names.empty() ? "" : ", ") + std::string(entry.descr);
  return names;
}

std::optional<ElementType> fromDType(DType dtype) {
  if (dtype == DType::BF16) return std::nullopt;
  return elementType(dtype);
}

int64_t Array::numElements() const {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

}  // namespace ein::npy
