// The writer's weight segment: parameters and constants (folded weights
// among them), stored as f32 or, for gemm weights, bf16 / int8.
#include "compiler/artifact/writer.hpp"

#include <cmath>
#include <cstring>

#include "compiler/limits.hpp"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "ops/scalar_functions.hpp"

namespace ein::artifact {

LogicalResult Writer::addParameters(Block &body) {
  // The constants kern-fold-constants made, by the parameters they hold.
  llvm::StringMap<uint32_t> foldedInto;
  for (auto constant : body.getOps<ir::ConstantOp>())
    if (auto from = constant->getAttrOfType<ArrayAttr>(kern::kFoldedFromAttr))
      for (StringRef name : from.getAsValueRange<StringAttr>())
        if (auto stored = tensorIndex.find(constant.getResult()); stored != tensorIndex.end())
          foldedInto.try_emplace(name, stored->second);
  for (auto param : body.getOps<ir::ParamOp>()) {
    // A parameter only folds read is in the folded weight that holds it.
    const bool folded = param.getResult().use_empty();
    std::optional<uint32_t> tensor;
    if (!folded) {
      if (auto stored = tensorIndex.find(param.getResult()); stored != tensorIndex.end()) tensor = stored->second;
    } else if (auto into = foldedInto.find(param.getName()); into != foldedInto.end()) {
      tensor = into->second;
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
  // A folded weight (kern-fold-constants): f32 values in a resource.
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(constant.getValue())) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob || !resource.getElementType().isF32()) return constant.emitOpError() << "holds no f32 values";
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
  uint64_t bytes = static_cast<uint64_t>(type.getNumElements()) * elementBytes(type.getElementType());
  if (std::optional<std::string> passed = limits::weightLimitPassed(segmentSize, bytes))
    return emitError(value.getLoc()) << *passed;
  return success();
}

// A parameter or folded weight, stored as gemm weights are at the
// artifact's precision (bf16, int8) or else as it is.
LogicalResult Writer::addGemmWeights(Value value, RankedTensorType type,
                                     llvm::function_ref<FailureOr<WeightBytes>()> read) {
  if (std::optional<Int8Layout> layout = storedAsInt8(value, type)) return addInt8Weights(value, *layout, read);
  return addWeights(value, type, read, storedAsBf16(value, type));
}

// --precision bf16 on the CPU: a f32 parameter (or folded weight) that
// only ever is a gemm's weight operand b is stored as bf16, half the bytes
// to map and stream. The runtime packs it for its bf16 gemm, or widens it
// to f32 while packing, so every path computes with exactly these
// bf16-rounded weights. A parameter with any other use (a bias, a norm's
// gamma, a gather table) stays f32.
bool Writer::storedAsBf16(Value value, RankedTensorType type) {
  if (options.target != ArtifactTarget::Cpu || options.precision != ArtifactPrecision::Bf16) return false;
  if (!type.getElementType().isF32() || value.use_empty()) return false;
  for (OpOperand &use : value.getUses()) {
    auto gemm = dyn_cast<kern::GemmOp>(use.getOwner());
    if (!gemm || gemm.getB() != value) return false;
    if (gemm.getA() == value || gemm.getBias() == value || gemm.getResidual() == value) return false;
  }
  return true;
}

// --precision int8 on the CPU: a f32 parameter that only ever is a gemm's
// weight operand b, always through the same view, which is one [k, n]
// matrix for the whole batch covering each element once (a linear's weight,
// either orientation), is stored as s8 with a scale per column n
// (symmetric: scale = max_k |w| / 127, q = round_half_even(w * 127 / max)).
// Anything else stays f32.
std::optional<Writer::Int8Layout> Writer::storedAsInt8(Value value, RankedTensorType type) {
  if (options.target != ArtifactTarget::Cpu || options.precision != ArtifactPrecision::Int8) return std::nullopt;
  if (!type.getElementType().isF32() || value.use_empty()) return std::nullopt;
  std::optional<Int8Layout> layout;
  for (OpOperand &use : value.getUses()) {
    auto gemm = dyn_cast<kern::GemmOp>(use.getOwner());
    if (!gemm || gemm.getB() != value || gemm.getA() == value || gemm.getBias() == value ||
        gemm.getResidual() == value)
      return std::nullopt;
    kern::ViewAttr view = gemm.getBView();
    const Shape &strides = view.getStrides();
    const Shape batch = gemm.getBatch().sizes();
    std::optional<int64_t> k = kern::sizeOf(gemm.getK()).constant(), n = kern::sizeOf(gemm.getN()).constant();
    std::optional<int64_t> offset = view.getOffset().constant();
    if (!k || !n || !offset || *offset != 0 || strides.size() != batch.size() + 2) return std::nullopt;
    for (size_t axis = 0; axis < batch.size(); ++axis) {
      std::optional<int64_t> stride = strides[axis].constant(), size = batch[axis].constant();
      if (!stride || !size || (*stride != 0 && *size != 1)) return std::nullopt;
    }
    std::optional<int64_t> sK = strides[batch.size()].constant(), sN = strides[batch.size() + 1].constant();
    if (!sK || !sN) return std::nullopt;
    // Each element once: row-major [k, n] or its transpose [n, k].
    const bool dense = (*sN == 1 && *sK == *n) || (*sK == 1 && *sN == *k);
    if (!dense || *k * *n != type.getNumElements() || *k * *n == 0 || *k > 65536) return std::nullopt;
    Int8Layout here{*k, *n, *sK, *sN};
    if (layout && (layout->k != here.k || layout->n != here.n || layout->sK != here.sK || layout->sN != here.sN))
      return std::nullopt;
    layout = here;
  }
  return layout;
}

// The weights as s8 (their own tensor; a parameter's under its name) and
// their scales (an f32 [n] weight tensor that gemms reading them name as
// b_scale). A folded weight (a concatenation) is quantized as computed, so
// the scales of concatenated weights are theirs concatenated.
LogicalResult Writer::addInt8Weights(Value value, const Int8Layout &layout,
                                     llvm::function_ref<FailureOr<WeightBytes>()> read) {
  const auto count = static_cast<size_t>(layout.k * layout.n);
  std::vector<int64_t> shape{layout.n};
  if (sizing) {  // the layout only
    if (failed(addTensor(value, fb::Storage::Weights, 0, appendWeights(nullptr, count), fb::DType::I8)))
      return failure();
    const uint64_t scales = appendWeights(nullptr, static_cast<size_t>(layout.n) * sizeof(float));
    scaleTensor[value] = static_cast<uint32_t>(tensors.size());
    tensors.push_back(fb::CreateTensorDirect(builder, fb::DType::F32, &shape, fb::Storage::Weights, 0, scales));
    return success();
  }
  FailureOr<WeightBytes> bytes = read();
  if (failed(bytes)) return failure();
  if (bytes->size() != count * 4)
    return emitError(value.getLoc()) << "weights hold " << bytes->size() << " bytes for " << value.getType();
  auto at = [&](int64_t p, int64_t j) {
    float weight;
    std::memcpy(&weight, bytes->data() + 4 * (p * layout.sK + j * layout.sN), 4);
    return weight;
  };
  std::vector<uint8_t> quantized(count);
  std::vector<float> scales(static_cast<size_t>(layout.n));
  for (int64_t j = 0; j < layout.n; ++j) {
    float absMax = 0.0f;
    for (int64_t p = 0; p < layout.k; ++p) {
      const float weight = at(p, j);
      if (!std::isfinite(weight)) {
        auto param = value.getDefiningOp<ir::ParamOp>();
        return emitError(value.getLoc())
               << (param ? "parameter '" + param.getName().str() + "'" : std::string("the folded weight"))
               << " holds a value that is not finite: it cannot be quantized to int8";
      }
      absMax = std::max(absMax, std::fabs(weight));
    }
    scales[static_cast<size_t>(j)] = absMax / 127.0f;
    const float inverse = absMax == 0.0f ? 0.0f : 127.0f / absMax;
    for (int64_t p = 0; p < layout.k; ++p) {
      float q = std::nearbyint(at(p, j) * inverse);
      q = std::min(127.0f, std::max(-127.0f, q));
      quantized[static_cast<size_t>(p * layout.sK + j * layout.sN)] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
  bytes = failure();  // the f32 weights are done with
  if (failed(addTensor(value, fb::Storage::Weights, 0, appendWeights(quantized.data(), count), fb::DType::I8)))
    return failure();
  const uint64_t offset =
      appendWeights(reinterpret_cast<const uint8_t *>(scales.data()), scales.size() * sizeof(float));
  scaleTensor[value] = static_cast<uint32_t>(tensors.size());
  tensors.push_back(fb::CreateTensorDirect(builder, fb::DType::F32, &shape, fb::Storage::Weights, 0, offset));
  return success();
}

// f32 bytes to bf16, rounded to nearest even (NaN stays NaN).
std::vector<uint8_t> Writer::toBf16(ArrayRef<uint8_t> f32) {
  std::vector<uint8_t> out(f32.size() / 2);
  for (size_t i = 0; i < f32.size() / 4; ++i) {
    float value;
    std::memcpy(&value, f32.data() + 4 * i, 4);
    APFloat wide(value);
    bool lost = false;
    wide.convert(APFloat::BFloat(), APFloat::rmNearestTiesToEven, &lost);
    auto bits = static_cast<uint16_t>(wide.bitcastToAPInt().getZExtValue());
    std::memcpy(out.data() + 2 * i, &bits, 2);
  }
  return out;
}

// `read` gives the value's bytes; it is not called while sizing.
LogicalResult Writer::addWeights(Value value, RankedTensorType type,
                                 llvm::function_ref<FailureOr<WeightBytes>()> read, bool asBf16) {
  uint64_t expected = static_cast<uint64_t>(type.getNumElements() * elementBytes(type.getElementType()));
  uint64_t offset;
  if (sizing) {
    offset = appendWeights(nullptr, asBf16 ? expected / 2 : expected);
  } else {
    FailureOr<WeightBytes> bytes = read();
    if (failed(bytes)) return failure();
    if (bytes->size() != expected)
      return emitError(value.getLoc()) << "weights hold " << bytes->size() << " bytes for " << type
                                       << " (expected " << expected << ")";
    if (asBf16) bytes = WeightBytes(toBf16(bytes->bytes()));
    offset = appendWeights(bytes->data(), bytes->size());
  }
  return success(succeeded(addTensor(value, fb::Storage::Weights, 0, offset,
                                     asBf16 ? std::optional<fb::DType>(fb::DType::BF16) : std::nullopt)));
}

}  // namespace ein::artifact
