// kern-plan-first-run (passes.td): what runs only at a sequence's first run.
#include "compiler/transforms/kern/passes.hpp"

namespace ein {
#define GEN_PASS_DEF_PLANFIRSTRUN
#include "compiler/transforms/kern/passes.h.inc"
}  // namespace ein

using namespace mlir;

namespace {

struct PlanFirstRunPass : ein::impl::PlanFirstRunBase<PlanFirstRunPass> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    Block &body = function.getBody().front();
    auto mark = UnitAttr::get(&getContext());
    // Every reader of `value` (the op of the body holding it) runs at the first run only.
    auto onlyFirstRunReads = [&](Value value) {
      return !value.use_empty() && llvm::all_of(value.getUsers(), [&](Operation *user) {
        Operation *reader = body.findAncestorOpInBlock(*user);
        return reader && reader->hasAttr(ein::kern::kFirstRunAttr);
      });
    };
    // Readers follow what they read, so one walk from the end sees every
    // reader of a kernel before the kernel.
    for (Operation &op : llvm::reverse(body)) {
      if (!isa<ein::kern::KernDialect>(op.getDialect())) continue;
      auto append = dyn_cast<ein::kern::AppendOp>(op);
      // A kernel's effect is its results, but an append writes the session's
      // state: it runs at the first run only when it keeps its rows.
      const bool firstRun = append ? append.getFirstRun()
                                   : op.getNumResults() > 0 && llvm::all_of(op.getResults(), onlyFirstRunReads);
      if (firstRun) op.setAttr(ein::kern::kFirstRunAttr, mark);
    }
    for (BlockArgument argument : body.getArguments())
      if (onlyFirstRunReads(argument)) function.setArgAttr(argument.getArgNumber(), ein::kern::kFirstRunAttr, mark);
  }
};

}  // namespace
