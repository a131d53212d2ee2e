// Computes element-wise, copy and concat kernels of weights once, at compile
// time: a kernel whose inputs are all bound parameters or constants (a
// scaled, transposed or offset weight; the fused parallel linears'
// concatenated weights) becomes a constant holding its result, computed in
// f32 as the runtime's kernels would (the element-wise program through the
// op table's scalar definitions, inputs read through their views). The
// constant names the parameters it holds (kern.folded_from), so the artifact
// lists them; a parameter only folds read keeps its declaration but drops its
// values.
#include <cstring>
#include <optional>
#include <vector>

#include "compiler/transforms/kern/passes.hpp"
#include "ir/ein/ein_dialect.hpp"
#include "ir/kern/kern_dialect.hpp"
#include "ir/kern/scalar_program.hpp"
#include "llvm/ADT/SetVector.h"
#include "mlir/IR/DialectResourceBlobManager.h"

namespace ein {
#define GEN_PASS_DEF_FOLDKERNCONSTANTS
#include "compiler/transforms/kern/passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::Shape;
using ein::Size;

namespace {

bool staticView(ein::kern::ViewAttr view) {
  if (!view.getOffset().constant()) return false;
  return llvm::all_of(view.getStrides(), [](const Size &stride) { return stride.constant().has_value(); });
}

// The values of a weight: a bound parameter's or a constant's.
ElementsAttr valueOf(Value value) {
  Operation *producer = value.getDefiningOp();
  if (auto param = dyn_cast_or_null<ein::ir::ParamOp>(producer)) return param.getValueAttr();
  if (auto constant = dyn_cast_or_null<ein::ir::ConstantOp>(producer)) return constant.getValue();
  return {};
}

// A weight's f32 values, row-major: read in place from a resource (a bound
// parameter's, a folded constant's), copied out of a dense attribute.
struct F32Values {
  std::vector<float> copied;
  const char *bytes = nullptr;  // into the resource, or `copied`
  float operator[](size_t i) const {
    float value;
    std::memcpy(&value, bytes + i * sizeof(float), sizeof value);
    return value;
  }
};

std::optional<F32Values> f32Values(ElementsAttr attr) {
  auto type = cast<RankedTensorType>(attr.getType());
  if (!type.getElementType().isF32()) return std::nullopt;
  const auto count = static_cast<size_t>(type.getNumElements());
  F32Values values;
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != count * sizeof(float)) return std::nullopt;
    values.bytes = blob->getData().data();
    return values;
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense) return std::nullopt;
  values.copied.assign(dense.getValues<float>().begin(), dense.getValues<float>().end());
  values.bytes = reinterpret_cast<const char *>(values.copied.data());
  return values;
}

// Whether `op` is an f32 element-wise, copy or concat kernel of a static
// shape, not a model output, whose inputs are all f32 weights with values
// read through static views, and whose result is no larger than those inputs
// together (folding never grows the weights: a broadcast stays a kernel).
bool foldable(Operation &op, Operation *terminator) {
  using namespace ein;
  if (!isa<kern::ElementwiseOp, kern::CopyOp, kern::ConcatOp>(op) || op.getNumResults() != 1) return false;
  auto type = cast<RankedTensorType>(op.getResult(0).getType());
  if (!type.getElementType().isF32() || !type.hasStaticShape()) return false;
  if (llvm::is_contained(op.getResult(0).getUsers(), terminator)) return false;
  int64_t inputElements = 0;
  for (Value input : op.getOperands()) {
    ElementsAttr value = valueOf(input);
    auto inputType = cast<RankedTensorType>(input.getType());
    if (!value || !inputType.getElementType().isF32() || !inputType.hasStaticShape()) return false;
    inputElements += inputType.getNumElements();
  }
  if (auto elementwise = dyn_cast<kern::ElementwiseOp>(op)) {
    if (elementwise.getInputs().empty()) return false;
    for (Attribute view : elementwise.getInputViews())
      if (!staticView(cast<kern::ViewAttr>(view))) return false;
  } else if (auto concat = dyn_cast<kern::ConcatOp>(op)) {
    for (Attribute view : concat.getInputViews())
      if (!staticView(cast<kern::ViewAttr>(view))) return false;
  } else if (!staticView(cast<kern::CopyOp>(op).getXView())) {
    return false;
  }
  return type.getNumElements() <= inputElements;
}

// One input of a fold: its values and the view it is read through.
struct Input {
  F32Values values;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  float at(const std::vector<int64_t> &index) const {
    int64_t element = offset;
    for (size_t axis = 0; axis < index.size(); ++axis) element += index[axis] * strides[axis];
    return values[static_cast<size_t>(element)];
  }
};

// Steps through a row-major index over `extent`; false after the last.
bool next(std::vector<int64_t> &index, const std::vector<int64_t> &extent) {
  for (size_t axis = extent.size(); axis-- > 0;)
    if (++index[axis] < extent[axis]) return true;
    else index[axis] = 0;
  return false;
}

