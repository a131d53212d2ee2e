// Horizontal GEMM fusion: projections that read the same input (a
// transformer's q/k/v, a SwiGLU's gate and up; `linear(x, w)`, `x @ w` or
// `einsum("s d, h d e -> h s e", x, w)`) become one over their weights
// concatenated along an output axis; each part is a slice of its result,
// which lowering turns into a strided view.
#include "compiler/transforms/ein/passes.hpp"
#include "ir/ein/equations.hpp"
#include "llvm/ADT/MapVector.h"

namespace ein {
#define GEN_PASS_DEF_FUSEPARALLELLINEARS
#include "compiler/transforms/ein/passes.h.inc"
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

// One projection of a group: a linear (weight [n, k], optional bias [n]), a
// matmul by a [k, n] weight or a two-operand einsum with a parameter, and the
// activation that would be its GEMM's epilogue (fused along with it), if any.
struct Part {
  Operation *op;
  Value input, weight, bias;
  int64_t outputAxis;  // of the weight, along which the weights concatenate
  int64_t resultAxis;  // the same axis in the result, along which it splits
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

int64_t rankOf(Value value) { return cast<RankedTensorType>(value.getType()).getRank(); }

// A two-operand einsum of an input by a parameter as a projection: the
// weights concatenate along a label of the parameter's that the result keeps
// and the input lacks (an output feature or head axis), the outermost one in
// the result, so that each part is as contiguous a slice as can be.
std::optional<Part> einsumPart(ein::ir::EinsumOp einsum) {
  if (einsum.getInputs().size() != 2) return std::nullopt;
  SmallVector<int64_t> ranks;
  for (Value input : einsum.getInputs()) ranks.push_back(rankOf(input));
  auto parsed = ein::EinsumEquation::parse(einsum.getEquation().str(), {ranks.begin(), ranks.end()}, true);
  if (ein::failed(parsed)) return std::nullopt;
  const ein::EinsumEquation &equation = std::get<ein::EinsumEquation>(parsed);
  for (int weightOperand : {1, 0}) {
    Value weight = einsum.getInputs()[weightOperand], input = einsum.getInputs()[1 - weightOperand];
    if (!paramOf(weight, rankOf(weight)) || paramOf(input, rankOf(input))) continue;
    const std::vector<std::string> &weightLabels = equation.inputs[weightOperand];
    const std::vector<std::string> &inputLabels = equation.inputs[1 - weightOperand];
    std::optional<Part> best;
    for (auto [axis, label] : llvm::enumerate(weightLabels)) {
      if (llvm::count(weightLabels, label) != 1 || llvm::is_contained(inputLabels, label)) continue;
      auto inResult = llvm::find(equation.output, label);
      if (inResult == equation.output.end()) continue;
      const int64_t resultAxis = inResult - equation.output.begin();
      if (!best || resultAxis < best->resultAxis)
        best = Part{einsum, input, weight, Value(), static_cast<int64_t>(axis), resultAxis, UnaryOp()};
    }
    return best;
  }
  return std::nullopt;
}

// `op` as a projection by parameters, if it is one.
std::optional<Part> partOf(Operation *op) {
  std::optional<Part> part;
  if (auto linear = dyn_cast<LinearOp>(op)) {
    const int64_t last = rankOf(linear.getResult()) - 1;
    part = Part{op, linear.getInput(), linear.getWeight(), linear.getBias(), 0, last, UnaryOp()};
    if (part->bias && !paramOf(part->bias, 1)) return std::nullopt;
  } else if (auto matmul = dyn_cast<ein::ir::MatmulOp>(op)) {
    if (rankOf(matmul.getLhs()) < 1) return std::nullopt;
    part = Part{op, matmul.getLhs(), matmul.getRhs(), Value(), 1, rankOf(matmul.getResult()) - 1, UnaryOp()};
  } else if (auto einsum = dyn_cast<ein::ir::EinsumOp>(op)) {
    part = einsumPart(einsum);
  }
  // (An einsum's weight is a parameter of any rank already.)
  if (!part || (!isa<ein::ir::EinsumOp>(op) && !paramOf(part->weight, 2)) || failed(findEpilogue(*part)))
    return std::nullopt;
  return part;
}

// The weight's type with its concatenated axis as 1: parts whose weights
// agree on every other axis (and on the element type) can concatenate.
Type weightTypeApartFromOutputs(const Part &part) {
  auto type = cast<RankedTensorType>(part.weight.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[static_cast<size_t>(part.outputAxis)] = 1;
  return RankedTensorType::get(shape, type.getElementType());
}

struct FuseParallelLinearsPass : ein::impl::FuseParallelLinearsBase<FuseParallelLinearsPass> {
  void runOnOperation() override {
    // Groups by input, op (and einsum equation), weight and bias types,
    // concatenated axis and epilogue, in block order.
    using Key = std::tuple<Value, OperationName, Attribute, Type, Type, int64_t, int64_t, int>;
    llvm::MapVector<Key, SmallVector<Part>> groups;
    getOperation().walk([&](Operation *op) {
      std::optional<Part> part = partOf(op);
      if (!part) return;
      auto einsum = dyn_cast<ein::ir::EinsumOp>(op);
      Type biasType = part->bias ? part->bias.getType() : Type();
      int activation = part->activation ? static_cast<int>(part->activation.getKind()) : -1;
      groups[Key{part->input, op->getName(), einsum ? einsum.getEquationAttr() : Attribute(),
                 weightTypeApartFromOutputs(*part),
                 biasType ? cast<RankedTensorType>(biasType).getElementType() : Type(), part->outputAxis,
                 einsum && einsum.getInputs()[0] == part->weight ? 0 : 1, activation}]
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
    // The parts' locations; the input they share stays its own op.
    Location loc = builder.getFusedLoc(locations, builder.getArrayAttr({builder.getStringAttr(getArgument())}));
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
    } else if (auto einsum = dyn_cast<ein::ir::EinsumOp>(first)) {
      // The input as it is now (as above), the weight in its operand's place.
      SmallVector<Value> operands(einsum.getInputs());
      operands[operands[0] == parts.front().weight ? 0 : 1] = *weight;
      auto type = ein::ir::EinsumOp::inferResultType(einsum.getEquation(), ValueRange(operands).getTypes());
      if (ein::failed(type)) return first->emitOpError() << "cannot fuse with the projections that share its input";
      fused = builder.create<ein::ir::EinsumOp>(loc, std::get<RankedTensorType>(type), einsum.getEquationAttr(),
                                                operands);
    } else {
      auto type = ein::ir::MatmulOp::inferResultType(input.getType(), weight->getType());
      if (ein::failed(type)) return first->emitOpError() << "cannot fuse with the projections that share its input";
      fused = builder.create<ein::ir::MatmulOp>(loc, std::get<RankedTensorType>(type), input, *weight);
    }
    if (UnaryOp activation = parts.front().activation)
      fused = builder.create<UnaryOp>(loc, fused.getType(), activation.getKindAttr(), fused);

    // Each part is its columns of the fused result.
    Shape shape = ein::ir::shapeOf(fused.getType());
    const auto axis = static_cast<size_t>(parts.front().resultAxis);
    int64_t offset = 0;
    for (Part &part : parts) {
      Value result = part.result();
      Shape offsets(shape.size(), ein::Size(0)), sizes = shape;
      offsets[axis] = offset;
      sizes[axis] = ein::ir::shapeOf(result.getType())[axis];
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
