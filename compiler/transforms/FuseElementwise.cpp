// Inlines element-wise kernels into their element-wise users.
#include <cmath>

#include "mlir/IR/IRMapping.h"
#include "passes/Passes.h"

namespace ein {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "passes/Passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::kern::ElementwiseOp;
using ein::kern::ViewAttr;
using ein::kern::YieldOp;

namespace {

// Whether `view` reads a dense buffer of `shape` element for element (size-1
// axes may carry any stride).
bool readsElementForElement(ViewAttr view, const ein::Shape &shape) {
  if (view.getOffset() != 0 || view.getStrides().size() != shape.size()) return false;
  ein::Size dense = 1;
  for (int axis = static_cast<int>(shape.size()) - 1; axis >= 0; --axis) {
    if (shape[axis] != 1 && view.getStrides()[axis] != dense) return false;
    dense *= shape[axis];
  }
  return true;
}

// Whether `producer`'s f32 body value is exactly what it stores. f32
// results are; an integer result is when the body only combines integer
// inputs with integer-preserving arithmetic (the kernel stores f32 values
// converted). i1 results are normalised when inlined (see fuse).
bool storesItsBodyValue(ElementwiseOp producer) {
  Type element = producer.getType().getElementType();
  if (element.isF32() || element.isInteger(1)) return true;
  for (Value input : producer.getInputs())
    if (!cast<RankedTensorType>(input.getType()).getElementType().isSignlessInteger()) return false;
  return llvm::all_of(producer.getBody().front().without_terminator(), [](Operation &op) {
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      auto value = dyn_cast<FloatAttr>(constant.getValue());
      return value && value.getValueAsDouble() == std::trunc(value.getValueAsDouble());
    }
    return isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp,
               arith::SelectOp, arith::CmpFOp, arith::UIToFPOp, math::AbsFOp>(op);
  });
}

// The input of `consumer` that a fusable producer defines, if any.
std::optional<unsigned> fusableInput(ElementwiseOp consumer) {
  for (auto [index, input] : llvm::enumerate(consumer.getInputs())) {
    auto producer = input.getDefiningOp<ElementwiseOp>();
    ein::Shape shape = ein::ir::shapeOf(consumer.getType());
    if (!producer || ein::ir::shapeOf(producer.getType()) != shape) continue;
    if (!storesItsBodyValue(producer)) continue;
    if (!llvm::all_of(producer->getUsers(), [&](Operation *user) { return user == consumer; })) continue;
    // Every read of the producer must be element for element.
    bool aligned = llvm::all_of(llvm::enumerate(consumer.getInputs()), [&](auto other) {
      return other.value() != input ||
             readsElementForElement(cast<ViewAttr>(consumer.getInputViews()[other.index()]), shape);
    });
    if (aligned) return static_cast<unsigned>(index);
  }
  return std::nullopt;
}

// Replaces `consumer` by one kernel computing it with `producer` (the
// definition of its inputs equal to `producer`'s result) inlined.
void fuse(ElementwiseOp consumer, ElementwiseOp producer) {
  OpBuilder builder(consumer);
  Value fused = producer.getResult();
  SmallVector<Value> inputs;
  SmallVector<Attribute> views;
  for (auto [input, view] : llvm::zip(consumer.getInputs(), consumer.getInputViews()))
    if (input != fused) {
      inputs.push_back(input);
      views.push_back(view);
    }
  // The producer's inputs join the consumer's; one read through the same
  // view serves both.
  SmallVector<unsigned> producerArgument;
  for (auto [input, view] : llvm::zip(producer.getInputs(), producer.getInputViews())) {
    unsigned position = inputs.size();
    for (unsigned i = 0; i < inputs.size(); ++i)
      if (inputs[i] == input && views[i] == view) position = i;
    if (position == inputs.size()) {
      inputs.push_back(input);
      views.push_back(view);
    }
    producerArgument.push_back(position);
  }

  auto merged = builder.create<ElementwiseOp>(consumer.getLoc(), consumer.getType(), inputs,
                                              builder.getArrayAttr(views));
  Block *body = builder.createBlock(&merged.getBody());
  for (Value input : inputs) body->addArgument(builder.getF32Type(), input.getLoc());

  IRMapping producerMap;
  for (auto [argument, position] : llvm::zip(producer.getBody().getArguments(), producerArgument))
    producerMap.map(argument, body->getArgument(position));
  builder.setInsertionPointToEnd(body);
  for (Operation &op : producer.getBody().front().without_terminator()) builder.clone(op, producerMap);
  Value producerValue = producerMap.lookup(cast<YieldOp>(producer.getBody().front().getTerminator()).getValue());
  if (producer.getType().getElementType().isInteger(1) && !producerValue.getDefiningOp<arith::UIToFPOp>()) {
    // A bool result stores value != 0; the consumer must see 0 or 1.
    Location loc = producer.getLoc();
    Value zero = builder.create<arith::ConstantOp>(loc, builder.getF32FloatAttr(0.0f));
    Value nonZero = builder.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNE, producerValue, zero);
    producerValue = builder.create<arith::UIToFPOp>(loc, builder.getF32Type(), nonZero);
  }

  IRMapping consumerMap;
  unsigned next = 0;
  for (auto [input, argument] : llvm::zip(consumer.getInputs(), consumer.getBody().getArguments()))
    consumerMap.map(argument, input == fused ? producerValue : body->getArgument(next++));
  for (Operation &op : consumer.getBody().front()) builder.clone(op, consumerMap);

  consumer.replaceAllUsesWith(merged.getResult());
  consumer.erase();
  producer.erase();
}

struct FuseElementwisePass : ein::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    bool changed = true;
    while (changed) {
      changed = false;
      for (Operation &op : llvm::make_early_inc_range(getOperation().getBody().front())) {
        auto consumer = dyn_cast<ElementwiseOp>(op);
        if (!consumer) continue;
        if (auto index = fusableInput(consumer)) {
          fuse(consumer, consumer.getInputs()[*index].getDefiningOp<ElementwiseOp>());
          changed = true;
          break;
        }
      }
    }
  }
};

}  // namespace
