// Reductions and norms: reduce, softmax and layer norm.
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

Value Lowering::reduceAxes(Location loc, const Layout &input, ArrayRef<int64_t> axes, ein::kern::ReduceKind kind,
                           Type element) {
  Shape shape, strides, keptShape;
  for (size_t i = 0; i < input.sizes.size(); ++i) {
    if (llvm::is_contained(axes, static_cast<int64_t>(i))) continue;
    shape.push_back(input.sizes[i]);
    strides.push_back(input.strides[i]);
    keptShape.push_back(input.sizes[i]);
  }
  for (int64_t axis : axes) {
    shape.push_back(input.sizes[axis]);
    strides.push_back(input.strides[axis]);
  }
  return buildReduce(loc, ein::ir::sizedTensorType(keptShape, element), input, shape, strides,
                     static_cast<int64_t>(axes.size()), kind);
}

Layout Lowering::broadcastReduced(Value reduced, ArrayRef<Size> fullSizes, ArrayRef<int64_t> axes) {
  Layout layout{reduced, 0, Shape(fullSizes.begin(), fullSizes.end()), {}};
  Shape kept;
  for (size_t i = 0; i < fullSizes.size(); ++i)
    if (!llvm::is_contained(axes, static_cast<int64_t>(i))) kept.push_back(fullSizes[i]);
  Shape keptStrides = denseStrides(kept);
  size_t next = 0;
  for (size_t i = 0; i < fullSizes.size(); ++i)
    layout.strides.push_back(llvm::is_contained(axes, static_cast<int64_t>(i)) ? Size(0) : keptStrides[next++]);
  return layout;
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
  // var / std: mean, squared deviations, their sum over (n - correction), or
  // their mean without a correction (n may then be a size over ranged dims).
  Size count = 1;
  for (int64_t axis : axes) count *= input.sizes[axis];
  int64_t correction = reduce.getCorrectionAttr().getInt();
  if (correction != 0 && !count.isConstant())
    return reduce.emitOpError() << "var/std with correction " << correction << " over " << count.str()
                                << " elements (a size over ranged dims) has no kernel yet; use correction=0";
  Value mean = reduceAxes(loc, input, axes, ein::kern::ReduceKind::mean, element);
  auto fullType = ein::ir::sizedTensorType(input.sizes, element);
  Layout meanLayout = broadcastReduced(mean, input.sizes, axes);
  auto squares = buildElementwise(loc, fullType, {Value(), Value()}, {input, meanLayout},
                                  [](OpBuilder &b, Location loc, ArrayRef<Value> x) -> Value {
                                    Value centered = b.create<arith::SubFOp>(loc, x[0], x[1]);
                                    return b.create<arith::MulFOp>(loc, centered, centered);
                                  });
  if (failed(squares)) return failure();
  Value sum = reduceAxes(loc, denseLayout(*squares), axes,
                         correction == 0 ? ein::kern::ReduceKind::mean : ein::kern::ReduceKind::sum, element);
  double divisor = correction == 0 ? 1.0 : static_cast<double>(*count.constant() - correction);
  bool isStd = reduce.getKind() == ein::ir::ReduceKind::std;
  auto keptType = cast<RankedTensorType>(sum.getType());
  auto result = buildElementwise(loc, keptType, {Value()}, {denseLayout(sum)},
                                 [&](OpBuilder &b, Location loc, ArrayRef<Value> x) -> Value {
                                   Value variance = b.create<arith::DivFOp>(loc, x[0], constantF32(loc, divisor));
                                   return isStd ? b.create<math::SqrtOp>(loc, variance).getResult() : variance;
                                 });
  if (failed(result)) return failure();
  layouts[reduce] = resultLayout(reduce, *result);
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
