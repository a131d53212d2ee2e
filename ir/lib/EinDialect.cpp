#include "ein/IR/EinDialect.h"

#include "ein/IR/Equations.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace ein::ir;

#include "ein/IR/EinOpsDialect.cpp.inc"
#include "ein/IR/EinOpsEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "ein/IR/EinOpsAttrs.cpp.inc"
#define GET_OP_CLASSES
#include "ein/IR/EinOps.cpp.inc"

void EinDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ein/IR/EinOpsAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ein/IR/EinOps.cpp.inc"
      >();
}

namespace {

ein::Shape shapeOf(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return ein::Shape(type.getShape().begin(), type.getShape().end());
}

ein::Shape shapeOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return ein::Shape(tensor.getShape().begin(), tensor.getShape().end());
}

// Checks that `op`'s single result has `expected` shape and `elementType`.
LogicalResult verifyResult(Operation *op, const ein::Shape &expected, Type elementType) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  if (shapeOf(type) != expected)
    return op->emitOpError() << "result shape " << ein::formatShape(shapeOf(type)) << " should be "
                             << ein::formatShape(expected);
  if (type.getElementType() != elementType)
    return op->emitOpError() << "result element type " << type.getElementType() << " should be " << elementType;
  return success();
}

template <typename T>
LogicalResult checkEquation(Operation *op, const ein::EquationResult<T> &result) {
  if (ein::failed(result)) return op->emitOpError() << std::get<ein::EquationError>(result).message;
  return success();
}

Type elementTypeOf(Value value) { return cast<RankedTensorType>(value.getType()).getElementType(); }


}  // namespace

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult EinsumOp::verify() {
  std::vector<int64_t> ranks;
  std::vector<ein::Shape> shapes;
  Type elementType;
  for (Value input : getInputs()) {
    shapes.push_back(shapeOf(input));
    ranks.push_back(static_cast<int64_t>(shapes.back().size()));
    if (!elementType) elementType = elementTypeOf(input);
    if (elementTypeOf(input) != elementType)
      return emitOpError() << "operands have different element types";
  }
  if (getInputs().empty()) return emitOpError() << "needs at least one operand";
  auto equation = ein::EinsumEquation::parse(getEquation(), ranks, /*canonical=*/true);
  if (failed(checkEquation(*this, equation))) return failure();
  const auto &parsed = std::get<ein::EinsumEquation>(equation);
  if (parsed.str() != getEquation())
    return emitOpError() << "equation is not canonical: expected \"" << parsed.str() << "\"";
  auto shape = parsed.inferShape(shapes);
  if (failed(checkEquation(*this, shape))) return failure();
  return verifyResult(*this, std::get<ein::Shape>(shape), elementType);
}

std::map<std::string, int64_t> RearrangeOp::getSizeMap() {
  std::map<std::string, int64_t> sizes;
  for (NamedAttribute entry : getSizes())
    if (auto size = dyn_cast<IntegerAttr>(entry.getValue())) sizes[entry.getName().str()] = size.getInt();
  return sizes;
}

LogicalResult RearrangeOp::verify() {
  for (NamedAttribute entry : getSizes())
    if (!isa<IntegerAttr>(entry.getValue()))
      return emitOpError() << "size of axis '" << entry.getName().str() << "' is not an integer";
  ein::EinopsKind kind = ein::EinopsKind::Rearrange;
  if (getReduction()) kind = ein::EinopsKind::Reduce;
  auto plan = ein::planEinops(kind, getPattern(), shapeOf(getInput()), getSizeMap());
  // A pattern with new axes on the right is einops.repeat.
  if (ein::failed(plan) && !getReduction())
    if (auto repeat = ein::planEinops(ein::EinopsKind::Repeat, getPattern(), shapeOf(getInput()), getSizeMap());
        !ein::failed(repeat))
      plan = repeat;
  if (failed(checkEquation(*this, plan))) return failure();
  return verifyResult(*this, std::get<ein::EinopsPlan>(plan).resultShape, elementTypeOf(getInput()));
}

