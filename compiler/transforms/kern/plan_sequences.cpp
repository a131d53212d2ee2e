// kern-plan-sequences (passes.td): which kernels of a decoder written for one
// sequence run once over the tokens of many sequences laid end to end, and
// which run once per sequence over its own tokens, position and state.
#include <map>
#include <optional>
#include <string>

#include "compiler/transforms/kern/passes.hpp"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/IRMapping.h"

namespace ein {
#define GEN_PASS_DEF_PLANSEQUENCES
#include "compiler/transforms/kern/passes.h.inc"
}  // namespace ein

using namespace mlir;

namespace {

using ein::kern::ViewAttr;

// What a tensor holds when the tokens of many sequences are laid end to end.
enum class Holds {
  Shared,   // the same for every sequence: no size depends on the tokens or the position
  Rows,     // a row per token: [1, ..., 1, t, inner...], inner sizes fixed
  Private,  // a sequence's own (scores over its keys, heads before tokens): never shared
  State,    // a session state: a sequence's own cache
};

// The tokens' dim, the dims each sequence has its own value of (the
// position, an encoder's length: ein::kern::sequenceDims) and the position
// among them.
struct SequenceDims {
  std::string tokens;
  std::set<std::string> own;
  std::string position;
};

bool dependsOn(const ein::Size &size, const SequenceDims &dims) {
  return llvm::any_of(size.dims(), [&](const std::string &dim) { return dim == dims.tokens || dims.own.count(dim); });
}
bool dependsOn(const ein::Shape &shape, const SequenceDims &dims) {
  return llvm::any_of(shape, [&](const ein::Size &size) { return dependsOn(size, dims); });
}

// Elements per token row of a Rows tensor, when its inner sizes are constants.
std::optional<int64_t> rowElements(const ein::Shape &shape, size_t axis) {
  int64_t elements = 1;
  for (size_t inner = axis + 1; inner < shape.size(); ++inner) {
    std::optional<int64_t> size = shape[inner].constant();
    if (!size) return std::nullopt;
    elements *= *size;
  }
  return elements;
}

// One tensor a kernel reads or writes, through `view` (none: densely) over
// `extents`, the kernel's iteration axes it walks.
struct Access {
  Value tensor;
  ViewAttr view;
  ein::Shape extents;
};

ein::Shape concatenated(ein::Shape head, std::initializer_list<ein::Size> tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}
ein::Shape shapeOf(Value value) { return ein::ir::shapeOf(value.getType()); }

// The accesses of a kernel that may run over every sequence's tokens at once
// and the sizes it reduces or contracts over (which must not be the
// tokens); nullopt for the kernels that never do (attention, append).
struct Walk {
  SmallVector<Access> accesses;
  ein::Shape reduced;
};

std::optional<Walk> walkOf(Operation *op) {
  Walk walk;
  if (auto gemm = dyn_cast<ein::kern::GemmOp>(op)) {
    const ein::Shape batch = gemm.getBatch().sizes();
    const ein::Size m = gemm.getM().sizes()[0], n = gemm.getN().sizes()[0], k = gemm.getK().sizes()[0];
    walk.accesses = {{gemm.getA(), gemm.getAView(), concatenated(batch, {m, k})},
                     {gemm.getB(), gemm.getBView(), concatenated(batch, {k, n})},
                     {gemm.getResult(), gemm.getCView(), concatenated(batch, {m, n})}};
    if (gemm.getBias()) walk.accesses.push_back({gemm.getBias(), *gemm.getBiasView(), concatenated(batch, {m, n})});
    if (gemm.getResidual())
      walk.accesses.push_back({gemm.getResidual(), *gemm.getResidualView(), concatenated(batch, {m, n})});
    if (gemm.getBScale()) walk.accesses.push_back({gemm.getBScale(), {}, shapeOf(gemm.getBScale())});
    walk.reduced = {k};
    return walk;
  }
  if (auto elementwise = dyn_cast<ein::kern::ElementwiseOp>(op)) {
    const ein::Shape shape = shapeOf(elementwise.getResult());
    for (auto [input, view] : llvm::zip(elementwise.getInputs(), elementwise.getInputViews()))
      walk.accesses.push_back({input, cast<ViewAttr>(view), shape});
    walk.accesses.push_back({elementwise.getResult(), {}, shape});
    return walk;
  }
  if (auto concat = dyn_cast<ein::kern::ConcatOp>(op)) {
    const ein::Shape shape = shapeOf(concat.getResult());
    const auto axis = static_cast<size_t>(concat.getAxis());
    const ein::Shape sizes = concat.getSizes().sizes();
    for (size_t part = 0; part < sizes.size(); ++part) {
      ein::Shape partShape = shape;
      partShape[axis] = sizes[part];
      for (auto [input, view] : llvm::zip(concat.partInputs(part), concat.partViews(part)))
        walk.accesses.push_back({input, cast<ViewAttr>(view), partShape});
    }
    walk.accesses.push_back({concat.getResult(), {}, shape});
    walk.reduced = {shape[axis]};  // parts laid along the axis: not the tokens
    return walk;
  }
  // Kernels over `shape` whose trailing `reduced` axes are reduced or normalised.
  auto rows = [&](Value x, ViewAttr xView, const ein::Shape &shape, size_t reduced) {
    walk.accesses.push_back({x, xView, shape});
    walk.reduced.assign(shape.end() - std::min(reduced, shape.size()), shape.end());
  };
  if (auto softmax = dyn_cast<ein::kern::SoftmaxOp>(op)) {
    rows(softmax.getX(), softmax.getXView(), softmax.getShape().sizes(), 1);
    walk.accesses.push_back({softmax.getResult(), softmax.getYView(), softmax.getShape().sizes()});
    return walk;
  }
  if (auto norm = dyn_cast<ein::kern::LayerNormOp>(op)) {
    const ein::Shape shape = norm.getShape().sizes();
    rows(norm.getX(), norm.getXView(), shape, 1);
    if (norm.getResidual()) walk.accesses.push_back({norm.getResidual(), *norm.getResidualView(), shape});
    // gamma and beta are read over the normalised axis alone.
    if (norm.getGamma()) walk.accesses.push_back({norm.getGamma(), *norm.getGammaView(), {shape.back()}});
    if (norm.getBeta()) walk.accesses.push_back({norm.getBeta(), *norm.getBetaView(), {shape.back()}});
    for (Value result : norm->getResults()) walk.accesses.push_back({result, {}, shape});
    return walk;
  }
  if (auto reduce = dyn_cast<ein::kern::ReduceOp>(op)) {
    rows(reduce.getX(), reduce.getXView(), reduce.getShape().sizes(), reduce.getReducedRank());
    walk.accesses.push_back({reduce.getResult(), {}, shapeOf(reduce.getResult())});
    return walk;
  }
  if (auto variance = dyn_cast<ein::kern::VarianceOp>(op)) {
    rows(variance.getX(), variance.getXView(), variance.getShape().sizes(), variance.getReducedRank());
    walk.accesses.push_back({variance.getResult(), {}, shapeOf(variance.getResult())});
    return walk;
  }
  if (auto copy = dyn_cast<ein::kern::CopyOp>(op)) {
    walk.accesses = {{copy.getX(), copy.getXView(), copy.getShape().sizes()},
                     {copy.getResult(), {}, shapeOf(copy.getResult())}};
    return walk;
  }
  if (auto gather = dyn_cast<ein::kern::GatherOp>(op)) {
    // The table's rows are chosen by id, not by token: it is read whole.
    walk.accesses = {{gather.getIds(), gather.getIdsView(), ein::kern::gatherIdsShape(gather)},
                     {gather.getTable(), {}, shapeOf(gather.getTable())},
                     {gather.getResult(), {}, shapeOf(gather.getResult())}};
    return walk;
  }
  return std::nullopt;
}

class SequencePlanner {
 public:
  SequencePlanner(func::FuncOp function, SequenceDims dims) : function_(function), dims_(std::move(dims)) {}

