#include "ir/kern/kern_dialect.hpp"

#include <numeric>

#include "llvm/ADT/TypeSwitch.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace ein::kern;

#include "ir/kern/kern_ops_dialect.cpp.inc"
#include "ir/kern/kern_ops_enums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "ir/kern/kern_ops_attrs.cpp.inc"
#define GET_OP_CLASSES
#include "ir/kern/kern_ops.cpp.inc"

void KernDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/kern/kern_ops_attrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ir/kern/kern_ops.cpp.inc"
      >();
}

ViewAttr ViewAttr::get(MLIRContext *context, const ein::Size &offset, const ein::Shape &strides) {
  return get(context, ein::ir::SizesAttr::get(context, ein::Shape{offset}), ein::ir::SizesAttr::get(context, strides));
}

ein::Size ViewAttr::getOffset() const {
  ein::Shape offset = getOffsetSize().sizes();
  return offset.empty() ? ein::Size(0) : offset.front();
}

ein::Shape ViewAttr::getStrides() const { return getStrideSizes().sizes(); }

namespace {

// A size as the view prints it: an integer, or its text in quotes.
void printSize(AsmPrinter &printer, const ein::Size &size) {
  if (std::optional<int64_t> constant = size.constant())
    printer << *constant;
  else
    printer << '"' << size.str() << '"';
}

ParseResult parseSize(AsmParser &parser, ein::Size &size) {
  int64_t constant = 0;
  if (parser.parseOptionalInteger(constant).has_value()) {
    size = constant;
    return success();
  }
  std::string text;
  llvm::SMLoc at = parser.getCurrentLocation();
  if (parser.parseString(&text)) return failure();
  std::string error;
  std::optional<ein::Size> parsed = ein::Size::parse(text, &error);
  if (!parsed) return parser.emitError(at) << "malformed size: " << error;
  size = *parsed;
  return success();
}

}  // namespace

// #kern.view<offset, [stride, ...]>
Attribute ViewAttr::parse(AsmParser &parser, Type) {
  ein::Size offset;
  ein::Shape strides;
  if (parser.parseLess() || parseSize(parser, offset) || parser.parseComma() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                     [&] { return parseSize(parser, strides.emplace_back()); }) ||
      parser.parseGreater())
    return {};
  return get(parser.getContext(), offset, strides);
}

void ViewAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printSize(printer, getOffset());
  printer << ", [";
  llvm::interleaveComma(getStrides(), printer, [&](const ein::Size &stride) { printSize(printer, stride); });
  printer << "]>";
}

ein::ir::SizesAttr ein::kern::sizesAttr(MLIRContext *context, const ein::Shape &sizes) {
  return ein::ir::SizesAttr::get(context, sizes);
}

ein::ir::SizesAttr ein::kern::sizeAttr(MLIRContext *context, const ein::Size &size) {
  return ein::ir::SizesAttr::get(context, ein::Shape{size});
}

ein::Size ein::kern::sizeOf(ein::ir::SizesAttr attr) {
  ein::Shape sizes = attr.sizes();
  return sizes.empty() ? ein::Size(0) : sizes.front();
}

std::set<std::string> ein::kern::sequenceDims(mlir::FunctionOpInterface function) {
  std::set<std::string> dims;
  if (auto position = function->getAttrOfType<mlir::StringAttr>("ein.position")) dims.insert(position.str());
  for (unsigned i = 0; i < function.getNumArguments(); ++i)
    if (function.getArgAttr(i, kFirstRunAttr))
      for (const ein::Size &size : ein::ir::shapeOf(function.getArgumentTypes()[i])) {
        const std::set<std::string> used = size.dims();
        dims.insert(used.begin(), used.end());
      }
  return dims;
}

std::optional<size_t> ein::kern::tokenRowAxis(const ein::Shape &shape, const std::string &tokens,
                                              const std::set<std::string> &sequenceDims) {
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] == ein::Size::dim(tokens)) {
      for (size_t inner = axis + 1; inner < shape.size(); ++inner)
        for (const std::string &dim : shape[inner].dims())
          if (dim == tokens || sequenceDims.count(dim)) return std::nullopt;
      return axis;
    }
    if (shape[axis] != ein::Size(1)) return std::nullopt;
  }
  return std::nullopt;
}

