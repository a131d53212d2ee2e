// Reductions and norms: reduce, variance, softmax and layer norm.
#include "compiler/conversion/ein_to_kern/lowering.hpp"

namespace ein::conversion {

std::optional<ein::kern::ReduceKind> Lowering::toKernReduce(ein::ir::ReduceKind kind) {
  switch (kind) {
    case ein::ir::ReduceKind::sum: return ein::kern::ReduceKind::sum;
    case ein::ir::ReduceKind::mean: return ein::kern::ReduceKind::mean;
    case ein::ir::ReduceKind::max: return ein::kern::ReduceKind::max;
    case ein::ir::ReduceKind::min: return ein::kern::ReduceKind::min;
    case ein::ir::ReduceKind::prod: return ein::kern::ReduceKind::prod;
    default: return std::nullopt;
  }
}

Value Lowering::buildReduce(Location loc, RankedTensorType resultType, const Layout &source, ArrayRef<Size> shape,
                            ArrayRef<Size> strides, int64_t reducedRank, ein::kern::ReduceKind kind) {
  return builder.create<ein::kern::ReduceOp>(
      loc, resultType, source.buffer, sizesAttr(context(), shape), builder.getI64IntegerAttr(reducedRank),
      ein::kern::ReduceKindAttr::get(context(), kind), viewOf(context(), source.offset, strides));
}

LogicalResult Lowering::lowerSoftmax(ein::ir::SoftmaxOp softmax) {
  const Layout &input = layouts.at(softmax.getInput());
  int64_t axis = softmax.getAxisAttr().getInt();
  Shape resultStrides = denseStrides(shapeOf(softmax));
  // Move the softmax axis last in the iteration space.
  Shape shape, xStrides, yStrides;
  for (size_t i = 0; i <= input.sizes.size(); ++i) {
    size_t dim = i == input.sizes.size() ? axis : i;
    if (i < input.sizes.size() && static_cast<int64_t>(i) == axis) continue;
    shape.push_back(input.sizes[dim]);
    xStrides.push_back(input.strides[dim]);
    yStrides.push_back(resultStrides[dim]);
  }
  Value result = builder.create<ein::kern::SoftmaxOp>(softmax.getLoc(), softmax.getType(), input.buffer,
                                                      sizesAttr(context(), shape),
                                                      viewOf(context(), input.offset, xStrides),
                                                      viewOf(context(), 0, yStrides));
  layouts[softmax] = denseLayout(result);
  return success();
}

// `input`'s axes with `axes` moved last: a reduction's iteration space over
// them, its strides through `input`, and the kept sizes.
struct ReducedLast {
  Shape shape, strides, kept;
};
static ReducedLast reducedLast(const Layout &input, ArrayRef<int64_t> axes) {
  ReducedLast space;
  for (size_t i = 0; i < input.sizes.size(); ++i) {
    if (llvm::is_contained(axes, static_cast<int64_t>(i))) continue;
    space.shape.push_back(input.sizes[i]);
    space.strides.push_back(input.strides[i]);
    space.kept.push_back(input.sizes[i]);
  }
  for (int64_t axis : axes) {
    space.shape.push_back(input.sizes[axis]);
    space.strides.push_back(input.strides[axis]);
  }
  return space;
}

Value Lowering::reduceAxes(Location loc, const Layout &input, ArrayRef<int64_t> axes, ein::kern::ReduceKind kind,
                           Type element) {
  ReducedLast space = reducedLast(input, axes);
  return buildReduce(loc, ein::ir::sizedTensorType(space.kept, element), input, space.shape, space.strides,
                     static_cast<int64_t>(axes.size()), kind);
}

// The reduce's result over `buffer` (dense over the kept axes): with
// keepdim, the reduced axes stay as unit axes of the result's shape.
static Layout resultLayout(ein::ir::ReduceOp reduce, Value buffer) {
  Shape shape = shapeOf(reduce);
  return Layout{buffer, 0, shape, denseStrides(shape)};
}

LogicalResult Lowering::lowerReduce(ein::ir::ReduceOp reduce) {
  const Layout &input = layouts.at(reduce.getInput());
  Location loc = reduce.getLoc();
  Type element = reduce.getType().getElementType();
  SmallVector<int64_t> axes(reduce.getAxes());
  if (element.isSignlessInteger() && toKernReduce(reduce.getKind())) {
    // Integers reduce in f32 (exact below 2^24) and are stored back as integers.
    auto copy = [](OpBuilder &, Location, ArrayRef<Value> x) { return x[0]; };
    Type f32 = builder.getF32Type();
    auto widened = buildElementwise(loc, ein::ir::sizedTensorType(input.sizes, f32), {Value()}, {input}, copy);
    if (failed(widened)) return failure();
    Value reduced = reduceAxes(loc, denseLayout(*widened), axes, *toKernReduce(reduce.getKind()), f32);
    auto keptType = cast<RankedTensorType>(reduced.getType());
    auto narrowed = buildElementwise(loc, keptType.clone(element), {Value()},
                                     {denseLayout(reduced)}, copy);
    if (failed(narrowed)) return failure();
    layouts[reduce] = resultLayout(reduce, *narrowed);
    return success();
  }
  if (!element.isF32()) return reduce.emitOpError() << "reductions of " << element << " have no kernel yet";
  if (auto kind = toKernReduce(reduce.getKind())) {
    Value result = reduceAxes(loc, input, axes, *kind, element);
    layouts[reduce] = resultLayout(reduce, result);
    return success();
  }
  // var / std: one kern.variance over the reduced axes.
  ReducedLast space = reducedLast(input, axes);
  Value result = builder.create<ein::kern::VarianceOp>(
      loc, ein::ir::sizedTensorType(space.kept, element), input.buffer, sizesAttr(context(), space.shape),
      builder.getI64IntegerAttr(static_cast<int64_t>(axes.size())), reduce.getCorrectionAttr(),
      builder.getBoolAttr(reduce.getKind() == ein::ir::ReduceKind::std),
      viewOf(context(), input.offset, space.strides));
  layouts[reduce] = resultLayout(reduce, result);
  return success();
}

LogicalResult Lowering::lowerLayerNorm(ein::ir::LayerNormOp norm) {
  if (!norm.getType().getElementType().isF32())
    return norm.emitOpError() << "layer norms of " << norm.getType().getElementType() << " have no kernel yet";
  const Layout &input = layouts.at(norm.getInput());
  Shape shape = shapeOf(norm);
  auto [residual, residualView] = optionalView(norm.getResidual(), shape);
  auto [gamma, gammaView] = optionalView(norm.getWeight(), ArrayRef<Size>(shape).take_back());
  auto [beta, betaView] = optionalView(norm.getBias(), ArrayRef<Size>(shape).take_back());
  ein::kern::LayerNormVariant variant = ein::kern::LayerNormVariant::variance;
  switch (norm.getVariant()) {
    case ein::ir::LayerNormVariant::variance: variant = ein::kern::LayerNormVariant::variance; break;
    case ein::ir::LayerNormVariant::unbiased_std: variant = ein::kern::LayerNormVariant::unbiased_std; break;
    case ein::ir::LayerNormVariant::rms: variant = ein::kern::LayerNormVariant::rms; break;
  }
  Value result = builder.create<ein::kern::LayerNormOp>(
      norm.getLoc(), norm.getType(), input.buffer, residual, gamma, beta, sizesAttr(context(), shape),
      viewOfLayout(input), residualView, gammaView, betaView,
      builder.getF32FloatAttr(static_cast<float>(norm.getEps().convertToDouble())),
      ein::kern::LayerNormVariantAttr::get(context(), variant));
  layouts[norm] = denseLayout(result);
  return success();
}

}  // namespace ein::conversion