LogicalResult SliceOp::verify() {
  ein::Shape input = shapeOf(getInput());
  size_t rank = input.size();
  if (getOffsets().size() != rank || getSizes().size() != rank)
    return emitOpError() << "needs an offset and a size for each of the " << rank << " axes";
  for (size_t i = 0; i < rank; ++i)
    if (getOffsets()[i] < 0 || getSizes()[i] < 0 || getOffsets()[i] + getSizes()[i] > input[i])
      return emitOpError() << "axis " << i << " takes [" << getOffsets()[i] << ", "
                           << getOffsets()[i] + getSizes()[i] << ") of " << input[i] << " elements";
  ein::Shape expected;
  for (size_t i = 0; i < rank; ++i) {
    bool dropped = llvm::is_contained(getDropped(), static_cast<int64_t>(i));
    if (dropped && getSizes()[i] != 1) return emitOpError() << "dropped axis " << i << " must have size 1";
    if (!dropped) expected.push_back(getSizes()[i]);
  }
  return verifyResult(*this, expected, elementTypeOf(getInput()));
}

LogicalResult BinaryOp::verify() {
  if (elementTypeOf(getLhs()) != elementTypeOf(getRhs()))
    return emitOpError() << "operand element types differ: " << elementTypeOf(getLhs()) << " and "
                         << elementTypeOf(getRhs());
  auto shape = ein::broadcastShapes(shapeOf(getLhs()), shapeOf(getRhs()));
  if (failed(checkEquation(*this, shape))) return failure();
  Type elementType = isComparison(getKind()) ? IntegerType::get(getContext(), 1) : elementTypeOf(getLhs());
  return verifyResult(*this, std::get<ein::Shape>(shape), elementType);
}

LogicalResult WhereOp::verify() {
  if (!elementTypeOf(getCondition()).isInteger(1)) return emitOpError() << "condition must be a bool (i1) tensor";
  if (elementTypeOf(getOnTrue()) != elementTypeOf(getOnFalse()))
    return emitOpError() << "branches have different element types";
  auto shape = ein::broadcastShapes(shapeOf(getCondition()), shapeOf(getOnTrue()));
  if (failed(checkEquation(*this, shape))) return failure();
  shape = ein::broadcastShapes(std::get<ein::Shape>(shape), shapeOf(getOnFalse()));
  if (failed(checkEquation(*this, shape))) return failure();
  return verifyResult(*this, std::get<ein::Shape>(shape), elementTypeOf(getOnTrue()));
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = getType().getRank();
  if (getAxisAttr().getInt() < 0 || getAxisAttr().getInt() >= rank)
    return emitOpError() << "axis " << getAxisAttr().getInt() << " is out of range for rank " << rank;
  // f16 and bf16 too: they are storage types the front end keeps until
  // ein-widen-half-floats computes them in f32.
  if (!isa<FloatType>(getType().getElementType())) return emitOpError() << "needs a float tensor";
  return success();
}

LogicalResult ReduceOp::verify() {
  ein::Shape input = shapeOf(getInput());
  int64_t rank = static_cast<int64_t>(input.size());
  std::vector<bool> reduced(rank, false);
  for (int64_t axis : getAxes()) {
    if (axis < 0 || axis >= rank) return emitOpError() << "axis " << axis << " is out of range for rank " << rank;
    if (reduced[axis]) return emitOpError() << "axis " << axis << " is listed twice";
    reduced[axis] = true;
  }
  if (getCorrectionAttr().getInt() < 0) return emitOpError() << "correction must be non-negative";
  ein::Shape expected;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i])
      expected.push_back(input[i]);
    else if (getKeepdim())
      expected.push_back(1);
  }
  return verifyResult(*this, expected, elementTypeOf(getInput()));
}

