// Replaces hand-written softmaxes by ein.softmax.
#include "compiler/transforms/ein/passes.hpp"
#include "ir/source_locations.hpp"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"

namespace ein {
#define GEN_PASS_DEF_FUSESOFTMAX
#include "compiler/transforms/ein/passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::ir::BinaryKind;
using ein::ir::BinaryOp;
using ein::ir::ReduceKind;
using ein::ir::ReduceOp;
using ein::ir::UnaryKind;
using ein::ir::UnaryOp;

namespace {

// `value` as `kind(x, axes = [axis], keepdim = true)`, returning x and axis.
std::optional<std::pair<Value, int64_t>> matchReduce(Value value, ReduceKind kind) {
  auto reduce = value.getDefiningOp<ReduceOp>();
  if (!reduce || reduce.getKind() != kind || !reduce.getKeepdim() || reduce.getAxes().size() != 1) return std::nullopt;
  return std::make_pair(reduce.getInput(), reduce.getAxes()[0]);
}

// The softmax input and axis if `division` is
// exp(x - max(x, a)) / sum(exp(x - max(x, a)), a).
std::optional<std::pair<Value, int64_t>> matchSoftmax(BinaryOp division) {
  if (division.getKind() != BinaryKind::div || division.getLhs().getType() != division.getType()) return std::nullopt;
  auto exp = division.getLhs().getDefiningOp<UnaryOp>();
  if (!exp || exp.getKind() != UnaryKind::exp) return std::nullopt;
  auto sum = matchReduce(division.getRhs(), ReduceKind::sum);
  if (!sum || sum->first != exp.getResult()) return std::nullopt;
  auto shifted = exp.getInput().getDefiningOp<BinaryOp>();
  if (!shifted || shifted.getKind() != BinaryKind::sub || shifted.getLhs().getType() != division.getType())
    return std::nullopt;
  auto max = matchReduce(shifted.getRhs(), ReduceKind::max);
  if (!max || max->first != shifted.getLhs() || max->second != sum->second) return std::nullopt;
  return std::make_pair(shifted.getLhs(), sum->second);
}

struct FuseSoftmaxPass : ein::impl::FuseSoftmaxBase<FuseSoftmaxPass> {
  void runOnOperation() override {
    SmallVector<BinaryOp> divisions;
    getOperation().walk([&](BinaryOp op) { divisions.push_back(op); });
    for (BinaryOp division : divisions) {
      auto match = matchSoftmax(division);
      if (!match) continue;
      OpBuilder builder(division);
      Value softmax = builder.create<ein::ir::SoftmaxOp>(division.getLoc(), division.getType(), match->first,
                                                         builder.getI64IntegerAttr(match->second));
      softmax.getDefiningOp()->setLoc(ein::ir::fusedLocation(softmax.getDefiningOp(), {division}, getArgument()));
      division.replaceAllUsesWith(softmax);
      division.erase();
    }
    // The ops left without users go.
    IRRewriter rewriter(&getContext());
    (void)runRegionDCE(rewriter, getOperation()->getRegions());
  }
};

}  // namespace
