// Attention and talking-heads attention: one fused kernel each.
#include "compiler/conversion/ein_to_kern/lowering.hpp"

namespace ein::conversion {

ein::kern::MaskKind Lowering::toKernMask(ein::ir::MaskKind kind) {
  return static_cast<ein::kern::MaskKind>(static_cast<int>(kind));
}

std::optional<Shape> Lowering::inputStridesFor(ein::ir::RearrangeOp rearrange, ArrayRef<Size> resultStrides) {
  if (rearrange.getReduction()) return std::nullopt;
  Shape inputShape = shapeOf(rearrange.getInput());
  auto planned = ein::planEinops(ein::EinopsKind::Rearrange, rearrange.getPattern(), inputShape, rearrange.getSizeMap());
  if (ein::failed(planned)) return std::nullopt;  // a repeat: its result cannot be written once per element
  const ein::EinopsPlan &plan = std::get<ein::EinopsPlan>(planned);
  // A result axis splits into its elementary axes row-major.
  Shape elementary(plan.outputAxes.size(), 0);
  for (auto [axis, group] : llvm::enumerate(plan.outputGroups)) {
    Size stride = resultStrides[axis];
    for (int member : llvm::reverse(group)) {
      elementary[member] = stride;
      stride = stride * plan.outputAxisSizes[member];
    }
  }
  Shape inputAxisStrides(plan.inputAxes.size(), 0);
  for (auto [output, source] : llvm::enumerate(plan.outputSource))
    if (source >= 0) inputAxisStrides[source] = elementary[output];  // else a unit axis "1"
  // Each input axis must be its elementary axes laid out as one.
  Shape strides;
  for (size_t dim = 0; dim < inputShape.size(); ++dim) {
    Shape sizes, axisStrides;
    for (size_t axis = 0; axis < plan.inputAxes.size(); ++axis)
      if (plan.inputAxisDim[axis] == static_cast<int>(dim)) {
        sizes.push_back(plan.inputAxisSizes[axis]);
        axisStrides.push_back(inputAxisStrides[axis]);
      }
    auto merged = mergeAxes(sizes, axisStrides);
    if (!merged) return std::nullopt;
    strides.push_back(merged->second);
  }
  return strides;
}

Lowering::Placement Lowering::placeAttentionOutput(Operation *op) {
  Value result = op->getResult(0);
  auto type = cast<RankedTensorType>(result.getType());
  // The rearranges that alone read the result, one after the other.
  SmallVector<ein::ir::RearrangeOp> chain;
  for (Value value = result; value.hasOneUse();) {
    auto next = dyn_cast<ein::ir::RearrangeOp>(*value.getUsers().begin());
    if (!next || next.getReduction()) break;
    chain.push_back(next);
    value = next.getResult();
  }
  // The longest of them whose result the op can write densely.
  for (; !chain.empty(); chain.pop_back()) {
    std::optional<Shape> strides = denseStrides(shapeOf(chain.back()));
    for (ein::ir::RearrangeOp rearrange : llvm::reverse(chain))
      if (strides) strides = inputStridesFor(rearrange, *strides);
    if (strides) return Placement{chain.back().getType(), *strides};
  }
  return Placement{type, denseStrides(shapeOf(result))};
}

template <typename Op>
Lowering::AttentionParts Lowering::attentionParts(Op op) {
  Shape qShape = shapeOf(op.getQuery()), vShape = shapeOf(op.getValue());
  AttentionParts parts;
  parts.batch.assign(qShape.begin(), qShape.end() - 2);
  Shape scores = parts.batch;
  scores.insert(scores.end(), {qShape[qShape.size() - 2], vShape[vShape.size() - 2]});
  parts.queries = sizeAttr(context(), scores[scores.size() - 2]);
  parts.keys = sizeAttr(context(), scores.back());
  parts.headDim = sizeAttr(context(), qShape.back());
  parts.valueDim = sizeAttr(context(), vShape.back());
  for (auto [value, buffer, view] : {std::tuple(op.getQuery(), &parts.q, &parts.qView),
                                     std::tuple(op.getKey(), &parts.k, &parts.kView),
                                     std::tuple(op.getValue(), &parts.v, &parts.vView)}) {
    *buffer = layouts.at(value).buffer;
    *view = viewOfLayout(layouts.at(value));
  }
  std::tie(parts.mask, parts.maskView) = optionalView(op.getMask(), scores);
  Placement placement = placeAttentionOutput(op);
  parts.resultType = placement.bufferType;
  parts.outStrides = placement.strides;
  parts.outView = viewOf(context(), 0, placement.strides);
  parts.scale = builder.getF32FloatAttr(static_cast<float>(op.getScale().convertToDouble()));
  parts.maskFill = builder.getF32FloatAttr(static_cast<float>(op.getMaskFill().convertToDouble()));
  parts.maskKind = ein::kern::MaskKindAttr::get(context(), toKernMask(op.getMaskKind()));
  return parts;
}

LogicalResult Lowering::lowerAttention(ein::ir::AttentionOp attention) {
  AttentionParts p = attentionParts(attention);
  Value result = builder.create<ein::kern::AttentionOp>(
      attention.getLoc(), p.resultType, p.q, p.k, p.v, p.mask, sizesAttr(context(), p.batch), p.queries,
      p.keys, p.headDim, p.valueDim, p.scale, p.qView, p.kView, p.vView, p.outView, p.maskView, p.maskKind,
      p.maskFill, attention.getCausalPositionsAttr(),
      builder.getF32FloatAttr(static_cast<float>(attention.getSoftcap().convertToDouble())));
  layouts[attention] = Layout{result, 0, shapeOf(attention), p.outStrides};
  return success();
}

LogicalResult Lowering::lowerTalkingHeadsAttention(ein::ir::TalkingHeadsAttentionOp attention) {
  AttentionParts p = attentionParts(attention);
  Size heads = p.batch.back();
  p.batch.pop_back();
  auto [preMix, preMixView] = optionalView(attention.getPreMix(), {heads, heads});
  auto [preBias, preBiasView] = optionalView(attention.getPreBias(), {heads});
  auto [postMix, postMixView] = optionalView(attention.getPostMix(), {heads, heads});
  auto [postBias, postBiasView] = optionalView(attention.getPostBias(), {heads});
  Value result = builder.create<ein::kern::TalkingHeadsAttentionOp>(
      attention.getLoc(), p.resultType, p.q, p.k, p.v, preMix, preBias, postMix, postBias, p.mask,
      sizesAttr(context(), p.batch), sizeAttr(context(), heads), p.queries, p.keys, p.headDim,
      p.valueDim, p.scale, p.qView, p.kView, p.vView, p.outView, preMixView, preBiasView, postMixView,
      postBiasView, p.maskView, p.maskKind, p.maskFill);
  layouts[attention] = Layout{result, 0, shapeOf(attention), p.outStrides};
  return success();
}

}  // namespace ein::conversion
