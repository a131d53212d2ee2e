// Splits N-operand einsums into the cheapest tree of pairwise einsums.
#include <limits>
#include <map>

#include "compiler/transforms/ein/passes.hpp"
#include "ir/ein/equations.hpp"
#include "llvm/ADT/DenseMap.h"

namespace ein {
#define GEN_PASS_DEF_PLANCONTRACTIONS
#include "compiler/transforms/ein/passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::ir::EinsumOp;
using ein::ir::dimRangesOf;
using ein::ir::largestValue;
using ein::ir::shapeOf;
using ein::ir::sizedTensorType;

namespace {

// Beyond this many operands the 3^N subset search gets slow; such einsums
// are contracted left to right.
constexpr size_t kMaxSearchedOperands = 12;

using Labels = std::vector<std::string>;

// Operand subsets are bit sets, which bounds the operand count.
constexpr size_t kMaxOperands = 31;

struct Node {
  double cost = std::numeric_limits<double>::infinity();
  unsigned left = 0, right = 0;  // the subsets it joins; 0 for a single operand
  Labels labels;                 // the labels its result keeps, in order
};
using Nodes = llvm::DenseMap<unsigned, Node>;

class ContractionPlanner {
 public:
  ContractionPlanner(const ein::EinsumEquation &equation, std::map<std::string, int64_t> sizes)
      : equation(equation), sizes(std::move(sizes)), count(equation.inputs.size()) {}

  // nodes[S] for every subset S of the operands (bit i = operand i).
  Nodes search() {
    Nodes nodes;
    for (size_t i = 0; i < count; ++i) {
      Node &leaf = nodes[size_t{1} << i];
      leaf.cost = 0;
      leaf.labels = equation.inputs[i];
    }
    unsigned full = (1u << count) - 1;
    for (unsigned subset = 1; subset <= full; ++subset) {
      if ((subset & (subset - 1)) == 0) continue;  // single operands are leaves
      Labels kept = keptLabels(subset, full);
      Node best;
      // Each unordered split once: the left part holds the lowest operand.
      // Every proper subset is already in `nodes`.
      unsigned lowest = subset & -subset;
      for (unsigned left = (subset - 1) & subset; left; left = (left - 1) & subset) {
        if (!(left & lowest)) continue;
        unsigned right = subset ^ left;
        const Node &a = nodes.find(left)->second, &b = nodes.find(right)->second;
        double cost = a.cost + b.cost + contractionCost(a.labels, b.labels) + elements(kept);
        if (cost < best.cost) best = Node{cost, left, right, kept};
      }
      nodes[subset] = std::move(best);
    }
    return nodes;
  }

  // Left-to-right joins, for einsums with too many operands to search.
  Nodes leftToRight() {
    Nodes nodes;
    unsigned accumulated = 1;
    nodes[1].labels = equation.inputs[0];
    unsigned full = (1u << count) - 1;
    for (size_t i = 1; i < count; ++i) {
      unsigned leaf = 1u << i;
      nodes[leaf].labels = equation.inputs[i];
      unsigned joined = accumulated | leaf;
      nodes[joined] = Node{0, accumulated, leaf, keptLabels(joined, full)};
      accumulated = joined;
    }
    return nodes;
  }

 private:
  // The labels of `subset`'s result: those the other operands or the output
  // still need, in order of first appearance in the subset's operands.
  Labels keptLabels(unsigned subset, unsigned full) const {
    if (subset == full) return equation.output;
    Labels kept;
    for (size_t i = 0; i < count; ++i) {
      if (!(subset & (1u << i))) continue;
      for (const std::string &label : equation.inputs[i])
        if (!llvm::is_contained(kept, label) && neededOutside(label, subset)) kept.push_back(label);
    }
    return kept;
  }

  bool neededOutside(const std::string &label, unsigned subset) const {
    if (llvm::is_contained(equation.output, label)) return true;
    for (size_t i = 0; i < count; ++i)
      if (!(subset & (1u << i)) && llvm::is_contained(equation.inputs[i], label)) return true;
    return false;
  }

  // Multiply-adds of contracting two results: one per point of the union of
  // their labels.
  double contractionCost(const Labels &a, const Labels &b) const {
    Labels all = a;
    for (const std::string &label : b)
      if (!llvm::is_contained(all, label)) all.push_back(label);
    return elements(all);
  }

  double elements(const Labels &labels) const {
    double product = 1;
    for (const std::string &label : labels) product *= static_cast<double>(sizes.at(label));
    return product;
  }

