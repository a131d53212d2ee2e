// Folds ein ops whose operands are all constants into constants, with the
// reference evaluator's semantics: index tables and masks a model computes
// from arange, //, % and comparisons become data in the artifact.
#include "compiler/reference/reference_evaluator.hpp"
#include "compiler/transforms/ein/passes.hpp"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"

namespace ein {
#define GEN_PASS_DEF_FOLDCONSTANTS
#include "compiler/transforms/ein/passes.h.inc"
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

// `rearrange` as "P c -> Q c": the last axis alone and last on both sides;
// returns "P -> Q", the pattern of the rows.
std::optional<std::string> rowsPattern(ein::ir::RearrangeOp rearrange) {
  if (rearrange.getReduction()) return std::nullopt;
  auto [left, right] = rearrange.getPattern().split("->");
  auto lhs = withoutLastAxis(left), rhs = withoutLastAxis(right);
  if (!lhs || !rhs || lhs->second != rhs->second || lhs->first.empty() || rhs->first.empty() ||
      occurrences(rearrange.getPattern(), lhs->second) != 2)
    return std::nullopt;
  return lhs->first + " -> " + rhs->first;
}

// The `sizes` of a rearrange without the row pattern's dropped axis.
DictionaryAttr sizesWithout(OpBuilder &builder, ein::ir::RearrangeOp rearrange) {
  auto [left, right] = rearrange.getPattern().split("->");
  std::string last = withoutLastAxis(left)->second;
  SmallVector<NamedAttribute> sizes;
  for (NamedAttribute size : rearrange.getSizes())
    if (size.getName() != last) sizes.push_back(size);
  return builder.getDictionaryAttr(sizes);
}

Value createRearrange(OpBuilder &builder, Location loc, Value input, const std::string &pattern, DictionaryAttr sizes) {
  auto type = ein::ir::RearrangeOp::inferResultType(input.getType(), pattern, sizes, false);
  if (ein::failed(type)) return nullptr;
  return builder.create<ein::ir::RearrangeOp>(loc, std::get<RankedTensorType>(type), input,
                                              builder.getStringAttr(pattern), sizes, nullptr);
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
    if (!embedding || !embedding->hasOneUse() || !embedding.getIds().getDefiningOp<ein::ir::ConstantOp>())
      continue;
    std::optional<std::string> pattern = rowsPattern(rearrange);
    if (!pattern) continue;
    OpBuilder builder(rearrange);
    Value ids = createRearrange(builder, rearrange.getLoc(), embedding.getIds(), *pattern,
                                sizesWithout(builder, rearrange));
    if (!ids) continue;
    Value gathered = builder.create<ein::ir::EmbeddingOp>(embedding.getLoc(), rearrange.getType(), ids,
                                                          embedding.getTable());
    rearrange.getResult().replaceAllUsesWith(gathered);
    rearrange.erase();
    embedding.erase();
  }
}

// embedding(ids, rows(rearrange(W, "P c -> Q c"))) with constant ids is
// embedding(ids', rows(W)), ids' = the row of W each row of the rearranged
// tensor comes from, picked by ids: a window merge before a roll is no copy
// of its own. `rows` is "... c -> (...) c" (what roll() gathers from).
void moveRearrangesOutOfTables(func::FuncOp function) {
  SmallVector<ein::ir::EmbeddingOp> embeddings;
  function.walk([&](ein::ir::EmbeddingOp op) { embeddings.push_back(op); });
  for (ein::ir::EmbeddingOp embedding : embeddings) {
    auto rows = embedding.getTable().getDefiningOp<ein::ir::RearrangeOp>();
    if (!rows || rows.getPattern() != "... c -> (...) c" || !embedding.getIds().getDefiningOp<ein::ir::ConstantOp>())
      continue;
    auto rearrange = rows.getInput().getDefiningOp<ein::ir::RearrangeOp>();
    std::optional<std::string> pattern = rearrange ? rowsPattern(rearrange) : std::nullopt;
    auto source = rearrange ? dyn_cast<RankedTensorType>(rearrange.getInput().getType()) : RankedTensorType();
    if (!pattern || !source || !source.hasStaticShape() || source.getEncoding() || source.getRank() < 2) continue;
    OpBuilder builder(embedding);
    Location loc = embedding.getLoc();
    // The row numbers of W, rearranged as the rows were, then flattened.
    SmallVector<int64_t> rowShape(source.getShape().drop_back());
    int64_t count = 1;
    for (int64_t size : rowShape) count *= size;
    SmallVector<int64_t> numbers(count);
    for (int64_t i = 0; i < count; ++i) numbers[i] = i;
    Value iota = builder.create<ein::ir::ConstantOp>(
        loc, DenseElementsAttr::get(RankedTensorType::get(rowShape, builder.getI64Type()), ArrayRef<int64_t>(numbers)));
    Value moved = createRearrange(builder, loc, iota, *pattern, sizesWithout(builder, rearrange));
    Value column = moved ? createRearrange(builder, loc, moved, "... -> (...) 1", builder.getDictionaryAttr({})) : nullptr;
    if (!column) continue;  // left for DCE
    Value picked = builder.create<ein::ir::EmbeddingOp>(loc, embedding.getIds(), column);
    Value ids = createRearrange(builder, loc, picked, "... 1 -> ...", builder.getDictionaryAttr({}));
    Value table = createRearrange(builder, loc, rearrange.getInput(), "... c -> (...) c", builder.getDictionaryAttr({}));
    if (!ids || !table) continue;
    Value gathered = builder.create<ein::ir::EmbeddingOp>(loc, embedding.getType(), ids, table);
    embedding.getResult().replaceAllUsesWith(gathered);
    embedding.erase();
  }
}

bool foldable(Operation *op) {
  if (!isa<ein::ir::EinDialect>(op->getDialect()) || isa<ein::ir::ConstantOp, ein::ir::ParamOp>(op) ||
      op->getNumResults() != 1 || op->getNumOperands() == 0)
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || !type.hasStaticShape() || type.getNumElements() > kMaxFoldedElements) return false;
  // A result with a sizes encoding depends on ranged dims, and so does an op
  // with such an attribute (a slice at offset t - 1 of a constant).
  if (type.getEncoding()) return false;
  bool ranged = false;
  for (NamedAttribute attr : op->getAttrs())
    attr.getValue().walk([&](ein::ir::SizesAttr sizes) {
      for (const ein::Size &size : sizes.sizes()) ranged |= !size.isConstant();
    });
  if (ranged) return false;
  return llvm::all_of(op->getOperands(), [](Value operand) { return operand.getDefiningOp<ein::ir::ConstantOp>(); });
}

struct FoldConstantsPass : ein::impl::FoldConstantsBase<FoldConstantsPass> {
  void runOnOperation() override {
    moveRearrangesIntoIds(getOperation());
    moveRearrangesOutOfTables(getOperation());
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
