// The writer's weight segment: parameters and constants (folded and stored
// weights among them, kern-store-weights), each as the IR holds it.
#include "compiler/artifact/writer.hpp"

#include "compiler/limits.hpp"
#include "mlir/IR/DialectResourceBlobManager.h"

namespace ein::artifact {

LogicalResult Writer::addParameters(Block &body) {
  // The constants kern-store-weights made, by the parameters they hold:
  // folded into (a concatenation of several) or stored as (bf16, i8).
  llvm::StringMap<uint32_t> foldedInto, storedAs;
  for (auto constant : body.getOps<ir::ConstantOp>()) {
    auto stored = tensorIndex.find(constant.getResult());
    if (stored == tensorIndex.end()) continue;
    if (auto from = constant->getAttrOfType<ArrayAttr>(kern::kFoldedFromAttr))
      for (StringRef name : from.getAsValueRange<StringAttr>()) foldedInto.try_emplace(name, stored->second);
    if (auto from = constant->getAttrOfType<StringAttr>(kern::kStoredFromAttr))
      storedAs.try_emplace(from.getValue(), stored->second);
  }
  for (auto param : body.getOps<ir::ParamOp>()) {
    std::optional<uint32_t> tensor;
    bool folded = false;
    if (auto own = tensorIndex.find(param.getResult()); own != tensorIndex.end()) {
      tensor = own->second;
    } else if (auto as = storedAs.find(param.getName()); as != storedAs.end()) {
      tensor = as->second;
    } else if (auto into = foldedInto.find(param.getName()); into != foldedInto.end()) {
      tensor = into->second;
      folded = true;
    }
    if (!tensor) continue;  // read by nothing the artifact keeps
    auto dtype = dtypeOf(param.getLoc(), param.getType().getElementType());
    if (failed(dtype)) return failure();
    std::vector<int64_t> shape(param.getType().getShape());
    parameters.push_back(
        fb::CreateParameterDirect(builder, param.getName().str().c_str(), *tensor, *dtype, &shape, folded));
  }
  return success();
}

// A parameter's bytes, as bound (bindParameters), read by the second build
// (the first only sizes).
FailureOr<WeightBytes> Writer::paramBytes(ir::ParamOp param) {
  if (!param.getValueAttr())
    return param.emitOpError() << "\"" << param.getName() << "\" has no values: bind the parameters before writing";
  return WeightBytes(param.getBoundBytes());
}

// Appends `size` bytes of `data` (64-aligned: zeros before them) to the
// weight segment, straight to the output, and returns their offset there;
// while sizing, only counts them (`data` may then be null).
uint64_t Writer::appendWeights(const uint8_t *data, size_t size) {
  const uint64_t end = segmentSize;
  segmentSize = alignTo(segmentSize, kWeightAlignment);
  const uint64_t offset = segmentSize;
  segmentSize += size;
  if (!sizing) {
    out->write_zeros(static_cast<unsigned>(offset - end));
    out->write(reinterpret_cast<const char *>(data), size);
  }
  return offset;
}

FailureOr<WeightBytes> Writer::constantBytes(ir::ConstantOp constant) {
  // A folded or stored weight (kern-store-weights): its bytes in a resource.
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(constant.getValue())) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob) return constant.emitOpError() << "holds no values";
    return WeightBytes(blob->getData());
  }
  auto value = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!value) return constant.emitOpError() << "only dense constants can be stored";
  Type element = value.getElementType();
  std::vector<uint8_t> bytes;
  auto append = [&](const void *data, size_t size) {
    auto *begin = static_cast<const uint8_t *>(data);
    bytes.insert(bytes.end(), begin, begin + size);
  };
  if (element.isF32()) {
    for (APFloat v : value.getValues<APFloat>()) {
      float f = v.convertToFloat();
      append(&f, sizeof f);
    }
  } else if (element.isInteger(1)) {
    for (bool v : value.getValues<bool>()) bytes.push_back(v ? 1 : 0);
  } else if (element.isSignlessInteger(32) || element.isSignlessInteger(64)) {
    for (APInt v : value.getValues<APInt>()) {
      int64_t wide = v.getSExtValue();
      int32_t narrow = static_cast<int32_t>(wide);
      element.isSignlessInteger(32) ? append(&narrow, sizeof narrow) : append(&wide, sizeof wide);
    }
  } else {
    return constant.emitOpError() << "constants of " << element << " cannot be stored yet";
  }
  return WeightBytes(std::move(bytes));
}

// Refuses, before its bytes are read or generated, a parameter that would
// take the weight segment past its limit (a model declaring terabytes of
// random weights would otherwise exhaust memory).
LogicalResult Writer::checkWeightLimit(Value value, RankedTensorType type) {
  uint64_t bytes = storedBytes(type);
  if (std::optional<std::string> passed = limits::weightLimitPassed(segmentSize, bytes))
    return emitError(value.getLoc()) << *passed;
  return success();
}

// `read` gives the value's bytes; it is not called while sizing.
LogicalResult Writer::addWeights(Value value, RankedTensorType type,
                                 llvm::function_ref<FailureOr<WeightBytes>()> read) {
  uint64_t expected = storedBytes(type);
  uint64_t offset;
  if (sizing) {
    offset = appendWeights(nullptr, expected);
  } else {
    FailureOr<WeightBytes> bytes = read();
    if (failed(bytes)) return failure();
    if (bytes->size() != expected)
      return emitError(value.getLoc()) << "weights hold " << bytes->size() << " bytes for " << type
                                       << " (expected " << expected << ")";
    offset = appendWeights(bytes->data(), bytes->size());
  }
  return success(succeeded(addTensor(value, fb::Storage::Weights, 0, offset)));
}

}  // namespace ein::artifact
