// Attention and talking-heads attention: one fused kernel each.
#include "conversion/Lowering.h"

namespace ein::conversion {

ein::kern::MaskKind Lowering::toKernMask(ein::ir::MaskKind kind) {
  return static_cast<ein::kern::MaskKind>(static_cast<int>(kind));
}

Lowering::Placement Lowering::placeAttentionOutput(Operation *op) {
  Value result = op->getResult(0);
  auto type = cast<RankedTensorType>(result.getType());
  Shape shape = shapeOf(result);
  Placement dense{type, denseStrides(shape)};
  auto merge = result.hasOneUse() ? dyn_cast<ein::ir::RearrangeOp>(*result.getUsers().begin()) : nullptr;
  if (!merge || merge.getReduction()) return dense;
  auto planned = ein::planEinops(ein::EinopsKind::Rearrange, merge.getPattern(), shape, merge.getSizeMap());
  if (ein::failed(planned)) return dense;
  const ein::EinopsPlan &plan = std::get<ein::EinopsPlan>(planned);
  if (plan.inputAxes.size() != static_cast<size_t>(type.getRank()) || llvm::is_contained(plan.outputSource, -1))
    return dense;
  // Each result axis is one elementary axis of the rearranged, dense buffer.
  Shape elementary = denseStrides(plan.outputAxisSizes);
  Placement placement{merge.getType(), Shape(type.getRank(), 0)};
  for (size_t o = 0; o < plan.outputSource.size(); ++o)
    placement.strides[plan.inputAxisDim[plan.outputSource[o]]] = elementary[o];
  return placement;
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
      p.maskFill, attention.getCausalPositionsAttr());
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
