// The writer behind writeArtifact, private to compiler/artifact. Its members
// are defined by concern: writer.cpp (the two builds, tensors,
// bindings and sizes over ranged dims), steps.cpp (steps, views and
// element-wise programs) and weights.cpp (parameters, constants,
// folded kernels, bf16/int8 weight storage and the weight segment).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
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
// "model.ein:12:5" for the innermost file location of `loc`.
std::string describe(Location loc);
std::string bindingName(DictionaryAttr attrs, const std::string &fallback);

class Writer {
 public:
  Writer(func::FuncOp function, const ParamBytesProvider &params, const ArtifactOptions &options)
      : function(function), params(params), options(options) {}

  FailureOr<std::vector<uint8_t>> run();

 private:
  // writer.cpp
  LogicalResult build(uint64_t weightsOffset);
  int64_t upperBound(Value argument);
  bool stateStoredAsBf16(ir::StateOp state);
  FailureOr<uint32_t> addTensor(Value value, fb::Storage storage, uint32_t index, uint64_t offset,
                                std::optional<fb::DType> storedAs = std::nullopt);
  FailureOr<int64_t> sizeField(const Size &size, std::optional<Location> at = std::nullopt);
  FailureOr<std::vector<int64_t>> sizeFields(const Shape &sizes, std::optional<Location> at = std::nullopt);
  int64_t field(const Size &size);
  std::vector<int64_t> fields(const Shape &sizes);
  LogicalResult emitSize(const Size &size, std::vector<fb::SizeOp> &ops, std::optional<Location> at);
  static fb::CheckKind checkKindOf(SizeCheck::Kind kind);

  // steps.cpp
  flatbuffers::Offset<fb::View> view(Value value, kern::ViewAttr attr);
  flatbuffers::Offset<fb::View> denseView(Value value, const Shape &sizes);
  LogicalResult addConcatSteps(kern::ConcatOp concat);
  LogicalResult addStep(Operation &op);
  flatbuffers::Offset<fb::View> optionalView(Value value, std::optional<kern::ViewAttr> attr);
  FailureOr<std::vector<fb::Instruction>> compileProgram(Block &block);

  // weights.cpp
  // How an int8 weight lies: [k, n] with strides sK, sN.
  struct Int8Layout {
    int64_t k, n, sK, sN;
  };
  static bool readOnlyByFolds(Value value);
  // The model's parameters, in declaration order, each with the weight tensor
  // that holds it (its own, or a folded one it went into).
  LogicalResult addParameters(Block &body);
  FailureOr<std::vector<uint8_t>> unstoredBytes(Value value);
  LogicalResult addFoldedWeights(Operation &op, RankedTensorType type);
  FailureOr<std::vector<uint8_t>> foldedBytes(Operation &op);
  LogicalResult fold(Operation &op, uint8_t *out);
  FailureOr<std::vector<uint8_t>> paramBytes(ir::ParamOp param);
  uint64_t appendWeights(const uint8_t *data, size_t size);
  FailureOr<std::vector<uint8_t>> constantBytes(ir::ConstantOp constant);
  LogicalResult checkWeightLimit(Value value, RankedTensorType type);
  LogicalResult addGemmWeights(Value value, RankedTensorType type,
                               llvm::function_ref<FailureOr<std::vector<uint8_t>>()> read);
  bool storedAsBf16(Value value, RankedTensorType type);
  std::optional<Int8Layout> storedAsInt8(Value value, RankedTensorType type);
  LogicalResult addInt8Weights(Value value, const Int8Layout &layout,
                               llvm::function_ref<FailureOr<std::vector<uint8_t>>()> read);
  static std::vector<uint8_t> toBf16(const std::vector<uint8_t> &f32);
  LogicalResult addWeights(Value value, RankedTensorType type,
                           llvm::function_ref<FailureOr<std::vector<uint8_t>>()> read, bool asBf16 = false);

  func::FuncOp function;
  const ParamBytesProvider &params;
  const ArtifactOptions &options;

  flatbuffers::FlatBufferBuilder builder;
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  DenseMap<Value, uint32_t> tensorIndex;
  DenseMap<Value, uint32_t> scaleTensor;  // an int8 parameter's scale tensor
  DenseMap<Value, uint64_t> weightOffset;  // where a weight tensor's bytes start in the segment
  // The artifact file being built: segmentBase bytes of room for the header,
  // then the weight segment (empty while sizing).
  std::vector<uint8_t> weights;
  bool sizing = false;
  uint64_t segmentBase = 0, segmentSize = 0;
  std::vector<flatbuffers::Offset<fb::Binding>> inputs, outputs, states;
  uint64_t stateBytes = 0;
  std::vector<flatbuffers::Offset<fb::Parameter>> parameters;
  std::vector<flatbuffers::Offset<fb::Step>> steps;
  std::vector<std::vector<fb::SizeOp>> expressions;   // Model.sizes, in order
  std::map<std::string, int64_t> expressionIndex;     // a size's text -> its expression
  std::map<std::string, int64_t> dimIndex;            // a ranged dim -> its Model.dims number
  bool broken = false;                                // a size named an unknown dim (reported)
};

}  // namespace ein::artifact
