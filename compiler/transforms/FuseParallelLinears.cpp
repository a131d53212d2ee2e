// Horizontal GEMM fusion: projections that read the same input (a
// transformer's q/k/v, a SwiGLU's gate and up; `linear(x, w)` or `x @ w`)
// become one over their weights concatenated along the output axis; each
// part is a slice of its result, which lowering turns into a strided view.
#include "llvm/ADT/MapVector.h"
#include "passes/Passes.h"

namespace ein {
#define GEN_PASS_DEF_FUSEPARALLELLINEARS
#include "passes/Passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::Shape;
using ein::ir::LinearOp;
using ein::ir::ParamOp;
using ein::ir::UnaryKind;
using ein::ir::UnaryOp;

namespace {

// The activations kern-fuse-gemm-epilogue moves into a GEMM: those the op
// table lists as GEMM epilogue activations (kern's Activation, by name).
bool isEpilogueActivation(UnaryKind kind) {
  std::optional<ein::kern::Activation> activation = ein::kern::symbolizeActivation(ein::ir::stringifyUnaryKind(kind));
  return activation && *activation != ein::kern::Activation::none;
}

bool isElementwise(Operation *op) { return isa<UnaryOp, ein::ir::BinaryOp, ein::ir::WhereOp, ein::ir::CastOp>(op); }

// One projection of a group: a linear (weight [n, k], optional bias [n]) or
// a matmul by a [k, n] weight, and the activation that would be its GEMM's
// epilogue (fused along with it), if any.
struct Part {
  Operation *op;
  Value input, weight, bias;
  int64_t outputAxis;  // of the weight
  UnaryOp activation;
  Value result() { return activation ? Value(activation.getResult()) : op->getResult(0); }
};

// What a projection's GEMM would take as its epilogue. Parts fuse only with
// parts of the same epilogue, which the fused GEMM then takes: fusing an
// activation of one part alone would cost its own pass over the result.
// Fails when the projection is better left alone: its result's only reader
// adds to it (a residual, which joins its GEMM).
LogicalResult findEpilogue(Part &part) {
  if (!part.op->hasOneUse()) return success();
  Operation *user = *part.op->getUsers().begin();
  if (auto add = dyn_cast<ein::ir::BinaryOp>(user); add && add.getKind() == ein::ir::BinaryKind::add)
    return failure();
  // An activation that feeds only element-wise ops (silu(gate) * up) merges
  // with them into one element-wise kernel, not into the GEMM.
  auto activation = dyn_cast<UnaryOp>(user);
  if (activation && isEpilogueActivation(activation.getKind()) &&
      !llvm::all_of(activation->getUsers(), isElementwise))
    part.activation = activation;
  return success();
}

// A parameter of the given rank, the only weights that fuse: concatenating
// them is computed once, when einc writes the artifact.
ParamOp paramOf(Value value, int64_t rank) {
  auto param = value ? value.getDefiningOp<ParamOp>() : ParamOp();
  return param && param.getType().getRank() == rank && param.getType().hasStaticShape() ? param : ParamOp();
}

// `op` as a projection by parameters, if it is one.
std::optional<Part> partOf(Operation *op) {
  Part part{op, Value(), Value(), Value(), 0, UnaryOp()};
  if (auto linear = dyn_cast<LinearOp>(op)) {
    part = Part{op, linear.getInput(), linear.getWeight(), linear.getBias(), 0, UnaryOp()};
    if (part.bias && !paramOf(part.bias, 1)) return std::nullopt;
  } else if (auto matmul = dyn_cast<ein::ir::MatmulOp>(op)) {
    part = Part{op, matmul.getLhs(), matmul.getRhs(), Value(), 1, UnaryOp()};
    if (cast<RankedTensorType>(part.input.getType()).getRank() < 1) return std::nullopt;
  } else {
    return std::nullopt;
  }
  if (!paramOf(part.weight, 2) || failed(findEpilogue(part))) return std::nullopt;
  return part;
}

struct FuseParallelLinearsPass : ein::impl::FuseParallelLinearsBase<FuseParallelLinearsPass> {
  void runOnOperation() override {
    // Groups by input, op, weight and bias types and epilogue, in block order.
    using Key = std::tuple<Value, OperationName, Type, Type, int>;
    llvm::MapVector<Key, SmallVector<Part>> groups;
    getOperation().walk([&](Operation *op) {
      std::optional<Part> part = partOf(op);
      if (!part) return;
      Type biasType = part->bias ? part->bias.getType() : Type();
      int activation = part->activation ? static_cast<int>(part->activation.getKind()) : -1;
      groups[Key{part->input, op->getName(), cast<RankedTensorType>(part->weight.getType()).getElementType(),
                 biasType ? cast<RankedTensorType>(biasType).getElementType() : Type(), activation}]
          .push_back(*part);
    });
    for (auto &[key, parts] : groups)
      if (parts.size() >= 2 && failed(fuse(parts))) return signalPassFailure();
  }

