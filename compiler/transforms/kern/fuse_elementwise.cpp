// Inlines element-wise kernels into their element-wise users. A concat is a
// piecewise element-wise kernel: a producer read only by one of its parts is
// computed into that part's slab, and an element-wise user of the whole
// concat is distributed over its parts (its other operands read through
// views shifted to each slab), so a concat of computed parts costs no copy.
#include <cmath>

#include "compiler/transforms/kern/passes.hpp"
#include "ir/source_locations.hpp"
#include "mlir/IR/IRMapping.h"

namespace ein {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "compiler/transforms/kern/passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::kern::ConcatOp;
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

// The inputs of an element-wise program being assembled, each read through
// its view; one read through the same view serves every use.
struct ProgramInputs {
  SmallVector<Value> inputs;
  SmallVector<Attribute> views;

  std::optional<unsigned> find(Value input, Attribute view) const {
    for (unsigned i = 0; i < inputs.size(); ++i)
      if (inputs[i] == input && views[i] == view) return i;
    return std::nullopt;
  }

  unsigned add(Value input, Attribute view) {
    if (std::optional<unsigned> known = find(input, view)) return *known;
    inputs.push_back(input);
    views.push_back(view);
    return inputs.size() - 1;
  }
};

// Clones `body` (but its kern.yield) at the builder's insertion point with
// its arguments bound to `arguments`; returns the value it yields.
Value inlineBody(OpBuilder &builder, Block &body, ArrayRef<Value> arguments) {
  IRMapping map;
  for (auto [argument, value] : llvm::zip(body.getArguments(), arguments)) map.map(argument, value);
  for (Operation &op : body.without_terminator()) builder.clone(op, map);
  return map.lookupOrDefault(cast<YieldOp>(body.getTerminator()).getValue());
}

// The value a consumer reads from `producer`, computed by its body as
// `value`: a bool result stores value != 0, so a consumer must see 0 or 1.
Value storedValue(OpBuilder &builder, ElementwiseOp producer, Value value) {
  if (!producer.getType().getElementType().isInteger(1) || value.getDefiningOp<arith::UIToFPOp>()) return value;
  Location loc = producer.getLoc();
  Value zero = builder.create<arith::ConstantOp>(loc, builder.getF32FloatAttr(0.0f));
  Value nonZero = builder.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNE, value, zero);
  return builder.create<arith::UIToFPOp>(loc, builder.getF32Type(), nonZero);
}

// A new block of f32 arguments, one per input, in `region`.
Block *programBlock(OpBuilder &builder, Region &region, const ProgramInputs &inputs) {
  Block *body = builder.createBlock(&region);
  for (Value input : inputs.inputs) body->addArgument(builder.getF32Type(), input.getLoc());
  return body;
}

// Computes `consumer`'s body into the builder's block, with its inputs read
// from `block`'s arguments at `positions`, except its reads of `fused`, which
// take `fusedValue`; yields the result.
void yieldConsumer(OpBuilder &builder, ElementwiseOp consumer, Value fused, Value fusedValue, Block *block,
                   ArrayRef<unsigned> positions) {
  SmallVector<Value> arguments;
  for (auto [input, position] : llvm::zip(consumer.getInputs(), positions))
    arguments.push_back(input == fused ? fusedValue : block->getArgument(position));
  Value result = inlineBody(builder, consumer.getBody().front(), arguments);
  builder.create<YieldOp>(consumer.getLoc(), result);
}

// Replaces `consumer` by one kernel computing it with `producer` (the
// definition of its inputs equal to `producer`'s result) inlined; `pass` is
// named in its location.
void fuse(ElementwiseOp consumer, ElementwiseOp producer, llvm::StringRef pass) {
  OpBuilder builder(consumer);
  Value fused = producer.getResult();
  ProgramInputs inputs;
  SmallVector<unsigned> consumerPositions, producerPositions;
  for (auto [input, view] : llvm::zip(consumer.getInputs(), consumer.getInputViews()))
    consumerPositions.push_back(input == fused ? 0 : inputs.add(input, view));
  for (auto [input, view] : llvm::zip(producer.getInputs(), producer.getInputViews()))
    producerPositions.push_back(inputs.add(input, view));

  auto merged = builder.create<ElementwiseOp>(consumer.getLoc(), consumer.getType(), inputs.inputs,
                                              builder.getArrayAttr(inputs.views));
  Block *body = programBlock(builder, merged.getBody(), inputs);
  SmallVector<Value> producerArguments;
  for (unsigned position : producerPositions) producerArguments.push_back(body->getArgument(position));
  Value producerValue = storedValue(builder, producer, inlineBody(builder, producer.getBody().front(), producerArguments));
  yieldConsumer(builder, consumer, fused, producerValue, body, consumerPositions);

  merged->setLoc(ein::ir::fusedLocation(merged, {consumer, producer}, pass));
  consumer.replaceAllUsesWith(merged.getResult());
  consumer.erase();
  producer.erase();
}

