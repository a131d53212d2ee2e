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

// `side` of an einops pattern without its last axis when that is a plain
// name (`b h w c` -> `b h w`, name `c`); nullopt when it ends in a group.
std::optional<std::pair<std::string, std::string>> withoutLastAxis(llvm::StringRef side) {
  side = side.rtrim();
  size_t start = side.size();
  while (start > 0 && (std::isalnum(static_cast<unsigned char>(side[start - 1])) || side[start - 1] == '_')) --start;
  if (start == side.size() || start == 0 || side[start - 1] != ' ') return std::nullopt;
  return std::make_pair(side.substr(0, start).rtrim().str(), side.substr(start).str());
}

// Whole-word occurrences of `name` in `text`.
int occurrences(llvm::StringRef text, llvm::StringRef name) {
  int count = 0;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find(name); at != llvm::StringRef::npos; at = text.find(name, at + 1))
    if ((at == 0 || !word(text[at - 1])) && (at + name.size() == text.size() || !word(text[at + name.size()])))
      ++count;
  return count;
}

// rearrange(embedding(ids, table), "P c -> Q c") with constant ids, where the
// pattern leaves the width axis `c` last and alone, is
// embedding(rearrange(ids, "P -> Q"), table): the rows move, not the
// elements. The ids then fold, so a roll followed by a window partition is
// one gather by a constant index.
void moveRearrangesIntoIds(func::FuncOp function) {
  SmallVector<ein::ir::RearrangeOp> rearranges;
  function.walk([&](ein::ir::RearrangeOp op) { rearranges.push_back(op); });
  for (ein::ir::RearrangeOp rearrange : rearranges) {
    auto embedding = rearrange.getInput().getDefiningOp<ein::ir::EmbeddingOp>();
    if (!embedding || !embedding->hasOneUse() || rearrange.getReduction() ||
        !embedding.getIds().getDefiningOp<ein::ir::ConstantOp>())
      continue;
    auto [left, right] = rearrange.getPattern().split("->");
    auto lhs = withoutLastAxis(left), rhs = withoutLastAxis(right);
    if (!lhs || !rhs || lhs->second != rhs->second || lhs->first.empty() || rhs->first.empty() ||
        occurrences(rearrange.getPattern(), lhs->second) != 2)
      continue;
    SmallVector<NamedAttribute> sizes;
    for (NamedAttribute size : rearrange.getSizes())
      if (size.getName() != lhs->second) sizes.push_back(size);
    OpBuilder builder(rearrange);
    auto sizeDict = builder.getDictionaryAttr(sizes);
    std::string pattern = lhs->first + " -> " + rhs->first;
    auto idsType = ein::ir::RearrangeOp::inferResultType(embedding.getIds().getType(), pattern, sizeDict, false);
    if (ein::failed(idsType)) continue;
    Value ids = builder.create<ein::ir::RearrangeOp>(rearrange.getLoc(), std::get<RankedTensorType>(idsType),
                                                     embedding.getIds(), builder.getStringAttr(pattern), sizeDict,
                                                     nullptr);
    Value gathered = builder.create<ein::ir::EmbeddingOp>(embedding.getLoc(), rearrange.getType(), ids,
                                                          embedding.getTable());
    rearrange.getResult().replaceAllUsesWith(gathered);
    rearrange.erase();
    embedding.erase();
  }
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
    moveRearrangesIntoIds(getOperation());
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
