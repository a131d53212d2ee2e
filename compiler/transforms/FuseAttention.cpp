// Finds attention by the roles of its indices and replaces it by
// ein.attention or ein.talking_heads_attention.
//
// Starting from each softmax, the scores are traced back through an optional
// mask, an optional head mix (with bias) and optional constant scales to a
// contraction of Q and K; the probabilities are traced forward through an
// optional head mix to a contraction with V. Labels give the roles: in Q, K
// and the scores, a batch axis; in Q and the scores only, the query axis; in
// K and the scores only, the key axis (the softmax's); in Q and K only, the
// feature axis. Operands are brought into the fused op's canonical layout by
// rearranges, which the lowering turns into strides, never copies.
#include <map>
#include <set>

#include "ein/IR/Equations.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"
#include "passes/Passes.h"
#include "transforms/Matchers.h"

namespace ein {
#define GEN_PASS_DEF_FUSEATTENTION
#include "passes/Passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::binaryOf;
using ein::scalarConstant;
using ein::ir::BinaryKind;
using ein::ir::MaskKind;

namespace {

using Labels = SmallVector<std::string>;

// A contraction of two operands seen through labels: a two-operand einsum
// without diagonals, or a matmul of equal-rank operands.
struct Contraction {
  Operation *op = nullptr;
  Value operands[2];
  Labels labels[2];
  Labels out;
};

std::optional<Contraction> matchContraction(Value value) {
  Operation *op = value.getDefiningOp();
  if (!op) return std::nullopt;
  Contraction contraction;
  contraction.op = op;
  if (auto einsum = dyn_cast<ein::ir::EinsumOp>(op)) {
    if (einsum.getInputs().size() != 2) return std::nullopt;
    std::vector<int64_t> ranks;
    for (Value input : einsum.getInputs()) ranks.push_back(cast<RankedTensorType>(input.getType()).getRank());
    auto parsed = ein::EinsumEquation::parse(einsum.getEquation(), ranks, /*canonical=*/true);
    if (ein::failed(parsed)) return std::nullopt;
    const auto &equation = std::get<ein::EinsumEquation>(parsed);
    for (int i = 0; i < 2; ++i) {
      contraction.operands[i] = einsum.getInputs()[i];
      contraction.labels[i].assign(equation.inputs[i].begin(), equation.inputs[i].end());
      if (std::set<std::string>(equation.inputs[i].begin(), equation.inputs[i].end()).size() !=
          equation.inputs[i].size())
        return std::nullopt;  // a diagonal
    }
    contraction.out.assign(equation.output.begin(), equation.output.end());
    return contraction;
  }
  if (auto matmul = dyn_cast<ein::ir::MatmulOp>(op)) {
    auto lhs = cast<RankedTensorType>(matmul.getLhs().getType()), rhs = cast<RankedTensorType>(matmul.getRhs().getType());
    ein::Shape lhsShape = ein::ir::shapeOf(lhs), rhsShape = ein::ir::shapeOf(rhs);
    if (lhs.getRank() < 2 || lhs.getRank() != rhs.getRank() ||
        !std::equal(lhsShape.begin(), lhsShape.end() - 2, rhsShape.begin(), rhsShape.end() - 2))
      return std::nullopt;
    Labels batch;
    for (int64_t i = 0; i + 2 < lhs.getRank(); ++i) batch.push_back("@" + std::to_string(i));
    contraction.operands[0] = matmul.getLhs();
    contraction.operands[1] = matmul.getRhs();
    contraction.labels[0] = batch;
    contraction.labels[0].append({"@m", "@k"});
    contraction.labels[1] = batch;
    contraction.labels[1].append({"@k", "@n"});
    contraction.out = batch;
    contraction.out.append({"@m", "@n"});
    return contraction;
  }
  return std::nullopt;
}

// `contraction` with operand `index`'s labels renamed to `names`
// (position by position) and its other labels renamed apart from them.
Contraction renamed(const Contraction &contraction, int index, ArrayRef<std::string> names) {
  std::map<std::string, std::string> rename;
  for (auto [from, to] : llvm::zip(contraction.labels[index], names)) rename[from] = to;
  auto map = [&](const std::string &label) {
    auto found = rename.find(label);
    return found != rename.end() ? found->second : "'" + label;  // ' keeps new names apart
  };
  Contraction result = contraction;
  for (auto *labels : {&result.labels[0], &result.labels[1], &result.out})
    for (std::string &label : *labels) label = map(label);
  return result;
}

bool contains(ArrayRef<std::string> labels, const std::string &label) { return llvm::is_contained(labels, label); }

// Labels of `contraction` in both operands but not in the output.
Labels contracted(const Contraction &contraction) {
  Labels result;
  for (const std::string &label : contraction.labels[0])
    if (contains(contraction.labels[1], label) && !contains(contraction.out, label)) result.push_back(label);
  return result;
}

// Q . K: the roles of the score labels.
struct ScoreRoles {
  Value q, k;
  Labels qLabels, kLabels;
  Labels scores;  // the labels of the scores, in order
  Labels batch;   // in score order
  Labels queries;  // in Q and the scores only: none (a single query), one, or several (grouped heads)
  std::string key, feature;
  double scale = 1.0;
};

// `value` with constant factors peeled off into `scale`: x * c, c * x, x / c.
// Every peeled op must have no other user.
Value peelScales(Value value, double &scale) {
  while (value.hasOneUse()) {
    auto op = value.getDefiningOp<ein::ir::BinaryOp>();
    if (!op || (op.getType() != op.getLhs().getType() && op.getType() != op.getRhs().getType())) break;
    if (op.getKind() == BinaryKind::mul) {
      if (auto c = scalarConstant(op.getRhs()); c && op.getLhs().getType() == op.getType()) {
        scale *= *c;
        value = op.getLhs();
        continue;
      }
      if (auto c = scalarConstant(op.getLhs()); c && op.getRhs().getType() == op.getType()) {
        scale *= *c;
        value = op.getRhs();
        continue;
      }
    }
    if (op.getKind() == BinaryKind::div)
      if (auto c = scalarConstant(op.getRhs()); c && *c != 0.0 && op.getLhs().getType() == op.getType()) {
        scale /= *c;
        value = op.getLhs();
        continue;
      }
    break;
  }
  return value;
}

// Q . K ending at `scores`, whose key axis must be `keyAxis` (the softmax's:
// every op between keeps the axis order).
std::optional<ScoreRoles> matchScores(Value scores, int64_t keyAxis) {
  ScoreRoles roles;
  Value product = peelScales(scores, roles.scale);
  if (!product.hasOneUse()) return std::nullopt;
  auto qk = matchContraction(product);
  if (!qk) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    double factor = 1.0;
    Value operand = qk->operands[side];
    Value peeled = peelScales(operand, factor);
    roles.scale *= factor;
    (side == 0 ? roles.q : roles.k) = peeled;
  }
  roles.qLabels = qk->labels[0];
  roles.kLabels = qk->labels[1];
  roles.scores = qk->out;
  Labels features = contracted(*qk);
  if (features.size() != 1) return std::nullopt;
  roles.feature = features[0];
  Labels queries, keys;
  for (const std::string &label : qk->out) {  // (reused below as roles.queries)
    bool inQ = contains(roles.qLabels, label), inK = contains(roles.kLabels, label);
    if (inQ && inK) roles.batch.push_back(label);
    else if (inQ) queries.push_back(label);
    else keys.push_back(label);
  }
  // Every operand label has a role: nothing is summed away on its own.
  for (int side = 0; side < 2; ++side)
    for (const std::string &label : qk->labels[side])
      if (!contains(qk->out, label) && label != roles.feature) return std::nullopt;
  if (keys.size() != 1 || llvm::find(roles.scores, keys[0]) - roles.scores.begin() != keyAxis) return std::nullopt;
  roles.queries = queries;
  roles.key = keys[0];
  auto type = cast<RankedTensorType>(scores.getType());
  if (!type.getElementType().isF32()) return std::nullopt;
  return roles;
}

// A contraction with a [heads, heads] matrix over one batch label of the
// scores (talking heads): s'[.., g, ..] = sum_h w[g, h] s[.., h, ..].
struct HeadMix {
  Value weight;             // [g, h] or [h, g]
  bool transposed = false;  // weight is [h, g]
  Value bias;               // indexed by the mixed head only, or null
};

// `value` as a head mix of `input` (labelled `labels`) over `head`, with an
// optional following bias add; the result keeps `labels` position by
// position, the mixed head in the place of the old.
std::optional<HeadMix> matchHeadMix(Value value, Value input, ArrayRef<std::string> labels, const std::string &head) {
  HeadMix mix;
  auto tryContraction = [&](Value candidate) -> bool {
    auto contraction = matchContraction(candidate);
    if (!contraction) return false;
    int side = contraction->operands[0] == input ? 0 : contraction->operands[1] == input ? 1 : -1;
    if (side < 0 || contraction->operands[0] == contraction->operands[1]) return false;
    Contraction c = renamed(*contraction, side, labels);
    const Labels &weightLabels = c.labels[1 - side];
    if (weightLabels.size() != 2 || contracted(c) != Labels{head}) return false;
    std::string mixed = weightLabels[0] == head ? weightLabels[1] : weightLabels[0];
    // The output is the input's labels with the head replaced by the mixed one.
    Labels expected(labels.begin(), labels.end());
    *llvm::find(expected, head) = mixed;
    if (c.out != expected) return false;
    auto weightType = cast<RankedTensorType>(contraction->operands[1 - side].getType());
    if (!weightType.getElementType().isF32() || weightType.getDimSize(0) != weightType.getDimSize(1)) return false;
    mix.weight = contraction->operands[1 - side];
    mix.transposed = weightLabels[0] == head;
    return true;
  };
  if (tryContraction(value)) return mix;
  // (mix) + bias with the bias indexed by the head axis alone.
  auto add = binaryOf(value, BinaryKind::add);
  if (!add) return std::nullopt;
  for (auto [mixed, bias] : {std::pair{add.getLhs(), add.getRhs()}, {add.getRhs(), add.getLhs()}}) {
    if (mixed.getType() != add.getType() || !mixed.hasOneUse() || !tryContraction(mixed)) continue;
    auto biasType = cast<RankedTensorType>(bias.getType());
    auto type = cast<RankedTensorType>(add.getType());
    int64_t headPosition = llvm::find(labels, head) - labels.begin();
    int64_t shift = type.getRank() - biasType.getRank();
    bool headOnly = biasType.getElementType().isF32() && shift <= headPosition;
    for (int64_t i = 0; i < biasType.getRank() && headOnly; ++i)
      headOnly = biasType.getDimSize(i) == (i + shift == headPosition ? type.getDimSize(headPosition) : 1);
    if (!headOnly) continue;
    mix.bias = bias;
    return mix;
  }
  return std::nullopt;
}

// Everything between the softmax and the two contractions.
struct Attention {
  ScoreRoles roles;
  std::optional<HeadMix> preMix, postMix;
  std::optional<std::string> head;  // the mixed batch label (talking heads)
  MaskKind maskKind = MaskKind::none;
  Value mask;
  SmallVector<Value> addedMasks;  // further additive terms, summed into `mask`
  double maskFill = 0.0;
  Operation *pv = nullptr;  // the contraction with V, which the fused op replaces
  Value v;
  Labels vLabels, outLabels;  // in score names
  std::string value;          // v's own label
};

// The unmasked scores ending at `value`: Q . K with scales, then an optional
// head mix (over some batch label). Fills roles, preMix and head.
bool matchUnmaskedScores(Value value, int64_t keyAxis, Attention &attention) {
  if (!value.hasOneUse()) return false;
  if (auto roles = matchScores(value, keyAxis)) {
    attention.roles = *roles;
    return true;
  }
  SmallVector<Value> inputs;  // what a head mix may mix
  auto collect = [&](Value candidate) {
    if (auto contraction = matchContraction(candidate)) inputs.append({contraction->operands[0], contraction->operands[1]});
  };
  collect(value);
  if (auto add = binaryOf(value, BinaryKind::add)) {
    collect(add.getLhs());
    collect(add.getRhs());
  }
  for (Value input : inputs) {
    if (!input.hasOneUse()) continue;
    auto roles = matchScores(input, keyAxis);
    if (!roles) continue;
    for (const std::string &head : roles->batch)
      if (auto mix = matchHeadMix(value, input, roles->scores, head)) {
        attention.roles = *roles;
        attention.preMix = *mix;
        attention.head = head;
        return true;
      }
  }
  return false;
}

// `value` as the unmasked scores plus f32 terms in any grouping
// (`s + bias + mask`, `s + (bias + mask)`, `bias + s`): a bias table, a
// shifted-window mask, an ALiBi slope. Appends the terms to `terms`, the
// outermost first; the sums between them must have no other use.
bool matchAdditiveTerms(Value value, int64_t keyAxis, Attention &attention, SmallVector<Value> &terms, int depth) {
  constexpr int kMaxTerms = 8;  // each level tries both sides: bounded work
  auto add = binaryOf(value, BinaryKind::add);
  if (!add || !value.hasOneUse() || depth >= kMaxTerms) return false;
  for (auto [scores, term] : {std::pair{add.getLhs(), add.getRhs()}, {add.getRhs(), add.getLhs()}}) {
    if (scores.getType() != add.getType() || !cast<RankedTensorType>(term.getType()).getElementType().isF32()) continue;
    terms.push_back(term);
    if (matchUnmaskedScores(scores, keyAxis, attention) ||
        matchAdditiveTerms(scores, keyAxis, attention, terms, depth + 1))
      return true;
    terms.pop_back();
  }
  return false;
}

// The masked scores ending at `value`, the softmax's input.
bool matchMaskedScores(Value value, int64_t keyAxis, Attention &attention) {
  if (matchUnmaskedScores(value, keyAxis, attention)) return true;
  if (!value.hasOneUse()) return false;
  if (auto where = value.getDefiningOp<ein::ir::WhereOp>()) {
    Value condition = where.getCondition();
    if (!cast<RankedTensorType>(condition.getType()).getElementType().isInteger(1)) return false;
    for (auto [kind, fill, scores] : {std::tuple(MaskKind::drop, where.getOnTrue(), where.getOnFalse()),
                                      std::tuple(MaskKind::keep, where.getOnFalse(), where.getOnTrue())}) {
      auto fillValue = scalarConstant(fill);
      if (!fillValue || scores.getType() != where.getType() || !matchUnmaskedScores(scores, keyAxis, attention)) continue;
      attention.maskKind = kind;
      attention.mask = condition;
      attention.maskFill = *fillValue;
      return true;
    }
    return false;
  }
  SmallVector<Value> terms;
  if (!matchAdditiveTerms(value, keyAxis, attention, terms, /*depth=*/0)) return false;
  // A constant zero term (a shifted-window mask without a shift) adds nothing.
  llvm::erase_if(terms, [](Value term) {
    auto constant = term.getDefiningOp<ein::ir::ConstantOp>();
    auto dense = constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : DenseElementsAttr();
    return dense && dense.isSplat() && dense.getSplatValue<APFloat>().isZero();
  });
  if (terms.empty()) return true;
  attention.maskKind = MaskKind::add;
  attention.mask = terms.front();
  attention.addedMasks.assign(terms.begin() + 1, terms.end());
  return true;
}

// The only user of `value`, or null.
Operation *singleUser(Value value) { return value.hasOneUse() ? *value.getUsers().begin() : nullptr; }

// `op` as the contraction of the probabilities `probs` with V over the key
// axis. Fills pv, v, vLabels, outLabels and value.
bool matchValueContraction(Operation *op, Value probs, Attention &attention) {
  if (!op || op->getNumResults() != 1) return false;
  auto contraction = matchContraction(op->getResult(0));
  if (!contraction || contraction->operands[0] == contraction->operands[1]) return false;
  int side = contraction->operands[0] == probs ? 0 : contraction->operands[1] == probs ? 1 : -1;
  if (side < 0) return false;
  const ScoreRoles &roles = attention.roles;
  Contraction c = renamed(*contraction, side, roles.scores);
  if (contracted(c) != Labels{roles.key}) return false;
  const Labels &vLabels = c.labels[1 - side];
  Labels own;
  for (const std::string &label : vLabels)
    if (!contains(roles.batch, label) && label != roles.key) own.push_back(label);
  if (own.size() != 1 || vLabels.size() != roles.batch.size() + 2) return false;
  std::set<std::string> expected(roles.batch.begin(), roles.batch.end());
  expected.insert(roles.queries.begin(), roles.queries.end());
  expected.insert(own[0]);
  if (std::set<std::string>(c.out.begin(), c.out.end()) != expected || c.out.size() != expected.size()) return false;
  if (!cast<RankedTensorType>(contraction->operands[1 - side].getType()).getElementType().isF32()) return false;
  attention.pv = op;
  attention.v = contraction->operands[1 - side];
  attention.vLabels = vLabels;
  attention.outLabels = c.out;
  attention.value = own[0];
  return true;
}

// The whole attention around `softmax`, if it is one.
std::optional<Attention> matchAttention(ein::ir::SoftmaxOp softmax) {
  Attention attention;
  // A scale after a boolean mask: fill * c then stands where the scaled
  // scores would, which the fused op computes with the fill scaled too. An
  // additive mask would need scaling itself, so that order is left alone.
  double outer = 1.0;
  Value masked = softmax.getInput().hasOneUse() ? peelScales(softmax.getInput(), outer) : softmax.getInput();
  if (!matchMaskedScores(masked, softmax.getAxis(), attention)) return std::nullopt;
  if (outer != 1.0) {
    if (attention.maskKind == MaskKind::add) return std::nullopt;
    attention.roles.scale *= outer;
    attention.maskFill *= outer;
  }
  const ScoreRoles &roles = attention.roles;
  Value probs = softmax.getResult();
  Operation *user = singleUser(probs);
  if (!user) return std::nullopt;  // the probabilities are needed elsewhere (an output, say)
  if (matchValueContraction(user, probs, attention)) return attention;
  // A head mix after the softmax, then the contraction with V. The one user
  // may be anything, e.g. the function's return (the probabilities are the
  // model's output and nothing contracts them with V): only an ein op with
  // one result can be the mix.
  if (!isa<ein::ir::EinDialect>(user->getDialect()) || user->getNumResults() != 1) return std::nullopt;
  Labels heads = attention.head ? Labels{*attention.head} : roles.batch;
  for (const std::string &head : heads) {
    Value mixed = user->getResult(0);
    SmallVector<Value> ends{mixed};
    if (Operation *next = singleUser(mixed); next && isa<ein::ir::BinaryOp>(next)) ends.insert(ends.begin(), next->getResult(0));
    for (Value end : ends) {
      auto mix = matchHeadMix(end, probs, roles.scores, head);
      if (!mix || !matchValueContraction(singleUser(end), end, attention)) continue;
      attention.postMix = *mix;
      attention.head = head;
      return attention;
    }
  }
  return std::nullopt;
}

// Builds the fused op and its layout changes.
class Rewriter {
 public:
  Rewriter(Operation *at, const Attention &attention) : builder(at), loc(at->getLoc()), attention(attention) {
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
    Value mask;
    if (attention.mask) {
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
    auto maskKind = ein::ir::MaskKindAttr::get(builder.getContext(), attention.maskKind);
    auto maskFill = builder.getF64FloatAttr(attention.maskFill);
    Value fused;
    if (attention.head) {
      Value preMix, preBias, postMix, postBias;
      if (attention.preMix) std::tie(preMix, preBias) = mixOperands(*attention.preMix);
      if (attention.postMix) std::tie(postMix, postBias) = mixOperands(*attention.postMix);
      fused = builder.create<ein::ir::TalkingHeadsAttentionOp>(loc, resultType, q, k, v, preMix, preBias, postMix,
                                                               postBias, mask, scale, maskKind, maskFill);
    } else {
      fused = builder.create<ein::ir::AttentionOp>(loc, resultType, q, k, v, mask, scale, maskKind, maskFill,
                                                   /*causal_positions=*/nullptr);
    }
    Value result = arrange(fused, resultGroups, singletons(attention.outLabels));
    if (!result) return false;
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
  std::map<std::string, ein::Size> sizes;      // every label of Q, K and V
  std::map<std::string, std::string> names;    // label -> einops name
};

// ---- grouped-query attention: repeated key heads read in place -------------

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

// Attention over keys and values repeated alike along a batch axis (heads)
// becomes grouped-query attention: each group of query heads turns into more
// queries of its key head, `[.., (h g), l, e]` seen as `[.., h, (g l), e]`,
// so the kernel reads the keys and values in place, never the repeats; the
// result is seen back as `[.., (h g), l, e]`. A causal op keeps its positions
// (query i is position i mod l).
void readRepeatedHeadsInPlace(ein::ir::AttentionOp attention) {
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
      attention.getMaskKindAttr(), attention.getMaskFillAttr(), attention.getCausalPositionsAttr());
  Value result = rearrange(fused, axesOf(rank, false, true) + " -> " + axesOf(rank, true, false));
  attention.replaceAllUsesWith(result);
  attention.erase();
}

struct FuseAttentionPass : ein::impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    SmallVector<ein::ir::SoftmaxOp> softmaxes;
    getOperation().walk([&](ein::ir::SoftmaxOp op) { softmaxes.push_back(op); });
    for (ein::ir::SoftmaxOp softmax : softmaxes) {
      auto attention = matchAttention(softmax);
      if (!attention) continue;
      (void)Rewriter(attention->pv, *attention).run();  // false: left unfused
    }
    SmallVector<ein::ir::AttentionOp> attentions;
    getOperation().walk([&](ein::ir::AttentionOp op) { attentions.push_back(op); });
    for (ein::ir::AttentionOp attention : attentions) readRepeatedHeadsInPlace(attention);
    // The replaced chains are left without users.
    IRRewriter rewriter(&getContext());
    (void)runRegionDCE(rewriter, getOperation()->getRegions());
  }
};

}  // namespace
