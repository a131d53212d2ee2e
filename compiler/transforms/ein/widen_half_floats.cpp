// Computes f16 and bf16 values in f32: the kernels work in f32, so half
// floats are a storage type. Inputs are widened where the function reads
// them, params and constants become f32 (a bound parameter's values are
// converted once, here), every other result becomes f32, and outputs declared
// half are narrowed just before they are returned.
#include <cstring>
#include <vector>

#include "compiler/transforms/ein/passes.hpp"
#include "ir/half_floats.hpp"
#include "mlir/IR/DialectResourceBlobManager.h"

namespace ein {
#define GEN_PASS_DEF_WIDENHALFFLOATS
#include "compiler/transforms/ein/passes.h.inc"
}  // namespace ein

using namespace mlir;

namespace {

bool isHalf(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && (tensor.getElementType().isF16() || tensor.getElementType().isBF16());
}

RankedTensorType widened(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return tensor.clone(Float32Type::get(type.getContext()));
}

// A bound half parameter's values as f32 (exact: every f16 and bf16 is an f32).
DenseResourceElementsAttr widenedValues(ein::ir::ParamOp param) {
  Type element = param.getType().getElementType();
  const llvm::fltSemantics &semantics = ein::ir::halfSemantics(element);
  ArrayRef<char> bytes = param.getBoundBytes();
  std::vector<float> values(bytes.size() / 2);
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, bytes.data() + 2 * i, 2);
    values[i] = ein::ir::fromHalfBits(bits, semantics);
  }
  return DenseResourceElementsAttr::get(widened(param.getType()), param.getName(),
                                        HeapAsmResourceBlob::allocateAndCopyInferAlign(ArrayRef<float>(values)));
}

// A cast of `value` to f32 right after its definition, taking all its uses.
void widenUses(OpBuilder &builder, Value value) {
  auto cast = builder.create<ein::ir::CastOp>(value.getLoc(), widened(value.getType()), value);
  value.replaceAllUsesExcept(cast, cast);
}

struct WidenHalfFloatsPass : ein::impl::WidenHalfFloatsBase<WidenHalfFloatsPass> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    Block &body = function.getBody().front();
    OpBuilder builder(&getContext());
    builder.setInsertionPointToStart(&body);
    for (BlockArgument argument : body.getArguments())
      if (isHalf(argument.getType())) widenUses(builder, argument);

    for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
      if (!isa<ein::ir::EinDialect>(op.getDialect())) continue;
      if (auto param = dyn_cast<ein::ir::ParamOp>(op)) {
        // Weights are converted once, here, instead of at every run.
        if (!isHalf(param.getType())) continue;
        if (param.getValueAttr()) param.setValueAttr(widenedValues(param));
        param.getResult().setType(widened(param.getType()));
        continue;
      }
      if (auto constant = dyn_cast<ein::ir::ConstantOp>(op)) {
        if (!isHalf(constant.getType())) continue;
        auto elements = cast<DenseElementsAttr>(constant.getValue());
        SmallVector<float> values;
        for (const APFloat &value : elements.getValues<APFloat>()) values.push_back(value.convertToFloat());
        builder.setInsertionPoint(constant);
        auto type = widened(constant.getType());
        Value replacement = builder.create<ein::ir::ConstantOp>(
            constant.getLoc(), type, DenseElementsAttr::get(type, ArrayRef<float>(values)));
        constant.replaceAllUsesWith(replacement);
        constant.erase();
        continue;
      }
      for (Value result : op.getResults())
        if (isHalf(result.getType())) result.setType(widened(result.getType()));
      // A cast that now converts f32 to f32 is the value itself.
      if (auto cast = dyn_cast<ein::ir::CastOp>(op); cast && cast.getInput().getType() == cast.getType()) {
        cast.replaceAllUsesWith(cast.getInput());
        cast.erase();
      }
    }

    // Outputs keep their declared type.
    Operation *terminator = body.getTerminator();
    builder.setInsertionPoint(terminator);
    for (auto [index, declared] : llvm::enumerate(function.getFunctionType().getResults())) {
      Value value = terminator->getOperand(index);
      if (value.getType() == declared) continue;
      terminator->setOperand(index, builder.create<ein::ir::CastOp>(terminator->getLoc(), declared, value));
    }
  }
};

}  // namespace
