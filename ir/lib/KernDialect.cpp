#include "ein/IR/KernDialect.h"

#include "llvm/ADT/TypeSwitch.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace ein::kern;

#include "ein/IR/KernOpsDialect.cpp.inc"
#include "ein/IR/KernOpsEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "ein/IR/KernOpsAttrs.cpp.inc"
#define GET_OP_CLASSES
#include "ein/IR/KernOps.cpp.inc"

void KernDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ein/IR/KernOpsAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ein/IR/KernOps.cpp.inc"
      >();
}

SmallVector<int64_t> ein::kern::denseStrides(ArrayRef<int64_t> sizes) {
  SmallVector<int64_t> strides(sizes.size(), 1);
  for (int i = static_cast<int>(sizes.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * sizes[i + 1];
  return strides;
}

std::optional<ViewExtent> ein::kern::viewExtent(ViewAttr view, ArrayRef<int64_t> sizes) {
  ViewExtent extent{view.getOffset(), view.getOffset()};
  for (auto [size, stride] : llvm::zip(sizes, view.getStrides())) {
    if (size == 0) return std::nullopt;
    int64_t reach = (size - 1) * stride;
    if (reach < 0)
      extent.min += reach;
    else
      extent.max += reach;
  }
  return extent;
}

namespace {

// Checks that `view` has one stride per axis of `sizes` and stays inside `operand`.
LogicalResult verifyView(Operation *op, StringRef name, ViewAttr view, ArrayRef<int64_t> sizes, Value operand) {
  if (view.getStrides().size() != sizes.size())
    return op->emitOpError() << name << " has " << view.getStrides().size() << " strides for "
                             << sizes.size() << " axes";
  auto type = cast<RankedTensorType>(operand.getType());
  auto extent = viewExtent(view, sizes);
  if (extent && (extent->min < 0 || extent->max >= type.getNumElements()))
    return op->emitOpError() << name << " reaches elements [" << extent->min << ", " << extent->max
                             << "] of an operand with " << type.getNumElements();
  return success();
}

// An optional operand and its view: both or neither, and the view in bounds.
LogicalResult verifyOptionalView(Operation *op, StringRef name, Value operand, std::optional<ViewAttr> view,
                                 ArrayRef<int64_t> sizes) {
  if (static_cast<bool>(operand) != view.has_value())
    return op->emitOpError() << name << (operand ? " has no view" : " view without an operand");
  if (!operand) return success();
  return verifyView(op, (name + "_view").str(), *view, sizes, operand);
}

SmallVector<int64_t> concat(ArrayRef<int64_t> head, std::initializer_list<int64_t> tail) {
  SmallVector<int64_t> result(head.begin(), head.end());
  result.append(tail.begin(), tail.end());
  return result;
}

int64_t product(ArrayRef<int64_t> sizes) {
  int64_t result = 1;
  for (int64_t size : sizes) result *= size;
  return result;
}

}  // namespace

LogicalResult GemmOp::verify() {
  if (getMAttr().getInt() < 0 || getNAttr().getInt() < 0 || getKAttr().getInt() < 0) return emitOpError() << "sizes must be non-negative";
  if (failed(verifyView(*this, "a_view", getAView(), concat(getBatch(), {getMAttr().getInt(), getKAttr().getInt()}), getA())) ||
      failed(verifyView(*this, "b_view", getBView(), concat(getBatch(), {getKAttr().getInt(), getNAttr().getInt()}), getB())) ||
      failed(verifyView(*this, "c_view", getCView(), concat(getBatch(), {getMAttr().getInt(), getNAttr().getInt()}), getResult())))
    return failure();
  SmallVector<int64_t> output = concat(getBatch(), {getMAttr().getInt(), getNAttr().getInt()});
  if (failed(verifyOptionalView(*this, "bias", getBias(), getBiasView(), output)) ||
      failed(verifyOptionalView(*this, "residual", getResidual(), getResidualView(), output)))
    return failure();
  if (product(getBatch()) * getMAttr().getInt() * getNAttr().getInt() != getType().getNumElements())
    return emitOpError() << "result has " << getType().getNumElements() << " elements but the product has "
                         << product(getBatch()) * getMAttr().getInt() * getNAttr().getInt();
  return success();
}

LogicalResult ElementwiseOp::verify() {
  if (getInputViews().size() != getInputs().size())
    return emitOpError() << "has " << getInputViews().size() << " input views for " << getInputs().size()
                         << " inputs";
  ArrayRef<int64_t> shape = getType().getShape();
  for (auto [index, view, input] : llvm::enumerate(getInputViews(), getInputs())) {
    auto viewAttr = dyn_cast<ViewAttr>(view);
    if (!viewAttr) return emitOpError() << "input view " << index << " is not a #kern.view";
    if (failed(verifyView(*this, "input view " + std::to_string(index), viewAttr, shape, input))) return failure();
  }
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body has " << body.getNumArguments() << " arguments for " << getInputs().size()
                         << " inputs";
  for (BlockArgument argument : body.getArguments())
    if (!argument.getType().isF32()) return emitOpError() << "body arguments must be f32";
  if (body.empty() || !isa<YieldOp>(body.back()))
    return emitOpError() << "body must end in kern.yield";
  Type resultElement = getType().getElementType();
  // Integer results are computed in f32: exact below 2^24, which covers the
  // masks and ids models compute with.
  if (!resultElement.isF32() && !resultElement.isF16() && !resultElement.isBF16() && !resultElement.isSignlessInteger())
    return emitOpError() << "result must be f32, f16, bf16 or a signless integer, got " << resultElement;
  return success();
}

LogicalResult SoftmaxOp::verify() {
  if (product(getShape()) != getType().getNumElements())
    return emitOpError() << "shape does not cover the result";
  if (getShape().empty()) return emitOpError() << "shape must have at least one axis";
  if (failed(verifyView(*this, "x_view", getXView(), getShape(), getX())) ||
      failed(verifyView(*this, "y_view", getYView(), getShape(), getResult())))
    return failure();
  return success();
}

LogicalResult ReduceOp::verify() {
  int64_t rank = static_cast<int64_t>(getShape().size());
  if (getReducedRankAttr().getInt() < 1 || getReducedRankAttr().getInt() > rank)
    return emitOpError() << "reduced_rank " << getReducedRankAttr().getInt() << " is out of range for rank " << rank;
  if (product(getShape().drop_back(getReducedRankAttr().getInt())) != getType().getNumElements())
    return emitOpError() << "result does not hold the kept axes";
  return verifyView(*this, "x_view", getXView(), getShape(), getX());
}

LogicalResult GatherOp::verify() {
  auto table = cast<RankedTensorType>(getTable().getType());
  if (table.getRank() != 2) return emitOpError() << "table must be [rows, width]";
  auto ids = cast<RankedTensorType>(getIds().getType());
  SmallVector<int64_t> expected(ids.getShape());
  expected.push_back(table.getDimSize(1));
  if (getType().getShape() != ArrayRef<int64_t>(expected)) return emitOpError() << "result must be [ids..., width]";
  return verifyView(*this, "ids_view", getIdsView(), ids.getShape(), getIds());
}

LogicalResult CopyOp::verify() {
  if (product(getShape()) != getType().getNumElements())
    return emitOpError() << "shape does not cover the result";
  auto input = cast<RankedTensorType>(getX().getType());
  if (input.getElementType() != getType().getElementType()) return emitOpError() << "cannot change element type";
  return verifyView(*this, "x_view", getXView(), getShape(), getX());
}

LogicalResult ConcatOp::verify() {
  size_t parts = getInputs().size();
  if (getInputViews().size() != parts || getSizes().size() != parts)
    return emitOpError() << "has " << getInputViews().size() << " views and " << getSizes().size() << " sizes for "
                         << parts << " inputs";
  ArrayRef<int64_t> shape = getType().getShape();
  int64_t axis = getAxis();
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    return emitOpError() << "axis " << axis << " is outside the result's " << shape.size() << " axes";
  int64_t total = 0;
  for (auto [index, view, input, size] : llvm::enumerate(getInputViews(), getInputs(), getSizes())) {
    auto viewAttr = dyn_cast<ViewAttr>(view);
    if (!viewAttr) return emitOpError() << "input view " << index << " is not a #kern.view";
    if (cast<RankedTensorType>(input.getType()).getElementType() != getType().getElementType())
      return emitOpError() << "input " << index << " has another element type than the result";
    SmallVector<int64_t> partShape(shape);
    partShape[axis] = size;
    if (failed(verifyView(*this, "input view " + std::to_string(index), viewAttr, partShape, input)))
      return failure();
    total += size;
  }
  if (total != shape[axis])
    return emitOpError() << "parts add up to " << total << " along axis " << axis << ", the result has "
                         << shape[axis];
  return success();
}

namespace {

// The parts kern.attention and kern.talking_heads_attention share. `batch`
// includes the heads axis of the talking-heads op.
LogicalResult verifyAttention(Operation *op, ArrayRef<int64_t> batch, int64_t queries, int64_t keys, int64_t headDim,
                              int64_t valueDim, Value q, ViewAttr qView, Value k, ViewAttr kView, Value v,
                              ViewAttr vView, ViewAttr outView, Value mask, std::optional<ViewAttr> maskView,
                              MaskKind maskKind, Value result) {
  for (int64_t size : batch)
    if (size < 0) return op->emitOpError() << "batch sizes must be non-negative";
  if (queries < 0 || keys < 0 || headDim < 0 || valueDim < 0) return op->emitOpError() << "sizes must be non-negative";
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
  SmallVector<int64_t> out = concat(batch, {queries, valueDim});
  if (product(out) != cast<RankedTensorType>(result.getType()).getNumElements())
    return op->emitOpError() << "result does not hold [batch.., queries, value_dim]";
  return verifyView(op, "out_view", outView, out, result);
}

}  // namespace

LogicalResult AttentionOp::verify() {
  return verifyAttention(*this, getBatch(), getQueriesAttr().getInt(), getKeysAttr().getInt(), getHeadDimAttr().getInt(), getValueDimAttr().getInt(), getQ(), getQView(),
                         getK(), getKView(), getV(), getVView(), getOutView(), getMask(), getMaskView(), getMaskKind(),
                         getResult());
}

LogicalResult TalkingHeadsAttentionOp::verify() {
  SmallVector<int64_t> batch = concat(getBatch(), {getHeadsAttr().getInt()});
  if (failed(verifyAttention(*this, batch, getQueriesAttr().getInt(), getKeysAttr().getInt(), getHeadDimAttr().getInt(), getValueDimAttr().getInt(), getQ(), getQView(),
                             getK(), getKView(), getV(), getVView(), getOutView(), getMask(), getMaskView(),
                             getMaskKind(), getResult())))
    return failure();
  int64_t heads = getHeadsAttr().getInt();
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
  ArrayRef<int64_t> shape = getShape();
  if (shape.empty()) return emitOpError() << "shape must have at least one axis";
  if (product(shape) != getType().getNumElements() || getType().getShape() != shape)
    return emitOpError() << "result must be dense over shape";
  SmallVector<int64_t> last{shape.back()};
  if (failed(verifyView(*this, "x_view", getXView(), shape, getX())) ||
      failed(verifyOptionalView(*this, "residual", getResidual(), getResidualView(), shape)) ||
      failed(verifyOptionalView(*this, "gamma", getGamma(), getGammaView(), last)) ||
      failed(verifyOptionalView(*this, "beta", getBeta(), getBetaView(), last)))
    return failure();
  return success();
}
