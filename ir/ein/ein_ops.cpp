// The ein ops' shape rules: each op's result type inferred from its operands
// (inferResultType / inferReturnTypes) and its verifier, which checks the
// declared type against that rule. The dialect and its attributes are in
// ein_dialect.cpp.
#include "ir/ein/ein_dialect.hpp"

#include <cmath>

#include "ir/ein/equations.hpp"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;
using namespace ein::ir;

namespace {

Type elementTypeOf(Type type) { return cast<RankedTensorType>(type).getElementType(); }

using TypeResult = ein::EquationResult<RankedTensorType>;

// An optional operand's type; null where it is absent.
Type typeOrNull(Value value) { return value ? value.getType() : Type(); }

// A rule's verdict that the operands admit no result, its message streamed
// together from `parts` (types print as in the IR).
}  // namespace

namespace ein {
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const Size &size) { return os << size.str(); }
}  // namespace ein

namespace {

template <typename... Parts>
ein::EquationError error(const Parts &...parts) {
  std::string message;
  llvm::raw_string_ostream os(message);
  (os << ... << parts);
  return ein::EquationError{message};
}

template <typename T>
ein::EquationError errorOf(const ein::EquationResult<T> &result) {
  return std::get<ein::EquationError>(result);
}

RankedTensorType tensorType(const ein::Shape &shape, Type elementType) { return sizedTensorType(shape, elementType); }

// Checks `op` against its shape rule's verdict: the rule's message when the
// operands admit no result, else that the result has the inferred shape and
// element type (said in shapes, more readable than the interface's generic
// "incompatible" message, which comes after this and so never fires).
LogicalResult verifyInferred(Operation *op, const TypeResult &inferred) {
  if (ein::failed(inferred)) return op->emitOpError() << errorOf(inferred).message;
  auto expected = std::get<RankedTensorType>(inferred);
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  if (shapeOf(type) != shapeOf(expected))
    return op->emitOpError() << "result shape " << ein::formatShape(shapeOf(type)) << " should be "
                             << ein::formatShape(shapeOf(expected));
  if (type.getElementType() != expected.getElementType())
    return op->emitOpError() << "result element type " << type.getElementType() << " should be "
                             << expected.getElementType();
  return success();
}

// inferReturnTypes through the shape rule; a failure is reported as the
// verifier would report it.
LogicalResult inferFrom(std::optional<Location> location, llvm::StringRef opName, const TypeResult &inferred,
                        SmallVectorImpl<Type> &types) {
  if (ein::failed(inferred))
    return emitOptionalError(location, "'", opName, "' op ", errorOf(inferred).message);
  types.push_back(std::get<RankedTensorType>(inferred));
  return success();
}

// Keyword sizes: an integer, or a size over ranged dims (#ein.sizes of one).
std::map<std::string, ein::Size> sizeMap(DictionaryAttr sizes) {
  std::map<std::string, ein::Size> map;
  for (NamedAttribute entry : sizes) {
    if (auto size = dyn_cast<IntegerAttr>(entry.getValue())) map[entry.getName().str()] = size.getInt();
    if (auto size = dyn_cast<SizesAttr>(entry.getValue()); size && size.sizes().size() == 1)
      map[entry.getName().str()] = size.sizes()[0];
  }
  return map;
}

}  // namespace

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

TypeResult EinsumOp::inferResultType(llvm::StringRef equation, TypeRange inputs) {
  std::vector<int64_t> ranks;
  std::vector<ein::Shape> shapes;
  Type elementType;
  for (Type input : inputs) {
    shapes.push_back(shapeOf(input));
    ranks.push_back(static_cast<int64_t>(shapes.back().size()));
    if (!elementType) elementType = elementTypeOf(input);
    if (elementTypeOf(input) != elementType) return error("operands have different element types");
  }
  if (inputs.empty()) return error("needs at least one operand");
  auto parsed = ein::EinsumEquation::parse(equation.str(), ranks, /*canonical=*/true);
  if (ein::failed(parsed)) return errorOf(parsed);
  const auto &canonical = std::get<ein::EinsumEquation>(parsed);
  if (canonical.str() != equation) return error("equation is not canonical: expected \"", canonical.str(), "\"");
  auto shape = canonical.inferShape(shapes);
  if (ein::failed(shape)) return errorOf(shape);
  return tensorType(std::get<ein::Shape>(shape), elementType);
}

