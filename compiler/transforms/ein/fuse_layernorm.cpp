// Replaces hand-written layer norms and RMSNorms by ein.layernorm.
#include "compiler/transforms/ein/matchers.hpp"
#include "compiler/transforms/ein/passes.hpp"
#include "ir/source_locations.hpp"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"

namespace ein {
#define GEN_PASS_DEF_FUSELAYERNORM
#include "compiler/transforms/ein/passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::binaryOf;
using ein::otherOperand;
using ein::scalarConstant;
using ein::ir::BinaryKind;
using ein::ir::BinaryOp;
using ein::ir::LayerNormVariant;
using ein::ir::ReduceKind;
using ein::ir::ReduceOp;
using ein::ir::UnaryKind;
using ein::ir::UnaryOp;

namespace {

// `value` as kind(x, axes = [last], keepdim) with the given correction.
bool isLastAxisReduce(Value value, ReduceKind kind, Value x, int64_t correction = 0) {
  auto reduce = value.getDefiningOp<ReduceOp>();
  auto type = cast<RankedTensorType>(x.getType());
  return reduce && reduce.getInput() == x && reduce.getKind() == kind && reduce.getKeepdim() &&
         reduce.getAxes().size() == 1 && reduce.getAxes()[0] == type.getRank() - 1 &&
         ((kind != ReduceKind::var && kind != ReduceKind::std) || reduce.getCorrectionAttr().getInt() == correction);
}

// A vector of the last axis' size: a weight or bias of the norm.
bool isFeatureVector(Value value, RankedTensorType normalized) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getRank() == 1 && ein::ir::shapeOf(type)[0] == ein::ir::shapeOf(normalized).back() &&
         type.getElementType() == normalized.getElementType();
}

struct Match {
  Value x, weight, bias;
  double eps = 0;
  LayerNormVariant variant = LayerNormVariant::variance;
  Operation *root = nullptr;  // the op whose result the norm replaces
};

// centred = x - mean(x); returns x.
Value matchCentred(Value centred) {
  BinaryOp sub = binaryOf(centred, BinaryKind::sub);
  if (!sub || sub.getLhs().getType() != centred.getType()) return Value();
  return isLastAxisReduce(sub.getRhs(), ReduceKind::mean, sub.getLhs()) ? sub.getLhs() : Value();
}

// mean(x * x) over the last axis, keepdim: the mean square of x (RMSNorm).
bool isMeanSquare(Value value, Value x) {
  auto reduce = value.getDefiningOp<ReduceOp>();
  BinaryOp square = reduce ? binaryOf(reduce.getInput(), BinaryKind::mul) : BinaryOp();
  return square && square.getLhs() == x && square.getRhs() == x &&
         isLastAxisReduce(value, ReduceKind::mean, square.getResult());
}

// The norm that `division` computes, scale and shift not yet included:
// (x - mean) / sqrt(var + eps), (x - mean) / (std_unbiased + eps) or
// x / sqrt(mean(x * x) + eps), each with its numerator perhaps times a weight.
std::optional<Match> matchDivision(BinaryOp division) {
  if (division.getKind() != BinaryKind::div || division.getLhs().getType() != division.getType()) return std::nullopt;
  auto type = cast<RankedTensorType>(division.getType());
  if (!type.getElementType().isF32()) return std::nullopt;
  // Denominator: sqrt(spread + eps) or spread + eps.
  Value denominator = division.getRhs();
  auto sqrt = denominator.getDefiningOp<UnaryOp>();
  bool rooted = sqrt && sqrt.getKind() == UnaryKind::sqrt;
  BinaryOp plusEps = binaryOf(rooted ? sqrt.getInput() : denominator, BinaryKind::add);
  if (!plusEps) return std::nullopt;
  // Numerator: what is normalised (x - mean, or x itself for RMSNorm), or
  // weight times it.
  SmallVector<std::pair<Value, Value>, 3> numerators{{division.getLhs(), Value()}};
  if (BinaryOp scaled = binaryOf(division.getLhs(), BinaryKind::mul))
    for (auto [normalised, weight] : {std::pair{scaled.getLhs(), scaled.getRhs()}, {scaled.getRhs(), scaled.getLhs()}})
      if (normalised.getType() == type && isFeatureVector(weight, type)) numerators.push_back({normalised, weight});
  for (auto [spread, eps] : {std::pair{plusEps.getLhs(), plusEps.getRhs()}, {plusEps.getRhs(), plusEps.getLhs()}}) {
    auto value = scalarConstant(eps);
    if (!value) continue;
    for (auto [normalised, weight] : numerators) {
      Match match;
      match.root = division;
      match.weight = weight;
      match.eps = *value;
      if (Value x = matchCentred(normalised)) {
        match.x = x;
        if (rooted && isLastAxisReduce(spread, ReduceKind::var, x, 0)) {
          match.variant = LayerNormVariant::variance;
          return match;
        }
        if (!rooted && isLastAxisReduce(spread, ReduceKind::std, x, 1)) {
          match.variant = LayerNormVariant::unbiased_std;
          return match;
        }
      }
      if (rooted && isMeanSquare(spread, normalised)) {
        match.x = normalised;
        match.variant = LayerNormVariant::rms;
        return match;
      }
    }
  }
  return std::nullopt;
}

// Extends `match` over a following `* weight` (when it has none) and `+ bias`.
void absorbScaleAndShift(Match &match) {
  auto type = cast<RankedTensorType>(match.root->getResult(0).getType());
  auto single = [](Operation *op) -> Operation * {
    return op->hasOneUse() ? *op->getResult(0).getUsers().begin() : nullptr;
  };
  if (!match.weight)
    if (auto mul = dyn_cast_or_null<BinaryOp>(single(match.root)); mul && mul.getKind() == BinaryKind::mul) {
      Value weight = otherOperand(mul, match.root->getResult(0));
      if (weight && isFeatureVector(weight, type) && mul.getType() == type) {
        match.weight = weight;
        match.root = mul;
      }
    }
  if (match.variant == LayerNormVariant::rms) return;  // RMSNorm has no shift
  if (auto add = dyn_cast_or_null<BinaryOp>(single(match.root)); add && add.getKind() == BinaryKind::add) {
    Value bias = otherOperand(add, match.root->getResult(0));
    if (bias && isFeatureVector(bias, type) && add.getType() == type) {
      match.bias = bias;
      match.root = add;
    }
  }
}

struct FuseLayerNormPass : ein::impl::FuseLayerNormBase<FuseLayerNormPass> {
  void runOnOperation() override {
    SmallVector<BinaryOp> divisions;
    getOperation().walk([&](BinaryOp op) {
      if (op.getKind() == BinaryKind::div) divisions.push_back(op);
    });
    for (BinaryOp division : divisions) {
      auto match = matchDivision(division);
      if (!match) continue;
      absorbScaleAndShift(*match);
      OpBuilder builder(match->root);
      Value result = match->root->getResult(0);
      Value norm = builder.create<ein::ir::LayerNormOp>(
          match->root->getLoc(), result.getType(), match->x, /*residual=*/Value(), match->weight, match->bias,
          builder.getF64FloatAttr(match->eps),
          ein::ir::LayerNormVariantAttr::get(builder.getContext(), match->variant));
      norm.getDefiningOp()->setLoc(ein::ir::fusedLocation(norm.getDefiningOp(), {match->root}, getArgument()));
      result.replaceAllUsesWith(norm);
    }
    // The replaced chains go first, so a sum they read has only the norm left.
    IRRewriter rewriter(&getContext());
    (void)runRegionDCE(rewriter, getOperation()->getRegions());
    // layernorm(x + r): the add joins the norm when nothing else reads the sum.
    getOperation().walk([&](ein::ir::LayerNormOp norm) {
      BinaryOp add = binaryOf(norm.getInput(), BinaryKind::add);
      if (norm.getResidual() || !add || !add->hasOneUse() || add.getLhs().getType() != add.getType() ||
          add.getRhs().getType() != add.getType())
        return;
      norm.getInputMutable().assign(add.getLhs());
      norm.getResidualMutable().assign(add.getRhs());
      norm->setLoc(ein::ir::fusedLocation(norm, {add}, getArgument()));
    });
    (void)runRegionDCE(rewriter, getOperation()->getRegions());
  }
};

}  // namespace
