// Grouped-query attention: attention over repeated key heads (repeat_kv)
// reads the keys and values in place.

#include "ir/source_locations.hpp"
#include <map>

#include "compiler/transforms/ein/attention_fusion.hpp"
#include "ir/ein/equations.hpp"

using namespace mlir;
using namespace ein::attention_fusion;

namespace {

// A key or value that repeats one axis of `input` `group` times, each
// element's copies adjacent (`b h t d -> b (h g) t d`, Hugging Face's
// repeat_kv) or the whole axis over again (`(g h)`).
struct RepeatedAxis {
  Value input;
  size_t axis = 0;
  int64_t group = 1;
  bool adjacent = true;
};

std::optional<RepeatedAxis> matchRepeatedAxis(Value value) {
  auto repeat = value.getDefiningOp<ein::ir::RearrangeOp>();
  if (!repeat || repeat.getReduction()) return std::nullopt;
  ein::Shape inputShape = ein::ir::shapeOf(repeat.getInput().getType());
  auto planned = ein::planEinops(ein::EinopsKind::Repeat, repeat.getPattern(), inputShape, repeat.getSizeMap());
  if (ein::failed(planned)) return std::nullopt;
  const ein::EinopsPlan &plan = std::get<ein::EinopsPlan>(planned);
  const size_t rank = inputShape.size();
  // Every input axis is whole and stays in place; one gains a new axis.
  if (plan.inputAxes.size() != rank || plan.outputGroups.size() != rank) return std::nullopt;
  std::optional<RepeatedAxis> found;
  for (size_t axis = 0; axis < rank; ++axis) {
    const std::vector<int> &group = plan.outputGroups[axis];
    auto fromInput = [&](int member) { return plan.outputSource[member] == static_cast<int>(axis); };
    if (group.size() == 1 && fromInput(group[0])) continue;
    if (group.size() != 2 || found) return std::nullopt;
    int fresh = plan.outputSource[group[0]] < 0 ? 0 : plan.outputSource[group[1]] < 0 ? 1 : -1;
    if (fresh < 0 || !fromInput(group[1 - fresh])) return std::nullopt;
    std::optional<int64_t> count = plan.outputAxisSizes[group[fresh]].constant();
    if (!count || *count < 1) return std::nullopt;
    found = RepeatedAxis{repeat.getInput(), axis, *count, fresh == 1};
  }
  return found;
}

}  // namespace

namespace ein::attention_fusion {

// Attention over keys and values repeated alike along a batch axis (heads)
// becomes grouped-query attention: each group of query heads turns into more
// queries of its key head, `[.., (h g), l, e]` seen as `[.., h, (g l), e]`,
// so the kernel reads the keys and values in place, never the repeats; the
// result is seen back as `[.., (h g), l, e]`. A causal op keeps its positions
// (query i is position i mod l).
void readRepeatedHeadsInPlace(ein::ir::AttentionOp attention, llvm::StringRef pass) {
  auto key = matchRepeatedAxis(attention.getKey()), value = matchRepeatedAxis(attention.getValue());
  const size_t rank = ein::ir::shapeOf(attention.getQuery().getType()).size();
  if (!key || !value || key->axis != value->axis || key->group != value->group || key->adjacent != value->adjacent ||
      key->group == 1 || key->axis + 2 >= rank)
    return;
  OpBuilder builder(attention);
  Location loc = attention.getLoc();
  const size_t head = key->axis;
  const std::string grouped = key->adjacent ? "(h g)" : "(g h)";
  // `x`'s last `count` axes named as the query's, the head axis split.
  auto axesOf = [&](size_t count, bool split, bool groupQueries) {
    std::string pattern;
    for (size_t axis = rank - count; axis < rank; ++axis) {
      std::string name = axis == head ? (split ? grouped : "h")
                         : axis == rank - 2 ? (groupQueries ? "(g l)" : "l")
                                            : "a" + std::to_string(axis);
      pattern += (pattern.empty() ? "" : " ") + name;
    }
    return pattern;
  };
  auto groupSize = builder.getDictionaryAttr(builder.getNamedAttr("g", builder.getI64IntegerAttr(key->group)));
  auto rearrange = [&](Value x, const std::string &pattern) -> Value {
    auto type = ein::ir::RearrangeOp::inferResultType(x.getType(), pattern, groupSize, false);
    assert(!ein::failed(type) && "a grouped-query rearrange has no type");
    return builder.create<ein::ir::RearrangeOp>(loc, std::get<RankedTensorType>(type), x,
                                                builder.getStringAttr(pattern), groupSize, ein::ir::ReduceKindAttr());
  };
  Value query = rearrange(attention.getQuery(), axesOf(rank, true, false) + " -> " + axesOf(rank, false, true));
  Value mask = attention.getMask();
  if (mask) {
    ein::Shape maskShape = ein::ir::shapeOf(mask.getType());
    const size_t maskRank = maskShape.size();
    bool perHead = maskRank + head >= rank && maskShape[maskRank - rank + head] != 1;
    if (perHead) {
      mask = rearrange(mask, axesOf(maskRank, true, false) + " -> " + axesOf(maskRank, false, true));
    } else if (maskRank >= 2 && maskShape[maskRank - 2] != 1) {
      // One mask for every head of a group, read by each: stacked along the
      // queries (a mask broadcast over the queries broadcasts over them all).
      SmallVector<Value> copies(static_cast<size_t>(key->group), mask);
      auto type = ein::ir::ConcatOp::inferResultType(ValueRange(copies).getTypes(), maskRank - 2);
      assert(!ein::failed(type) && "stacked masks have no type");
      mask = builder.create<ein::ir::ConcatOp>(loc, std::get<RankedTensorType>(type), copies,
                                               builder.getI64IntegerAttr(static_cast<int64_t>(maskRank) - 2));
    }
  }
  auto type = ein::ir::AttentionOp::inferResultType(query.getType(), key->input.getType(), value->input.getType(),
                                                    mask ? mask.getType() : Type(), attention.getMaskKind());
  assert(!ein::failed(type) && "grouped-query attention has no type");
  auto fused = builder.create<ein::ir::AttentionOp>(
      loc, std::get<RankedTensorType>(type), query, key->input, value->input, mask, attention.getScaleAttr(),
      attention.getMaskKindAttr(), attention.getMaskFillAttr(), attention.getCausalPositionsAttr(),
      attention.getSoftcapAttr());
  Value result = rearrange(fused, axesOf(rank, false, true) + " -> " + axesOf(rank, true, false));
  fused->setLoc(ein::ir::fusedLocation(fused, {attention}, pass));
  attention.replaceAllUsesWith(result);
  attention.erase();
}

}  // namespace ein::attention_fusion
