// The writer's steps: one per kern op (concat one per part), with the views
// they read and write and the element-wise programs they run.
#include "compiler/artifact/writer.hpp"

#include "ir/kern/scalar_program.hpp"
#include "ir/source_locations.hpp"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

namespace ein::artifact {

flatbuffers::Offset<fb::View> Writer::view(Value value, kern::ViewAttr attr) {
  std::vector<fb::Size> strides = fields(attr.getStrides());
  fb::Size offset = field(attr.getOffset());
  // An absent offset is 0, as it was when sizes were longs: most views start there.
  return fb::CreateViewDirect(builder, tensorIndex.at(value), offset.encoded() == 0 ? nullptr : &offset, &strides);
}

// The dense row-major view of an op's own result over `sizes`.
flatbuffers::Offset<fb::View> Writer::denseView(Value value, const Shape &sizes) {
  std::vector<fb::Size> strides = fields(kern::denseStrides(sizes));
  return fb::CreateViewDirect(builder, tensorIndex.at(value), /*offset=*/nullptr, &strides);
}

// One step per part, each writing its slab of the result: a copy, or the
// part's element-wise program.
LogicalResult Writer::addConcatSteps(kern::ConcatOp concat) {
  Value result = concat.getResult();
  Shape shape = ir::shapeOf(concat.getType());
  Shape strides = kern::denseStrides(shape);
  std::vector<fb::Size> strideFields = fields(strides);
  int64_t axis = concat.getAxis();
  for (auto [part, size] : llvm::enumerate(concat.getSizes().sizes())) {
    Shape partShape = shape;
    partShape[axis] = size;
    std::vector<fb::Size> partFields = fields(partShape);
    std::vector<flatbuffers::Offset<fb::View>> inputs = views(concat.partInputs(part), concat.partViews(part));
    fb::Size start = field(concat.partStart(part) * strides[axis]);
    auto y = fb::CreateViewDirect(builder, tensorIndex.at(result), &start, &strideFields);
    flatbuffers::Offset<void> kernel;
    fb::Kernel kind = fb::Kernel::Copy;
    if (concat.isCopy(part)) {
      kernel = fb::CreateCopyDirect(builder, &partFields, inputs.front(), y).Union();
    } else {
      auto program = compileProgram(concat.getParts()[part].front());
      if (failed(program)) return failure();
      kernel = fb::CreateElementwiseDirect(builder, &partFields, &inputs, y, &*program).Union();
      kind = fb::Kernel::Elementwise;
    }
    steps.push_back(stepOf(concat, kind, kernel));
  }
  return success();
}

LogicalResult Writer::addStep(Operation &op) {
  if (auto concat = dyn_cast<kern::ConcatOp>(op)) return addConcatSteps(concat);
  auto written = writeOwnStep(op);
  if (failed(written) || broken) return failure();
  steps.push_back(stepOf(&op, written->first, written->second));
  return success();
}

flatbuffers::Offset<fb::Step> Writer::stepOf(Operation *op, fb::Kernel kind, flatbuffers::Offset<void> kernel) {
  ir::SourceLocations where = ir::sourceLocationsOf(op->getLoc());
  // One source and no pass: nothing was fused, and `location` says it all.
  const bool fused = where.sources.size() > 1 || !where.passes.empty();
  return fb::CreateStep(builder, kind, kernel, builder.CreateString(ir::locationText(op->getLoc())),
                        op->hasAttr(kern::kPerSequenceAttr),
                        fused ? builder.CreateVectorOfStrings(where.sources) : 0,
                        where.scope.empty() ? 0 : builder.CreateString(where.scope),
                        fused ? builder.CreateVectorOfStrings(where.passes) : 0, op->hasAttr(kern::kFirstRunAttr),
                        op->hasAttr(kern::kRowsOverKeptAttr));
}

#define GET_STEP_WRITERS
#include "compiler/artifact/step_writers.inc"

// The view of an optional operand, or none.
flatbuffers::Offset<fb::View> Writer::optionalView(Value value, std::optional<kern::ViewAttr> attr) {
  return value ? view(value, *attr) : flatbuffers::Offset<fb::View>();
}

// The views of `values`, each through its #kern.view.
std::vector<flatbuffers::Offset<fb::View>> Writer::views(ValueRange values, ArrayRef<Attribute> viewAttrs) {
  std::vector<flatbuffers::Offset<fb::View>> result;
  for (auto [value, attr] : llvm::zip(values, viewAttrs)) result.push_back(view(value, cast<kern::ViewAttr>(attr)));
  return result;
}

// An elementwise body as register instructions (kern::compileScalarProgram).
FailureOr<std::vector<fb::Instruction>> Writer::compileProgram(Block &block) {
  FailureOr<std::vector<kern::ScalarInstruction>> scalar = kern::compileScalarProgram(block);
  if (failed(scalar)) return failure();
  std::vector<fb::Instruction> program;
  program.reserve(scalar->size());
  for (const kern::ScalarInstruction &in : *scalar)
    program.emplace_back(toSchema<fb::Opcode>(in.opcode), in.a, in.b, in.c, in.imm);
  return program;
}

}  // namespace ein::artifact