  Holds holds(Value value) const {
    if (auto found = holds_.find(value); found != holds_.end()) return found->second;
    if (isa_and_nonnull<ein::ir::StateOp>(value.getDefiningOp())) return Holds::State;
    const ein::Shape shape = shapeOf(value);
    if (!dependsOn(shape, dims_)) return Holds::Shared;
    return ein::kern::tokenRowAxis(shape, dims_.tokens, dims_.own) ? Holds::Rows : Holds::Private;
  }

  // Whether `op` can run once over the tokens of every sequence: it reads
  // and writes each token's row alone, in the same place in every tensor,
  // and nothing it computes depends on a sequence's own dims or on the
  // tokens' count but the count of rows it walks.
  bool overAllTokens(Operation *op) const {
    for (NamedAttribute attribute : op->getAttrs()) {
      if (auto sizes = dyn_cast<ein::ir::SizesAttr>(attribute.getValue());
          sizes && llvm::any_of(sizes.sizes(), [&](const ein::Size &size) {
            return llvm::any_of(size.dims(), [&](const std::string &dim) { return dims_.own.count(dim) > 0; });
          }))
        return false;
    }
    // Computed from what every sequence shares: the same for all, computed once.
    auto shared = [&](Value value) { return holds(value) == Holds::Shared; };
    if (llvm::all_of(op->getOperands(), shared) && llvm::all_of(op->getResults(), shared) && !readsPosition(op))
      return true;
    std::optional<Walk> walk = walkOf(op);
    if (!walk || dependsOn(walk->reduced, dims_)) return false;
    for (Value result : op->getResults())
      if (holds(result) != Holds::Rows) return false;
    for (const Access &access : walk->accesses)
      if (!rowWise(access)) return false;
    return true;
  }