  const ein::EinsumEquation &equation;
  std::map<std::string, int64_t> sizes;
  size_t count;
};

std::string equationText(const Labels &a, const Labels &b, const Labels &out) {
  ein::EinsumEquation equation;
  equation.inputs = {a, b};
  equation.output = out;
  return equation.str();
}

LogicalResult planEinsum(EinsumOp einsum) {
  std::vector<int64_t> ranks;
  for (Value input : einsum.getInputs()) ranks.push_back(cast<RankedTensorType>(input.getType()).getRank());
  auto parsed = ein::EinsumEquation::parse(einsum.getEquation(), ranks, /*canonical=*/true);
  if (ein::failed(parsed)) return einsum.emitOpError() << std::get<ein::EquationError>(parsed).message;
  const auto &equation = std::get<ein::EinsumEquation>(parsed);

  // Costs count at the dims' largest values: the sizes that take the time.
  ein::DimRanges ranges = dimRangesOf(einsum);
  std::map<std::string, ein::Size> sizes;
  std::map<std::string, int64_t> largest;
  for (auto [labels, input] : llvm::zip(equation.inputs, einsum.getInputs()))
    for (auto [label, size] : llvm::zip(labels, shapeOf(input.getType()))) {
      sizes[label] = size;
      largest[label] = largestValue(size, ranges);
    }
  ContractionPlanner planner(equation, largest);
  size_t count = equation.inputs.size();
  if (count > kMaxOperands)
    return einsum.emitOpError() << "has " << count << " operands; at most " << kMaxOperands << " are supported";
  Nodes nodes = count <= kMaxSearchedOperands ? planner.search() : planner.leftToRight();

  OpBuilder builder(einsum);
  Type element = einsum.getType().getElementType();
  auto isLeaf = [](unsigned subset) { return (subset & (subset - 1)) == 0; };
  // The layout of an intermediate is ours to choose. The lowering makes a
  // pairwise contraction one GEMM without copies when the summed labels lie
  // together, in the same order, in both operands, and packs its operands
  // fastest when the summed labels are innermost in the left one (rows of A)
  // and outermost in the right one (rows of B). So a child's labels are: the
  // ones shared with its sibling and kept (batch), then its own kept ones and
  // the summed ones (left child), or the summed ones and then its own (right
  // child); summed labels in the order a fixed (input) sibling has them.
  auto childOrder = [&](unsigned child, unsigned sibling, const Labels &parentOrder, bool right) {
    const Labels &labels = nodes.lookup(child).labels;
    if (isLeaf(child)) return labels;
    const Labels &siblingLabels = nodes.lookup(sibling).labels;
    auto inChild = [&](const std::string &label) { return llvm::is_contained(labels, label); };
    auto inSibling = [&](const std::string &label) { return llvm::is_contained(siblingLabels, label); };
    Labels batch, own, summed;
    for (const std::string &label : parentOrder)
      if (inChild(label)) (inSibling(label) ? batch : own).push_back(label);
    // (A leaf sibling may repeat a label: a diagonal. The child keeps it once.)
    for (const std::string &label : isLeaf(sibling) ? siblingLabels : labels)
      if (inChild(label) && inSibling(label) && !llvm::is_contained(parentOrder, label) &&
          !llvm::is_contained(summed, label))
        summed.push_back(label);
    Labels order = batch;
    for (const Labels *part : {right ? &summed : &own, right ? &own : &summed})
      order.insert(order.end(), part->begin(), part->end());
    return order;
  };
  // Emits the tree under `subset` with its result's labels in `order`, children first.
  std::function<Value(unsigned, const Labels &)> emit = [&](unsigned subset, const Labels &order) -> Value {
    if (isLeaf(subset)) return einsum.getInputs()[__builtin_ctz(subset)];
    const Node node = nodes.lookup(subset);
    Labels leftOrder = childOrder(node.left, node.right, order, /*right=*/false);
    Labels rightOrder = childOrder(node.right, node.left, order, /*right=*/true);
    Value left = emit(node.left, leftOrder), right = emit(node.right, rightOrder);
    ein::Shape shape;
    for (const std::string &label : order) shape.push_back(sizes.at(label));
    return builder.create<EinsumOp>(einsum.getLoc(), sizedTensorType(shape, element),
                                    equationText(leftOrder, rightOrder, order), ValueRange{left, right});
  };
  Value result = emit((1u << count) - 1, equation.output);
  einsum.replaceAllUsesWith(result);
  einsum.erase();
  return success();
}

struct PlanContractionsPass : ein::impl::PlanContractionsBase<PlanContractionsPass> {
  void runOnOperation() override {
    SmallVector<EinsumOp> einsums;
    getOperation().walk([&](EinsumOp einsum) {
      if (einsum.getInputs().size() > 2) einsums.push_back(einsum);
    });
    for (EinsumOp einsum : einsums)
      if (failed(planEinsum(einsum))) return signalPassFailure();
  }
};

}  // namespace