LogicalResult EinsumOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(), inferResultType(adaptor.getEquation(), adaptor.getInputs().getTypes()),
                   types);
}

// Bound values have exactly the parameter's type: a pass that changes one
// (ein-widen-half-floats) changes the other.
LogicalResult ParamOp::verify() {
  if (ElementsAttr value = getValueAttr(); value && value.getType() != getType())
    return emitOpError() << "value of type " << value.getType() << " for a parameter of type " << getType();
  return success();
}

namespace {
// The maker of a parameter's values bound on demand, or null.
std::function<FailureOr<AsmResourceBlob>()> *valueMaker(ParamOp param, DenseResourceElementsAttr resource) {
  auto &makers = param->getContext()->getOrLoadDialect<EinDialect>()->valueMakers;
  auto found = makers.find(resource.getRawHandle().getKey());
  return found == makers.end() ? nullptr : &found->second;
}
}  // namespace

void ParamOp::bindOnDemand(std::function<FailureOr<AsmResourceBlob>()> make) {
  auto &manager = DenseResourceElementsHandle::getManagerInterface(getContext());
  DenseResourceElementsHandle handle = manager.insert(getName());  // no blob yet
  getContext()->getOrLoadDialect<EinDialect>()->valueMakers[handle.getKey()] = std::move(make);
  setValueAttr(DenseResourceElementsAttr::get(getType(), handle));
}

ArrayRef<char> ParamOp::getBoundBytes() {
  auto resource = llvm::dyn_cast_or_null<DenseResourceElementsAttr>(getValueAttr());
  if (!resource) return {};
  AsmResourceBlob *blob = resource.getRawHandle().getBlob();
  if ((!blob || blob->getData().empty()) && resource.getNumElements() > 0) {
    auto *make = valueMaker(*this, resource);
    if (!make) return {};
    FailureOr<AsmResourceBlob> made = (*make)();
    if (failed(made)) return {};
    resource.getRawHandle().getResource()->setBlob(std::move(*made));
    blob = resource.getRawHandle().getBlob();
  }
  return blob ? blob->getData() : ArrayRef<char>();
}

void ParamOp::releaseValues() {
  auto resource = llvm::dyn_cast_or_null<DenseResourceElementsAttr>(getValueAttr());
  if (resource && valueMaker(*this, resource)) resource.getRawHandle().getResource()->setBlob(AsmResourceBlob());
}

LogicalResult EinsumOp::verify() { return verifyInferred(*this, inferResultType(getEquation(), getInputs().getTypes())); }

std::map<std::string, ein::Size> RearrangeOp::getSizeMap() { return sizeMap(getSizes()); }

TypeResult RearrangeOp::inferResultType(Type input, llvm::StringRef pattern, DictionaryAttr sizes, bool reduction) {
  for (NamedAttribute entry : sizes) {
    auto symbolic = dyn_cast<SizesAttr>(entry.getValue());
    if (!isa<IntegerAttr>(entry.getValue()) && !(symbolic && symbolic.sizes().size() == 1))
      return error("size of axis '", entry.getName().str(), "' is not an integer or one #ein.sizes");
  }
  ein::EinopsKind kind = reduction ? ein::EinopsKind::Reduce : ein::EinopsKind::Rearrange;
  auto plan = ein::planEinops(kind, pattern, shapeOf(input), sizeMap(sizes));
  // A pattern with new axes on the right is einops.repeat.
  if (ein::failed(plan) && !reduction)
    if (auto repeat = ein::planEinops(ein::EinopsKind::Repeat, pattern, shapeOf(input), sizeMap(sizes));
        !ein::failed(repeat))
      plan = repeat;
  if (ein::failed(plan)) return errorOf(plan);
  return tensorType(std::get<ein::EinopsPlan>(plan).resultShape, elementTypeOf(input));
}

