// Views: slices, rearranges and broadcasts as new layouts of a buffer, without
// kernels where the axes allow it.
#include "compiler/conversion/ein_to_kern/lowering.hpp"

namespace ein::conversion {

LogicalResult Lowering::lowerSlice(ein::ir::SliceOp slice) {
  const Layout &input = layouts.at(slice.getInput());
  Layout result{input.buffer, input.offset, {}, {}};
  Shape offsets = slice.getOffsets().sizes(), sizes = slice.getSizes().sizes();
  for (size_t i = 0; i < input.sizes.size(); ++i) {
    result.offset += offsets[i] * input.strides[i];
    if (llvm::is_contained(slice.getDropped(), static_cast<int64_t>(i))) continue;
    result.sizes.push_back(sizes[i]);
    result.strides.push_back(input.strides[i] * slice.stepOf(i));
  }
  layouts[slice] = result;
  return success();
}

// Overlapping windows are a view too: a window axis steps through the input
// axis by the dilation, the axis of window starts by the stride.
LogicalResult Lowering::lowerWindows(ein::ir::WindowsOp windows) {
  const Layout &input = layouts.at(windows.getInput());
  const size_t n = windows.getWindow().size(), lead = input.sizes.size() - n;
  Layout result{input.buffer, input.offset, shapeOf(windows), {}};
  result.strides.assign(input.strides.begin(), input.strides.begin() + static_cast<std::ptrdiff_t>(lead));
  for (size_t i = 0; i < n; ++i) result.strides.push_back(input.strides[lead + i] * windows.getStrides()[i]);
  for (size_t i = 0; i < n; ++i) result.strides.push_back(input.strides[lead + i] * windows.getDilations()[i]);
  layouts[windows] = result;
  return success();
}

LogicalResult Lowering::lowerRearrange(ein::ir::RearrangeOp rearrange) {
  const Layout &input = layouts.at(rearrange.getInput());
  ein::EinopsKind kind = ein::EinopsKind::Rearrange;
  if (rearrange.getReduction()) kind = ein::EinopsKind::Reduce;
  auto planned = ein::planEinops(kind, rearrange.getPattern(), input.sizes, rearrange.getSizeMap());
  if (ein::failed(planned) && kind == ein::EinopsKind::Rearrange)
    planned = ein::planEinops(ein::EinopsKind::Repeat, rearrange.getPattern(), input.sizes, rearrange.getSizeMap());
  if (ein::failed(planned)) return rearrange.emitOpError() << std::get<ein::EquationError>(planned).message;
  const ein::EinopsPlan &plan = std::get<ein::EinopsPlan>(planned);
  const Shape &inputAxisSizes = plan.inputAxisSizes, &outputAxisSizes = plan.outputAxisSizes;

  // Strides of the elementary input axes: a composed dimension splits like a
  // row-major block.
  Shape axisStrides(plan.inputAxes.size());
  for (int i = static_cast<int>(plan.inputAxes.size()) - 1; i >= 0; --i) {
    bool lastOfDim = i + 1 == static_cast<int>(plan.inputAxes.size()) ||
                     plan.inputAxisDim[i + 1] != plan.inputAxisDim[i];
    axisStrides[i] = lastOfDim ? input.strides[plan.inputAxisDim[i]] : axisStrides[i + 1] * inputAxisSizes[i + 1];
  }
  Shape outSizes, outStrides;
  for (size_t i = 0; i < plan.outputAxes.size(); ++i) {
    outSizes.push_back(outputAxisSizes[i]);
    outStrides.push_back(plan.outputSource[i] < 0 ? Size(0) : axisStrides[plan.outputSource[i]]);
  }
  auto resultType = rearrange.getType();

  if (!plan.reducedAxes.empty()) {
    // einops.reduce: kept axes in output order, then the reduced ones.
    Shape shape = outSizes, strides = outStrides;
    for (int axis : plan.reducedAxes) {
      shape.push_back(inputAxisSizes[axis]);
      strides.push_back(axisStrides[axis]);
    }
    auto kind = toKernReduce(*rearrange.getReduction());
    if (!kind) return rearrange.emitOpError() << "reduction '" << stringifyReduceKind(*rearrange.getReduction())
                                              << "' has no kernel yet";
    Value result = buildReduce(rearrange.getLoc(), resultType, input, shape, strides,
                               static_cast<int64_t>(plan.reducedAxes.size()), *kind);
    layouts[rearrange] = denseLayout(result);
    return success();
  }

  Layout result{input.buffer, input.offset, {}, {}};
  for (const auto &group : plan.outputGroups) {
    Shape sizes, strides;
    for (int member : group) {
      sizes.push_back(outSizes[member]);
      strides.push_back(outStrides[member]);
    }
    auto merged = mergeAxes(sizes, strides);
    if (!merged) {
      // Not expressible as a view: materialise the elementary axes densely,
      // which is exactly the row-major layout of the composed result.
      Value copy = buildCopy(rearrange.getLoc(), resultType, Layout{input.buffer, input.offset, outSizes, outStrides});
      layouts[rearrange] = denseLayout(copy);
      return success();
    }
    result.sizes.push_back(merged->first);
    result.strides.push_back(merged->second);
  }
  layouts[rearrange] = result;
  return success();
}

Shape Lowering::broadcastStrides(const Layout &layout, ArrayRef<Size> shape) {
  Shape strides(shape.size(), 0);
  size_t shift = shape.size() - layout.sizes.size();
  for (size_t i = 0; i < layout.sizes.size(); ++i)
    if (layout.sizes[i] != 1) strides[shift + i] = layout.strides[i];
  return strides;
}

ein::kern::ViewAttr Lowering::viewOfLayout(const Layout &layout) {
  return viewOf(context(), layout.offset, layout.strides);
}

std::pair<Value, ein::kern::ViewAttr> Lowering::optionalView(Value value, ArrayRef<Size> shape) {
  if (!value) return {Value(), ein::kern::ViewAttr()};
  const Layout &layout = layouts.at(value);
  return {layout.buffer, viewOf(context(), layout.offset, broadcastStrides(layout, shape))};
}

Layout Lowering::broadcastTo(const Layout &layout, ArrayRef<Size> sizes) {
  Layout result{layout.buffer, layout.offset, Shape(sizes.begin(), sizes.end()), {}};
  size_t shift = sizes.size() - layout.sizes.size();
  for (size_t i = 0; i < sizes.size(); ++i)
    result.strides.push_back(i < shift || layout.sizes[i - shift] == 1 ? Size(0) : layout.strides[i - shift]);
  return result;
}

LogicalResult Lowering::lowerAppend(ein::ir::AppendOp append) {
  const Layout &state = layouts.at(append.getState()), &x = layouts.at(append.getX());
  const int64_t axis = append.getAxis();
  Size start = state.offset + append.getOffset().sizes()[0] * state.strides[axis];
  Value written = builder.create<ein::kern::AppendOp>(
      append.getLoc(), state.buffer.getType(), state.buffer, x.buffer, sizesAttr(context(), x.sizes),
      viewOfLayout(x), viewOf(context(), start, state.strides),
      append.getFirstRunAttr());
  layouts[append] = Layout{written, state.offset, shapeOf(append), state.strides};
  return success();
}

}  // namespace ein::conversion
