// Places every kernel result that is not a model output in one arena, each
// buffer as large as its tensor gets over the dims' ranges: one plan serves
// every run (kern-store-weights has made the kernels of weights constants).
#include <algorithm>

#include "compiler/transforms/kern/passes.hpp"
#include "ir/ein/ein_dialect.hpp"
#include "ir/kern/kern_dialect.hpp"

namespace ein {
#define GEN_PASS_DEF_PLANMEMORY
#include "compiler/transforms/kern/passes.h.inc"
}  // namespace ein

using namespace mlir;

namespace {

struct Buffer {
  Operation *producer;
  int64_t bytes;
  int64_t firstUse;  // index of the producing op
  int64_t lastUse;   // index of the last op reading it
  int64_t offset = -1;
};

int64_t alignTo(int64_t value, int64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

// The largest byte size over the dims' ranges (the front end bounded it).
int64_t byteSize(RankedTensorType type, const ein::DimRanges &ranges) {
  int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  return ein::ir::largestValue(ein::product(ein::ir::shapeOf(type)), ranges) * std::max<int64_t>(bits / 8, 1);
}

struct PlanMemoryPass : ein::impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (alignment <= 0 || (alignment & (alignment - 1)) != 0) {
      function.emitError() << "alignment " << alignment << " is not a power of two";
      return signalPassFailure();
    }
    Block &body = function.getBody().front();
    ein::DimRanges ranges = ein::ir::dimRangesOf(function);
    DenseMap<Operation *, int64_t> position;
    int64_t index = 0;
    for (Operation &op : body) position[&op] = index++;

    Operation *terminator = body.getTerminator();
    Builder builder(function.getContext());
    std::vector<Buffer> buffers;
    for (Operation &op : body) {
      // kern.append's result is the session's state, not a new buffer.
      if (!isa<ein::kern::KernDialect>(op.getDialect()) || op.getNumResults() != 1 || isa<ein::kern::AppendOp>(op))
        continue;
      bool isOutput = llvm::any_of(op.getResult(0).getUsers(), [&](Operation *user) { return user == terminator; });
      if (isOutput) continue;
      Buffer buffer{&op, byteSize(cast<RankedTensorType>(op.getResult(0).getType()), ranges), position[&op],
                    position[&op]};
      for (Operation *user : op.getResult(0).getUsers()) {
        // Uses inside an elementwise body are not possible (bodies see scalars),
        // but stay safe: attribute a nested use to its top-level ancestor.
        Operation *ancestor = body.findAncestorOpInBlock(*user);
        buffer.lastUse = std::max(buffer.lastUse, position[ancestor]);
      }
      buffers.push_back(buffer);
    }

    // Where many sequences run at once, a stretch of per-sequence kernels
    // (kern-plan-sequences) runs once for each sequence in turn: a buffer
    // any of them writes or reads is live over the whole stretch, or the next
    // sequence's would overwrite what the one before left for later.
    std::vector<std::pair<int64_t, int64_t>> stretchOf(static_cast<size_t>(index), {-1, -1});
    int64_t start = -1, last = -1;
    auto closeStretch = [&] {
      for (int64_t inside = start; start >= 0 && inside <= last; ++inside) stretchOf[inside] = {start, last};
      start = -1;
    };
    for (Operation &op : body) {
      if (!isa<ein::kern::KernDialect>(op.getDialect())) continue;  // constants between kernels end no stretch
      if (!op.hasAttr(ein::kern::kPerSequenceAttr)) {
        closeStretch();
        continue;
      }
      if (start < 0) start = position[&op];
      last = position[&op];
    }
    closeStretch();
    for (Buffer &buffer : buffers) {
      if (stretchOf[buffer.firstUse].first >= 0) buffer.firstUse = stretchOf[buffer.firstUse].first;
      if (stretchOf[buffer.lastUse].second >= 0) buffer.lastUse = stretchOf[buffer.lastUse].second;
    }

    // Greedy by size: big buffers first, each at the lowest aligned offset that
    // does not overlap a placed buffer with an overlapping lifetime.
    std::vector<Buffer *> order;
    for (Buffer &buffer : buffers) order.push_back(&buffer);
    std::stable_sort(order.begin(), order.end(), [](Buffer *a, Buffer *b) { return a->bytes > b->bytes; });
    std::vector<Buffer *> placed;
    int64_t arenaBytes = 0;
    for (Buffer *buffer : order) {
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (Buffer *other : placed)
        if (other->firstUse <= buffer->lastUse && buffer->firstUse <= other->lastUse)
          busy.emplace_back(other->offset, other->offset + other->bytes);
      std::sort(busy.begin(), busy.end());
      int64_t offset = 0;
      for (auto [begin, end] : busy) {
        if (offset + buffer->bytes <= begin) break;
        offset = std::max(offset, alignTo(end, alignment));
      }
      buffer->offset = offset;
      placed.push_back(buffer);
      arenaBytes = std::max(arenaBytes, offset + buffer->bytes);
    }

    for (const Buffer &buffer : buffers)
      buffer.producer->setAttr(ein::kern::kArenaOffsetAttr, builder.getI64IntegerAttr(buffer.offset));
    function->setAttr(ein::kern::kArenaBytesAttr, builder.getI64IntegerAttr(alignTo(arenaBytes, alignment)));
  }
};

}  // namespace
