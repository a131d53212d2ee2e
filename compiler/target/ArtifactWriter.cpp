#include "target/ArtifactWriter.h"

#include <cmath>
#include <cstring>
#include <optional>

#include "Limits.h"
#include "ein/IR/EinDialect.h"
#include "ein/IR/KernDialect.h"
#include "ein/IR/OpTable.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "ops/scalar_functions.hpp"
#include "ops/schema_enums.hpp"

using namespace mlir;
namespace fb = ein::schema;
using ein::Shape;
using ein::Size;
using ein::SizeCheck;

namespace ein {
namespace {

// The kern dialect's kernel enums are the op table's, value for value, and so
// the schema's (ops/schema_enums.hpp): they are written by value.
#define EIN_KERN_MATCHES(Enum, Name, spelling) \
  static_assert(static_cast<int>(kern::Enum::spelling) == static_cast<int>(ops::Enum::Name), #Enum "::" #spelling);
#define EIN_ACTIVATION(Name, spelling, function) EIN_KERN_MATCHES(Activation, Name, spelling)
#define EIN_REDUCE_KIND(Name, spelling) EIN_KERN_MATCHES(ReduceKind, Name, spelling)
#define EIN_MASK_KIND(Name, spelling) EIN_KERN_MATCHES(MaskKind, Name, spelling)
#define EIN_LAYERNORM_VARIANT(Name, spelling) EIN_KERN_MATCHES(LayerNormVariant, Name, spelling)
#include "ops/op_table.def"
#undef EIN_KERN_MATCHES
static_assert(kern::getMaxEnumValForActivation() + 1 == ops::kValueCount<ops::Activation>);
static_assert(kern::getMaxEnumValForReduceKind() + 1 == ops::kValueCount<ops::ReduceKind>);
static_assert(kern::getMaxEnumValForMaskKind() + 1 == ops::kValueCount<ops::MaskKind>);
static_assert(kern::getMaxEnumValForLayerNormVariant() + 1 == ops::kValueCount<ops::LayerNormVariant>);
using ops::toSchema;

constexpr uint64_t kWeightAlignment = 64;
constexpr const char *kProducer = "einc 0.1.0";

uint64_t alignTo(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

FailureOr<fb::DType> dtypeOf(Location loc, Type type) {
  if (type.isF32()) return fb::DType::F32;
  if (type.isF16()) return fb::DType::F16;
  if (type.isBF16()) return fb::DType::BF16;
  if (type.isInteger(1)) return fb::DType::Bool;
  if (type.isSignlessInteger(32)) return fb::DType::I32;
  if (type.isSignlessInteger(64)) return fb::DType::I64;
  return emitError(loc) << "element type " << type << " cannot be stored in an artifact";
}

int64_t elementBytes(Type type) { return type.isInteger(1) ? 1 : type.getIntOrFloatBitWidth() / 8; }

// "model.ein:12:5" for the innermost file location of `loc`.
std::string describe(Location loc) {
  std::string text;
  loc->walk([&](Location inner) {
    if (auto file = dyn_cast<FileLineColLoc>(inner)) {
      text = (file.getFilename().str() + ":" + std::to_string(file.getLine()) + ":" + std::to_string(file.getColumn()));
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return text;
}

std::string bindingName(DictionaryAttr attrs, const std::string &fallback) {
  if (attrs)
    if (auto name = attrs.getAs<StringAttr>("ein.name")) return name.str();
  return fallback;
}

class Writer {
 public:
  Writer(func::FuncOp function, const ParamBytesProvider &params, const ArtifactOptions &options)
      : function(function), params(params), options(options) {}

  FailureOr<std::vector<uint8_t>> run() {
    // The weight segment's file offset is a field of the FlatBuffer: build
    // once to learn the buffer's size (sizing: weights are laid out but not
    // read), then again with the final offset, reading each parameter once
    // straight into the file after the header's room. All scalar fields are
    // forced present, so both builds have the same size. So einc holds the
    // weights once (the file), plus one parameter at a time.
    sizing = true;
    if (failed(build(0))) return failure();
    uint64_t weightsOffset = alignTo(builder.GetSize(), kWeightAlignment);
    sizing = false;
    segmentBase = weightsOffset;
    weights.reserve(weightsOffset + segmentSize);
    if (failed(build(weightsOffset))) return failure();
    if (alignTo(builder.GetSize(), kWeightAlignment) != weightsOffset)
      return function.emitError() << "internal error: artifact header changed size between builds";
    std::memcpy(weights.data(), builder.GetBufferPointer(), builder.GetSize());
    return std::move(weights);
  }

 private:
  LogicalResult build(uint64_t weightsOffset) {
    builder.Clear();
    builder.ForceDefaults(true);
    tensors.clear();
    tensorIndex.clear();
    scaleTensor.clear();
    weightOffset.clear();
    weights.assign(sizing ? 0 : segmentBase, 0);
    segmentSize = 0;
    inputs.clear();
    outputs.clear();
    states.clear();
    stateBytes = 0;
    parameters.clear();
    steps.clear();
    expressions.clear();
    expressionIndex.clear();
    dimIndex.clear();
    ein::DimRanges ranges = ir::dimRangesOf(function);
    std::vector<flatbuffers::Offset<fb::Dim>> dims;
    for (const auto &[name, range] : ranges) {
      dimIndex[name] = static_cast<int64_t>(dims.size());
      dims.push_back(fb::CreateDimDirect(builder, name.c_str(), range.min, range.max));
    }

    Block &body = function.getBody().front();
    for (auto [index, argument] : llvm::enumerate(body.getArguments())) {
      auto id = addTensor(argument, fb::Storage::Input, static_cast<uint32_t>(index), 0);
      if (failed(id)) return failure();
      std::string name = bindingName(function.getArgAttrDict(index), "input" + std::to_string(index));
      inputs.push_back(fb::CreateBinding(builder, builder.CreateString(name), *id, upperBound(argument)));
    }
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    DenseMap<Value, uint32_t> outputIndex;
    for (auto [index, value] : llvm::enumerate(ret.getOperands())) outputIndex[value] = static_cast<uint32_t>(index);

    for (Operation &op : body.without_terminator()) {
      // A weight only folded kernels read is stored in its folded form alone
      // (q, k and v weights as their concatenation); unstoredBytes computes
      // it where a fold reads it.
      if (isa<ir::ParamOp, ir::ConstantOp>(op) && readOnlyByFolds(op.getResult(0))) continue;
      if (auto param = dyn_cast<ir::ParamOp>(op)) {
        if (failed(checkWeightLimit(param, param.getType())) ||
            failed(addGemmWeights(param, param.getType(), [&] { return paramBytes(param); })))
          return failure();
        parameters.push_back(fb::CreateParameter(builder, builder.CreateString(param.getName().str()),
                                                 tensorIndex.at(param)));
        continue;
      }
      if (auto constant = dyn_cast<ir::ConstantOp>(op)) {
        if (failed(addWeights(constant, constant.getType(), [&] { return constantBytes(constant); })))
          return failure();
        continue;
      }
      if (auto state = dyn_cast<ir::StateOp>(op)) {
        // Each state at its own 64-aligned place in the session's state.
        stateBytes = alignTo(stateBytes, kWeightAlignment);
        auto id = addTensor(state, fb::Storage::State, static_cast<uint32_t>(states.size()), stateBytes);
        if (failed(id)) return failure();
        stateBytes += static_cast<uint64_t>(state.getType().getNumElements()) * elementBytes(state.getType().getElementType());
        states.push_back(fb::CreateBinding(builder, builder.CreateString(state.getName().str()), *id, 0));
        continue;
      }
      if (auto append = dyn_cast<kern::AppendOp>(op)) {
        // The appended state is the state's tensor; the step is a copy into it.
        tensorIndex[append.getResult()] = tensorIndex.at(append.getState());
        std::vector<int64_t> shape = fields(append.getShape().sizes());
        auto kernel = fb::CreateCopyDirect(builder, &shape, view(append.getX(), append.getXView()),
                                           view(append.getState(), append.getStateView()))
                          .Union();
        steps.push_back(fb::CreateStep(builder, fb::Kernel::Copy, kernel, builder.CreateString(describe(append.getLoc()))));
        continue;
      }
      if (!isa<kern::KernDialect>(op.getDialect()))
        return op.emitOpError() << "cannot be serialised: the artifact holds kernel (kern) ops only";
      if (op.hasAttr(kern::kFoldedAttr)) {  // computed here, stored with the weights
        auto type = cast<RankedTensorType>(op.getResult(0).getType());
        if (readOnlyByFolds(op.getResult(0))) continue;
        if (failed(checkWeightLimit(op.getResult(0), type)) || failed(addFoldedWeights(op, type))) return failure();
        continue;
      }
      Value result = op.getResult(0);
      FailureOr<uint32_t> id = failure();
      if (auto output = outputIndex.find(result); output != outputIndex.end()) {
        id = addTensor(result, fb::Storage::Output, output->second, 0);
      } else {
        auto offset = op.getAttrOfType<IntegerAttr>(kern::kArenaOffsetAttr);
        if (!offset) return op.emitOpError() << "has no arena offset: run the memory planner first";
        id = addTensor(result, fb::Storage::Arena, 0, offset.getInt());
      }
      if (failed(id) || failed(addStep(op))) return failure();
    }
    for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
      if (!tensorIndex.count(value) || !value.getDefiningOp() || !isa<kern::KernDialect>(value.getDefiningOp()->getDialect()))
        return ret.emitOpError() << "result " << index << " must be produced by a kernel";
      std::string name = bindingName(function.getResultAttrDict(index), "output" + std::to_string(index));
      outputs.push_back(fb::CreateBinding(builder, builder.CreateString(name), tensorIndex.at(value), 0));
    }

    std::vector<flatbuffers::Offset<fb::Check>> checks;
    if (auto attrs = function->getAttrOfType<ArrayAttr>("ein.checks"))
      for (Attribute attr : attrs) {
        auto check = ir::sizeCheckOf(attr);
        if (!check) return function.emitError() << "malformed ein.checks entry " << attr;
        auto [condition, at] = *check;
        auto lhs = sizeField(condition.lhs), rhs = sizeField(condition.rhs);
        if (failed(lhs) || failed(rhs)) return failure();
        checks.push_back(fb::CreateCheckDirect(builder, checkKindOf(condition.kind), *lhs, *rhs, describe(at).c_str(),
                                               condition.message.c_str()));
      }
    std::vector<flatbuffers::Offset<fb::SizeExpression>> sizeTables;
    for (const std::vector<fb::SizeOp> &ops : expressions) sizeTables.push_back(fb::CreateSizeExpressionDirect(builder, &ops));

    int32_t positionDim = -1;
    int64_t positionAdvance = 0;
    if (auto position = function->getAttrOfType<StringAttr>("ein.position")) {
      auto advance = function->getAttrOfType<ir::SizesAttr>("ein.position_advance");
      auto dim = dimIndex.find(position.str());
      if (dim == dimIndex.end() || !advance || advance.sizes().size() != 1)
        return function.emitError() << "ein.position names no ranged dim, or ein.position_advance is missing";
      positionDim = static_cast<int32_t>(dim->second);
      auto field = sizeField(advance.sizes()[0]);
      if (failed(field)) return failure();
      positionAdvance = *field;
    }
    auto arenaBytes = function->getAttrOfType<IntegerAttr>(kern::kArenaBytesAttr);
    if (!arenaBytes) return function.emitError() << "has no arena size: run the memory planner first";
    auto target = options.target == ArtifactTarget::Cuda ? fb::Target::Cuda : fb::Target::Cpu;
    auto precision = options.precision == ArtifactPrecision::Bf16   ? fb::Precision::Bf16
                     : options.precision == ArtifactPrecision::Fp16 ? fb::Precision::Fp16
                     : options.precision == ArtifactPrecision::Int8 ? fb::Precision::Int8
                                                                    : fb::Precision::Fp32;
    auto model = fb::CreateModelDirect(builder, static_cast<uint32_t>(fb::FormatVersion::Current), target, kProducer,
                                       options.source.c_str(), &inputs, &outputs, &parameters, &tensors, &steps,
                                       static_cast<uint64_t>(arenaBytes.getInt()), weightsOffset, segmentSize,
                                       precision, &dims, &sizeTables, &checks, &states, stateBytes, positionDim,
                                       positionAdvance);
    fb::FinishSizePrefixedModelBuffer(builder, model);
    return success();
  }

  // ---- constant folding ----------------------------------------------------

  // Whether every reader of `value` (a weight) is a folded kernel.
  static bool readOnlyByFolds(Value value) {
    return !value.use_empty() &&
           llvm::all_of(value.getUsers(), [](Operation *user) { return user->hasAttr(kern::kFoldedAttr); });
  }

  // The f32 bytes of a weight a fold reads (a parameter, constant or folded
  // result: f32, kern-plan-memory checked) that is not in the weight segment,
  // computed now.
  FailureOr<std::vector<uint8_t>> unstoredBytes(Value value) {
    Operation *producer = value.getDefiningOp();
    if (auto param = dyn_cast<ir::ParamOp>(producer)) return paramBytes(param);
    if (auto constant = dyn_cast<ir::ConstantOp>(producer)) return constantBytes(constant);
    return foldedBytes(*producer);
  }

  // A folded kernel's result, stored with the weights: as f32, written
  // straight into the weight segment (einc holds no second copy of it).
  LogicalResult addFoldedWeights(Operation &op, RankedTensorType type) {
    Value result = op.getResult(0);
    if (storedAsInt8(result, type) || storedAsBf16(result, type))
      return addGemmWeights(result, type, [&] { return foldedBytes(op); });
    const uint64_t offset = appendWeights(nullptr, static_cast<size_t>(type.getNumElements()) * 4);
    if (!sizing && failed(fold(op, weights.data() + segmentBase + offset))) return failure();
    weightOffset[result] = offset;
    return success(succeeded(addTensor(result, fb::Storage::Weights, 0, offset)));
  }

  FailureOr<std::vector<uint8_t>> foldedBytes(Operation &op) {
    std::vector<uint8_t> bytes(static_cast<size_t>(cast<RankedTensorType>(op.getResult(0).getType()).getNumElements()) * 4);
    if (failed(fold(op, bytes.data()))) return failure();
    return bytes;
  }

  // Computes a folded element-wise, copy or concat kernel's result (f32,
  // row-major) into `out`, as the runtime's kernels would: the element-wise
  // program in f32 by the op table's scalar definitions, inputs read through
  // their views.
  LogicalResult fold(Operation &op, uint8_t *out) {
    Shape shape = ir::shapeOf(op.getResult(0).getType());
    std::vector<int64_t> sizes;
    for (const Size &size : shape) sizes.push_back(*size.constant());
    struct Input {
      std::vector<uint8_t> computed;  // empty where the weight segment holds it
      const uint8_t *data;
      int64_t offset;
      std::vector<int64_t> strides;
      float at(const std::vector<int64_t> &index) const {
        int64_t element = offset;
        for (size_t axis = 0; axis < index.size(); ++axis) element += index[axis] * strides[axis];
        float x;
        std::memcpy(&x, data + 4 * element, 4);
        return x;
      }
    };
    auto inputOf = [&](Value value, kern::ViewAttr view) -> FailureOr<std::unique_ptr<Input>> {
      auto input = std::make_unique<Input>();
      if (auto stored = weightOffset.find(value); stored != weightOffset.end()) {
        input->data = weights.data() + segmentBase + stored->second;
      } else {
        FailureOr<std::vector<uint8_t>> bytes = unstoredBytes(value);
        if (failed(bytes)) return failure();
        input->computed = std::move(*bytes);
        input->data = input->computed.data();
      }
      input->offset = *view.getOffset().constant();
      for (const Size &stride : view.getStrides()) input->strides.push_back(*stride.constant());
      return input;
    };
    // Steps through a row-major index over `extent`; false after the last.
    auto next = [](std::vector<int64_t> &index, const std::vector<int64_t> &extent) {
      for (size_t axis = extent.size(); axis-- > 0;)
        if (++index[axis] < extent[axis]) return true;
        else index[axis] = 0;
      return false;
    };
    int64_t count = 1;
    for (int64_t size : sizes) count *= size;
    if (count == 0) return success();
    // Runs `program` over `inputs` at every index of `extent`, writing each
    // result at its row-major place in `out`, `start` further along `axis`
    // (a concat part's slab; 0 for a whole result). A copy is the empty
    // program: its result register is its one input.
    auto evaluate = [&](ValueRange values, ArrayRef<Attribute> views, Block *body, const std::vector<int64_t> &extent,
                        size_t axis, int64_t start) -> LogicalResult {
      std::vector<std::unique_ptr<Input>> inputs;
      for (auto [value, attr] : llvm::zip(values, views)) {
        FailureOr<std::unique_ptr<Input>> input = inputOf(value, cast<kern::ViewAttr>(attr));
        if (failed(input)) return failure();
        inputs.push_back(std::move(*input));
      }
      std::vector<fb::Instruction> program;
      if (body) {
        auto compiled = compileProgram(*body);
        if (failed(compiled)) return failure();
        program = std::move(*compiled);
      }
      for (int64_t size : extent)
        if (size == 0) return success();
      std::vector<int64_t> index(extent.size(), 0);
      std::vector<float> registers(inputs.size() + program.size());
      do {
        for (size_t i = 0; i < inputs.size(); ++i) registers[i] = inputs[i]->at(index);
        for (size_t p = 0; p < program.size(); ++p) {
          const fb::Instruction &in = program[p];
          registers[inputs.size() + p] =
              ops::evaluate<float>(static_cast<ops::Opcode>(in.opcode()), registers[in.a()], registers[in.b()],
                                   registers[in.c()], in.imm());
        }
        int64_t flat = 0;
        for (size_t d = 0; d < sizes.size(); ++d) flat = flat * sizes[d] + index[d] + (d == axis ? start : 0);
        std::memcpy(out + 4 * flat, &registers.back(), 4);
      } while (next(index, extent));
      return success();
    };
    if (auto concat = dyn_cast<kern::ConcatOp>(op)) {
      // Each part into its slab along the axis.
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
    if (auto copy = dyn_cast<kern::CopyOp>(op)) {
      Value x = copy.getX();
      Attribute view = copy.getXViewAttr();
      return evaluate(x, view, nullptr, sizes, 0, 0);
    }
    auto elementwise = cast<kern::ElementwiseOp>(op);
    return evaluate(elementwise.getInputs(), elementwise.getInputViews().getValue(), &elementwise.getBody().front(),
                    sizes, 0, 0);
  }

  // A parameter's bytes, read once: by the second build (the first only sizes).
  FailureOr<std::vector<uint8_t>> paramBytes(ir::ParamOp param) {
    return params(param.getName(), param.getType(), param.getLoc());
  }

  // Appends `size` bytes (64-aligned; zeros where `data` is null) to the
  // weight segment and returns their offset there; while sizing, only counts
  // them.
  uint64_t appendWeights(const uint8_t *data, size_t size) {
    segmentSize = alignTo(segmentSize, kWeightAlignment);
    const uint64_t offset = segmentSize;
    segmentSize += size;
    if (!sizing) {
      weights.resize(segmentBase + offset, 0);
      if (data) weights.insert(weights.end(), data, data + size);
      else weights.resize(segmentBase + offset + size, 0);  // the caller fills them
    }
    return offset;
  }

  // Ids feeding a gather must index its table: record the row count so that
  // `ein-run --random-inputs` draws valid ids.
  int64_t upperBound(Value argument) {
    int64_t bound = 0;
    for (Operation *user : argument.getUsers())
      if (auto gather = dyn_cast<kern::GatherOp>(user); gather && gather.getIds() == argument) {
        std::optional<int64_t> rows = kern::gatherTableShape(gather)[0].constant();
        if (rows) bound = bound == 0 ? *rows : std::min(bound, *rows);
      }
    return bound;
  }

  FailureOr<uint32_t> addTensor(Value value, fb::Storage storage, uint32_t index, uint64_t offset,
                                std::optional<fb::DType> storedAs = std::nullopt) {
    auto type = cast<RankedTensorType>(value.getType());
    auto dtype = storedAs ? FailureOr<fb::DType>(*storedAs) : dtypeOf(value.getLoc(), type.getElementType());
    if (failed(dtype)) return failure();
    auto shape = sizeFields(ir::shapeOf(type), value.getLoc());
    if (failed(shape)) return failure();
    auto id = static_cast<uint32_t>(tensors.size());
    tensors.push_back(fb::CreateTensorDirect(builder, *dtype, &*shape, storage, index, offset));
    tensorIndex[value] = id;
    return id;
  }

  FailureOr<std::vector<uint8_t>> constantBytes(ir::ConstantOp constant) {
    auto value = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!value) return constant.emitOpError() << "only dense constants can be stored";
    Type element = value.getElementType();
    std::vector<uint8_t> bytes;
    auto append = [&](const void *data, size_t size) {
      auto *begin = static_cast<const uint8_t *>(data);
      bytes.insert(bytes.end(), begin, begin + size);
    };
    if (element.isF32()) {
      for (APFloat v : value.getValues<APFloat>()) {
        float f = v.convertToFloat();
        append(&f, sizeof f);
      }
    } else if (element.isInteger(1)) {
      for (bool v : value.getValues<bool>()) bytes.push_back(v ? 1 : 0);
    } else if (element.isSignlessInteger(32) || element.isSignlessInteger(64)) {
      for (APInt v : value.getValues<APInt>()) {
        int64_t wide = v.getSExtValue();
        int32_t narrow = static_cast<int32_t>(wide);
        element.isSignlessInteger(32) ? append(&narrow, sizeof narrow) : append(&wide, sizeof wide);
      }
    } else {
      return constant.emitOpError() << "constants of " << element << " cannot be stored yet";
    }
    return bytes;
  }

  // Refuses, before its bytes are read or generated, a parameter that would
  // take the weight segment past its limit (a model declaring terabytes of
  // random weights would otherwise exhaust memory).
  LogicalResult checkWeightLimit(Value value, RankedTensorType type) {
    uint64_t bytes = static_cast<uint64_t>(type.getNumElements()) * elementBytes(type.getElementType());
    if (bytes > limits::kMaxWeightBytes - std::min<uint64_t>(segmentSize, limits::kMaxWeightBytes))
      return emitError(value.getLoc()) << "the weights reach " << segmentSize + bytes
                                       << " bytes with this parameter, beyond the artifact's limit of 2^36 bytes";
    return success();
  }

  // A parameter or folded weight, stored as gemm weights are at the
  // artifact's precision (bf16, int8) or else as it is.
  LogicalResult addGemmWeights(Value value, RankedTensorType type,
                               llvm::function_ref<FailureOr<std::vector<uint8_t>>()> read) {
    if (std::optional<Int8Layout> layout = storedAsInt8(value, type)) return addInt8Weights(value, *layout, read);
    return addWeights(value, type, read, storedAsBf16(value, type));
  }

  // --precision bf16 on the CPU: a f32 parameter (or folded weight) that
  // only ever is a gemm's weight operand b is stored as bf16, half the bytes
  // to map and stream. The runtime packs it for its bf16 gemm, or widens it
  // to f32 while packing, so every path computes with exactly these
  // bf16-rounded weights. A parameter with any other use (a bias, a norm's
  // gamma, a gather table) stays f32.
  bool storedAsBf16(Value value, RankedTensorType type) {
    if (options.target != ArtifactTarget::Cpu || options.precision != ArtifactPrecision::Bf16) return false;
    if (!type.getElementType().isF32() || value.use_empty()) return false;
    for (OpOperand &use : value.getUses()) {
      auto gemm = dyn_cast<kern::GemmOp>(use.getOwner());
      if (!gemm || gemm.getB() != value) return false;
      if (gemm.getA() == value || gemm.getBias() == value || gemm.getResidual() == value) return false;
    }
    return true;
  }

  // --precision int8 on the CPU: a f32 parameter that only ever is a gemm's
  // weight operand b, always through the same view, which is one [k, n]
  // matrix for the whole batch covering each element once (a linear's weight,
  // either orientation), is stored as s8 with a scale per column n
  // (symmetric: scale = max_k |w| / 127, q = round_half_even(w * 127 / max)).
  // Anything else stays f32.
  struct Int8Layout {
    int64_t k, n, sK, sN;
  };
  std::optional<Int8Layout> storedAsInt8(Value value, RankedTensorType type) {
    if (options.target != ArtifactTarget::Cpu || options.precision != ArtifactPrecision::Int8) return std::nullopt;
    if (!type.getElementType().isF32() || value.use_empty()) return std::nullopt;
    std::optional<Int8Layout> layout;
    for (OpOperand &use : value.getUses()) {
      auto gemm = dyn_cast<kern::GemmOp>(use.getOwner());
      if (!gemm || gemm.getB() != value || gemm.getA() == value || gemm.getBias() == value ||
          gemm.getResidual() == value)
        return std::nullopt;
      kern::ViewAttr view = gemm.getBView();
      const Shape &strides = view.getStrides();
      const Shape batch = gemm.getBatch().sizes();
      std::optional<int64_t> k = kern::sizeOf(gemm.getK()).constant(), n = kern::sizeOf(gemm.getN()).constant();
      std::optional<int64_t> offset = view.getOffset().constant();
      if (!k || !n || !offset || *offset != 0 || strides.size() != batch.size() + 2) return std::nullopt;
      for (size_t axis = 0; axis < batch.size(); ++axis) {
        std::optional<int64_t> stride = strides[axis].constant(), size = batch[axis].constant();
        if (!stride || !size || (*stride != 0 && *size != 1)) return std::nullopt;
      }
      std::optional<int64_t> sK = strides[batch.size()].constant(), sN = strides[batch.size() + 1].constant();
      if (!sK || !sN) return std::nullopt;
      // Each element once: row-major [k, n] or its transpose [n, k].
      const bool dense = (*sN == 1 && *sK == *n) || (*sK == 1 && *sN == *k);
      if (!dense || *k * *n != type.getNumElements() || *k * *n == 0 || *k > 65536) return std::nullopt;
      Int8Layout here{*k, *n, *sK, *sN};
      if (layout && (layout->k != here.k || layout->n != here.n || layout->sK != here.sK || layout->sN != here.sN))
        return std::nullopt;
      layout = here;
    }
    return layout;
  }

  // The weights as s8 (their own tensor; a parameter's under its name) and
  // their scales (an f32 [n] weight tensor that gemms reading them name as
  // b_scale). A folded weight (a concatenation) is quantized as computed, so
  // the scales of concatenated weights are theirs concatenated.
  LogicalResult addInt8Weights(Value value, const Int8Layout &layout,
                               llvm::function_ref<FailureOr<std::vector<uint8_t>>()> read) {
    const auto count = static_cast<size_t>(layout.k * layout.n);
    std::vector<int64_t> shape{layout.n};
    if (sizing) {  // the layout only
      if (failed(addTensor(value, fb::Storage::Weights, 0, appendWeights(nullptr, count), fb::DType::I8)))
        return failure();
      const uint64_t scales = appendWeights(nullptr, static_cast<size_t>(layout.n) * sizeof(float));
      scaleTensor[value] = static_cast<uint32_t>(tensors.size());
      tensors.push_back(fb::CreateTensorDirect(builder, fb::DType::F32, &shape, fb::Storage::Weights, 0, scales));
      return success();
    }
    FailureOr<std::vector<uint8_t>> bytes = read();
    if (failed(bytes)) return failure();
    if (bytes->size() != count * 4)
      return emitError(value.getLoc()) << "weights hold " << bytes->size() << " bytes for " << value.getType();
    auto at = [&](int64_t p, int64_t j) {
      float weight;
      std::memcpy(&weight, bytes->data() + 4 * (p * layout.sK + j * layout.sN), 4);
      return weight;
    };
    std::vector<uint8_t> quantized(count);
    std::vector<float> scales(static_cast<size_t>(layout.n));
    for (int64_t j = 0; j < layout.n; ++j) {
      float absMax = 0.0f;
      for (int64_t p = 0; p < layout.k; ++p) {
        const float weight = at(p, j);
        if (!std::isfinite(weight)) {
          auto param = value.getDefiningOp<ir::ParamOp>();
          return emitError(value.getLoc())
                 << (param ? "parameter '" + param.getName().str() + "'" : std::string("the folded weight"))
                 << " holds a value that is not finite: it cannot be quantized to int8";
        }
        absMax = std::max(absMax, std::fabs(weight));
      }
      scales[static_cast<size_t>(j)] = absMax / 127.0f;
      const float inverse = absMax == 0.0f ? 0.0f : 127.0f / absMax;
      for (int64_t p = 0; p < layout.k; ++p) {
        float q = std::nearbyint(at(p, j) * inverse);
        q = std::min(127.0f, std::max(-127.0f, q));
        quantized[static_cast<size_t>(p * layout.sK + j * layout.sN)] = static_cast<uint8_t>(static_cast<int8_t>(q));
      }
    }
    bytes->clear();
    bytes->shrink_to_fit();
    if (failed(addTensor(value, fb::Storage::Weights, 0, appendWeights(quantized.data(), count), fb::DType::I8)))
      return failure();
    const uint64_t offset =
        appendWeights(reinterpret_cast<const uint8_t *>(scales.data()), scales.size() * sizeof(float));
    scaleTensor[value] = static_cast<uint32_t>(tensors.size());
    tensors.push_back(fb::CreateTensorDirect(builder, fb::DType::F32, &shape, fb::Storage::Weights, 0, offset));
    return success();
  }

  // f32 bytes to bf16, rounded to nearest even (NaN stays NaN).
  static std::vector<uint8_t> toBf16(const std::vector<uint8_t> &f32) {
    std::vector<uint8_t> out(f32.size() / 2);
    for (size_t i = 0; i < f32.size() / 4; ++i) {
      float value;
      std::memcpy(&value, f32.data() + 4 * i, 4);
      APFloat wide(value);
      bool lost = false;
      wide.convert(APFloat::BFloat(), APFloat::rmNearestTiesToEven, &lost);
      auto bits = static_cast<uint16_t>(wide.bitcastToAPInt().getZExtValue());
      std::memcpy(out.data() + 2 * i, &bits, 2);
    }
    return out;
  }

  // `read` gives the value's bytes; it is not called while sizing.
  LogicalResult addWeights(Value value, RankedTensorType type,
                           llvm::function_ref<FailureOr<std::vector<uint8_t>>()> read, bool asBf16 = false) {
    uint64_t expected = static_cast<uint64_t>(type.getNumElements() * elementBytes(type.getElementType()));
    uint64_t offset;
    if (sizing) {
      offset = appendWeights(nullptr, asBf16 ? expected / 2 : expected);
    } else {
      FailureOr<std::vector<uint8_t>> bytes = read();
      if (failed(bytes)) return failure();
      if (bytes->size() != expected)
        return emitError(value.getLoc()) << "weights hold " << bytes->size() << " bytes for " << type
                                         << " (expected " << expected << ")";
      if (asBf16) *bytes = toBf16(*bytes);
      offset = appendWeights(bytes->data(), bytes->size());
    }
    weightOffset[value] = offset;
    return success(succeeded(addTensor(value, fb::Storage::Weights, 0, offset,
                                       asBf16 ? std::optional<fb::DType>(fb::DType::BF16) : std::nullopt)));
  }

  // ---- sizes over ranged dims ---------------------------------------------

  // A (size) field: the constant, or -1 - the index of the size's
  // expression (one per distinct size).
  FailureOr<int64_t> sizeField(const Size &size, std::optional<Location> at = std::nullopt) {
    if (std::optional<int64_t> constant = size.constant()) return *constant;
    auto [entry, inserted] = expressionIndex.try_emplace(size.str(), static_cast<int64_t>(expressions.size()));
    if (inserted) {
      std::vector<fb::SizeOp> ops;
      if (failed(emitSize(size, ops, at))) return failure();
      expressions.push_back(std::move(ops));
    }
    return -1 - entry->second;
  }

  FailureOr<std::vector<int64_t>> sizeFields(const Shape &sizes, std::optional<Location> at = std::nullopt) {
    std::vector<int64_t> fields;
    for (const Size &size : sizes) {
      auto field = sizeField(size, at);
      if (failed(field)) return failure();
      fields.push_back(*field);
    }
    return fields;
  }

  // Fields of sizes the kern verifiers and the front end have made valid: a
  // size over a dim the function does not declare is an internal error,
  // reported where it is found.
  int64_t field(const Size &size) {
    FailureOr<int64_t> value = sizeField(size);
    return succeeded(value) ? *value : 0;
  }
  std::vector<int64_t> fields(const Shape &sizes) {
    std::vector<int64_t> result;
    for (const Size &size : sizes) result.push_back(field(size));
    return result;
  }

  // Postfix: each term as coefficient and factors multiplied, the terms added
  // (a negative one subtracted), quotients as numerator, divisor, FloorDiv.
  LogicalResult emitSize(const Size &size, std::vector<fb::SizeOp> &ops, std::optional<Location> at) {
    auto push = [&](fb::SizeOpcode opcode, int64_t operand = 0) { ops.emplace_back(opcode, operand); };
    if (size.terms().empty()) push(fb::SizeOpcode::Constant, 0);
    for (auto [index, term] : llvm::enumerate(size.terms())) {
      bool negative = term.coefficient < 0;
      if (index == 0 && negative) push(fb::SizeOpcode::Constant, 0);
      uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(term.coefficient) : static_cast<uint64_t>(term.coefficient);
      bool first = true;
      if (magnitude != 1 || term.factors.empty()) {
        push(fb::SizeOpcode::Constant, static_cast<int64_t>(magnitude));
        first = false;
      }
      for (const Size::Atom &atom : term.factors) {
        if (atom.isDim()) {
          auto dim = dimIndex.find(atom.dim);
          if (dim == dimIndex.end()) {
            if (at) emitError(*at) << "size " << size.str() << " names '" << atom.dim << "', which is no ranged dim";
            else function.emitError() << "size " << size.str() << " names '" << atom.dim << "', which is no ranged dim";
            broken = true;
            return failure();
          }
          push(fb::SizeOpcode::Dim, dim->second);
        } else {
          if (failed(emitSize(*atom.numerator, ops, at))) return failure();
          push(fb::SizeOpcode::Constant, atom.divisor);
          push(fb::SizeOpcode::FloorDiv);
        }
        if (!first) push(fb::SizeOpcode::Mul);
        first = false;
      }
      if (index > 0 || negative) push(negative ? fb::SizeOpcode::Sub : fb::SizeOpcode::Add);
    }
    return success();
  }

  static fb::CheckKind checkKindOf(SizeCheck::Kind kind) {
    switch (kind) {
      case SizeCheck::Equal: return fb::CheckKind::Equal;
      case SizeCheck::LessEqual: return fb::CheckKind::LessEqual;
      case SizeCheck::Divides: return fb::CheckKind::Divides;
    }
    return fb::CheckKind::Equal;
  }

  flatbuffers::Offset<fb::View> view(Value value, kern::ViewAttr attr) {
    std::vector<int64_t> strides = fields(attr.getStrides());
    return fb::CreateViewDirect(builder, tensorIndex.at(value), field(attr.getOffset()), &strides);
  }

  // The dense row-major view of an op's own result over `sizes`.
  flatbuffers::Offset<fb::View> denseView(Value value, const Shape &sizes) {
    std::vector<int64_t> strides = fields(kern::denseStrides(sizes));
    return fb::CreateViewDirect(builder, tensorIndex.at(value), 0, &strides);
  }

  // One step per part, each writing its slab of the result: a copy, or the
  // part's element-wise program.
  LogicalResult addConcatSteps(kern::ConcatOp concat) {
    Value result = concat.getResult();
    Shape shape = ir::shapeOf(concat.getType());
    Shape strides = kern::denseStrides(shape);
    std::vector<int64_t> strideFields = fields(strides);
    int64_t axis = concat.getAxis();
    for (auto [part, size] : llvm::enumerate(concat.getSizes().sizes())) {
      Shape partShape = shape;
      partShape[axis] = size;
      std::vector<int64_t> partFields = fields(partShape);
      std::vector<flatbuffers::Offset<fb::View>> inputs;
      for (auto [input, attr] : llvm::zip(concat.partInputs(part), concat.partViews(part)))
        inputs.push_back(view(input, cast<kern::ViewAttr>(attr)));
      auto y = fb::CreateViewDirect(builder, tensorIndex.at(result), field(concat.partStart(part) * strides[axis]),
                                    &strideFields);
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
      steps.push_back(fb::CreateStep(builder, kind, kernel, builder.CreateString(describe(concat.getLoc()))));
    }
    return success();
  }

  LogicalResult addStep(Operation &op) {
    if (auto concat = dyn_cast<kern::ConcatOp>(op)) return addConcatSteps(concat);
    Value result = op.getResult(0);
    auto shapeOf = [](Value v) { return ir::shapeOf(v.getType()); };
    auto vec = [&](ir::SizesAttr sizes) { return fields(sizes.sizes()); };
    auto one = [&](ir::SizesAttr size) { return field(kern::sizeOf(size)); };
    flatbuffers::Offset<void> kernel;
    fb::Kernel kind = fb::Kernel::NONE;
    LogicalResult status = llvm::TypeSwitch<Operation *, LogicalResult>(&op)
        .Case<kern::GemmOp>([&](kern::GemmOp gemm) {
          auto batch = vec(gemm.getBatch());
          auto a = view(gemm.getA(), gemm.getAView());
          auto b = view(gemm.getB(), gemm.getBView());
          auto c = view(result, gemm.getCView());
          auto bias = optionalView(gemm.getBias(), gemm.getBiasView());
          auto residual = optionalView(gemm.getResidual(), gemm.getResidualView());
          // int8 weights: their scale per column (n), a dense [n] tensor.
          flatbuffers::Offset<fb::View> bScale = 0;
          if (auto scale = scaleTensor.find(gemm.getB()); scale != scaleTensor.end()) {
            std::vector<int64_t> unit{1};
            bScale = fb::CreateViewDirect(builder, scale->second, 0, &unit);
          }
          kernel = fb::CreateGemmDirect(builder, &batch, one(gemm.getM()), one(gemm.getN()), one(gemm.getK()), a, b, c,
                                        bias,
                                        gemm.getAlpha().convertToFloat(), toSchema<fb::Activation>(gemm.getActivation()), residual,
                                        bScale)
                       .Union();
          kind = fb::Kernel::Gemm;
          return success();
        })
        .Case<kern::ElementwiseOp>([&](kern::ElementwiseOp elementwise) -> LogicalResult {
          // Any result type: the kernel computes in f32 and stores the result's dtype.
          auto program = compileProgram(elementwise.getBody().front());
          if (failed(program)) return failure();
          std::vector<flatbuffers::Offset<fb::View>> views;
          for (auto [input, attr] : llvm::zip(elementwise.getInputs(), elementwise.getInputViews()))
            views.push_back(view(input, cast<kern::ViewAttr>(attr)));
          auto output = denseView(result, shapeOf(result));
          auto shape = fields(shapeOf(result));
          kernel = fb::CreateElementwiseDirect(builder, &shape, &views, output, &*program).Union();
          kind = fb::Kernel::Elementwise;
          return success();
        })
        .Case<kern::SoftmaxOp>([&](kern::SoftmaxOp softmax) {
          auto shape = vec(softmax.getShape());
          auto x = view(softmax.getX(), softmax.getXView());
          auto y = view(result, softmax.getYView());
          kernel = fb::CreateSoftmaxDirect(builder, &shape, x, y).Union();
          kind = fb::Kernel::Softmax;
          return success();
        })
        .Case<kern::ReduceOp>([&](kern::ReduceOp reduce) {
          auto shape = vec(reduce.getShape());
          int64_t reducedRank = reduce.getReducedRankAttr().getInt();
          Shape sizes = reduce.getShape().sizes();
          auto x = view(reduce.getX(), reduce.getXView());
          auto y = denseView(result, Shape(sizes.begin(), sizes.end() - reducedRank));
          kernel = fb::CreateReduceDirect(builder, &shape, static_cast<uint32_t>(reducedRank),
                                          toSchema<fb::ReduceKind>(reduce.getKind()), x, y)
                       .Union();
          kind = fb::Kernel::Reduce;
          return success();
        })
        .Case<kern::GatherOp>([&](kern::GatherOp gather) {
          Shape idsSizes = kern::gatherIdsShape(gather), table = kern::gatherTableShape(gather);
          auto ids = view(gather.getIds(), gather.getIdsView());
          auto tableView = denseView(gather.getTable(), table);
          Shape ySizes = idsSizes;
          ySizes.push_back(table[1]);
          auto y = denseView(result, ySizes);
          auto idsShape = fields(idsSizes);
          kernel = fb::CreateGatherDirect(builder, &idsShape, field(table[0]), field(table[1]), ids, tableView, y)
                       .Union();
          kind = fb::Kernel::Gather;
          return success();
        })
        .Case<kern::CopyOp>([&](kern::CopyOp copy) {
          auto shape = vec(copy.getShape());
          auto x = view(copy.getX(), copy.getXView());
          auto y = denseView(result, copy.getShape().sizes());
          kernel = fb::CreateCopyDirect(builder, &shape, x, y).Union();
          kind = fb::Kernel::Copy;
          return success();
        })
        .Case<kern::AttentionOp>([&](kern::AttentionOp attention) {
          auto batch = vec(attention.getBatch());
          auto q = view(attention.getQ(), attention.getQView());
          auto k = view(attention.getK(), attention.getKView());
          auto v = view(attention.getV(), attention.getVView());
          auto out = view(result, attention.getOutView());
          auto mask = optionalView(attention.getMask(), attention.getMaskView());
          auto causal = attention.getCausalPositions();
          kernel = fb::CreateAttentionDirect(builder, &batch, one(attention.getQueries()), one(attention.getKeys()),
                                             one(attention.getHeadDim()), one(attention.getValueDim()),
                                             attention.getScale().convertToFloat(), q, k, v, out,
                                             toSchema<fb::MaskKind>(attention.getMaskKind()), mask,
                                             attention.getMaskFill().convertToFloat(), causal.has_value(),
                                             causal ? one(*causal) : 0)
                       .Union();
          kind = fb::Kernel::Attention;
          return success();
        })
        .Case<kern::TalkingHeadsAttentionOp>([&](kern::TalkingHeadsAttentionOp attention) {
          auto batch = vec(attention.getBatch());
          auto q = view(attention.getQ(), attention.getQView());
          auto k = view(attention.getK(), attention.getKView());
          auto v = view(attention.getV(), attention.getVView());
          auto out = view(result, attention.getOutView());
          auto preMix = optionalView(attention.getPreMix(), attention.getPreMixView());
          auto preBias = optionalView(attention.getPreBias(), attention.getPreBiasView());
          auto postMix = optionalView(attention.getPostMix(), attention.getPostMixView());
          auto postBias = optionalView(attention.getPostBias(), attention.getPostBiasView());
          auto mask = optionalView(attention.getMask(), attention.getMaskView());
          kernel = fb::CreateTalkingHeadsAttentionDirect(
                       builder, &batch, one(attention.getHeads()), one(attention.getQueries()), one(attention.getKeys()),
                       one(attention.getHeadDim()), one(attention.getValueDim()), attention.getScale().convertToFloat(), q, k,
                       v, out, preMix, preBias, postMix, postBias, toSchema<fb::MaskKind>(attention.getMaskKind()), mask,
                       attention.getMaskFill().convertToFloat())
                       .Union();
          kind = fb::Kernel::TalkingHeadsAttention;
          return success();
        })
        .Case<kern::LayerNormOp>([&](kern::LayerNormOp norm) {
          auto shape = vec(norm.getShape());
          auto x = view(norm.getX(), norm.getXView());
          auto residual = optionalView(norm.getResidual(), norm.getResidualView());
          auto gamma = optionalView(norm.getGamma(), norm.getGammaView());
          auto beta = optionalView(norm.getBeta(), norm.getBetaView());
          auto y = denseView(result, norm.getShape().sizes());
          kernel = fb::CreateLayerNormDirect(builder, &shape, x, residual, /*sum=*/0, gamma, beta, y,
                                             norm.getEpsilon().convertToFloat(),
                                             toSchema<fb::LayerNormVariant>(norm.getVariant()))
                       .Union();
          kind = fb::Kernel::LayerNorm;
          return success();
        })
        .Default([&](Operation *other) { return other->emitOpError() << "has no runtime kernel"; });
    if (failed(status) || broken) return failure();
    steps.push_back(fb::CreateStep(builder, kind, kernel, builder.CreateString(describe(op.getLoc()))));
    return success();
  }

  // The view of an optional operand, or none.
  flatbuffers::Offset<fb::View> optionalView(Value value, std::optional<kern::ViewAttr> attr) {
    return value ? view(value, *attr) : flatbuffers::Offset<fb::View>();
  }

  // Translates an elementwise body into register instructions: block
  // arguments are registers 0..n-1 and each instruction defines the next one.
  FailureOr<std::vector<fb::Instruction>> compileProgram(Block &block) {
    DenseMap<Value, uint16_t> registers;
    for (BlockArgument argument : block.getArguments())
      registers[argument] = static_cast<uint16_t>(argument.getArgNumber());
    std::vector<fb::Instruction> program;
    auto next = [&]() { return static_cast<uint32_t>(block.getNumArguments() + program.size()); };
    auto reg = [&](Value v) { return registers.at(v); };
    auto emit = [&](Operation *op, fb::Opcode opcode, uint16_t a = 0, uint16_t b = 0, uint16_t c = 0,
                    float imm = 0.0f) -> LogicalResult {
      if (next() > UINT16_MAX) return op->emitError() << "element-wise program is too long";
      if (op->getNumResults() == 1) registers[op->getResult(0)] = static_cast<uint16_t>(next());
      program.emplace_back(opcode, a, b, c, imm);
      return success();
    };
    for (Operation &op : block) {
      auto binary = [&](fb::Opcode opcode) {
        return emit(&op, opcode, reg(op.getOperand(0)), reg(op.getOperand(1)));
      };
      LogicalResult status = llvm::TypeSwitch<Operation *, LogicalResult>(&op)
          .Case<arith::ConstantOp>([&](arith::ConstantOp constant) -> LogicalResult {
            auto value = dyn_cast<FloatAttr>(constant.getValue());
            if (!value) return constant.emitOpError() << "only f32 constants are supported in element-wise bodies";
            return emit(&op, fb::Opcode::Const, 0, 0, 0, static_cast<float>(value.getValueAsDouble()));
          })
          .Case<arith::CmpFOp>([&](arith::CmpFOp compare) -> LogicalResult {
            switch (compare.getPredicate()) {
              case arith::CmpFPredicate::OLT: return binary(fb::Opcode::Lt);
              case arith::CmpFPredicate::OLE: return binary(fb::Opcode::Le);
              case arith::CmpFPredicate::OGT: return binary(fb::Opcode::Gt);
              case arith::CmpFPredicate::OGE: return binary(fb::Opcode::Ge);
              case arith::CmpFPredicate::OEQ: return binary(fb::Opcode::Eq);
              case arith::CmpFPredicate::UNE: return binary(fb::Opcode::Ne);
              default: return compare.emitOpError() << "predicate has no runtime opcode";
            }
          })
          .Case<arith::UIToFPOp>([&](arith::UIToFPOp convert) {
            // Booleans are already 0/1 in f32 registers.
            registers[convert] = reg(convert.getIn());
            return success();
          })
          .Case<kern::YieldOp>([&](kern::YieldOp yield) -> LogicalResult {
            // The result is the last register; x * 1 copies one there exactly.
            uint16_t value = reg(yield.getValue());
            if (!program.empty() && value == next() - 1) return success();
            if (failed(emit(&op, fb::Opcode::Const, 0, 0, 0, 1.0f))) return failure();
            uint16_t one = static_cast<uint16_t>(next() - 1);
            program.emplace_back(fb::Opcode::Mul, value, one, 0, 0.0f);
            return success();
          })
          .Default([&](Operation *other) -> LogicalResult {
            // The op table's row naming this op (math.exp, kern.gelu, arith.select, ...).
            std::optional<ops::Opcode> opcode = ir::opcodeOfScalarOp(other);
            if (!opcode || static_cast<int>(other->getNumOperands()) != ops::operandCount(*opcode))
              return other->emitOpError() << "has no element-wise runtime opcode";
            uint16_t operands[3] = {0, 0, 0};
            for (auto [index, operand] : llvm::enumerate(other->getOperands())) operands[index] = reg(operand);
            return emit(other, toSchema<fb::Opcode>(*opcode), operands[0], operands[1], operands[2]);
          });
      if (failed(status)) return failure();
    }
    return program;
  }

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

}  // namespace

FailureOr<std::vector<uint8_t>> writeArtifact(func::FuncOp function, const ParamBytesProvider &params,
                                              const ArtifactOptions &options) {
  return Writer(function, params, options).run();
}

}  // namespace ein