// The kernel's result (f32, row-major), as the runtime computes it, into
// `out` (the elements of its type).
LogicalResult fold(Operation &op, MutableArrayRef<float> out) {
  std::vector<int64_t> sizes;
  for (const Size &size : ein::ir::shapeOf(op.getResult(0).getType())) sizes.push_back(*size.constant());
  // Runs `body` (none: a copy) over `values` at every index of `extent`,
  // writing each result at its row-major place in `out`, `start` further
  // along `axis` (a concat part's slab; 0 for a whole result).
  auto evaluate = [&](ValueRange values, ArrayRef<Attribute> views, Block *body, const std::vector<int64_t> &extent,
                      size_t axis, int64_t start) -> LogicalResult {
    std::vector<Input> inputs;
    for (auto [value, attr] : llvm::zip(values, views)) {
      std::optional<F32Values> weights = f32Values(valueOf(value));
      if (!weights) return op.emitOpError() << "folds a weight whose values are not f32";
      auto view = cast<ein::kern::ViewAttr>(attr);
      Input input{std::move(*weights), *view.getOffset().constant(), {}};
      for (const Size &stride : view.getStrides()) input.strides.push_back(*stride.constant());
      inputs.push_back(std::move(input));
    }
    std::vector<ein::kern::ScalarInstruction> program;
    if (body) {
      auto compiled = ein::kern::compileScalarProgram(*body);
      if (failed(compiled)) return failure();
      program = std::move(*compiled);
    }
    for (int64_t size : extent)
      if (size == 0) return success();
    std::vector<int64_t> index(extent.size(), 0);
    std::vector<float> registers(inputs.size() + program.size());
    do {
      for (size_t i = 0; i < inputs.size(); ++i) registers[i] = inputs[i].at(index);
      ein::kern::runScalarProgram(program, inputs.size(), registers);
      int64_t flat = 0;
      for (size_t d = 0; d < sizes.size(); ++d) flat = flat * sizes[d] + index[d] + (d == axis ? start : 0);
      out[static_cast<size_t>(flat)] = registers.back();
    } while (next(index, extent));
    return success();
  };
  if (out.empty()) return success();
  if (auto concat = dyn_cast<ein::kern::ConcatOp>(op)) {
    const auto axis = static_cast<size_t>(concat.getAxis());
    for (auto [part, size] : llvm::enumerate(concat.getSizes().sizes())) {
      std::vector<int64_t> extent = sizes;
      extent[axis] = *size.constant();
      Block *body = concat.isCopy(part) ? nullptr : &concat.getParts()[part].front();
      if (failed(evaluate(concat.partInputs(part), concat.partViews(part), body, extent, axis,
                          *concat.partStart(part).constant())))
        return failure();
    }
    return success();
  }
  if (auto copy = dyn_cast<ein::kern::CopyOp>(op)) return evaluate(copy.getX(), copy.getXViewAttr(), nullptr, sizes, 0, 0);
  auto elementwise = cast<ein::kern::ElementwiseOp>(op);
  return evaluate(elementwise.getInputs(), elementwise.getInputViews().getValue(), &elementwise.getBody().front(),
                  sizes, 0, 0);
}

struct FoldKernConstantsPass : ein::impl::FoldKernConstantsBase<FoldKernConstantsPass> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    Block &body = function.getBody().front();
    Operation *terminator = body.getTerminator();
    OpBuilder builder(&getContext());
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
      if (!foldable(op, terminator)) continue;
      auto type = cast<RankedTensorType>(op.getResult(0).getType());
      AsmResourceBlob blob = HeapAsmResourceBlob::allocate(static_cast<size_t>(type.getNumElements()) * sizeof(float),
                                                           alignof(float), /*dataIsMutable=*/true);
      MutableArrayRef<char> bytes = blob.getMutableData();
      if (failed(fold(op, MutableArrayRef<float>(reinterpret_cast<float *>(bytes.data()), bytes.size() / sizeof(float)))))
        return signalPassFailure();
      // The parameters it holds: its inputs', and those folded into them.
      llvm::SetVector<StringRef> names;
      llvm::SetVector<Operation *> producers;
      for (Value input : op.getOperands()) {
        Operation *producer = input.getDefiningOp();
        producers.insert(producer);
        if (auto param = dyn_cast<ein::ir::ParamOp>(producer)) names.insert(param.getName());
        if (auto from = producer->getAttrOfType<ArrayAttr>(ein::kern::kFoldedFromAttr))
          for (auto name : from.getAsValueRange<StringAttr>()) names.insert(name);
      }
      builder.setInsertionPoint(&op);
      auto constant = builder.create<ein::ir::ConstantOp>(op.getLoc(),
                                                          DenseResourceElementsAttr::get(type, "folded", std::move(blob)));
      constant->setAttr(ein::kern::kFoldedFromAttr, builder.getStrArrayAttr(names.getArrayRef()));
      op.getResult(0).replaceAllUsesWith(constant.getResult());
      op.erase();
      // A weight nothing reads any more: a constant goes; a parameter stays
      // declared (the artifact lists it, held by the folded constant) but
      // lets its values go.
      for (Operation *producer : producers) {
        if (!producer->use_empty()) continue;
        if (auto param = dyn_cast<ein::ir::ParamOp>(producer)) {
          if (auto resource = dyn_cast_or_null<DenseResourceElementsAttr>(param.getValueAttr()))
            if (auto *entry = resource.getRawHandle().getResource()) entry->setBlob(AsmResourceBlob());
          param.removeValueAttr();
        } else {
          producer->erase();
        }
      }
    }
  }
};

}  // namespace
