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
// rearranges, which the lowering turns into strides, never copies
// (fused_attention_builder.cpp); then repeated key heads are read in place
// (grouped_query_attention.cpp).
#include <map>
#include <set>

#include "compiler/transforms/ein/attention_fusion.hpp"
#include "compiler/transforms/ein/matchers.hpp"
#include "compiler/transforms/ein/passes.hpp"
#include "ir/ein/equations.hpp"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"

namespace ein {
#define GEN_PASS_DEF_FUSEATTENTION
#include "compiler/transforms/ein/passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::binaryOf;
using ein::scalarConstant;
using ein::ir::BinaryKind;
using namespace ein::attention_fusion;

namespace {

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

// `value` as c * tanh(x) with a constant c > 0 and x scaled scores: the
// scores capped softly, as Gemma 2's attn_logit_softcapping writes them out
// (s / c, tanh, * c). c * tanh(a QK) is the fused op's c * tanh(s / c) with
// s = a c QK, whatever the constants were called.
std::optional<ScoreRoles> matchCappedScores(Value value, int64_t keyAxis, double &softcap) {
  double cap = 1.0;
  Value capped = peelScales(value, cap);
  auto tanh = capped.getDefiningOp<ein::ir::UnaryOp>();
  if (capped == value || !(cap > 0.0) || !tanh || tanh.getKind() != ein::ir::UnaryKind::tanh || !capped.hasOneUse())
    return std::nullopt;
  auto roles = matchScores(tanh.getInput(), keyAxis);
  if (!roles) return std::nullopt;
  roles->scale *= cap;
  softcap = cap;
  return roles;
}

// The unmasked scores ending at `value`: Q . K with scales, then an optional
// softcap or head mix (over some batch label). Fills roles, softcap, preMix
// and head.
bool matchUnmaskedScores(Value value, int64_t keyAxis, Attention &attention) {
  if (!value.hasOneUse()) return false;
  if (auto roles = matchScores(value, keyAxis)) {
    attention.roles = *roles;
    return true;
  }
  if (auto roles = matchCappedScores(value, keyAxis, attention.softcap)) {
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

// Builds the fused op and its layout changes.

}  // namespace

namespace ein::attention_fusion {

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
    // A scale after the cap would scale the cap's output, which the fused
    // op does not.
    if (attention.maskKind == MaskKind::add || attention.softcap > 0.0) return std::nullopt;
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

}  // namespace ein::attention_fusion

namespace {

struct FuseAttentionPass : ein::impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    SmallVector<ein::ir::SoftmaxOp> softmaxes;
    getOperation().walk([&](ein::ir::SoftmaxOp op) { softmaxes.push_back(op); });
    for (ein::ir::SoftmaxOp softmax : softmaxes) {
      auto attention = matchAttention(softmax);
      if (!attention) continue;
      (void)replaceWithFusedOp(*attention, getArgument());  // false: left unfused
    }
    SmallVector<ein::ir::AttentionOp> attentions;
    getOperation().walk([&](ein::ir::AttentionOp op) { attentions.push_back(op); });
    for (ein::ir::AttentionOp attention : attentions) readRepeatedHeadsInPlace(attention, getArgument());
    // The replaced chains are left without users.
    IRRewriter rewriter(&getContext());
    (void)runRegionDCE(rewriter, getOperation()->getRegions());
  }
};

}  // namespace