LogicalResult RearrangeOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getInput().getType(), adaptor.getPattern(), adaptor.getSizes(),
                                   adaptor.getReduction().has_value()),
                   types);
}

LogicalResult RearrangeOp::verify() {
  return verifyInferred(*this, inferResultType(getInput().getType(), getPattern(), getSizes(), getReduction().has_value()));
}

TypeResult SliceOp::inferResultType(Type inputType, const ein::Shape &offsets, const ein::Shape &sizes,
                                    llvm::ArrayRef<int64_t> dropped, llvm::ArrayRef<int64_t> steps) {
  ein::Shape input = shapeOf(inputType);
  size_t rank = input.size();
  if (offsets.size() != rank || sizes.size() != rank)
    return error("needs an offset and a size for each of the ", rank, " axes");
  if (!steps.empty() && steps.size() != rank) return error("needs a step for each of the ", rank, " axes, or none");
  for (size_t i = 0; i < rank; ++i) {
    int64_t step = steps.empty() ? 1 : steps[i];
    if (step < 1) return error("axis ", i, " has step ", step, "; steps are positive");
    if (sizes[i] == 0) continue;
    // The last element taken, offset + (size - 1) * step, must lie inside the
    // axis. Where that depends on the dims, the front end checks it at run time.
    std::optional<int64_t> offset = offsets[i].constant(), size = sizes[i].constant();
    std::optional<int64_t> slack = (input[i] - 1 - offsets[i] - (sizes[i] - 1) * step).constant();
    bool negative = (offset && *offset < 0) || (size && *size < 0);
    if (negative || (slack && *slack < 0))
      return error("axis ", i, " takes ", sizes[i], " elements from ", offsets[i], " in steps of ", step, " out of ",
                   input[i]);
  }
  ein::Shape expected;
  for (size_t i = 0; i < rank; ++i) {
    bool isDropped = llvm::is_contained(dropped, static_cast<int64_t>(i));
    if (isDropped && sizes[i] != 1) return error("dropped axis ", i, " must have size 1");
    if (!isDropped) expected.push_back(sizes[i]);
  }
  return tensorType(expected, elementTypeOf(inputType));
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getInput().getType(), adaptor.getOffsets().sizes(), adaptor.getSizes().sizes(),
                                   adaptor.getDropped(), adaptor.getSteps()),
                   types);
}

LogicalResult SliceOp::verify() {
  return verifyInferred(*this,
                        inferResultType(getInput().getType(), getOffsets().sizes(), getSizes().sizes(), getDropped(), getSteps()));
}

TypeResult WindowsOp::inferResultType(Type inputType, llvm::ArrayRef<int64_t> window, llvm::ArrayRef<int64_t> strides,
                                      llvm::ArrayRef<int64_t> dilations) {
  ein::Shape input = shapeOf(inputType);
  const size_t n = window.size();
  if (n == 0 || n > input.size())
    return error("takes windows over 1 to ", input.size(), " trailing axes, not ", n);
  if (strides.size() != n || dilations.size() != n)
    return error("needs a stride and a dilation for each of the ", n, " window axes");
  ein::Shape result(input.begin(), input.end() - static_cast<std::ptrdiff_t>(n));
  for (size_t i = 0; i < n; ++i) {
    if (window[i] < 1 || strides[i] < 1 || dilations[i] < 1)
      return error("window axis ", i, " has window ", window[i], ", stride ", strides[i], " and dilation ",
                   dilations[i], "; each must be positive");
    const ein::Size &size = input[input.size() - n + i];
    // Where whether one window fits depends on the dims, the front end checks it at run time.
    if (std::optional<int64_t> slack = (size - span(window[i], dilations[i])).constant(); slack && *slack < 0)
      return error("window axis ", i, " spans ", span(window[i], dilations[i]), " elements of an axis of ", size);
    result.push_back(ein::Size::floorDiv(size - span(window[i], dilations[i]), strides[i]) + 1);
  }
  for (int64_t w : window) result.push_back(w);
  return tensorType(result, elementTypeOf(inputType));
}

