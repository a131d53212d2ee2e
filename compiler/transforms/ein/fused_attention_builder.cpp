// Builds ein.attention or ein.talking_heads_attention for a matched attention,
// bringing the operands into its canonical layout by rearranges. A constant
// mask that is exactly causal becomes causal attention.

#include <map>

#include "compiler/transforms/ein/attention_fusion.hpp"
#include "ir/source_locations.hpp"
#include "ir/ein/equations.hpp"

using namespace mlir;
using namespace ein::attention_fusion;
using ein::ir::BinaryKind;

namespace {

// A hidden score's value, as a fill or an added term, that makes the same
// softmax as -inf: -inf, or one so far below any finite score (f32's lowest,
// -3.4e38, as PyTorch's masked_fill(mask, torch.finfo(dtype).min) writes)
// that exp(fill - max) is 0 while the row sees some key.
bool hidesLikeMinusInfinity(double value) { return value <= -1e30; }

// Whether `attention`'s mask is a constant that hides exactly the keys causal
// attention hides: key j from query i where j > i + J - I (bottom-right, as
// the op's causal_positions = I), for every batch index it broadcasts over,
// with each row seeing at least one key (I <= J). Then the op needs no mask,
// and the kernels skip the key blocks above the diagonal.
bool isCausalMask(const Attention &attention, const std::map<std::string, ein::Size> &sizes) {
  const ScoreRoles &roles = attention.roles;
  if (!attention.mask || !attention.addedMasks.empty() || roles.queries.size() != 1 || attention.head) return false;
  auto constant = attention.mask.getDefiningOp<ein::ir::ConstantOp>();
  auto values = constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!values) return false;
  const std::optional<int64_t> queries = sizes.at(roles.queries.front()).constant(),
                               keys = sizes.at(roles.key).constant();
  if (!queries || !keys || *queries > *keys) return false;
  const bool fill = attention.maskKind == ein::ir::MaskKind::keep || attention.maskKind == ein::ir::MaskKind::drop;
  if (fill && !hidesLikeMinusInfinity(attention.maskFill)) return false;
  if (!fill && attention.maskKind != ein::ir::MaskKind::add) return false;
  // The mask's axes are the scores' last ones; the query and key axes must be whole.
  auto type = cast<RankedTensorType>(values.getType());
  Labels maskLabels(roles.scores.end() - type.getRank(), roles.scores.end());
  auto axisOf = [&](const std::string &label, int64_t size) -> std::optional<int64_t> {
    for (int64_t axis = 0; axis < type.getRank(); ++axis)
      if (maskLabels[axis] == label && type.getDimSize(axis) == size) return axis;
    return std::nullopt;
  };
  const std::optional<int64_t> queryAxis = axisOf(roles.queries.front(), *queries), keyAxis = axisOf(roles.key, *keys);
  if (!queryAxis || !keyAxis) return false;
  const ArrayRef<int64_t> shape = type.getShape();
  auto visibleAt = [&](int64_t flat) {
    int64_t i = 0, j = 0;
    for (int64_t axis = type.getRank() - 1; axis >= 0; --axis) {
      if (axis == *queryAxis) i = flat % shape[axis];
      if (axis == *keyAxis) j = flat % shape[axis];
      flat /= shape[axis];
    }
    return j <= i + *keys - *queries;
  };
  int64_t flat = 0;
  if (type.getElementType().isInteger(1)) {
    if (!fill) return false;
    const bool keep = attention.maskKind == ein::ir::MaskKind::keep;
    for (bool flag : values.getValues<bool>())
      if (flag != (visibleAt(flat++) == keep)) return false;
    return true;
  }
  if (fill || !isa<FloatType>(type.getElementType())) return false;
  for (const APFloat &term : values.getValues<APFloat>()) {
    const double value = term.convertToDouble();
    if (visibleAt(flat++) ? value != 0.0 : !hidesLikeMinusInfinity(value)) return false;
  }
  return true;
}

// Builds the fused op and its layout changes.
class Rewriter {
 public:
  Rewriter(Operation *at, const Attention &attention, llvm::StringRef pass)
      : builder(at), loc(at->getLoc()), attention(attention), pass(pass) {
    const ScoreRoles &roles = attention.roles;
    for (auto [value, labels] : {std::pair{roles.q, &roles.qLabels}, {roles.k, &roles.kLabels},
                                 {attention.v, &attention.vLabels}})
      for (auto [label, size] : llvm::zip(*labels, ein::ir::shapeOf(value.getType()))) sizes[label] = size;
  }