LogicalResult MatmulOp::verify() {
  ein::Shape lhs = shapeOf(getLhs()), rhs = shapeOf(getRhs());
  if (lhs.empty() || rhs.empty()) return emitOpError() << "operands must not be scalars";
  if (elementTypeOf(getLhs()) != elementTypeOf(getRhs())) return emitOpError() << "operand element types differ";
  // NumPy: a 1-D operand is promoted to a matrix and the added axis removed.
  bool lhsVector = lhs.size() == 1, rhsVector = rhs.size() == 1;
  if (lhsVector) lhs.insert(lhs.begin(), 1);
  if (rhsVector) rhs.push_back(1);
  int64_t inner = lhs.back(), rhsInner = rhs[rhs.size() - 2];
  if (inner != rhsInner)
    return emitOpError() << "inner sizes differ: " << ein::formatShape(shapeOf(getLhs())) << " @ "
                         << ein::formatShape(shapeOf(getRhs()));
  auto batch = ein::broadcastShapes(ein::Shape(lhs.begin(), lhs.end() - 2), ein::Shape(rhs.begin(), rhs.end() - 2));
  if (failed(checkEquation(*this, batch))) return failure();
  ein::Shape expected = std::get<ein::Shape>(batch);
  if (!lhsVector) expected.push_back(lhs[lhs.size() - 2]);
  if (!rhsVector) expected.push_back(rhs.back());
  return verifyResult(*this, expected, elementTypeOf(getLhs()));
}

LogicalResult LinearOp::verify() {
  ein::Shape input = shapeOf(getInput()), weight = shapeOf(getWeight());
  if (input.empty()) return emitOpError() << "input must have at least one axis";
  if (weight.size() != 2) return emitOpError() << "weight must be [out, in], got " << ein::formatShape(weight);
  if (weight[1] != input.back())
    return emitOpError() << "weight " << ein::formatShape(weight) << " takes " << weight[1]
                         << " input features but the input has " << input.back();
  if (getBias() && shapeOf(getBias()) != ein::Shape{weight[0]})
    return emitOpError() << "bias " << ein::formatShape(shapeOf(getBias())) << " should be [" << weight[0] << "]";
  ein::Shape expected = input;
  expected.back() = weight[0];
  return verifyResult(*this, expected, elementTypeOf(getInput()));
}

LogicalResult LayerNormOp::verify() {
  ein::Shape input = shapeOf(getInput());
  if (input.empty()) return emitOpError() << "input must have at least one axis";
  ein::Shape normalized{input.back()};
  if (getResidual() && getResidual().getType() != getInput().getType())
    return emitOpError() << "residual must have the input's type";
  if (getWeight() && shapeOf(getWeight()) != normalized)
    return emitOpError() << "weight should be " << ein::formatShape(normalized);
  if (getBias() && shapeOf(getBias()) != normalized)
    return emitOpError() << "bias should be " << ein::formatShape(normalized);
  return verifyResult(*this, input, elementTypeOf(getInput()));
}

LogicalResult EmbeddingOp::verify() {
  if (!elementTypeOf(getIds()).isSignlessInteger(32) && !elementTypeOf(getIds()).isSignlessInteger(64))
    return emitOpError() << "ids must be i32 or i64";
  ein::Shape table = shapeOf(getTable());
  if (table.size() != 2) return emitOpError() << "table must be [rows, width]";
  ein::Shape expected = shapeOf(getIds());
  expected.push_back(table[1]);
  return verifyResult(*this, expected, elementTypeOf(getTable()));
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty()) return emitOpError() << "needs at least one operand";
  ein::Shape expected = shapeOf(getInputs().front());
  int64_t rank = static_cast<int64_t>(expected.size());
  if (getAxisAttr().getInt() < 0 || getAxisAttr().getInt() >= rank) return emitOpError() << "axis " << getAxisAttr().getInt() << " is out of range";
  for (Value input : getInputs().drop_front()) {
    ein::Shape shape = shapeOf(input);
    if (static_cast<int64_t>(shape.size()) != rank) return emitOpError() << "operands have different ranks";
    for (int64_t i = 0; i < rank; ++i)
      if (i != getAxisAttr().getInt() && shape[i] != expected[i])
        return emitOpError() << "operand shapes " << ein::formatShape(expected) << " and "
                             << ein::formatShape(shape) << " differ outside axis " << getAxisAttr().getInt();
    expected[getAxisAttr().getInt()] += shape[getAxisAttr().getInt()];
  }
  return verifyResult(*this, expected, elementTypeOf(getInputs().front()));
}