LogicalResult WindowsOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getInput().getType(), adaptor.getWindow(), adaptor.getStrides(),
                                   adaptor.getDilations()),
                   types);
}

LogicalResult WindowsOp::verify() {
  return verifyInferred(*this, inferResultType(getInput().getType(), getWindow(), getStrides(), getDilations()));
}

TypeResult BinaryOp::inferResultType(BinaryKind kind, Type lhs, Type rhs) {
  if (elementTypeOf(lhs) != elementTypeOf(rhs))
    return error("operand element types differ: ", elementTypeOf(lhs), " and ", elementTypeOf(rhs));
  auto shape = ein::broadcastShapes(shapeOf(lhs), shapeOf(rhs));
  if (ein::failed(shape)) return errorOf(shape);
  Type elementType = isComparison(kind) ? IntegerType::get(lhs.getContext(), 1) : elementTypeOf(lhs);
  return tensorType(std::get<ein::Shape>(shape), elementType);
}

LogicalResult BinaryOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getKind(), adaptor.getLhs().getType(), adaptor.getRhs().getType()), types);
}

LogicalResult BinaryOp::verify() {
  return verifyInferred(*this, inferResultType(getKind(), getLhs().getType(), getRhs().getType()));
}

TypeResult WhereOp::inferResultType(Type condition, Type onTrue, Type onFalse) {
  if (!elementTypeOf(condition).isInteger(1)) return error("condition must be a bool (i1) tensor");
  if (elementTypeOf(onTrue) != elementTypeOf(onFalse)) return error("branches have different element types");
  auto shape = ein::broadcastShapes(shapeOf(condition), shapeOf(onTrue));
  if (ein::failed(shape)) return errorOf(shape);
  shape = ein::broadcastShapes(std::get<ein::Shape>(shape), shapeOf(onFalse));
  if (ein::failed(shape)) return errorOf(shape);
  return tensorType(std::get<ein::Shape>(shape), elementTypeOf(onTrue));
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getCondition().getType(), adaptor.getOnTrue().getType(),
                                   adaptor.getOnFalse().getType()),
                   types);
}

LogicalResult WhereOp::verify() {
  return verifyInferred(*this,
                        inferResultType(getCondition().getType(), getOnTrue().getType(), getOnFalse().getType()));
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

TypeResult ReduceOp::inferResultType(Type inputType, llvm::ArrayRef<int64_t> axes, bool keepdim, int64_t correction) {
  ein::Shape input = shapeOf(inputType);
  int64_t rank = static_cast<int64_t>(input.size());
  std::vector<bool> reduced(rank, false);
  for (int64_t axis : axes) {
    if (axis < 0 || axis >= rank) return error("axis ", axis, " is out of range for rank ", rank);
    if (reduced[axis]) return error("axis ", axis, " is listed twice");
    reduced[axis] = true;
  }
  if (correction < 0) return error("correction must be non-negative");
  ein::Shape expected;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i])
      expected.push_back(input[i]);
    else if (keepdim)
      expected.push_back(1);
  }
  return tensorType(expected, elementTypeOf(inputType));
}

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getInput().getType(), adaptor.getAxes(), adaptor.getKeepdim(),
                                   adaptor.getCorrection()),
                   types);
}

LogicalResult ReduceOp::verify() {
  return verifyInferred(*this, inferResultType(getInput().getType(), getAxes(), getKeepdim(), getCorrection()));
}