  // Concatenates `values` (parameters) along `axis`.
  FailureOr<Value> concatenate(OpBuilder &builder, Location loc, ArrayRef<Value> values, int64_t axis) {
    auto type = ein::ir::ConcatOp::inferResultType(ValueRange(values).getTypes(), axis);
    if (ein::failed(type)) return emitError(loc) << "cannot concatenate the fused weights";
    return builder
        .create<ein::ir::ConcatOp>(loc, std::get<RankedTensorType>(type), values, builder.getI64IntegerAttr(axis))
        .getResult();
  }

  LogicalResult fuse(SmallVector<Part> &parts) {
    Operation *first = parts.front().op;
    const int64_t outputAxis = parts.front().outputAxis;
    SmallVector<Value> weights, biases;
    SmallVector<Location> locations;
    for (Part &part : parts) {
      weights.push_back(part.weight);
      if (part.bias) biases.push_back(part.bias);
      locations.push_back(part.op->getLoc());
    }
    // Parameters have no operands: the ones declared after the first part
    // move up to it, so the fused projection sees them all.
    for (Value value : llvm::concat<Value>(weights, biases))
      if (Operation *param = value.getDefiningOp(); !param->isBeforeInBlock(first)) param->moveBefore(first);

    OpBuilder builder(first);
    Location loc = builder.getFusedLoc(locations);
    FailureOr<Value> weight = concatenate(builder, loc, weights, outputAxis);
    if (failed(weight)) return failure();
    Value bias;
    if (!biases.empty()) {
      FailureOr<Value> concatenated = concatenate(builder, loc, biases, 0);
      if (failed(concatenated)) return failure();
      bias = *concatenated;
    }
    // Read now: an earlier fusion may have replaced the input by a slice.
    Value input = first->getOperand(0), fused;
    if (isa<LinearOp>(first)) {
      auto type = LinearOp::inferResultType(input.getType(), weight->getType(), bias ? bias.getType() : Type());
      if (ein::failed(type)) return first->emitOpError() << "cannot fuse with the projections that share its input";
      fused = builder.create<LinearOp>(loc, std::get<RankedTensorType>(type), input, *weight, bias);
    } else {
      auto type = ein::ir::MatmulOp::inferResultType(input.getType(), weight->getType());
      if (ein::failed(type)) return first->emitOpError() << "cannot fuse with the projections that share its input";
      fused = builder.create<ein::ir::MatmulOp>(loc, std::get<RankedTensorType>(type), input, *weight);
    }
    if (UnaryOp activation = parts.front().activation)
      fused = builder.create<UnaryOp>(loc, fused.getType(), activation.getKindAttr(), fused);

    // Each part is its columns of the fused result.
    Shape shape = ein::ir::shapeOf(fused.getType());
    const size_t last = shape.size() - 1;
    int64_t offset = 0;
    for (Part &part : parts) {
      Value result = part.result();
      Shape offsets(shape.size(), ein::Size(0)), sizes = shape;
      offsets[last] = offset;
      sizes[last] = ein::ir::shapeOf(result.getType())[last];
      offset += cast<RankedTensorType>(part.weight.getType()).getDimSize(outputAxis);
      Value slice = builder.create<ein::ir::SliceOp>(
          part.op->getLoc(), result.getType(), fused, ein::ir::SizesAttr::get(&getContext(), offsets),
          ein::ir::SizesAttr::get(&getContext(), sizes), builder.getDenseI64ArrayAttr({}),
          builder.getDenseI64ArrayAttr({}));
      result.replaceAllUsesWith(slice);
    }
    for (Part &part : parts) {
      if (part.activation) part.activation.erase();
      part.op->erase();
    }
    return success();
  }
};

}  // namespace