  // Marks each kernel, sinks what a sequence keeps to itself next to its
  // readers, and checks that nothing a sequence keeps to itself reaches a
  // kernel over every sequence's tokens. Returns the first kernel that
  // breaks that, with why.
  //
  // What runs at a sequence's first run only (kern.first_run: an encoder,
  // what a keep() writes) runs with that sequence alone (SequencePool), so
  // what it computes may live across kernels over every sequence's tokens.
  std::optional<std::pair<Operation *, std::string>> plan() {
    Block &body = function_.getBody().front();
    for (BlockArgument argument : body.getArguments()) {
      const bool firstRun = function_.getArgAttr(argument.getArgNumber(), ein::kern::kFirstRunAttr) != nullptr;
      if (firstRun &&
          llvm::any_of(shapeOf(argument), [&](const ein::Size &size) { return size.dims().count(dims_.tokens); }))
        return std::make_pair(function_.getOperation(),
                              describe("input", argument) + ", read at a sequence's first run only, is sized by the "
                                                             "tokens' dim " + dims_.tokens);
      if (!firstRun && holds(argument) == Holds::Private)
        return std::make_pair(function_.getOperation(),
                              describe("input", argument) + " is neither per token nor the same for every sequence");
    }
    SmallVector<Operation *> kernels;
    for (Operation &op : body)
      if (isa<ein::kern::KernDialect>(op.getDialect())) kernels.push_back(&op);
    for (Operation *op : kernels) {
      const bool perSequence = !overAllTokens(op);
      if (perSequence) op->setAttr(ein::kern::kPerSequenceAttr, UnitAttr::get(op->getContext()));
      // A value a sequence computes for itself is its own, whatever its shape.
      for (Value result : op->getResults())
        if (perSequence && holds(result) != Holds::Rows) holds_[result] = Holds::Private;
    }
    sinkPrivateValues(body);
    recomputePrivateValues(body, segmentsOf(body));
    const DenseMap<Operation *, int> segmentOf = segmentsOf(body);
    for (Operation &op : body) {
      if (op.hasAttr(ein::kern::kFirstRunAttr)) continue;  // read by first-run kernels alone
      for (Value result : op.getResults()) {
        if (holds(result) != Holds::Private) continue;
        for (Operation *user : result.getUsers()) {
          if (isa<func::ReturnOp>(user))
            return std::make_pair(&op, std::string("its result is a model output but not per token"));
          if (!user->hasAttr(ein::kern::kPerSequenceAttr))
            return std::make_pair(&op, "it computes a sequence's own " + describeShape(result) +
                                           ", which " + describeOp(user) +
                                           " reads as if it were per token or shared by the sequences");
          if (segmentOf.lookup(user) != segmentOf.lookup(&op))
            return std::make_pair(&op, "a sequence's own " + describeShape(result) + " must live until " +
                                           describeOp(user) + ", past kernels over every sequence's tokens");
        }
      }
    }
    for (Operation &op : body)
      if (op.hasAttr(ein::kern::kPerSequenceAttr) && rowsOverKept(&op))
        op.setAttr(ein::kern::kRowsOverKeptAttr, UnitAttr::get(op.getContext()));
    return std::nullopt;
  }