TypeResult MatmulOp::inferResultType(Type lhsType, Type rhsType) {
  ein::Shape lhs = shapeOf(lhsType), rhs = shapeOf(rhsType);
  if (lhs.empty() || rhs.empty()) return error("operands must not be scalars");
  if (elementTypeOf(lhsType) != elementTypeOf(rhsType)) return error("operand element types differ");
  // NumPy: a 1-D operand is promoted to a matrix and the added axis removed.
  bool lhsVector = lhs.size() == 1, rhsVector = rhs.size() == 1;
  if (lhsVector) lhs.insert(lhs.begin(), 1);
  if (rhsVector) rhs.push_back(1);
  ein::Size inner = lhs.back(), rhsInner = rhs[rhs.size() - 2];
  if (inner != rhsInner)
    return error("inner sizes differ: ", ein::formatShape(shapeOf(lhsType)), " @ ", ein::formatShape(shapeOf(rhsType)),
                 " (", inner, " vs ", rhsInner, ")");
  auto batch = ein::broadcastShapes(ein::Shape(lhs.begin(), lhs.end() - 2), ein::Shape(rhs.begin(), rhs.end() - 2));
  if (ein::failed(batch)) return error("batch axes: ", errorOf(batch).message);
  ein::Shape expected = std::get<ein::Shape>(batch);
  if (!lhsVector) expected.push_back(lhs[lhs.size() - 2]);
  if (!rhsVector) expected.push_back(rhs.back());
  return tensorType(expected, elementTypeOf(lhsType));
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getLhs().getType(), adaptor.getRhs().getType()), types);
}

LogicalResult MatmulOp::verify() { return verifyInferred(*this, inferResultType(getLhs().getType(), getRhs().getType())); }

TypeResult LinearOp::inferResultType(Type inputType, Type weightType, Type biasType) {
  ein::Shape input = shapeOf(inputType), weight = shapeOf(weightType);
  if (input.empty()) return error("input must have at least one axis");
  if (weight.size() != 2) return error("weight must be [out, in], got ", ein::formatShape(weight));
  if (weight[1] != input.back())
    return error("weight ", ein::formatShape(weight), " takes ", weight[1], " input features but the input has ",
                 input.back());
  if (biasType && shapeOf(biasType) != ein::Shape{weight[0]})
    return error("bias ", ein::formatShape(shapeOf(biasType)), " should be [", weight[0], "]");
  ein::Shape expected = input;
  expected.back() = weight[0];
  return tensorType(expected, elementTypeOf(inputType));
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getInput().getType(), adaptor.getWeight().getType(),
                                   typeOrNull(adaptor.getBias())),
                   types);
}

LogicalResult LinearOp::verify() {
  return verifyInferred(*this, inferResultType(getInput().getType(), getWeight().getType(), typeOrNull(getBias())));
}

TypeResult LayerNormOp::inferResultType(Type inputType, Type residual, Type weight, Type bias) {
  ein::Shape input = shapeOf(inputType);
  if (input.empty()) return error("input must have at least one axis");
  ein::Shape normalized{input.back()};
  if (residual && residual != inputType) return error("residual must have the input's type");
  if (weight && shapeOf(weight) != normalized) return error("weight should be ", ein::formatShape(normalized));
  if (bias && shapeOf(bias) != normalized) return error("bias should be ", ein::formatShape(normalized));
  return tensorType(input, elementTypeOf(inputType));
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getInput().getType(), typeOrNull(adaptor.getResidual()),
                                   typeOrNull(adaptor.getWeight()), typeOrNull(adaptor.getBias())),
                   types);
}

LogicalResult LayerNormOp::verify() {
  if (getVariant() == LayerNormVariant::rms && getBias()) return emitOpError() << "variant rms takes no bias";
  return verifyInferred(*this, inferResultType(getInput().getType(), typeOrNull(getResidual()),
                                               typeOrNull(getWeight()), typeOrNull(getBias())));
}

TypeResult EmbeddingOp::inferResultType(Type ids, Type table) {
  if (!elementTypeOf(ids).isSignlessInteger(32) && !elementTypeOf(ids).isSignlessInteger(64))
    return error("ids must be i32 or i64");
  if (shapeOf(table).size() != 2) return error("table must be [rows, width]");
  ein::Shape expected = shapeOf(ids);
  expected.push_back(shapeOf(table)[1]);
  return tensorType(expected, elementTypeOf(table));
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getIds().getType(), adaptor.getTable().getType()), types);
}

LogicalResult EmbeddingOp::verify() {
  return verifyInferred(*this, inferResultType(getIds().getType(), getTable().getType()));
}

