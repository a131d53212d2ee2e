// Attention and talking-heads attention: one fused kernel each.
#include "conversion/Lowering.h"

namespace ein::conversion {

ein::kern::MaskKind Lowering::toKernMask(ein::ir::MaskKind kind) {
  return static_cast<ein::kern::MaskKind>(static_cast<int>(kind));
}

Lowering::Placement Lowering::placeAttentionOutput(Operation *op) {
  Value result = op->getResult(0);
  auto type = cast<RankedTensorType>(result.getType());
  Placement dense{type, denseStrides(type.getShape())};
  auto merge = result.hasOneUse() ? dyn_cast<ein::ir::RearrangeOp>(*result.getUsers().begin()) : nullptr;
  if (!merge || merge.getReduction()) return dense;
  auto planned = ein::planEinops(ein::EinopsKind::Rearrange, merge.getPattern(),
                                 ein::Shape(type.getShape().begin(), type.getShape().end()), merge.getSizeMap());
  if (ein::failed(planned)) return dense;
  const ein::EinopsPlan &plan = std::get<ein::EinopsPlan>(planned);
  if (plan.inputAxes.size() != static_cast<size_t>(type.getRank()) || llvm::is_contained(plan.outputSource, -1))
    return dense;
  // Each result axis is one elementary axis of the rearranged, dense buffer.
  SmallVector<int64_t> elementary =
      denseStrides(constantSizes(plan.outputAxisSizes));
  Placement placement{merge.getType(), SmallVector<int64_t>(type.getRank(), 0)};
  for (size_t o = 0; o < plan.outputSource.size(); ++o)
    placement.strides[plan.inputAxisDim[plan.outputSource[o]]] = elementary[o];
  return placement;
}

template <typename Op>
Lowering::AttentionParts Lowering::attentionParts(Op op) {
  ArrayRef<int64_t> qShape = op.getQuery().getType().getShape(), vShape = op.getValue().getType().getShape();
  AttentionParts parts;
  parts.batch.assign(qShape.begin(), qShape.end() - 2);
  SmallVector<int64_t> scores = parts.batch;
  scores.append({qShape[qShape.size() - 2], vShape[vShape.size() - 2]});
  parts.queries = builder.getI64IntegerAttr(scores[scores.size() - 2]);
  parts.keys = builder.getI64IntegerAttr(scores.back());
  parts.headDim = builder.getI64IntegerAttr(qShape.back());
  parts.valueDim = builder.getI64IntegerAttr(vShape.back());
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
      attention.getLoc(), p.resultType, p.q, p.k, p.v, p.mask, builder.getDenseI64ArrayAttr(p.batch), p.queries,
      p.keys, p.headDim, p.valueDim, p.scale, p.qView, p.kView, p.vView, p.outView, p.maskView, p.maskKind,
      p.maskFill);
  layouts[attention] = Layout{result, 0, SmallVector<int64_t>(attention.getType().getShape()), p.outStrides};
  return success();
}

LogicalResult Lowering::lowerTalkingHeadsAttention(ein::ir::TalkingHeadsAttentionOp attention) {
  AttentionParts p = attentionParts(attention);
  int64_t heads = p.batch.pop_back_val();
  auto [preMix, preMixView] = optionalView(attention.getPreMix(), {heads, heads});
  auto [preBias, preBiasView] = optionalView(attention.getPreBias(), {heads});
  auto [postMix, postMixView] = optionalView(attention.getPostMix(), {heads, heads});
  auto [postBias, postBiasView] = optionalView(attention.getPostBias(), {heads});
  Value result = builder.create<ein::kern::TalkingHeadsAttentionOp>(
      attention.getLoc(), p.resultType, p.q, p.k, p.v, preMix, preBias, postMix, postBias, p.mask,
      builder.getDenseI64ArrayAttr(p.batch), builder.getI64IntegerAttr(heads), p.queries, p.keys, p.headDim,
      p.valueDim, p.scale, p.qView, p.kView, p.vView, p.outView, preMixView, preBiasView, postMixView,
      postBiasView, p.maskView, p.maskKind, p.maskFill);
  layouts[attention] = Layout{result, 0, SmallVector<int64_t>(attention.getType().getShape()), p.outStrides};
  return success();
}

}  // namespace ein::conversion