 private:
  // Whether a view of `op` depends on the position (a slice of a table at it).
  bool readsPosition(Operation *op) const {
    auto depends = [&](Attribute attribute) {
      auto view = dyn_cast<ViewAttr>(attribute);
      return view && (dependsOn(view.getOffset(), dims_) || dependsOn(view.getStrides(), dims_));
    };
    for (NamedAttribute attribute : op->getAttrs()) {
      if (depends(attribute.getValue())) return true;
      if (auto array = dyn_cast<ArrayAttr>(attribute.getValue()); array && llvm::any_of(array, depends)) return true;
    }
    return false;
  }

  // Whether per-sequence `op` computes each token's rows from that token's
  // rows and what a first run kept alone, at any position
  // (ein::kern::kRowsOverKeptAttr): an attention whose queries are the
  // tokens, not causal, its q and out per token and walked row by row, its
  // keys, values and mask kept by a first run (or the same for every
  // sequence) and read alike by every query, and nothing else of it sized
  // or placed by the tokens or the position.
  bool rowsOverKept(Operation *op) const {
    auto attention = dyn_cast<ein::kern::AttentionOp>(op);
    if (!attention || op->hasAttr(ein::kern::kFirstRunAttr) || attention.getCausalPositions()) return false;
    const ein::Size tokens = ein::Size::dim(dims_.tokens);
    if (attention.getQueries().sizes() != ein::Shape{tokens}) return false;
    auto byRun = [&](const ein::Shape &shape) {
      return llvm::any_of(shape, [&](const ein::Size &size) {
        return size.dims().count(dims_.tokens) > 0 || size.dims().count(dims_.position) > 0;
      });
    };
    const ein::Shape batch = attention.getBatch().sizes(), headDim = attention.getHeadDim().sizes(),
                     valueDim = attention.getValueDim().sizes();
    if (byRun(batch) || byRun(attention.getKeys().sizes()) || byRun(headDim) || byRun(valueDim)) return false;
    if (!rowWise({attention.getQ(), attention.getQView(), concatenated(batch, {tokens, headDim[0]})}) ||
        holds(attention.getResult()) != Holds::Rows ||
        !rowWise({attention.getResult(), attention.getOutView(), concatenated(batch, {tokens, valueDim[0]})}))
      return false;
    auto kept = [&](Value value, ViewAttr view) {
      auto append = value.getDefiningOp<ein::kern::AppendOp>();
      return (holds(value) == Holds::Shared || (append && append->hasAttr(ein::kern::kFirstRunAttr))) &&
             !byRun({view.getOffset()}) && !byRun(view.getStrides());
    };
    if (!kept(attention.getK(), attention.getKView()) || !kept(attention.getV(), attention.getVView())) return false;
    if (!attention.getMask()) return true;
    // Each query reads the same mask row: a query's row is where it lies among the run's.
    const ein::Shape maskStrides = attention.getMaskView()->getStrides();
    return kept(attention.getMask(), *attention.getMaskView()) && maskStrides.size() == batch.size() + 2 &&
           maskStrides[batch.size()] == ein::Size(0);
  }