TypeResult ConcatOp::inferResultType(TypeRange inputs, int64_t axis) {
  if (inputs.empty()) return error("needs at least one operand");
  ein::Shape expected = shapeOf(inputs.front());
  int64_t rank = static_cast<int64_t>(expected.size());
  if (axis < 0 || axis >= rank) return error("axis ", axis, " is out of range");
  for (Type input : inputs.drop_front()) {
    ein::Shape shape = shapeOf(input);
    if (static_cast<int64_t>(shape.size()) != rank) return error("operands have different ranks");
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis && shape[i] != expected[i])
        return error("operand shapes ", ein::formatShape(expected), " and ", ein::formatShape(shape),
                     " differ outside axis ", axis);
    expected[axis] += shape[axis];
  }
  return tensorType(expected, elementTypeOf(inputs.front()));
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getInputs().getTypes(), adaptor.getAxis()), types);
}

LogicalResult AppendOp::verify() {
  auto state = cast<RankedTensorType>(getState().getType()), x = cast<RankedTensorType>(getX().getType());
  if (!getState().getDefiningOp<StateOp>()) return emitOpError() << "appends to an ein.state only";
  if (state.getElementType() != x.getElementType() || state.getRank() != x.getRank())
    return emitOpError() << "x " << x << " does not match the state " << state;
  int64_t axis = getAxis();
  if (axis < 0 || axis >= state.getRank()) return emitOpError() << "axis " << axis << " is out of range";
  if (getOffset().sizes().size() != 1) return emitOpError() << "offset must be one size";
  if (getFirstRun() && getOffset().sizes()[0] != ein::Size(0))
    return emitOpError() << "writes at a sequence's first run (first_run) from row 0: its offset must be 0";
  ein::Shape stateShape = shapeOf(state), xShape = shapeOf(x), expected = stateShape;
  for (int64_t d = 0; d < state.getRank(); ++d)
    if (d != axis && xShape[d] != stateShape[d])
      return emitOpError() << "x " << ein::formatShape(xShape) << " differs from the state "
                           << ein::formatShape(stateShape) << " outside axis " << axis;
  expected[axis] = getOffset().sizes()[0] + xShape[axis];
  if (shapeOf(getType()) != expected || getType().getElementType() != state.getElementType())
    return emitOpError() << "result must be " << ein::formatShape(expected);
  return success();
}

LogicalResult ConcatOp::verify() { return verifyInferred(*this, inferResultType(getInputs().getTypes(), getAxis())); }

namespace {

// The rule of both attention ops: q [B.., I, D], k [B.., J, D], v [B.., J, E],
// all f32; a mask broadcastable to [B.., I, J] whose element type suits
// `kind`. The result is [B.., I, E].
TypeResult attentionResultType(Type query, Type key, Type value, Type mask, MaskKind kind) {
  ein::Shape q = shapeOf(query), k = shapeOf(key), v = shapeOf(value);
  if (q.size() < 2 || k.size() != q.size() || v.size() != q.size())
    return error("query, key and value must have the same rank, at least 2");
  for (Type operand : {query, key, value})
    if (!elementTypeOf(operand).isF32()) return error("query, key and value must be f32");
  size_t rank = q.size();
  ein::Shape batch(q.begin(), q.end() - 2);
  if (ein::Shape(k.begin(), k.end() - 2) != batch || ein::Shape(v.begin(), v.end() - 2) != batch)
    return error("batch axes differ: query ", ein::formatShape(q), ", key ", ein::formatShape(k), ", value ",
                 ein::formatShape(v));
  if (q[rank - 1] != k[rank - 1])
    return error("query and key feature sizes differ: ", q[rank - 1], " and ", k[rank - 1]);
  if (k[rank - 2] != v[rank - 2]) return error("key and value lengths differ: ", k[rank - 2], " and ", v[rank - 2]);
  if (static_cast<bool>(mask) != (kind != MaskKind::none))
    return error("mask_kind ", stringifyMaskKind(kind), mask ? " with" : " without", " a mask");
  if (mask) {
    ein::Shape scores = batch;
    scores.push_back(q[rank - 2]);
    scores.push_back(k[rank - 2]);
    auto broadcast = ein::broadcastShapes(shapeOf(mask), scores);
    if (ein::failed(broadcast) || std::get<ein::Shape>(broadcast) != scores)
      return error("mask ", ein::formatShape(shapeOf(mask)), " does not broadcast to the scores ",
                   ein::formatShape(scores));
    bool boolean = elementTypeOf(mask).isInteger(1);
    if (boolean != (kind != MaskKind::add))
      return error("a ", stringifyMaskKind(kind), " mask must be ", kind == MaskKind::add ? "f32" : "bool");
    if (!boolean && !elementTypeOf(mask).isF32()) return error("an add mask must be f32");
  }
  ein::Shape result = batch;
  result.push_back(q[rank - 2]);
  result.push_back(v[rank - 1]);
  return tensorType(result, elementTypeOf(query));
}

}  // namespace

