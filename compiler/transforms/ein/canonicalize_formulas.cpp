// Rewrites the spellings of one formula into one form, so that the fusion
// passes, which match that form, find every spelling.
#include "compiler/transforms/ein/matchers.hpp"
#include "compiler/transforms/ein/passes.hpp"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace ein {
#define GEN_PASS_DEF_CANONICALIZEFORMULAS
#include "compiler/transforms/ein/passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::binaryOf;
using ein::scalarConstant;
using ein::ir::BinaryKind;
using ein::ir::BinaryKindAttr;
using ein::ir::BinaryOp;
using ein::ir::ReduceKind;
using ein::ir::ReduceKindAttr;
using ein::ir::ReduceOp;
using ein::ir::UnaryKind;
using ein::ir::UnaryKindAttr;
using ein::ir::UnaryOp;

namespace {

bool isFloatTensor(Value value) {
  return isa<FloatType>(cast<RankedTensorType>(value.getType()).getElementType());
}

Value unary(PatternRewriter &rewriter, Location loc, UnaryKind kind, Value x) {
  return rewriter.create<UnaryOp>(loc, x.getType(), UnaryKindAttr::get(rewriter.getContext(), kind), x);
}

// x ** c for the constants that have a function of their own: 2 -> x * x,
// 0.5 -> sqrt(x), -0.5 -> rsqrt(x), -1 -> 1 / x.
struct PowerOfAConstant : OpRewritePattern<BinaryOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BinaryOp op, PatternRewriter &rewriter) const override {
    if (op.getKind() != BinaryKind::pow || op.getLhs().getType() != op.getType() || !isFloatTensor(op)) return failure();
    std::optional<double> exponent = scalarConstant(op.getRhs());
    if (!exponent) return failure();
    Value x = op.getLhs();
    MLIRContext *context = rewriter.getContext();
    if (*exponent == 2.0) {
      rewriter.replaceOpWithNewOp<BinaryOp>(op, op.getType(), BinaryKindAttr::get(context, BinaryKind::mul), x, x);
    } else if (*exponent == 0.5) {
      rewriter.replaceOp(op, unary(rewriter, op.getLoc(), UnaryKind::sqrt, x));
    } else if (*exponent == -0.5) {
      rewriter.replaceOp(op, unary(rewriter, op.getLoc(), UnaryKind::rsqrt, x));
    } else if (*exponent == -1.0) {
      // 1 with the exponent's (scalar) type: the division broadcasts it.
      Value one = rewriter.create<ein::ir::ConstantOp>(
          op.getLoc(), DenseElementsAttr::get(cast<RankedTensorType>(op.getRhs().getType()),
                                              rewriter.getFloatAttr(getElementTypeOrSelf(op.getType()), 1.0)));
      rewriter.replaceOpWithNewOp<BinaryOp>(op, op.getType(), BinaryKindAttr::get(context, BinaryKind::div), one, x);
    } else {
      return failure();
    }
    return success();
  }
};

// a * rsqrt(b) -> a / sqrt(b), and a * (1 / b) -> a / b (either factor order).
struct MultiplyByAReciprocal : OpRewritePattern<BinaryOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BinaryOp op, PatternRewriter &rewriter) const override {
    if (op.getKind() != BinaryKind::mul || !isFloatTensor(op)) return failure();
    MLIRContext *context = rewriter.getContext();
    for (auto [a, factor] : {std::pair{op.getLhs(), op.getRhs()}, {op.getRhs(), op.getLhs()}}) {
      Value denominator;
      if (auto rsqrt = factor.getDefiningOp<UnaryOp>(); rsqrt && rsqrt.getKind() == UnaryKind::rsqrt)
        denominator = unary(rewriter, op.getLoc(), UnaryKind::sqrt, rsqrt.getInput());
      else if (BinaryOp reciprocal = binaryOf(factor, BinaryKind::div); reciprocal && scalarConstant(reciprocal.getLhs()) == 1.0 &&
                                                                     reciprocal.getType() == reciprocal.getRhs().getType())
        denominator = reciprocal.getRhs();
      if (!denominator) continue;
      rewriter.replaceOpWithNewOp<BinaryOp>(op, op.getType(), BinaryKindAttr::get(context, BinaryKind::div), a,
                                            denominator);
      return success();
    }
    return failure();
  }
};

// mean(d * d, axes) with d = x - mean(x, axes, keepdim) is the biased
// variance of x over those axes.
struct MeanOfSquaredDeviations : OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceOp op, PatternRewriter &rewriter) const override {
    if (op.getKind() != ReduceKind::mean || !isFloatTensor(op)) return failure();
    BinaryOp square = binaryOf(op.getInput(), BinaryKind::mul);
    if (!square || square.getLhs() != square.getRhs()) return failure();
    BinaryOp deviation = binaryOf(square.getLhs(), BinaryKind::sub);
    if (!deviation || deviation.getLhs().getType() != deviation.getType()) return failure();
    auto mean = deviation.getRhs().getDefiningOp<ReduceOp>();
    Value x = deviation.getLhs();
    if (!mean || mean.getKind() != ReduceKind::mean || mean.getInput() != x || !mean.getKeepdim() ||
        mean.getAxes() != op.getAxes())
      return failure();
    rewriter.replaceOpWithNewOp<ReduceOp>(op, op.getType(), x, ReduceKindAttr::get(rewriter.getContext(), ReduceKind::var),
                                          op.getAxesAttr(), op.getKeepdimAttr(), rewriter.getI64IntegerAttr(0));
    return success();
  }
};

struct CanonicalizeFormulasPass : ein::impl::CanonicalizeFormulasBase<CanonicalizeFormulasPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<PowerOfAConstant, MultiplyByAReciprocal, MeanOfSquaredDeviations>(&getContext());
    // Only the arithmetic is rewritten (and erased once dead): a parameter the
    // model declares but does not use stays, so the weights are still checked.
    SmallVector<Operation *> arithmetic;
    getOperation().walk([&](Operation *op) {
      if (isa<BinaryOp, UnaryOp, ReduceOp>(op)) arithmetic.push_back(op);
    });
    GreedyRewriteConfig config;
    config.strictMode = GreedyRewriteStrictness::ExistingAndNewOps;
    if (failed(applyOpPatternsAndFold(arithmetic, std::move(patterns), config))) signalPassFailure();
  }
};

}  // namespace