ein::Shape ein::kern::denseStrides(const ein::Shape &sizes) {
  ein::Shape strides(sizes.size(), 1);
  for (int i = static_cast<int>(sizes.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * sizes[i + 1];
  return strides;
}

ein::Shape ein::kern::gatherIdsShape(GatherOp gather) {
  ein::Shape result = ein::ir::shapeOf(gather.getType());
  if (!result.empty()) result.pop_back();
  return result;
}

ein::Shape ein::kern::gatherTableShape(GatherOp gather) {
  ein::Shape result = ein::ir::shapeOf(gather.getType());
  ein::Size width = result.empty() ? ein::Size(0) : result.back();
  ein::Size elements = ein::product(ein::ir::shapeOf(gather.getTable().getType()));
  std::optional<int64_t> constantWidth = width.constant();
  if (!constantWidth || *constantWidth <= 0) return {elements, width};  // the verifier rejects what this cannot divide
  return {ein::Size::floorDiv(elements, *constantWidth), width};
}

std::optional<ViewExtent> ein::kern::viewExtent(ViewAttr view, const ein::Shape &sizes) {
  std::optional<int64_t> offset = view.getOffset().constant();
  if (!offset) return std::nullopt;
  ViewExtent extent{*offset, *offset};
  for (auto [size, stride] : llvm::zip(sizes, view.getStrides())) {
    if (size == ein::Size(1)) continue;  // never walked: any stride reaches nothing
    std::optional<int64_t> constantSize = size.constant(), constantStride = stride.constant();
    if (!constantSize || !constantStride || *constantSize == 0) return std::nullopt;
    int64_t reach = (*constantSize - 1) * *constantStride;
    if (reach < 0)
      extent.min += reach;
    else
      extent.max += reach;
  }
  return extent;
}

namespace {

using ein::Shape;
using ein::Size;

Shape shapeOfValue(Value value) { return ein::ir::shapeOf(value.getType()); }
Size elementsOf(Value value) { return ein::product(shapeOfValue(value)); }

// Checks that `view` has one stride per axis of `sizes` and, where every size
// is a constant, stays inside `operand` (the runtime checks the rest at the
// dims' values).
LogicalResult verifyView(Operation *op, StringRef name, ViewAttr view, const Shape &sizes, Value operand) {
  if (view.getStrides().size() != sizes.size())
    return op->emitOpError() << name << " has " << view.getStrides().size() << " strides for "
                             << sizes.size() << " axes";
  auto extent = viewExtent(view, sizes);
  std::optional<int64_t> elements = elementsOf(operand).constant();
  if (extent && elements && (extent->min < 0 || extent->max >= *elements))
    return op->emitOpError() << name << " reaches elements [" << extent->min << ", " << extent->max
                             << "] of an operand with " << *elements;
  return success();
}

// An optional operand and its view: both or neither, and the view in bounds.
LogicalResult verifyOptionalView(Operation *op, StringRef name, Value operand, std::optional<ViewAttr> view,
                                 const Shape &sizes) {
  if (static_cast<bool>(operand) != view.has_value())
    return op->emitOpError() << name << (operand ? " has no view" : " view without an operand");
  if (!operand) return success();
  return verifyView(op, (name + "_view").str(), *view, sizes, operand);
}

Shape concat(const Shape &head, std::initializer_list<Size> tail) {
  Shape result(head.begin(), head.end());
  result.insert(result.end(), tail.begin(), tail.end());
  return result;
}

bool negative(const Size &size) { return size.constant().value_or(0) < 0; }

}  // namespace

LogicalResult GemmOp::verify() {
  Size m = sizeOf(getM()), n = sizeOf(getN()), k = sizeOf(getK());
  Shape batch = getBatch().sizes();
  if (negative(m) || negative(n) || negative(k)) return emitOpError() << "sizes must be non-negative";
  if (failed(verifyView(*this, "a_view", getAView(), concat(batch, {m, k}), getA())) ||
      failed(verifyView(*this, "b_view", getBView(), concat(batch, {k, n}), getB())) ||
      failed(verifyView(*this, "c_view", getCView(), concat(batch, {m, n}), getResult())))
    return failure();
  Shape output = concat(batch, {m, n});
  if (failed(verifyOptionalView(*this, "bias", getBias(), getBiasView(), output)) ||
      failed(verifyOptionalView(*this, "residual", getResidual(), getResidualView(), output)))
    return failure();
  if (ein::product(output) != elementsOf(getResult()))
    return emitOpError() << "result has " << elementsOf(getResult()).str() << " elements but the product has "
                         << ein::product(output).str();
  Type weights = cast<RankedTensorType>(getB().getType()).getElementType();
  const bool quantized = weights.isSignlessInteger(8) || weights.isSignlessInteger(4);
  if (!weights.isF32() && !weights.isBF16() && !quantized)
    return emitOpError() << "b must be f32, bf16, i8 or i4 weights, got " << weights;
  if (quantized != bool(getBScale()))
    return emitOpError() << (getBScale() ? "b_scale belongs to i8 or i4 weights b" : "i8 and i4 weights b need b_scale");
  if (Value scale = getBScale()) {
    Type scaleType = cast<RankedTensorType>(scale.getType()).getElementType();
    const bool int4 = weights.isSignlessInteger(4);
    if (hasGroupScales() || int4) {
      std::optional<int64_t> depth = k.constant();
      if (!scaleType.isF16() || !depth || elementsOf(scale) != Size((*depth + 31) / 32) * n)
        return emitOpError() << "b_scale of " << (int4 ? "i4" : "i8") << " weights per group must hold an f16 scale "
                             << "per group of 32 along k and column (ceil(" << k.str() << " / 32) x " << n.str() << ")";
    } else if (!scaleType.isF32() || elementsOf(scale) != n) {
      return emitOpError() << "b_scale must hold one f32 scale per column (" << n.str()
                           << "), or one f16 scale per group of 32 along k and column";
    }
  }
  return success();
}

namespace {

// An element-wise body: one f32 argument per input, ending in kern.yield.
LogicalResult verifyScalarBody(Operation *op, StringRef name, Block &body, size_t inputs) {
  if (body.getNumArguments() != inputs)
    return op->emitOpError() << name << " has " << body.getNumArguments() << " arguments for " << inputs
                             << " inputs";
  for (BlockArgument argument : body.getArguments())
    if (!argument.getType().isF32()) return op->emitOpError() << name << " arguments must be f32";
  if (body.empty() || !isa<YieldOp>(body.back())) return op->emitOpError() << name << " must end in kern.yield";
  return success();
}

// Integer results are computed in f32: exact below 2^24, which covers the
// masks and ids models compute with.
LogicalResult verifyComputedResult(Operation *op, Type element) {
  if (!element.isF32() && !element.isF16() && !element.isBF16() && !element.isSignlessInteger())
    return op->emitOpError() << "result must be f32, f16, bf16 or a signless integer, got " << element;
  return success();
}

}  // namespace

LogicalResult ElementwiseOp::verify() {
  if (getInputViews().size() != getInputs().size())
    return emitOpError() << "has " << getInputViews().size() << " input views for " << getInputs().size()
                         << " inputs";
  Shape shape = shapeOfValue(getResult());
  for (auto [index, view, input] : llvm::enumerate(getInputViews(), getInputs())) {
    auto viewAttr = dyn_cast<ViewAttr>(view);
    if (!viewAttr) return emitOpError() << "input view " << index << " is not a #kern.view";
    if (failed(verifyView(*this, "input view " + std::to_string(index), viewAttr, shape, input))) return failure();
  }
  if (failed(verifyScalarBody(*this, "body", getBody().front(), getInputs().size()))) return failure();
  return verifyComputedResult(*this, getType().getElementType());
}

LogicalResult SoftmaxOp::verify() {
  Shape shape = getShape().sizes();
  if (ein::product(shape) != elementsOf(getResult())) return emitOpError() << "shape does not cover the result";
  if (shape.empty()) return emitOpError() << "shape must have at least one axis";
  if (failed(verifyView(*this, "x_view", getXView(), shape, getX())) ||
      failed(verifyView(*this, "y_view", getYView(), shape, getResult())))
    return failure();
  return success();
}

LogicalResult ReduceOp::verify() {
  Shape shape = getShape().sizes();
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t reduced = getReducedRankAttr().getInt();
  if (reduced < 1 || reduced > rank)
    return emitOpError() << "reduced_rank " << reduced << " is out of range for rank " << rank;
  if (ein::product(Shape(shape.begin(), shape.end() - reduced)) != elementsOf(getResult()))
    return emitOpError() << "result does not hold the kept axes";
  return verifyView(*this, "x_view", getXView(), shape, getX());
}

LogicalResult GatherOp::verify() {
  // The ids are read through ids_view over the result's leading axes, and
  // the table densely as [rows, width] with the result's width: either
  // buffer may hold its elements in another shape (a flatten, a slice, a
  // split), so only the view and the result say what they are.
  Shape result = shapeOfValue(getResult());
  if (result.empty()) return emitOpError() << "result must be [ids..., width]";
  std::optional<int64_t> width = result.back().constant();
  Shape table = gatherTableShape(*this);
  if (width && *width > 0 && table[0] * table[1] != elementsOf(getTable()))
    return emitOpError() << "table of " << elementsOf(getTable()).str() << " elements is not rows of width " << *width;
  return verifyView(*this, "ids_view", getIdsView(), gatherIdsShape(*this), getIds());
}

LogicalResult CopyOp::verify() {
  Shape shape = getShape().sizes();
  if (ein::product(shape) != elementsOf(getResult())) return emitOpError() << "shape does not cover the result";
  auto input = cast<RankedTensorType>(getX().getType());
  if (input.getElementType() != getType().getElementType()) return emitOpError() << "cannot change element type";
  return verifyView(*this, "x_view", getXView(), shape, getX());
}

LogicalResult AppendOp::verify() {
  Shape shape = getShape().sizes();
  if (getType() != getState().getType()) return emitOpError() << "result must be the state itself";
  auto state = cast<RankedTensorType>(getState().getType()), input = cast<RankedTensorType>(getX().getType());
  // A bf16 state (kern-store-state) takes f32 rows, rounded to nearest even.
  if (input.getElementType() != state.getElementType() &&
      !(input.getElementType().isF32() && state.getElementType().isBF16()))
    return emitOpError() << "cannot change element type (except f32 rows into a bf16 state)";
  if (failed(verifyView(*this, "x_view", getXView(), shape, getX()))) return failure();
  return verifyView(*this, "state_view", getStateView(), shape, getState());
}

OperandRange ConcatOp::partInputs(size_t part) {
  ArrayRef<int64_t> counts = getPartInputs();
  int64_t first = std::accumulate(counts.begin(), counts.begin() + part, int64_t(0));
  return getInputs().slice(first, counts[part]);
}

ArrayRef<Attribute> ConcatOp::partViews(size_t part) {
  ArrayRef<int64_t> counts = getPartInputs();
  int64_t first = std::accumulate(counts.begin(), counts.begin() + part, int64_t(0));
  return getInputViews().getValue().slice(first, counts[part]);
}

Size ConcatOp::partStart(size_t part) {
  Shape sizes = getSizes().sizes();
  Size start = 0;
  for (size_t i = 0; i < part; ++i) start += sizes[i];
  return start;
}

bool ConcatOp::isCopy(size_t part) {
  Block &body = getParts()[part].front();
  if (body.getNumArguments() != 1 || !llvm::hasSingleElement(body)) return false;
  auto yield = cast<YieldOp>(body.back());
  return yield.getValue() == body.getArgument(0) &&
         cast<RankedTensorType>(partInputs(part).front().getType()).getElementType() == getType().getElementType();
}

LogicalResult ConcatOp::verify() {
  size_t parts = getParts().size();
  Shape sizes = getSizes().sizes();
  ArrayRef<int64_t> counts = getPartInputs();
  if (sizes.size() != parts || counts.size() != parts)
    return emitOpError() << "has " << sizes.size() << " sizes and " << counts.size() << " input counts for " << parts
                         << " parts";
  if (llvm::any_of(counts, [](int64_t count) { return count < 0; }))
    return emitOpError() << "part input counts must be non-negative";
  if (std::accumulate(counts.begin(), counts.end(), int64_t(0)) != static_cast<int64_t>(getInputs().size()) ||
      getInputViews().size() != getInputs().size())
    return emitOpError() << "part input counts add up to "
                         << std::accumulate(counts.begin(), counts.end(), int64_t(0)) << " with "
                         << getInputViews().size() << " views, for " << getInputs().size() << " inputs";
  Shape shape = shapeOfValue(getResult());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    return emitOpError() << "axis " << axis << " is outside the result's " << shape.size() << " axes";
  Size total = 0;
  for (size_t part = 0; part < parts; ++part) {
    Shape partShape(shape);
    partShape[axis] = sizes[part];
    for (auto [index, view, input] : llvm::enumerate(partViews(part), partInputs(part))) {
      auto viewAttr = dyn_cast<ViewAttr>(view);
      std::string name = "part " + std::to_string(part) + " input view " + std::to_string(index);
      if (!viewAttr) return emitOpError() << name << " is not a #kern.view";
      if (failed(verifyView(*this, name, viewAttr, partShape, input))) return failure();
    }
    if (failed(verifyScalarBody(*this, "part " + std::to_string(part) + " body", getParts()[part].front(),
                                counts[part])))
      return failure();
    if (!isCopy(part) && failed(verifyComputedResult(*this, getType().getElementType()))) return failure();
    total += sizes[part];
  }
  if (total != shape[axis])
    return emitOpError() << "parts add up to " << total.str() << " along axis " << axis << ", the result has "
                         << shape[axis].str();
  return success();
}

namespace {

// The parts kern.attention and kern.talking_heads_attention share. `batch`
// includes the heads axis of the talking-heads op.
LogicalResult verifyAttention(Operation *op, const Shape &batch, const Size &queries, const Size &keys,
                              const Size &headDim, const Size &valueDim, Value q, ViewAttr qView, Value k, ViewAttr kView, Value v,
                              ViewAttr vView, ViewAttr outView, Value mask, std::optional<ViewAttr> maskView,
                              MaskKind maskKind, Value result) {
  for (const Size &size : batch)
    if (negative(size)) return op->emitOpError() << "batch sizes must be non-negative";
  if (negative(queries) || negative(keys) || negative(headDim) || negative(valueDim))
    return op->emitOpError() << "sizes must be non-negative";
  if (failed(verifyView(op, "q_view", qView, concat(batch, {queries, headDim}), q)) ||
      failed(verifyView(op, "k_view", kView, concat(batch, {keys, headDim}), k)) ||
      failed(verifyView(op, "v_view", vView, concat(batch, {keys, valueDim}), v)) ||
      failed(verifyOptionalView(op, "mask", mask, maskView, concat(batch, {queries, keys}))))
    return failure();
  if (static_cast<bool>(mask) != (maskKind != MaskKind::none))
    return op->emitOpError() << "mask_kind " << stringifyMaskKind(maskKind) << (mask ? " with" : " without")
                             << " a mask";
  if (mask) {
    Type element = cast<RankedTensorType>(mask.getType()).getElementType();
    if (maskKind == MaskKind::add ? !element.isF32() : !element.isInteger(1))
      return op->emitOpError() << "a " << stringifyMaskKind(maskKind) << " mask must be "
                               << (maskKind == MaskKind::add ? "f32" : "i1");
  }
  Shape out = concat(batch, {queries, valueDim});
  if (ein::product(out) != elementsOf(result))
    return op->emitOpError() << "result does not hold [batch.., queries, value_dim]";
  return verifyView(op, "out_view", outView, out, result);
}

}  // namespace

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttention(*this, getBatch().sizes(), sizeOf(getQueries()), sizeOf(getKeys()), sizeOf(getHeadDim()),
                             sizeOf(getValueDim()), getQ(), getQView(), getK(), getKView(), getV(), getVView(),
                             getOutView(), getMask(), getMaskView(), getMaskKind(), getResult())))
    return failure();
  if (auto causal = getCausalPositions()) {
    if (causal->sizes().size() != 1) return emitOpError() << "causal_positions must be one size";
    if (negative(causal->sizes()[0])) return emitOpError() << "causal_positions must be non-negative";
  }
  return success();
}