  // False, with nothing replaced, where a layout change cannot be written as
  // an einops pattern (a group of two sizes over ranged dims).
  bool run() {
    const ScoreRoles &roles = attention.roles;
    // Canonical order: batch labels (the head last for talking heads), the
    // queries as one axis (a unit axis when there is none, a merged one for
    // grouped heads), then the feature axis.
    Labels batch;
    for (const std::string &label : roles.batch)
      if (label != attention.head) batch.push_back(label);
    if (attention.head) batch.push_back(*attention.head);
    auto with = [&](std::initializer_list<Labels> tail) {
      SmallVector<Labels> groups;
      for (const std::string &label : batch) groups.push_back({label});
      groups.append(tail.begin(), tail.end());
      return groups;
    };
    Value q = arrange(roles.q, singletons(roles.qLabels), with({roles.queries, {roles.feature}}));
    Value k = arrange(roles.k, singletons(roles.kLabels), with({{roles.key}, {roles.feature}}));
    Value v = arrange(attention.v, singletons(attention.vLabels), with({{roles.key}, {attention.value}}));
    if (!q || !k || !v) return false;
    const bool causal = isCausalMask(attention, sizes);
    Value mask;
    if (attention.mask && !causal) {
      Value sum = attention.mask;  // the additive terms as one mask operand
      for (Value term : attention.addedMasks) {
        auto summed = ein::ir::BinaryOp::inferResultType(BinaryKind::add, sum.getType(), term.getType());
        if (ein::failed(summed)) return false;  // cannot happen: each term broadcasts to the scores
        sum = builder.create<ein::ir::BinaryOp>(loc, std::get<RankedTensorType>(summed),
                                                ein::ir::BinaryKindAttr::get(builder.getContext(), BinaryKind::add),
                                                sum, term);
      }
      auto maskType = cast<RankedTensorType>(sum.getType());
      Labels maskLabels(roles.scores.end() - maskType.getRank(), roles.scores.end());
      mask = arrange(sum, singletons(maskLabels), with({roles.queries, {roles.key}}));
      if (!mask) return false;
    }
    SmallVector<Labels> resultGroups = with({roles.queries, {attention.value}});
    ein::Shape resultShape;
    for (const Labels &group : resultGroups) resultShape.push_back(groupSize(group));
    auto outType = cast<RankedTensorType>(attention.pv->getResult(0).getType());
    auto resultType = ein::ir::sizedTensorType(resultShape, outType.getElementType());
    auto scale = builder.getF64FloatAttr(roles.scale);
    auto maskKind = ein::ir::MaskKindAttr::get(builder.getContext(),
                                               causal ? ein::ir::MaskKind::none : attention.maskKind);
    auto maskFill = builder.getF64FloatAttr(causal ? 0.0 : attention.maskFill);
    Value fused;
    if (attention.head) {
      Value preMix, preBias, postMix, postBias;
      if (attention.preMix) std::tie(preMix, preBias) = mixOperands(*attention.preMix);
      if (attention.postMix) std::tie(postMix, postBias) = mixOperands(*attention.postMix);
      fused = builder.create<ein::ir::TalkingHeadsAttentionOp>(loc, resultType, q, k, v, preMix, preBias, postMix,
                                                               postBias, mask, scale, maskKind, maskFill);
    } else {
      auto causalPositions =
          causal ? ein::ir::SizesAttr::get(builder.getContext(), {sizes.at(roles.queries.front())}) : nullptr;
      fused = builder.create<ein::ir::AttentionOp>(loc, resultType, q, k, v, mask, scale, maskKind, maskFill,
                                                   causalPositions, builder.getF64FloatAttr(attention.softcap));
    }
    Value result = arrange(fused, resultGroups, singletons(attention.outLabels));
    if (!result) return false;
    fused.getDefiningOp()->setLoc(ein::ir::fusedLocation(fused.getDefiningOp(), {attention.pv}, pass));
    attention.pv->getResult(0).replaceAllUsesWith(result);
    return true;
  }

 private:
  static SmallVector<Labels> singletons(ArrayRef<std::string> labels) {
    SmallVector<Labels> groups;
    for (const std::string &label : labels) groups.push_back({label});
    return groups;
  }

  ein::Size groupSize(const Labels &group) {
    ein::Size size = 1;
    for (const std::string &label : group) size *= sizes.at(label);
    return size;
  }

  // `label`'s size as an einops keyword size; null where it is over ranged
  // dims (einops takes constants, and infers at most one size per group).
  std::optional<NamedAttribute> keywordSize(const std::string &label) {
    std::optional<int64_t> size = sizes.at(label).constant();
    if (!size) return std::nullopt;
    return builder.getNamedAttr(nameOf(label), builder.getI64IntegerAttr(*size));
  }