namespace {

// Checks the operands of an attention op: q [B.., I, D], k [B.., J, D],
// v [B.., J, E], all f32; a mask broadcastable to [B.., I, J] whose element
// type suits `kind`. Returns [B.., I, E], the result shape.
FailureOr<ein::Shape> verifyAttentionOperands(Operation *op, Value query, Value key, Value value, Value mask,
                                              MaskKind kind) {
  ein::Shape q = shapeOf(query), k = shapeOf(key), v = shapeOf(value);
  if (q.size() < 2 || k.size() != q.size() || v.size() != q.size())
    return op->emitOpError() << "query, key and value must have the same rank, at least 2";
  for (Value operand : {query, key, value})
    if (!elementTypeOf(operand).isF32()) return op->emitOpError() << "query, key and value must be f32";
  size_t rank = q.size();
  ein::Shape batch(q.begin(), q.end() - 2);
  if (ein::Shape(k.begin(), k.end() - 2) != batch || ein::Shape(v.begin(), v.end() - 2) != batch)
    return op->emitOpError() << "batch axes differ: query " << ein::formatShape(q) << ", key "
                             << ein::formatShape(k) << ", value " << ein::formatShape(v);
  if (q[rank - 1] != k[rank - 1])
    return op->emitOpError() << "query and key feature sizes differ: " << q[rank - 1] << " and " << k[rank - 1];
  if (k[rank - 2] != v[rank - 2])
    return op->emitOpError() << "key and value lengths differ: " << k[rank - 2] << " and " << v[rank - 2];
  if (static_cast<bool>(mask) != (kind != MaskKind::none))
    return op->emitOpError() << "mask_kind " << stringifyMaskKind(kind) << (mask ? " with" : " without") << " a mask";
  if (mask) {
    ein::Shape scores = batch;
    scores.push_back(q[rank - 2]);
    scores.push_back(k[rank - 2]);
    auto broadcast = ein::broadcastShapes(shapeOf(mask), scores);
    if (ein::failed(broadcast) || std::get<ein::Shape>(broadcast) != scores)
      return op->emitOpError() << "mask " << ein::formatShape(shapeOf(mask)) << " does not broadcast to the scores "
                               << ein::formatShape(scores);
    bool boolean = elementTypeOf(mask).isInteger(1);
    if (boolean != (kind != MaskKind::add))
      return op->emitOpError() << "a " << stringifyMaskKind(kind) << " mask must be "
                               << (kind == MaskKind::add ? "f32" : "bool");
    if (!boolean && !elementTypeOf(mask).isF32()) return op->emitOpError() << "an add mask must be f32";
  }
  ein::Shape result = batch;
  result.push_back(q[rank - 2]);
  result.push_back(v[rank - 1]);
  return result;
}

}  // namespace

LogicalResult AttentionOp::verify() {
  auto result = verifyAttentionOperands(*this, getQuery(), getKey(), getValue(), getMask(), getMaskKind());
  if (failed(result)) return failure();
  return verifyResult(*this, *result, elementTypeOf(getQuery()));
}

LogicalResult TalkingHeadsAttentionOp::verify() {
  auto result = verifyAttentionOperands(*this, getQuery(), getKey(), getValue(), getMask(), getMaskKind());
  if (failed(result)) return failure();
  ein::Shape q = shapeOf(getQuery());
  if (q.size() < 3) return emitOpError() << "query must have a heads axis before [I, D]";
  int64_t heads = q[q.size() - 3];
  for (auto [name, mix, bias] : {std::tuple("pre", getPreMix(), getPreBias()),
                                 std::tuple("post", getPostMix(), getPostBias())}) {
    if (mix && shapeOf(mix) != ein::Shape{heads, heads})
      return emitOpError() << name << "_mix should be [" << heads << ", " << heads << "], not "
                           << ein::formatShape(shapeOf(mix));
    if (bias && !mix) return emitOpError() << name << "_bias without " << name << "_mix";
    if (bias && shapeOf(bias) != ein::Shape{heads})
      return emitOpError() << name << "_bias should be [" << heads << "], not " << ein::formatShape(shapeOf(bias));
  }
  return verifyResult(*this, *result, elementTypeOf(getQuery()));
}