LogicalResult TalkingHeadsAttentionOp::verify() {
  Size heads = sizeOf(getHeads());
  Shape batch = concat(getBatch().sizes(), {heads});
  if (failed(verifyAttention(*this, batch, sizeOf(getQueries()), sizeOf(getKeys()), sizeOf(getHeadDim()),
                             sizeOf(getValueDim()), getQ(), getQView(),
                             getK(), getKView(), getV(), getVView(), getOutView(), getMask(), getMaskView(),
                             getMaskKind(), getResult())))
    return failure();
  if (failed(verifyOptionalView(*this, "pre_mix", getPreMix(), getPreMixView(), {heads, heads})) ||
      failed(verifyOptionalView(*this, "pre_bias", getPreBias(), getPreBiasView(), {heads})) ||
      failed(verifyOptionalView(*this, "post_mix", getPostMix(), getPostMixView(), {heads, heads})) ||
      failed(verifyOptionalView(*this, "post_bias", getPostBias(), getPostBiasView(), {heads})))
    return failure();
  if (getPreBias() && !getPreMix()) return emitOpError() << "pre_bias without pre_mix";
  if (getPostBias() && !getPostMix()) return emitOpError() << "post_bias without post_mix";
  return success();
}

LogicalResult LayerNormOp::verify() {
  Shape shape = getShape().sizes();
  if (shape.empty()) return emitOpError() << "shape must have at least one axis";
  if (shapeOfValue(getResult()) != shape) return emitOpError() << "result must be dense over shape";
  Shape last{shape.back()};
  if (failed(verifyView(*this, "x_view", getXView(), shape, getX())) ||
      failed(verifyOptionalView(*this, "residual", getResidual(), getResidualView(), shape)) ||
      failed(verifyOptionalView(*this, "gamma", getGamma(), getGammaView(), last)) ||
      failed(verifyOptionalView(*this, "beta", getBeta(), getBetaView(), last)))
    return failure();
  if (getVariant() == LayerNormVariant::rms && getBeta()) return emitOpError() << "variant rms takes no beta";
  return success();
}