TypeResult AttentionOp::inferResultType(Type query, Type key, Type value, Type mask, MaskKind maskKind) {
  return attentionResultType(query, key, value, mask, maskKind);
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> location, Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getQuery().getType(), adaptor.getKey().getType(),
                                   adaptor.getValue().getType(), typeOrNull(adaptor.getMask()),
                                   adaptor.getMaskKind()),
                   types);
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyInferred(*this, inferResultType(getQuery().getType(), getKey().getType(), getValue().getType(),
                                                   typeOrNull(getMask()), getMaskKind()))))
    return failure();
  if (auto causal = getCausalPositions()) {
    if (causal->sizes().size() != 1) return emitOpError() << "causal_positions must be one size";
    ein::Shape q = shapeOf(getQuery().getType());
    std::optional<int64_t> positions = causal->sizes()[0].constant(), queries = q[q.size() - 2].constant();
    if (positions && (*positions < 1 || (queries && *queries % *positions != 0)))
      return emitOpError() << "causal_positions " << *positions << " must be positive and divide the "
                           << q[q.size() - 2].str() << " queries";
  }
  if (const double softcap = getSoftcap().convertToDouble(); !(softcap >= 0.0) || std::isinf(softcap))
    return emitOpError() << "softcap " << softcap << " must be 0 (none) or a positive number";
  return success();
}

TypeResult TalkingHeadsAttentionOp::inferResultType(Type query, Type key, Type value, Type preMix, Type preBias,
                                                    Type postMix, Type postBias, Type mask, MaskKind maskKind) {
  TypeResult result = attentionResultType(query, key, value, mask, maskKind);
  if (ein::failed(result)) return result;
  ein::Shape q = shapeOf(query);
  if (q.size() < 3) return error("query must have a heads axis before [I, D]");
  ein::Size heads = q[q.size() - 3];
  for (auto [name, mix, bias] : {std::tuple("pre", preMix, preBias), std::tuple("post", postMix, postBias)}) {
    if (mix && shapeOf(mix) != ein::Shape{heads, heads})
      return error(name, "_mix should be [", heads, ", ", heads, "], not ", ein::formatShape(shapeOf(mix)));
    if (bias && !mix) return error(name, "_bias without ", name, "_mix");
    if (bias && shapeOf(bias) != ein::Shape{heads})
      return error(name, "_bias should be [", heads, "], not ", ein::formatShape(shapeOf(bias)));
  }
  return result;
}

LogicalResult TalkingHeadsAttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferFrom(location, getOperationName(),
                   inferResultType(adaptor.getQuery().getType(), adaptor.getKey().getType(),
                                   adaptor.getValue().getType(), typeOrNull(adaptor.getPreMix()),
                                   typeOrNull(adaptor.getPreBias()), typeOrNull(adaptor.getPostMix()),
                                   typeOrNull(adaptor.getPostBias()), typeOrNull(adaptor.getMask()),
                                   adaptor.getMaskKind()),
                   types);
}

LogicalResult TalkingHeadsAttentionOp::verify() {
  return verifyInferred(*this, inferResultType(getQuery().getType(), getKey().getType(), getValue().getType(),
                                               typeOrNull(getPreMix()), typeOrNull(getPreBias()),
                                               typeOrNull(getPostMix()), typeOrNull(getPostBias()),
                                               typeOrNull(getMask()), getMaskKind()));
}
