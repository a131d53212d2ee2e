// Folds ein ops whose operands are all constants into constants, with the
// reference evaluator's semantics: index tables and masks a model computes
// from arange, //, % and comparisons become data in the artifact.
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"
#include "passes/Passes.h"
#include "reference/ReferenceEvaluator.h"

namespace ein {
#define GEN_PASS_DEF_FOLDCONSTANTS
#include "passes/Passes.h.inc"
}  // namespace ein

using namespace mlir;

namespace {

// Larger results stay computed at run time: a folded constant is stored in
// the artifact, where a broadcast of a scalar would take far more room than
// the step that computes it.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 20;

// `values` as an attribute of `type`'s element type (f32/f16/bf16, iN, i1).
DenseElementsAttr attributeOf(RankedTensorType type, const std::vector<double> &values) {
  Type element = type.getElementType();
  auto plain = RankedTensorType::get(type.getShape(), element);
  if (auto floatType = dyn_cast<FloatType>(element)) {
    SmallVector<APFloat> floats;
    for (double value : values) {
      APFloat converted(value);
      bool losesInfo = false;
      converted.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven, &losesInfo);
      floats.push_back(converted);
    }
    return DenseElementsAttr::get(plain, floats);
  }
  if (element.isInteger(1)) {
    SmallVector<bool> bools;
    for (double value : values) bools.push_back(value != 0);
    return DenseElementsAttr::get(plain, bools);
  }
  unsigned width = element.getIntOrFloatBitWidth();
  SmallVector<APInt> integers;
  for (double value : values) integers.push_back(APInt(width, static_cast<int64_t>(value), /*isSigned=*/true));
  return DenseElementsAttr::get(plain, integers);
}

bool foldable(Operation *op) {
  if (!isa<ein::ir::EinDialect>(op->getDialect()) || isa<ein::ir::ConstantOp, ein::ir::ParamOp>(op) ||
      op->getNumResults() != 1 || op->getNumOperands() == 0)
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || !type.hasStaticShape() || type.getNumElements() > kMaxFoldedElements) return false;
  // A result with a sizes encoding depends on ranged dims.
  if (type.getEncoding()) return false;
  return llvm::all_of(op->getOperands(), [](Value operand) { return operand.getDefiningOp<ein::ir::ConstantOp>(); });
}

struct FoldConstantsPass : ein::impl::FoldConstantsBase<FoldConstantsPass> {
  void runOnOperation() override {
    // In order: a folded op's users see a constant when their turn comes.
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops) {
      if (!foldable(op)) continue;
      llvm::Expected<ein::reference::Tensor> value = ein::reference::foldConstantOp(op);
      if (!value) {
        llvm::consumeError(value.takeError());  // left to run time, which reports it
        continue;
      }
      auto type = cast<RankedTensorType>(op->getResult(0).getType());
      OpBuilder builder(op);
      Value constant = builder.create<ein::ir::ConstantOp>(op->getLoc(), type, attributeOf(type, value->values));
      op->getResult(0).replaceAllUsesWith(constant);
      op->erase();
    }
    IRRewriter rewriter(&getContext());
    (void)runRegionDCE(rewriter, getOperation()->getRegions());
  }
};

}  // namespace