  // An access that reads or writes each token's row alone: a Rows tensor
  // walked a row apart along one axis of `t` and within the row along the
  // others; a Shared one alike for every token.
  bool rowWise(const Access &access) const {
    const Holds tensorHolds = holds(access.tensor);
    if (tensorHolds == Holds::Private || tensorHolds == Holds::State) return false;
    const ein::Shape shape = shapeOf(access.tensor);
    if (!access.view)  // read or written densely
      return tensorHolds == Holds::Shared ? !dependsOn(access.extents, dims_) : access.extents == shape;
    const ein::Shape strides = access.view.getStrides();
    if (strides.size() != access.extents.size() || dependsOn(access.view.getOffset(), dims_)) return false;
    const ein::Size one(1), tokens = ein::Size::dim(dims_.tokens);
    // The axes of size 1 are never walked: their strides mean nothing.
    if (tensorHolds == Holds::Shared) {
      for (size_t axis = 0; axis < strides.size(); ++axis)
        if (access.extents[axis] != one &&
            (dependsOn(strides[axis], dims_) || (dependsOn(access.extents[axis], dims_) && strides[axis] != 0)))
          return false;
      return true;
    }
    std::optional<int64_t> row = rowElements(shape, *ein::kern::tokenRowAxis(shape, dims_.tokens, dims_.own));
    if (!row) return false;
    ein::Shape withinRow = access.extents;
    int tokenAxes = 0;
    for (size_t axis = 0; axis < strides.size(); ++axis) {
      if (access.extents[axis] != tokens) continue;
      if (strides[axis] != ein::Size(*row)) return false;
      withinRow[axis] = one;
      ++tokenAxes;
    }
    std::optional<ein::kern::ViewExtent> reach = ein::kern::viewExtent(access.view, withinRow);
    return tokenAxes == 1 && reach && reach->min >= 0 && reach->max < *row;
  }

  // Each stretch of per-sequence kernels numbered from 1 (other ops: 0).
  static DenseMap<Operation *, int> segmentsOf(Block &body) {
    int segment = 0;
    DenseMap<Operation *, int> segmentOf;
    bool inSegment = false;
    for (Operation &op : body) {
      const bool perSequence = op.hasAttr(ein::kern::kPerSequenceAttr);
      if (perSequence && !inSegment) ++segment;
      inSegment = perSequence || (inSegment && !isa<ein::kern::KernDialect>(op.getDialect()));
      segmentOf[&op] = perSequence ? segment : 0;
    }
    return segmentOf;
  }

  // A sequence's own value that per-sequence kernels of later stretches read
  // too (T5's relative position bias, read by every layer's attention) is
  // computed again at the start of each such stretch when what computes it
  // reads no state: a few small kernels a stretch instead of one sequence's
  // value kept across the kernels over every sequence's tokens.
  void recomputePrivateValues(Block &body, const DenseMap<Operation *, int> &segmentOf) {
    SmallVector<Operation *> kernels;
    for (Operation &op : body)
      if (op.hasAttr(ein::kern::kPerSequenceAttr) && !op.hasAttr(ein::kern::kFirstRunAttr)) kernels.push_back(&op);
    for (Operation *op : kernels)
      for (Value result : op->getResults()) {
        if (holds(result) != Holds::Private) continue;
        // Its readers in other stretches, by stretch, in order.
        std::map<int, SmallVector<OpOperand *>> elsewhere;
        for (OpOperand &use : result.getUses()) {
          Operation *reader = body.findAncestorOpInBlock(*use.getOwner());
          if (reader && reader->hasAttr(ein::kern::kPerSequenceAttr) &&
              segmentOf.lookup(reader) != segmentOf.lookup(op))
            elsewhere[segmentOf.lookup(reader)].push_back(&use);
        }
        for (auto &[segment, uses] : elsewhere) {
          Operation *first = nullptr;
          for (OpOperand *use : uses) {
            Operation *reader = body.findAncestorOpInBlock(*use->getOwner());
            if (!first || reader->isBeforeInBlock(first)) first = reader;
          }
          if (!recomputable(result)) break;  // left to plan()'s check to report
          IRMapping copies;
          recompute(result, first, copies);
          for (OpOperand *use : uses) use->set(copies.lookupOrDefault(result));
        }
      }
  }

  // Whether `value`, if a sequence's own, is computed by kernels that read
  // no state, from operands that are not a sequence's own or are so too.
  bool recomputable(Value value) const {
    if (holds(value) != Holds::Private) return true;
    Operation *op = value.getDefiningOp();
    auto isState = [&](Value operand) { return holds(operand) == Holds::State; };
    return op && isa<ein::kern::KernDialect>(op->getDialect()) && !isa<ein::kern::AppendOp>(op) &&
           llvm::none_of(op->getOperands(), isState) &&
           llvm::all_of(op->getOperands(), [&](Value operand) { return recomputable(operand); });
  }

