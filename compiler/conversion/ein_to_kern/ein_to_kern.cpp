// Lowers the ein dialect to kern ops: one op per runtime kernel call.
//
// Every ein value is tracked as a Layout, a strided view of a buffer. Slices,
// rearranges that only permute/split/merge axes, and broadcasts produce new
// layouts without any op; kernels read their operands through the views. A
// copy is inserted only where a view cannot be expressed (the axes of a
// composed group do not merge) or a kernel needs a dense operand.
#include "compiler/conversion/ein_to_kern/lowering.hpp"
#include "llvm/ADT/TypeSwitch.h"

namespace ein {
#define GEN_PASS_DEF_CONVERTEINTOKERN
#include "compiler/conversion/ein_to_kern/passes.h.inc"
}  // namespace ein

namespace ein::conversion {

LogicalResult Lowering::run() {
  for (BlockArgument argument : function.getArguments()) layouts[argument] = denseLayout(argument);
  SmallVector<Operation *> einOps;
  for (Operation &op : function.getBody().front()) {
    builder.setInsertionPoint(&op);
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      if (failed(lowerReturn(ret))) return failure();
      continue;
    }
    if (!isa<ein::ir::EinDialect>(op.getDialect())) continue;
    einOps.push_back(&op);
    if (failed(lower(&op))) return failure();
  }
  // Users come after their definitions: erase in reverse. Params and
  // non-scalar constants are storage and stay while kernels read them.
  for (Operation *op : llvm::reverse(einOps))
    if (!isa<ein::ir::ParamOp, ein::ir::ConstantOp, ein::ir::StateOp>(op) || op->use_empty()) op->erase();
  return success();
}

LogicalResult Lowering::lower(Operation *op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ein::ir::ParamOp>([&](auto param) {
        layouts[param] = denseLayout(param);
        return success();
      })
      .Case<ein::ir::ConstantOp>([&](ein::ir::ConstantOp constant) {
        layouts[constant] = denseLayout(constant);
        auto value = dyn_cast<DenseElementsAttr>(constant.getValue());
        if (value && value.isSplat() && constant.getType().getNumElements() == 1) {
          Type element = value.getElementType();
          if (isa<FloatType>(element))
            scalars[constant] = value.getSplatValue<APFloat>().convertToDouble();
          else if (element.isInteger(1))
            scalars[constant] = value.getSplatValue<bool>() ? 1.0 : 0.0;
          else if (isa<IntegerType>(element))
            scalars[constant] = static_cast<double>(value.getSplatValue<APInt>().getSExtValue());
        }
        return success();
      })
      .Case<ein::ir::StateOp>([&](auto state) {
        layouts[state] = denseLayout(state);
        return success();
      })
      .Case<ein::ir::AppendOp>([&](auto append) { return lowerAppend(append); })
      .Case<ein::ir::SliceOp>([&](auto slice) { return lowerSlice(slice); })
      .Case<ein::ir::WindowsOp>([&](auto windows) { return lowerWindows(windows); })
      .Case<ein::ir::RearrangeOp>([&](auto rearrange) { return lowerRearrange(rearrange); })
      .Case<ein::ir::UnaryOp>([&](auto unary) { return lowerUnary(unary); })
      .Case<ein::ir::BinaryOp>([&](auto binary) { return lowerBinary(binary); })
      .Case<ein::ir::WhereOp>([&](auto where) { return lowerWhere(where); })
      .Case<ein::ir::CastOp>([&](auto cast) { return lowerCast(cast); })
      .Case<ein::ir::SoftmaxOp>([&](auto softmax) { return lowerSoftmax(softmax); })
      .Case<ein::ir::ReduceOp>([&](auto reduce) { return lowerReduce(reduce); })
      .Case<ein::ir::EinsumOp>([&](auto einsum) { return lowerEinsum(einsum); })
      .Case<ein::ir::MatmulOp>([&](auto matmul) { return lowerMatmul(matmul); })
      .Case<ein::ir::LinearOp>([&](auto linear) { return lowerLinear(linear); })
      .Case<ein::ir::LayerNormOp>([&](auto norm) { return lowerLayerNorm(norm); })
      .Case<ein::ir::AttentionOp>([&](auto attention) { return lowerAttention(attention); })
      .Case<ein::ir::TalkingHeadsAttentionOp>([&](auto attention) { return lowerTalkingHeadsAttention(attention); })
      .Case<ein::ir::EmbeddingOp>([&](auto embedding) { return lowerEmbedding(embedding); })
      .Case<ein::ir::ConcatOp>([&](auto concat) { return lowerConcat(concat); })
      .Default([&](Operation *other) {
        return other->emitOpError() << "has no kernel lowering yet";
      });
}

Value Lowering::buildCopy(Location loc, RankedTensorType resultType, const Layout &source) {
  return builder.create<ein::kern::CopyOp>(loc, resultType, source.buffer, sizesAttr(context(), source.sizes),
                                           viewOf(context(), source.offset, source.strides));
}

Layout Lowering::materialize(Location loc, const Layout &layout) {
  if (isDense(layout)) return layout;
  auto element = cast<RankedTensorType>(layout.buffer.getType()).getElementType();
  return denseLayout(buildCopy(loc, ein::ir::sizedTensorType(layout.sizes, element), layout));
}

LogicalResult Lowering::lowerReturn(func::ReturnOp ret) {
  std::set<Operation *> claimed;
  for (OpOperand &operand : ret->getOpOperands()) {
    Value value = operand.get();
    const Layout &layout = layouts.at(value);
    Operation *producer = layout.buffer.getDefiningOp();
    bool ownBuffer = producer && isa<ein::kern::KernDialect>(producer->getDialect()) &&
                     !isa<ein::kern::AppendOp>(producer) && isDense(layout) &&
                     layout.buffer.getType() == value.getType() && !claimed.count(producer);
    Value buffer = ownBuffer ? layout.buffer : buildCopy(ret.getLoc(), cast<RankedTensorType>(value.getType()), layout);
    claimed.insert(buffer.getDefiningOp());
    operand.set(buffer);
  }
  return success();
}

namespace {

struct ConvertEinToKernPass : ein::impl::ConvertEinToKernBase<ConvertEinToKernPass> {
  void runOnOperation() override {
    if (failed(Lowering(getOperation()).run())) signalPassFailure();
  }
};

}  // namespace

}  // namespace ein::conversion