// ---- concats: parts computed in place ----------------------------------------

// A copy of `concat` of type `type` whose part `p` reads `parts[p]` and whose
// body `fill(builder, p, block)` computes (and yields) into the part's new
// block.
ConcatOp rebuildConcat(OpBuilder &builder, ConcatOp concat, Type type, ArrayRef<ProgramInputs> parts,
                       llvm::function_ref<void(OpBuilder &, size_t, Block *)> fill) {
  SmallVector<Value> inputs;
  SmallVector<Attribute> views;
  SmallVector<int64_t> counts;
  for (const ProgramInputs &part : parts) {
    inputs.append(part.inputs);
    views.append(part.views);
    counts.push_back(static_cast<int64_t>(part.inputs.size()));
  }
  auto rebuilt = builder.create<ConcatOp>(concat.getLoc(), type, inputs, builder.getArrayAttr(views),
                                          builder.getDenseI64ArrayAttr(counts), concat.getAxisAttr(),
                                          concat.getSizesAttr(), parts.size());
  OpBuilder::InsertionGuard guard(builder);
  for (auto [index, part] : llvm::enumerate(parts)) fill(builder, index, programBlock(builder, rebuilt.getParts()[index], part));
  return rebuilt;
}

// The inputs of part `part` of `concat`.
ProgramInputs partInputs(ConcatOp concat, size_t part) {
  ProgramInputs inputs;
  for (auto [input, view] : llvm::zip(concat.partInputs(part), concat.partViews(part))) inputs.add(input, view);
  return inputs;
}

// Part `part`'s body inlined into `block`, whose arguments read `inputs`
// (which hold the part's own).
Value inlinePart(OpBuilder &builder, ConcatOp concat, size_t part, Block *block, const ProgramInputs &inputs) {
  SmallVector<Value> arguments;
  for (auto [input, view] : llvm::zip(concat.partInputs(part), concat.partViews(part)))
    arguments.push_back(block->getArgument(*inputs.find(input, view)));
  return inlineBody(builder, concat.getParts()[part].front(), arguments);
}

// The (part, input) of `concat` that an element-wise producer defines which
// the concat alone reads, once and element for element over the part.
std::optional<std::pair<size_t, unsigned>> fusablePartInput(ConcatOp concat) {
  ein::Shape shape = ein::ir::shapeOf(concat.getType());
  for (size_t part = 0; part < concat.getParts().size(); ++part) {
    ein::Shape partShape = shape;
    partShape[concat.getAxis()] = concat.getSizes().sizes()[part];
    for (auto [index, input, view] : llvm::enumerate(concat.partInputs(part), concat.partViews(part))) {
      auto producer = input.getDefiningOp<ElementwiseOp>();
      if (!producer || !producer->hasOneUse() || ein::ir::shapeOf(producer.getType()) != partShape) continue;
      if (!storesItsBodyValue(producer) || !readsElementForElement(cast<ViewAttr>(view), partShape)) continue;
      return std::make_pair(part, static_cast<unsigned>(index));
    }
  }
  return std::nullopt;
}

// Computes part `part` of `concat` with the producer of its input `index`
// inlined: the producer writes straight into its slab.
void fuseIntoPart(ConcatOp concat, size_t part, unsigned index, llvm::StringRef pass) {
  auto producer = concat.partInputs(part)[index].getDefiningOp<ElementwiseOp>();
  OpBuilder builder(concat);
  SmallVector<ProgramInputs> parts;
  SmallVector<unsigned> partPositions, producerPositions;
  for (size_t p = 0; p < concat.getParts().size(); ++p) {
    if (p != part) {
      parts.push_back(partInputs(concat, p));
      continue;
    }
    ProgramInputs &inputs = parts.emplace_back();
    for (auto [i, input, view] : llvm::enumerate(concat.partInputs(p), concat.partViews(p)))
      partPositions.push_back(i == index ? 0 : inputs.add(input, view));
    for (auto [input, view] : llvm::zip(producer.getInputs(), producer.getInputViews()))
      producerPositions.push_back(inputs.add(input, view));
  }
  ConcatOp rebuilt = rebuildConcat(builder, concat, concat.getType(), parts, [&](OpBuilder &b, size_t p, Block *block) {
    if (p != part) {
      b.create<YieldOp>(concat.getLoc(), inlinePart(b, concat, p, block, parts[p]));
      return;
    }
    SmallVector<Value> producerArguments, partArguments;
    for (unsigned position : producerPositions) producerArguments.push_back(block->getArgument(position));
    Value produced = storedValue(b, producer, inlineBody(b, producer.getBody().front(), producerArguments));
    for (auto [i, position] : llvm::enumerate(partPositions))
      partArguments.push_back(i == index ? produced : block->getArgument(position));
    b.create<YieldOp>(concat.getLoc(), inlineBody(b, concat.getParts()[p].front(), partArguments));
  });
  rebuilt->setLoc(ein::ir::fusedLocation(rebuilt, {concat, producer}, pass));
  concat.replaceAllUsesWith(rebuilt.getResult());
  concat.erase();
  producer.erase();
}