  // Clones the kernels computing `value` (recomputable()), a sequence's
  // own, and those of its operands that are too, before `before`.
  void recompute(Value value, Operation *before, IRMapping &copies) const {
    if (copies.contains(value) || holds(value) != Holds::Private) return;
    Operation *op = value.getDefiningOp();
    for (Value operand : op->getOperands()) recompute(operand, before, copies);
    OpBuilder(before).clone(*op, copies);
  }

  // Moves each kernel whose results a sequence keeps to itself down to just
  // before its first reader, so that the kernels over every sequence's tokens
  // that do not need it run before it rather than between it and its readers.
  void sinkPrivateValues(Block &body) {
    SmallVector<Operation *> candidates;
    auto isPrivate = [&](Value value) { return holds(value) == Holds::Private; };
    auto isState = [&](Value value) { return holds(value) == Holds::State; };
    // A kernel reading a state directly is not moved past the append that writes it.
    for (Operation &op : body)
      if (op.hasAttr(ein::kern::kPerSequenceAttr) && !op.hasAttr(ein::kern::kFirstRunAttr) && op.getNumResults() > 0 &&
          llvm::all_of(op.getResults(), isPrivate) && llvm::none_of(op.getOperands(), isState))
        candidates.push_back(&op);
    for (Operation *op : llvm::reverse(candidates)) {
      Operation *first = nullptr;
      for (Operation *user : op->getUsers()) {
        Operation *inBody = body.findAncestorOpInBlock(*user);
        if (inBody && (!first || inBody->isBeforeInBlock(first))) first = inBody;
      }
      if (first && first != op->getNextNode()) op->moveBefore(first);
    }
  }

  std::string describe(const char *what, BlockArgument argument) {
    std::string text = what;
    if (auto name = function_.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "ein.name"))
      text += " \"" + name.str() + "\"";
    return text;
  }
  std::string describeShape(Value value) const {
    std::string text;
    llvm::raw_string_ostream stream(text);
    stream << "[";
    llvm::interleaveComma(shapeOf(value), stream, [&](const ein::Size &size) { stream << size.str(); });
    stream << "]";
    return text;
  }
  static std::string describeOp(Operation *op) {
    return op->getName().getStringRef().str() + " at " + ein::ir::locationText(op->getLoc());
  }

  func::FuncOp function_;
  SequenceDims dims_;
  DenseMap<Value, Holds> holds_;
};

struct PlanSequencesPass : ein::impl::PlanSequencesBase<PlanSequencesPass> {
  using PlanSequencesBase::PlanSequencesBase;

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    auto position = function->getAttrOfType<StringAttr>("ein.position");
    auto advance = function->getAttrOfType<ein::ir::SizesAttr>("ein.position_advance");
    if (!position || !advance) return;  // no state: one sequence per run already
    const ein::Shape advanced = advance.sizes();
    const auto tokens = advanced.size() == 1 && advanced[0].terms().size() == 1 &&
                                advanced[0].terms()[0].coefficient == 1 &&
                                advanced[0].terms()[0].factors.size() == 1 &&
                                advanced[0].terms()[0].factors[0].isDim()
                            ? std::optional<std::string>(advanced[0].terms()[0].factors[0].dim)
                            : std::nullopt;
    Builder builder(function.getContext());
    if (!tokens) {
      function->setAttr(ein::kern::kOneSequenceAttr,
                        builder.getStringAttr("each run appends " + advanced[0].str() +
                                              " rows to the state, not one dim of tokens"));
      return;
    }
    SequencePlanner planner(function, {*tokens, ein::kern::sequenceDims(function), position.str()});
    std::optional<std::pair<Operation *, std::string>> blocked = planner.plan();
    if (!blocked) {
      function->setAttr(ein::kern::kSequenceTokensAttr, builder.getStringAttr(*tokens));
      return;
    }
    if (require) {
      blocked->first->emitError() << "the model cannot run many sequences at once: " << blocked->second;
      return signalPassFailure();
    }
    function->setAttr(ein::kern::kOneSequenceAttr,
                      builder.getStringAttr(ein::ir::locationText(blocked->first->getLoc()) + ": " + blocked->second));
  }
};

}  // namespace
