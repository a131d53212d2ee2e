#include "target/ParamSources.h"

#include <cstring>
#include <random>

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace ein {
namespace {

std::string typeString(RankedTensorType type) {
  std::string text;
  Type element = type.getElementType();
  if (element.isF32()) text = "f32";
  else if (element.isF16()) text = "f16";
  else if (element.isBF16()) text = "bf16";
  else if (element.isInteger(1)) text = "bool";
  else if (element.isSignlessInteger(32)) text = "i32";
  else if (element.isSignlessInteger(64)) text = "i64";
  else text = "?";
  text += "[";
  for (auto [i, size] : llvm::enumerate(type.getShape())) text += (i ? ", " : "") + std::to_string(size);
  return text + "]";
}

std::string describe(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return file.getFilename().str() + ":" + std::to_string(file.getLine()) + ":" + std::to_string(file.getColumn());
  return "the model";
}

// The file's dtype that stores the model's element type without conversion.
std::optional<weights::DType> exactDType(Type element) {
  if (element.isInteger(1)) return weights::DType::Bool;
  if (element.isSignlessInteger(32)) return weights::DType::I32;
  if (element.isSignlessInteger(64)) return weights::DType::I64;
  return std::nullopt;
}

}  // namespace

ParamBytesProvider SafetensorsParams::provider() {
  return [this](llvm::StringRef name, RankedTensorType type, Location declaredAt) -> FailureOr<std::vector<uint8_t>> {
    const weights::TensorEntry *entry = file.find(name);
    if (!entry)
      return emitError(declaredAt) << file.path() << ": missing parameter \"" << name << "\" (declared at "
                                   << describe(declaredAt) << ")";
    used.insert(name.str());
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    Type element = type.getElementType();
    auto exact = exactDType(element);
    bool typeFits = exact ? entry->dtype == *exact : element.isF32() && weights::isFloatingPoint(entry->dtype);
    if (entry->shape != shape || !typeFits)
      return emitError(declaredAt) << file.path() << ": parameter \"" << name << "\" is " << entry->typeString()
                                   << " in the file and " << typeString(type) << " in " << describe(declaredAt);
    if (exact) {
      llvm::ArrayRef<uint8_t> bytes = file.bytes(*entry);
      std::vector<uint8_t> copy(bytes.begin(), bytes.end());
      file.release(*entry);
      return copy;
    }
    if (!element.isF32())
      return emitError(declaredAt) << "parameter \"" << name << "\": " << element << " weights are not supported yet";
    auto values = file.toF32(*entry);
    if (!values) return emitError(declaredAt) << llvm::toString(values.takeError());
    file.release(*entry);
    std::vector<uint8_t> bytes(values->size() * sizeof(float));
    std::memcpy(bytes.data(), values->data(), bytes.size());
    return bytes;
  };
}

std::vector<std::string> SafetensorsParams::unusedTensors() const {
  std::vector<std::string> unused;
  for (const weights::TensorEntry &entry : file.entries())
    if (!used.count(entry.name)) unused.push_back(entry.name);
  return unused;
}

ParamBytesProvider randomParams(uint64_t seed) {
  return [seed](llvm::StringRef name, RankedTensorType type, Location declaredAt) -> FailureOr<std::vector<uint8_t>> {
    std::mt19937_64 generator(seed ^ std::hash<std::string>{}(name.str()));
    Type element = type.getElementType();
    int64_t count = type.getNumElements();
    std::vector<uint8_t> bytes;
    auto append = [&](const auto &value) {
      auto *begin = reinterpret_cast<const uint8_t *>(&value);
      bytes.insert(bytes.end(), begin, begin + sizeof value);
    };
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::uniform_int_distribution<int> bit(0, 1);
    for (int64_t i = 0; i < count; ++i) {
      if (element.isF32()) append(normal(generator));
      else if (element.isInteger(1)) bytes.push_back(static_cast<uint8_t>(bit(generator)));
      else if (element.isSignlessInteger(32)) append(static_cast<int32_t>(bit(generator)));
      else if (element.isSignlessInteger(64)) append(static_cast<int64_t>(bit(generator)));
      else return emitError(declaredAt) << "parameter \"" << name << "\": no random values for " << element;
    }
    return bytes;
  };
}

}  // namespace ein
