// The writer behind writeArtifact, private to compiler/artifact. Its members
// are defined by concern: writer.cpp (the two builds, tensors,
// bindings and sizes over ranged dims), steps.cpp (steps, views and
// element-wise programs) and weights.cpp (parameters, constants and the
// weight segment, streamed to the output as the IR holds them).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/artifact/artifact.hpp"
#include "ir/ein/ein_dialect.hpp"
#include "ir/ein/size.hpp"
#include "ir/kern/kern_dialect.hpp"
#include "ops/schema_enums.hpp"

namespace ein::artifact {

using namespace mlir;
namespace fb = ein::schema;
using ein::Shape;
using ein::Size;
using ein::SizeCheck;
using ops::toSchema;

constexpr uint64_t kWeightAlignment = 64;

uint64_t alignTo(uint64_t value, uint64_t alignment);
FailureOr<fb::DType> dtypeOf(Location loc, Type type);
int64_t elementBytes(Type type);
// The bytes a tensor of `type` takes in the artifact (i4: half its elements, rounded up).
uint64_t storedBytes(RankedTensorType type);
std::string bindingName(DictionaryAttr attrs, const std::string &fallback);

// A weight's bytes: a view of a bound parameter's values in the IR (no
// copy), or bytes computed here (a constant, a folded kernel's result).
class WeightBytes {
 public:
  explicit WeightBytes(ArrayRef<char> inIr)
      : view(reinterpret_cast<const uint8_t *>(inIr.data()), inIr.size()) {}
  explicit WeightBytes(std::vector<uint8_t> computed) : owned(std::move(computed)), view(owned) {}
  // A moved vector keeps its buffer, so a moved WeightBytes' view stays valid.
  WeightBytes(WeightBytes &&) = default;
  WeightBytes &operator=(WeightBytes &&) = default;

  const uint8_t *data() const { return view.data(); }
  size_t size() const { return view.size(); }
  ArrayRef<uint8_t> bytes() const { return view; }

 private:
  std::vector<uint8_t> owned;
  ArrayRef<uint8_t> view;
};

class Writer {
 public:
  Writer(func::FuncOp function, const ArtifactOptions &options) : function(function), options(options) {}

  // Writes the artifact to `out`, the header last (into room left for it).
  FailureOr<WrittenArtifact> run(llvm::raw_pwrite_stream &out);

 private:
  // writer.cpp
  LogicalResult build(uint64_t weightsOffset);
  int64_t upperBound(Value argument);
  FailureOr<uint32_t> addTensor(Value value, fb::Storage storage, uint32_t index, uint64_t offset);
  FailureOr<fb::Size> sizeField(const Size &size, std::optional<Location> at = std::nullopt);
  FailureOr<std::vector<fb::Size>> sizeFields(const Shape &sizes, std::optional<Location> at = std::nullopt);
  fb::Size field(const Size &size);
  std::vector<fb::Size> fields(const Shape &sizes);
  LogicalResult emitSize(const Size &size, std::vector<fb::SizeOp> &ops, std::optional<Location> at);
  static fb::CheckKind checkKindOf(SizeCheck::Kind kind);

  // steps.cpp
  flatbuffers::Offset<fb::View> view(Value value, kern::ViewAttr attr);
  flatbuffers::Offset<fb::View> denseView(Value value, const Shape &sizes);
  flatbuffers::Offset<fb::View> optionalView(Value value, std::optional<kern::ViewAttr> attr);
  std::vector<flatbuffers::Offset<fb::View>> views(ValueRange values, ArrayRef<Attribute> viewAttrs);
  LogicalResult addConcatSteps(kern::ConcatOp concat);
  LogicalResult addStep(Operation &op);
  // The step of `op` (its location, whether it runs per sequence) around `kernel`.
  flatbuffers::Offset<fb::Step> stepOf(Operation *op, fb::Kernel kind, flatbuffers::Offset<void> kernel);
  FailureOr<std::vector<fb::Instruction>> compileProgram(Block &block);
  // Generated from the kern ops' `step` (ir/kern/kern_ops.td, ein-tblgen):
  // writeStep(op) for each op with a step of its own, and writeOwnStep.
  FailureOr<std::pair<fb::Kernel, flatbuffers::Offset<void>>> writeOwnStep(Operation &op);
#define GET_STEP_WRITER_DECLS
#include "compiler/artifact/step_writers.inc"

  // weights.cpp
  // The model's parameters, in declaration order, each with the weight tensor
  // that holds it (its own, or a folded one it went into).
  LogicalResult addParameters(Block &body);
  FailureOr<WeightBytes> paramBytes(ir::ParamOp param);
  uint64_t appendWeights(const uint8_t *data, size_t size);
  FailureOr<WeightBytes> constantBytes(ir::ConstantOp constant);
  LogicalResult checkWeightLimit(Value value, RankedTensorType type);
  LogicalResult addWeights(Value value, RankedTensorType type, llvm::function_ref<FailureOr<WeightBytes>()> read);

  func::FuncOp function;
  const ArtifactOptions &options;

  flatbuffers::FlatBufferBuilder builder;
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  DenseMap<Value, uint32_t> tensorIndex;
  // The artifact being written (null while sizing): segmentBase bytes of room
  // for the header, then the weight segment as it is laid out.
  llvm::raw_pwrite_stream *out = nullptr;
  bool sizing = false;
  uint64_t segmentBase = 0, segmentSize = 0;
  std::vector<flatbuffers::Offset<fb::Binding>> inputs, outputs, states;
  uint64_t stateBytes = 0;
  std::vector<flatbuffers::Offset<fb::Parameter>> parameters;
  std::vector<flatbuffers::Offset<fb::Step>> steps;
  std::vector<std::vector<fb::SizeOp>> expressions;   // Model.sizes, in order
  std::map<std::string, int64_t> expressionIndex;     // a size's text -> its expression
  std::map<std::string, int64_t> dimIndex;            // a ranged dim -> its Model.dims number
  // A decoder serving many sequences at once (kern-plan-sequences): the dim
  // of their tokens and those each has its own value of (kern::sequenceDims);
  // empty otherwise.
  std::string sequenceTokens;
  std::set<std::string> sequenceDims;
  bool broken = false;                                // a size named an unknown dim (reported)
};

}  // namespace ein::artifact
