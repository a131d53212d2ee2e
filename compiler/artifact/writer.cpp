#include "compiler/artifact/writer.hpp"

#include <algorithm>
#include <cstring>

#include "compiler/limits.hpp"
#include "ir/op_table.hpp"

namespace ein::artifact {

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

namespace {
constexpr const char *kProducer = "einc 0.1.0";
}  // namespace

uint64_t alignTo(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

FailureOr<fb::DType> dtypeOf(Location loc, Type type) {
  if (type.isF32()) return fb::DType::F32;
  if (type.isSignlessInteger(8)) return fb::DType::I8;
  if (type.isSignlessInteger(4)) return fb::DType::I4;
  if (type.isF16()) return fb::DType::F16;
  if (type.isBF16()) return fb::DType::BF16;
  if (type.isInteger(1)) return fb::DType::Bool;
  if (type.isSignlessInteger(32)) return fb::DType::I32;
  if (type.isSignlessInteger(64)) return fb::DType::I64;
  return emitError(loc) << "element type " << type << " cannot be stored in an artifact";
}

int64_t elementBytes(Type type) { return type.isInteger(1) ? 1 : type.getIntOrFloatBitWidth() / 8; }

uint64_t storedBytes(RankedTensorType type) {
  const auto elements = static_cast<uint64_t>(type.getNumElements());
  // i4: two to a byte (the schema's DType I4).
  if (type.getElementType().isSignlessInteger(4)) return elements / 2 + elements % 2;
  return elements * static_cast<uint64_t>(elementBytes(type.getElementType()));
}

std::string bindingName(DictionaryAttr attrs, const std::string &fallback) {
  if (attrs)
    if (auto name = attrs.getAs<StringAttr>("ein.name")) return name.str();
  return fallback;
}

FailureOr<WrittenArtifact> Writer::run(llvm::raw_pwrite_stream &output) {
  // The weight segment's file offset is a field of the FlatBuffer: build
  // once to learn the buffer's size (sizing: weights are laid out but not
  // read), then again with the final offset, streaming each weight to the
  // output after the header's room, and the header into that room last. All
  // scalar fields are forced present, so both builds have the same size. So
  // the writer holds one weight at a time; the values are the IR's.
  sizing = true;
  if (failed(build(0))) return failure();
  uint64_t weightsOffset = alignTo(builder.GetSize(), kWeightAlignment);
  sizing = false;
  segmentBase = weightsOffset;
  out = &output;
  const uint64_t start = output.tell();
  output.write_zeros(static_cast<unsigned>(weightsOffset));
  if (failed(build(weightsOffset))) return failure();
  if (alignTo(builder.GetSize(), kWeightAlignment) != weightsOffset)
    return function.emitError() << "internal error: artifact header changed size between builds";
  output.pwrite(reinterpret_cast<const char *>(builder.GetBufferPointer()), builder.GetSize(), start);
  WrittenArtifact written;
  written.header.assign(builder.GetBufferPointer(), builder.GetBufferPointer() + builder.GetSize());
  written.bytes = segmentBase + segmentSize;
  return written;
}

LogicalResult Writer::build(uint64_t weightsOffset) {
  builder.Clear();
  builder.ForceDefaults(true);
  tensors.clear();
  tensorIndex.clear();
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
  sequenceTokens.clear();
  sequenceDims.clear();
  if (auto tokens = function->getAttrOfType<StringAttr>(kern::kSequenceTokensAttr)) {
    auto position = function->getAttrOfType<StringAttr>("ein.position");
    if (!position) return function.emitError() << kern::kSequenceTokensAttr << " without ein.position";
    sequenceTokens = tokens.str();
    sequenceDims = kern::sequenceDims(function);
  }
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
    inputs.push_back(fb::CreateBinding(builder, builder.CreateString(name), *id, upperBound(argument),
                                       static_cast<bool>(function.getArgAttr(index, kern::kFirstRunAttr))));
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  DenseMap<Value, uint32_t> outputIndex;
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) outputIndex[value] = static_cast<uint32_t>(index);

  for (Operation &op : body.without_terminator()) {
    // A parameter kern-store-weights folded into a constant (q, k and v
    // weights as their concatenation) or stored as one (bf16, i8) is
    // stored in that form alone.
    if (isa<ir::ParamOp>(op) && op.getResult(0).use_empty()) continue;
    if (auto param = dyn_cast<ir::ParamOp>(op)) {
      if (failed(checkWeightLimit(param, param.getType())) ||
          failed(addWeights(param, param.getType(), [&] { return paramBytes(param); })))
        return failure();
      if (!sizing) param.releaseValues();  // values made on demand go once written
      continue;
    }
    if (auto constant = dyn_cast<ir::ConstantOp>(op)) {
      if (failed(checkWeightLimit(constant, constant.getType())) ||
          failed(addWeights(constant, constant.getType(), [&] { return constantBytes(constant); })))
        return failure();
      continue;
    }
    if (auto state = dyn_cast<ir::StateOp>(op)) {
      // Each state at its own 64-aligned place in the session's state.
      stateBytes = alignTo(stateBytes, kWeightAlignment);
      // In its IR type (bf16 where kern-store-state narrowed it).
      auto id = addTensor(state, fb::Storage::State, static_cast<uint32_t>(states.size()), stateBytes);
      if (failed(id)) return failure();
      stateBytes += static_cast<uint64_t>(state.getType().getNumElements()) * elementBytes(state.getType().getElementType());
      states.push_back(fb::CreateBinding(builder, builder.CreateString(state.getName().str()), *id, 0));
      continue;
    }
    if (auto append = dyn_cast<kern::AppendOp>(op)) {
      // The appended state is the state's tensor; the step is a copy into it.
      tensorIndex[append.getResult()] = tensorIndex.at(append.getState());
      std::vector<fb::Size> shape = fields(append.getShape().sizes());
      auto kernel = fb::CreateCopyDirect(builder, &shape, view(append.getX(), append.getXView()),
                                         view(append.getState(), append.getStateView()))
                        .Union();
      steps.push_back(stepOf(append, fb::Kernel::Copy, kernel));
      continue;
    }
    if (!isa<kern::KernDialect>(op.getDialect()))
      return op.emitOpError() << "cannot be serialised: the artifact holds kernel (kern) ops only";
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
  if (failed(addParameters(body))) return failure();
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
      checks.push_back(fb::CreateCheckDirect(builder, checkKindOf(condition.kind), &*lhs, &*rhs, ir::locationText(at).c_str(),
                                             condition.message.c_str()));
    }
  std::vector<flatbuffers::Offset<fb::SizeExpression>> sizeTables;
  for (const std::vector<fb::SizeOp> &ops : expressions) sizeTables.push_back(fb::CreateSizeExpressionDirect(builder, &ops));

  int32_t positionDim = -1;
  std::optional<fb::Size> positionAdvance;
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
                   : options.precision == ArtifactPrecision::Int4 ? fb::Precision::Int4
                                                                  : fb::Precision::Fp32;
  // The fixed dims the front end recorded (name -> [value, line, column]).
  std::vector<flatbuffers::Offset<fb::FixedDim>> fixedDims;
  if (auto fixed = function->getAttrOfType<DictionaryAttr>("ein.fixed_dims"))
    for (NamedAttribute entry : fixed)
      if (auto at = dyn_cast<DenseI64ArrayAttr>(entry.getValue()); at && at.size() == 3) {
        const std::string declaredAt =
            options.source + ":" + std::to_string(at[1]) + ":" + std::to_string(at[2]);
        fixedDims.push_back(fb::CreateFixedDimDirect(builder, entry.getName().str().c_str(), at[0], declaredAt.c_str()));
      }
  int32_t sequenceTokensDim = -1;
  if (!sequenceTokens.empty()) {
    auto dim = dimIndex.find(sequenceTokens);
    if (dim == dimIndex.end())
      return function.emitError() << kern::kSequenceTokensAttr << " names " << sequenceTokens << ", no ranged dim";
    sequenceTokensDim = static_cast<int32_t>(dim->second);
  }
  auto oneSequence = function->getAttrOfType<StringAttr>(kern::kOneSequenceAttr);
  auto model = fb::CreateModelDirect(builder, static_cast<uint32_t>(fb::FormatVersion::Current), target, kProducer,
                                     options.source.c_str(), &inputs, &outputs, &parameters, &tensors, &steps,
                                     static_cast<uint64_t>(arenaBytes.getInt()), weightsOffset, segmentSize,
                                     precision, &dims, &sizeTables, &checks, &states, stateBytes, positionDim,
                                     positionAdvance ? &*positionAdvance : nullptr, &fixedDims, sequenceTokensDim,
                                     oneSequence ? oneSequence.str().c_str() : nullptr);
  fb::FinishSizePrefixedModelBuffer(builder, model);
  return success();
}

// Ids feeding a gather must index its table: record the row count so that
// `ein-run --random-inputs` draws valid ids.
int64_t Writer::upperBound(Value argument) {
  int64_t bound = 0;
  for (Operation *user : argument.getUsers())
    if (auto gather = dyn_cast<kern::GatherOp>(user); gather && gather.getIds() == argument) {
      std::optional<int64_t> rows = kern::gatherTableShape(gather)[0].constant();
      if (rows) bound = bound == 0 ? *rows : std::min(bound, *rows);
    }
  return bound;
}

FailureOr<uint32_t> Writer::addTensor(Value value, fb::Storage storage, uint32_t index, uint64_t offset) {
  auto type = cast<RankedTensorType>(value.getType());
  auto dtype = dtypeOf(value.getLoc(), type.getElementType());
  if (failed(dtype)) return failure();
  auto shape = sizeFields(ir::shapeOf(type), value.getLoc());
  if (failed(shape)) return failure();
  auto id = static_cast<uint32_t>(tensors.size());
  const bool perToken = !sequenceTokens.empty() && storage != fb::Storage::Weights && storage != fb::Storage::State &&
                        kern::tokenRowAxis(ir::shapeOf(type), sequenceTokens, sequenceDims).has_value();
  tensors.push_back(fb::CreateTensorDirect(builder, *dtype, &*shape, storage, index, offset, perToken));
  tensorIndex[value] = id;
  return id;
}

// A Size field: the constant, or -1 - the index of the size's expression
// (one per distinct size).
FailureOr<fb::Size> Writer::sizeField(const Size &size, std::optional<Location> at) {
  if (std::optional<int64_t> constant = size.constant()) return fb::Size(*constant);
  auto [entry, inserted] = expressionIndex.try_emplace(size.str(), static_cast<int64_t>(expressions.size()));
  if (inserted) {
    std::vector<fb::SizeOp> ops;
    if (failed(emitSize(size, ops, at))) return failure();
    expressions.push_back(std::move(ops));
  }
  return fb::Size(-1 - entry->second);
}

FailureOr<std::vector<fb::Size>> Writer::sizeFields(const Shape &sizes, std::optional<Location> at) {
  std::vector<fb::Size> fields;
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
fb::Size Writer::field(const Size &size) {
  FailureOr<fb::Size> value = sizeField(size);
  return succeeded(value) ? *value : fb::Size(0);
}

std::vector<fb::Size> Writer::fields(const Shape &sizes) {
  std::vector<fb::Size> result;
  for (const Size &size : sizes) result.push_back(field(size));
  return result;
}

// Postfix: each term as coefficient and factors multiplied, the terms added
// (a negative one subtracted), quotients as numerator, divisor, FloorDiv.
LogicalResult Writer::emitSize(const Size &size, std::vector<fb::SizeOp> &ops, std::optional<Location> at) {
  auto push = [&](fb::SizeOpcode opcode, int64_t operand = 0) { ops.emplace_back(opcode, operand); };
  if (size.terms().empty()) push(fb::SizeOpcode::Constant, 0);
  // A term with a positive coefficient first, so that the runtime's messages
  // read "t - 3", not "0 - 3 + t".
  std::vector<Size::Term> terms = size.terms();
  auto positive = llvm::find_if(terms, [](const Size::Term &term) { return term.coefficient > 0; });
  if (positive != terms.end()) std::rotate(terms.begin(), positive, positive + 1);
  for (auto [index, term] : llvm::enumerate(terms)) {
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

fb::CheckKind Writer::checkKindOf(SizeCheck::Kind kind) {
  switch (kind) {
    case SizeCheck::Equal: return fb::CheckKind::Equal;
    case SizeCheck::LessEqual: return fb::CheckKind::LessEqual;
    case SizeCheck::Divides: return fb::CheckKind::Divides;
  }
  return fb::CheckKind::Equal;
}

}  // namespace ein::artifact

using namespace mlir;

namespace ein {

FailureOr<WrittenArtifact> writeArtifact(func::FuncOp function, const ArtifactOptions &options,
                                         llvm::raw_pwrite_stream &out) {
  return artifact::Writer(function, options).run(out);
}

FailureOr<std::vector<uint8_t>> writeArtifact(func::FuncOp function, const ArtifactOptions &options) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream out(buffer);
  if (failed(writeArtifact(function, options, out))) return failure();
  return std::vector<uint8_t>(buffer.begin(), buffer.end());
}

}  // namespace ein
