// kern-store-state (passes.td): the type each session state (a key/value
// cache) is kept in, decided in the IR where the artifact writer reads it.
#include "compiler/transforms/kern/passes.hpp"

namespace ein {
#define GEN_PASS_DEF_STOREKERNSTATE
#include "compiler/transforms/kern/passes.h.inc"
}  // namespace ein

using namespace mlir;

namespace {

// The state's value and every append's result (the same tensor, grown), or
// none when any of them has a use other than a further append into it or
// attention reading it as keys or values.
std::optional<SmallVector<Value>> keysOrValuesOnly(ein::ir::StateOp state) {
  SmallVector<Value> chain{state.getResult()}, pending{state.getResult()};
  while (!pending.empty()) {
    Value value = pending.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (auto append = dyn_cast<ein::kern::AppendOp>(user); append && append.getState() == value && append.getX() != value) {
        chain.push_back(append.getResult());
        pending.push_back(append.getResult());
        continue;
      }
      auto attention = dyn_cast<ein::kern::AttentionOp>(user);
      if (!attention || attention.getQ() == value || attention.getMask() == value) return std::nullopt;
    }
  }
  return chain;
}

struct StoreKernStatePass : ein::impl::StoreKernStateBase<StoreKernStatePass> {
  using StoreKernStateBase::StoreKernStateBase;

  void runOnOperation() override {
    if (target != "cpu" || (precision != "bf16" && precision != "int8" && precision != "int4")) return;
    Type bf16 = BFloat16Type::get(&getContext());
    getOperation().walk([&](ein::ir::StateOp state) {
      auto type = cast<RankedTensorType>(state.getType());
      if (!type.getElementType().isF32()) return;
      std::optional<SmallVector<Value>> chain = keysOrValuesOnly(state);
      if (!chain) return;
      auto narrow = RankedTensorType::get(type.getShape(), bf16, type.getEncoding());
      for (Value value : *chain) value.setType(narrow);
    });
  }
};

}  // namespace
