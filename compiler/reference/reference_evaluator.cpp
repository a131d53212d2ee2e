#include "compiler/reference/reference_evaluator.hpp"

#include "compiler/reference/evaluator.hpp"

#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <sstream>

#include "compiler/weights/safetensors.hpp"
#include "ir/ein/ein_dialect.hpp"
#include "ir/ein/equations.hpp"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FormatVariadic.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

namespace ein::reference {
namespace detail {

llvm::Error Evaluator::bindInputs(mlir::func::FuncOp function, const std::map<std::string, Tensor> &inputs) {
  std::string where = "@" + function.getSymName().str();
  std::map<std::string, bool> used;
  for (const auto &entry : inputs) used[entry.first] = false;
  for (auto [index, argument] : llvm::enumerate(function.getArguments())) {
    auto name = function.getArgAttrOfType<mlir::StringAttr>(index, "ein.name");
    if (!name) return makeError(where + ": argument " + llvm::Twine(index) + " has no ein.name attribute");
    auto type = mlir::dyn_cast<RankedTensorType>(argument.getType());
    if (!type || !type.hasStaticShape())
      return makeError(where + ": input \"" + name.getValue() + "\" is not a statically shaped tensor");
    auto input = inputs.find(name.str());
    if (input == inputs.end()) return makeError(where + ": missing input \"" + name.getValue() + "\"");
    used[input->first] = true;
    const Tensor &tensor = input->second;
    if (ArrayRef<int64_t>(tensor.shape) != type.getShape() ||
        static_cast<int64_t>(tensor.values.size()) != product(type.getShape()))
      return makeError(where + ": input \"" + name.getValue() + "\" has shape " + formatDims(tensor.shape) +
                       " with " + llvm::Twine(tensor.values.size()) + " values but the function takes " +
                       ein::formatShape(ir::shapeOf(type)));
    ElementKind kind = elementKindOf(type.getElementType());
    if (tensor.kind != kind)
      return makeError(where + ": input \"" + name.getValue() + "\" has the wrong element kind for " +
                       modelTypeString(type));
    // Integers must fit the declared width: wrapping them here would hide a
    // caller's mistake.
    double limit = kind == ElementKind::Int ? std::ldexp(1.0, type.getElementType().getIntOrFloatBitWidth() - 1) : 0;
    for (double value : tensor.values)
      if ((kind == ElementKind::Int && (value != std::trunc(value) || value < -limit || value >= limit)) ||
          (kind == ElementKind::Bool && value != 0 && value != 1))
        return makeError(where + ": input \"" + name.getValue() + "\" holds " + formatNumber(value) + ", not " +
                         (kind == ElementKind::Bool ? "a bool" : "an integer of its type"));
    values[argument] = tensor;
  }
  for (const auto &[name, wasUsed] : used)
    if (!wasUsed) return makeError(where + ": no argument is named \"" + name + "\"");
  return llvm::Error::success();
}

Expected<std::map<std::string, Tensor>> Evaluator::run(mlir::func::FuncOp function,
                                                       const std::map<std::string, Tensor> &inputs) {
  std::string where = "@" + function.getSymName().str();
  // Op accessors assume verified IR; unverified IR is an error, not UB.
  std::string diagnostics;
  {
    mlir::ScopedDiagnosticHandler collect(function->getContext(), [&](mlir::Diagnostic &diagnostic) {
      diagnostics += (diagnostics.empty() ? "" : "\n") + formatLocation(diagnostic.getLocation()) + ": " +
                     diagnostic.str();
      return mlir::success();
    });
    if (mlir::failed(mlir::verify(function))) return makeError(where + " does not verify: " + diagnostics);
  }
  if (function.isExternal()) return makeError(where + " has no body");
  if (!function.getBody().hasOneBlock()) return makeError(where + " has more than one block");
  if (llvm::Error error = bindInputs(function, inputs)) return error;

  for (Operation &op : function.getBody().front()) {
    if (auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(op)) {
      std::map<std::string, Tensor> results;
      for (auto [index, operand] : llvm::enumerate(ret.getOperands())) {
        auto name = function.getResultAttrOfType<mlir::StringAttr>(index, "ein.name");
        if (!name) return makeError(where + ": result " + llvm::Twine(index) + " has no ein.name attribute");
        if (!results.emplace(name.str(), valueOf(operand)).second)
          return makeError(where + ": two results are named \"" + name.getValue() + "\"");
      }
      return results;
    }
    if (llvm::Error error = evaluate(&op)) return error;
  }
  return makeError(where + " ends without func.return");
}

Expected<Tensor> Evaluator::fold(Operation *op) {
  if (op->getNumResults() != 1) return opError(op, "has " + llvm::Twine(op->getNumResults()) + " results");
  for (Value operand : op->getOperands()) {
    auto constant = operand.getDefiningOp<ir::ConstantOp>();
    if (!constant) return opError(op, "has an operand that is not a constant");
    if (llvm::Error error = evaluate(constant.getOperation())) return std::move(error);
  }
  if (llvm::Error error = evaluate(op)) return std::move(error);
  return valueOf(op->getResult(0));
}

llvm::Error Evaluator::evaluate(Operation *op) {
  Expected<Tensor> result =
      llvm::TypeSwitch<Operation *, Expected<Tensor>>(op)
          .Case<ir::ParamOp, ir::ConstantOp, ir::EinsumOp, ir::RearrangeOp, ir::SliceOp, ir::WindowsOp, ir::UnaryOp,
                ir::BinaryOp, ir::WhereOp, ir::CastOp, ir::SoftmaxOp, ir::ReduceOp, ir::MatmulOp, ir::LinearOp,
                ir::LayerNormOp, ir::EmbeddingOp, ir::ConcatOp, ir::AttentionOp>([&](auto einOp) { return evaluate(einOp); })
          .Default([&](Operation *unknown) -> Expected<Tensor> {
            return makeError(formatLocation(unknown->getLoc()) + ": the reference evaluator does not support '" +
                             unknown->getName().getStringRef() + "'");
          });
  if (!result) return result.takeError();
  Expected<Tensor> fitted = fitToResultType(op, std::move(*result));
  if (!fitted) return fitted.takeError();
  values[op->getResult(0)] = std::move(*fitted);
  return llvm::Error::success();
}

Expected<Tensor> Evaluator::fitToResultType(Operation *op, Tensor result) const {
  auto type = mlir::cast<RankedTensorType>(op->getResult(0).getType());
  // A mismatch here is a bug in this evaluator, since the IR verified.
  if (ArrayRef<int64_t>(result.shape) != type.getShape() ||
      static_cast<int64_t>(result.values.size()) != product(type.getShape()))
    return opError(op, "evaluated to shape " + formatDims(result.shape) + " but the result type is " +
                           ein::formatShape(ir::shapeOf(type)));
  result.kind = elementKindOf(type.getElementType());
  if (result.kind == ElementKind::Bool) {
    for (double &value : result.values) value = value != 0;
  } else if (result.kind == ElementKind::Int) {
    unsigned width = type.getElementType().getIntOrFloatBitWidth();
    for (double &value : result.values) {
      if (!(value >= -0x1p63 && value < 0x1p63))  // NaN and infinities too
        return opError(op, "integer result " + formatNumber(value) + " is out of the range of i64");
      int64_t integer = static_cast<int64_t>(value);
      if (width < 64) {  // wrap to the width, as two's complement
        uint64_t mask = (uint64_t{1} << width) - 1, bits = static_cast<uint64_t>(integer) & mask;
        integer = bits >> (width - 1) ? static_cast<int64_t>(bits) - (int64_t{1} << width) : static_cast<int64_t>(bits);
      }
      value = static_cast<double>(integer);
    }
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::ParamOp op) {
  auto type = mlir::cast<RankedTensorType>(op.getType());
  auto cached = paramCache.find(op.getName());
  if (cached == paramCache.end()) {
    Expected<Tensor> loaded = params(op.getName(), type);
    if (!loaded) return loaded.takeError();
    cached = paramCache.try_emplace(op.getName(), std::move(*loaded)).first;
  }
  const Tensor &tensor = cached->second;
  if (ArrayRef<int64_t>(tensor.shape) != type.getShape() || tensor.kind != elementKindOf(type.getElementType()))
    return opError(op, "parameter \"" + op.getName() + "\" was provided with shape " +
                           formatDims(tensor.shape) + " but is declared " + modelTypeString(type));
  return tensor;
}

Expected<Tensor> Evaluator::evaluate(ir::ConstantOp op) {
  auto type = mlir::cast<RankedTensorType>(op.getType());
  Tensor result(toShape(type.getShape()), elementKindOf(type.getElementType()), {});
  mlir::ElementsAttr attr = op.getValue();
  result.values.reserve(product(type.getShape()));
  if (auto floats = attr.tryGetValues<llvm::APFloat>(); floats) {
    for (const llvm::APFloat &value : *floats) result.values.push_back(value.convertToDouble());
  } else if (auto integers = attr.tryGetValues<llvm::APInt>(); integers) {
    // An i1 true is all ones: read it as 1, not as the sign-extended -1.
    for (const llvm::APInt &value : *integers)
      result.values.push_back(value.getBitWidth() == 1 ? value.getBoolValue()
                                                       : static_cast<double>(value.getSExtValue()));
  } else {
    return opError(op, "cannot read the elements of " + llvm::formatv("{0}", attr).str());
  }
  return result;
}

}  // namespace detail

using namespace detail;


ElementKind elementKindOf(mlir::Type elementType) {
  if (elementType.isInteger(1)) return ElementKind::Bool;
  if (elementType.isIntOrIndex()) return ElementKind::Int;
  return ElementKind::Float;
}

Tensor Tensor::zeros(std::vector<int64_t> shape, ElementKind kind) {
  int64_t count = product(shape);
  return Tensor(std::move(shape), kind, std::vector<double>(count, 0.0));
}

int64_t Tensor::numElements() const { return product(shape); }

Expected<std::map<std::string, Tensor>> evaluate(mlir::func::FuncOp function,
                                                 const std::map<std::string, Tensor> &inputs,
                                                 const ParamProvider &params) {
  return Evaluator(params).run(function, inputs);
}

Expected<Tensor> foldConstantOp(mlir::Operation *op) {
  ParamProvider none = [](llvm::StringRef name, RankedTensorType) -> Expected<Tensor> {
    return makeError("parameter \"" + name + "\" is not a constant");
  };
  return Evaluator(none).fold(op);
}

ParamProvider safetensorsParams(const weights::SafetensorsFile &file) {
  return [&file](llvm::StringRef name, RankedTensorType type) -> Expected<Tensor> {
    const weights::TensorEntry *entry = file.find(name);
    if (!entry) return makeError(file.path() + ": missing parameter \"" + name + "\"");
    mlir::Type element = type.getElementType();
    // Integer and bool parameters are read exactly as stored; floating-point
    // ones from any float encoding, through f32 as the compiler stores them.
    std::optional<weights::DType> exact;
    if (element.isInteger(1)) exact = weights::DType::Bool;
    else if (element.isSignlessInteger(32)) exact = weights::DType::I32;
    else if (element.isSignlessInteger(64)) exact = weights::DType::I64;
    bool fits = exact ? entry->dtype == *exact
                      : mlir::isa<mlir::FloatType>(element) && weights::isFloatingPoint(entry->dtype);
    if (ArrayRef<int64_t>(entry->shape) != type.getShape() || !fits)
      return makeError(file.path() + ": parameter \"" + name + "\" is " + entry->typeString() + " in the file and " +
                       modelTypeString(type) + " in the model");
    Tensor tensor(entry->shape, elementKindOf(element), {});
    if (!exact) {
      Expected<std::vector<float>> values = file.toF32(*entry);
      if (!values) return values.takeError();
      tensor.values.assign(values->begin(), values->end());
      return tensor;
    }
    llvm::ArrayRef<uint8_t> bytes = file.bytes(*entry);
    unsigned size = weights::dtypeSize(entry->dtype);
    for (size_t offset = 0; offset < bytes.size(); offset += size) {
      const uint8_t *at = bytes.data() + offset;
      switch (entry->dtype) {
      case weights::DType::Bool:
        tensor.values.push_back(*at != 0);
        break;
      case weights::DType::I32:
        tensor.values.push_back(static_cast<int32_t>(llvm::support::endian::read32le(at)));
        break;
      default:  // I64
        tensor.values.push_back(static_cast<double>(static_cast<int64_t>(llvm::support::endian::read64le(at))));
        break;
      }
    }
    return tensor;
  };
}

}  // namespace ein::reference