// Whether every part of `concat` is a plain copy: distributing a user over
// them reads the parts' inputs instead, and computes nothing twice.
bool copiesOnly(ConcatOp concat) {
  for (size_t part = 0; part < concat.getParts().size(); ++part)
    if (!concat.isCopy(part)) return false;
  return true;
}

// The input of `consumer` that an f32 concat defines which `consumer` reads
// element for element, and alone unless the concat only copies.
std::optional<unsigned> fusableConcatInput(ElementwiseOp consumer) {
  ein::Shape shape = ein::ir::shapeOf(consumer.getType());
  for (auto [index, input] : llvm::enumerate(consumer.getInputs())) {
    auto concat = input.getDefiningOp<ConcatOp>();
    if (!concat || !concat.getType().getElementType().isF32() || ein::ir::shapeOf(concat.getType()) != shape) continue;
    if (!copiesOnly(concat) && !llvm::all_of(concat->getUsers(), [&](Operation *user) { return user == consumer; }))
      continue;
    bool aligned = llvm::all_of(llvm::enumerate(consumer.getInputs()), [&](auto other) {
      return other.value() != input ||
             readsElementForElement(cast<ViewAttr>(consumer.getInputViews()[other.index()]), shape);
    });
    if (aligned) return static_cast<unsigned>(index);
  }
  return std::nullopt;
}

// Replaces `consumer` of `concat` by a concat of `consumer`'s type whose
// parts each compute `consumer` over their slab: the element-wise op is
// distributed over the parts, its other inputs read through views shifted to
// each slab. `concat` goes once it has no other user.
void distributeOverParts(ElementwiseOp consumer, ConcatOp concat, llvm::StringRef pass) {
  OpBuilder builder(consumer);
  const int64_t axis = concat.getAxis();
  SmallVector<ProgramInputs> parts;
  SmallVector<SmallVector<unsigned>> consumerPositions;
  for (size_t p = 0; p < concat.getParts().size(); ++p) {
    ProgramInputs inputs = partInputs(concat, p);
    ein::Size start = concat.partStart(p);
    SmallVector<unsigned> &positions = consumerPositions.emplace_back();
    for (auto [input, attr] : llvm::zip(consumer.getInputs(), consumer.getInputViews())) {
      if (input == concat.getResult()) {
        positions.push_back(0);
        continue;
      }
      auto view = cast<ViewAttr>(attr);
      positions.push_back(inputs.add(
          input, ViewAttr::get(builder.getContext(), view.getOffset() + start * view.getStrides()[axis], view.getStrides())));
    }
    parts.push_back(std::move(inputs));
  }
  ConcatOp rebuilt = rebuildConcat(builder, concat, consumer.getType(), parts, [&](OpBuilder &b, size_t p, Block *block) {
    Value part = inlinePart(b, concat, p, block, parts[p]);
    yieldConsumer(b, consumer, concat.getResult(), part, block, consumerPositions[p]);
  });
  rebuilt->setLoc(ein::ir::fusedLocation(rebuilt, {consumer}, pass));
  consumer.replaceAllUsesWith(rebuilt.getResult());
  consumer.erase();
  if (concat->use_empty()) concat.erase();
}

struct FuseElementwisePass : ein::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    bool changed = true;
    while (changed) {
      changed = false;
      for (Operation &op : llvm::make_early_inc_range(getOperation().getBody().front())) {
        if (auto concat = dyn_cast<ConcatOp>(op)) {
          if (auto at = fusablePartInput(concat)) {
            fuseIntoPart(concat, at->first, at->second, getArgument());
            changed = true;
            break;
          }
          continue;
        }
        auto consumer = dyn_cast<ElementwiseOp>(op);
        if (!consumer) continue;
        if (auto index = fusableInput(consumer)) {
          fuse(consumer, consumer.getInputs()[*index].getDefiningOp<ElementwiseOp>(), getArgument());
          changed = true;
          break;
        }
        if (auto index = fusableConcatInput(consumer)) {
          distributeOverParts(consumer, consumer.getInputs()[*index].getDefiningOp<ConcatOp>(), getArgument());
          changed = true;
          break;
        }
      }
    }
  }
};

}  // namespace