  // A name for `label` in einops patterns: the user's own where it is one
  // (so the IR reads "b i h d -> b h i d"), else a fresh one.
  std::string nameOf(const std::string &label) {
    if (auto found = names.find(label); found != names.end()) return found->second;
    auto taken = [&](const std::string &name) {
      return llvm::any_of(names, [&](const auto &entry) { return entry.second == name; });
    };
    // Labels renamed apart (') and a matmul's (@m) keep their letters.
    std::string name = StringRef(label).ltrim("'@").str();
    bool identifier = !name.empty() && std::isalpha(static_cast<unsigned char>(name[0])) &&
                      llvm::all_of(name, [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    for (int next = 0; !identifier || taken(name); ++next) {
      name = "x" + std::to_string(next);
      identifier = true;
    }
    names[label] = name;
    return name;
  }

  // The mix matrix as [g, h] and its bias as [g].
  std::pair<Value, Value> mixOperands(const HeadMix &mix) {
    Value weight = mix.weight;
    if (mix.transposed) weight = arrange(weight, {{"h"}, {"g"}}, {{"g"}, {"h"}});
    Value bias;
    if (mix.bias) {
      // The bias is [.., g, ..] with unit axes elsewhere (matchHeadMix).
      auto type = cast<RankedTensorType>(mix.bias.getType());
      SmallVector<Labels> groups;
      for (int64_t i = 0; i < type.getRank(); ++i) groups.push_back(type.getDimSize(i) == 1 ? Labels{} : Labels{"g"});
      if (!llvm::is_contained(groups, Labels{"g"})) groups.back() = {"g"};  // one head: any unit axis will do
      bias = arrange(mix.bias, groups, {{"g"}});
    }
    return {weight, bias};
  }

  // `value`, whose axes are the groups `from` (an axis composed of labels; {}
  // a unit axis), rearranged to the groups of `to`. A one-label axis missing
  // in `from` becomes a unit axis (it broadcasts); a label missing from a
  // composed axis of `to`, or present there only with size 1, is repeated
  // (einops.repeat: a broadcast mask over grouped heads). Unit axes of `from`
  // that `to` does not name vanish.
  Value arrange(Value value, ArrayRef<Labels> from, ArrayRef<Labels> to) {
    auto type = cast<RankedTensorType>(value.getType());
    auto named = [&](const std::string &label) {
      return llvm::any_of(to, [&](const Labels &group) { return llvm::is_contained(group, label); });
    };
    std::map<std::string, ein::Size> inputSize;  // labels the input has, with their size there
    ein::Shape typeShape = ein::ir::shapeOf(type);
    std::string input, output;
    for (auto [axis, group] : llvm::enumerate(from)) {
      input += axis ? " " : "";
      ein::Size size = typeShape[axis];
      // A unit axis: none, one `to` does not name, or a size-1 stand-in for
      // a larger label that `to` composes with others (repeated there).
      bool unit = group.empty();
      if (group.size() == 1) {
        const std::string &label = group[0];
        bool broadcast = size == 1 && sizes.count(label) && sizes.at(label) != 1;
        unit = !named(label) || (broadcast && !llvm::is_contained(to, group));
      }
      if (unit) {
        input += "1";
        continue;
      }
      if (group.size() == 1) {
        input += nameOf(group[0]);
        inputSize[group[0]] = size;
        continue;
      }
      input += "(";
      for (auto [i, label] : llvm::enumerate(group)) {
        input += (i ? " " : "") + nameOf(label);
        inputSize[label] = sizes.at(label);
      }
      input += ")";
    }
    ein::Shape shape;
    SmallVector<NamedAttribute> repeated;
    for (auto [axis, group] : llvm::enumerate(to)) {
      output += axis ? " " : "";
      if (group.size() == 1) {
        auto found = inputSize.find(group[0]);
        output += found == inputSize.end() ? "1" : nameOf(group[0]);
        shape.push_back(found == inputSize.end() ? ein::Size(1) : found->second);
        continue;
      }
      if (group.empty()) {
        output += "1";
        shape.push_back(1);
        continue;
      }
      output += "(";
      for (auto [i, label] : llvm::enumerate(group)) {
        output += (i ? " " : "") + nameOf(label);
        if (inputSize.count(label)) continue;
        std::optional<NamedAttribute> keyword = keywordSize(label);
        if (!keyword) return Value();  // a repeated axis over ranged dims
        repeated.push_back(*keyword);
      }
      output += ")";
      shape.push_back(groupSize(group));
    }
    if (input == output) return value;
    auto resultType = ein::ir::sizedTensorType(shape, type.getElementType());
    // Sizes of the labels a composed input axis splits into: all but one
    // are needed, and the one may be over ranged dims.
    for (const Labels &group : from) {
      if (group.size() < 2) continue;
      size_t inferred = 0;
      for (const std::string &label : group) {
        std::optional<NamedAttribute> keyword = keywordSize(label);
        if (keyword)
          repeated.push_back(*keyword);
        else if (++inferred > 1)
          return Value();
      }
    }
    return builder.create<ein::ir::RearrangeOp>(loc, resultType, value, builder.getStringAttr(input + " -> " + output),
                                                builder.getDictionaryAttr(repeated), ein::ir::ReduceKindAttr());
  }

  OpBuilder builder;
  Location loc;
  const Attention &attention;
  llvm::StringRef pass;  // named in the fused op's location
  std::map<std::string, ein::Size> sizes;      // every label of Q, K and V
  std::map<std::string, std::string> names;    // label -> einops name
};

}  // namespace

bool ein::attention_fusion::replaceWithFusedOp(const Attention &attention, llvm::StringRef pass) {
  return Rewriter(attention.pv, attention, pass).run();
}
