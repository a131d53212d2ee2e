#include "loader/program_decoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>
#include <span>

#include "loader/flatbuffer_vectors.hpp"
#include "loader/step_decoder.hpp"
#include "util/limits.hpp"
#include "util/status_macros.hpp"

namespace ein::detail {
namespace {

namespace fb = ein::schema;

Status invalid(std::string message) { return Status(StatusCode::InvalidArtifact, std::move(message)); }

const char *storageName(Storage storage) {
  switch (storage) {
    case Storage::Arena: return "arena";
    case Storage::Weights: return "weights";
    case Storage::Input: return "input";
    case Storage::Output: return "output";
    case Storage::State: return "state";
  }
  return "?";
}

StatusOr<DType> decodeDType(fb::DType dtype) {
  switch (dtype) {
    case fb::DType::F32: return DType::F32;
    case fb::DType::F16: return DType::F16;
    case fb::DType::BF16: return DType::BF16;
    case fb::DType::I32: return DType::I32;
    case fb::DType::I64: return DType::I64;
    case fb::DType::Bool: return DType::Bool;
    case fb::DType::I8: return DType::I8;
    case fb::DType::I4: return DType::I4;
  }
  return invalid(fmt::format("unknown dtype {}", static_cast<int>(dtype)));
}

StatusOr<Storage> decodeStorage(fb::Storage storage) {
  switch (storage) {
    case fb::Storage::Arena: return Storage::Arena;
    case fb::Storage::Weights: return Storage::Weights;
    case fb::Storage::Input: return Storage::Input;
    case fb::Storage::Output: return Storage::Output;
    case fb::Storage::State: return Storage::State;
  }
  return invalid(fmt::format("unknown storage kind {}", static_cast<int>(storage)));
}

// How many inputs, outputs and states the model binds: an input, output or
// state tensor's index must name one of them.
struct BindingCounts {
  size_t inputs = 0;
  size_t outputs = 0;
  size_t states = 0;
};

BindingCounts bindingCounts(const fb::Model &model) {
  return {model.inputs() ? model.inputs()->size() : 0u, model.outputs() ? model.outputs()->size() : 0u,
          model.states() ? model.states()->size() : 0u};
}

// The element count of a shape of `dtype`, or why the runtime refuses it:
// its rank, a negative size, more than 2^40 elements (zeros aside, so that no
// product of its sizes can overflow wherever it is computed), or 2^43 bytes.
StatusOr<int64_t> checkedShape(const std::vector<int64_t> &shape, DType dtype) {
  if (shape.size() > kMaxRank)
    return invalid(fmt::format("rank {} exceeds the runtime's limit of {}", shape.size(), kMaxRank));
  for (size_t axis = 0; axis < shape.size(); ++axis)
    if (shape[axis] < 0) return invalid(fmt::format("axis {} has negative size {}", axis, shape[axis]));
  std::optional<int64_t> elements = checkedElementCount(shape);
  if (!elements)
    return invalid(fmt::format("its shape [{}] has more than 2^40 elements (the product of its nonzero sizes)",
                               fmt::join(shape, ", ")));
  const uint64_t bytes = dtypeBytes(dtype, static_cast<uint64_t>(*elements));
  if (bytes > kMaxTensorBytes) return invalid(fmt::format("its {} bytes exceed the runtime's limit of 2^43", bytes));
  return *elements;
}

StatusOr<Tensor> decodeTensor(const fb::Tensor &in, const Program &program, BindingCounts bound,
                              const SizeResolver &sizes) {
  Tensor tensor;
  EIN_ASSIGN_OR_RETURN(tensor.dtype, decodeDType(in.dtype()));
  EIN_ASSIGN_OR_RETURN(tensor.storage, decodeStorage(in.storage()));
  // int8 is a storage type of quantized gemm weights (decodeGemm checks
  // where they are read); nothing computes or returns int8 values.
  if (tensor.dtype == DType::I8 && (tensor.storage != Storage::Weights || program.precision != Precision::Int8))
    return invalid("an i8 tensor must be a weight of an int8 artifact");
  if (tensor.dtype == DType::I4 && (tensor.storage != Storage::Weights || program.precision != Precision::Int4))
    return invalid("an i4 tensor must be a weight of an int4 artifact");
  // Session state (a key/value cache) is f32, or bf16 on the CPU: what
  // append and attention read and write there.
  if (tensor.storage == Storage::State && tensor.dtype != DType::F32 &&
      !(tensor.dtype == DType::BF16 && program.target == Device::Cpu))
    return invalid(fmt::format("a state tensor is {}; the runtime keeps state as f32{}", dtypeName(tensor.dtype),
                               program.target == Device::Cpu ? " or bf16" : " on this target"));
  std::vector<int64_t> shape = readSizes(in.shape());
  if (shape.size() > kMaxRank)  // before resolving its sizes
    return invalid(fmt::format("rank {} exceeds the runtime's limit of {}", shape.size(), kMaxRank));
  for (int64_t &size : shape) {
    EIN_ASSIGN_OR_RETURN(size, sizes(size, "shape"));
  }
  EIN_ASSIGN_OR_RETURN(tensor.numElements, checkedShape(shape, tensor.dtype));
  for (int64_t size : shape) tensor.shape.push_back(size);
  tensor.byteSize = dtypeBytes(tensor.dtype, static_cast<uint64_t>(tensor.numElements));
  tensor.index = in.index();
  tensor.offset = in.offset();
  tensor.perToken = in.per_token();
  if (tensor.perToken && (tensor.storage == Storage::Weights || tensor.storage == Storage::State))
    return invalid("a weight or a state cannot hold a row per token");
  // Kernels access elements as their C++ type, so each tensor starts on a
  // multiple of its element size (the arena and the weight segment are
  // 64-aligned).
  if ((tensor.storage == Storage::Arena || tensor.storage == Storage::Weights || tensor.storage == Storage::State) &&
      tensor.offset % dtypeSize(tensor.dtype) != 0)
    return invalid(fmt::format("its offset {} is not a multiple of its element size {}", tensor.offset,
                               dtypeSize(tensor.dtype)));
  auto fits = [&](uint64_t capacity) { return tensor.offset <= capacity && tensor.byteSize <= capacity - tensor.offset; };
  switch (tensor.storage) {
    case Storage::Arena:
      if (!fits(program.arenaBytes))
        return invalid(fmt::format("its {} bytes at arena offset {} do not fit the {}-byte arena", tensor.byteSize,
                                   tensor.offset, program.arenaBytes));
      break;
    case Storage::Weights:
      if (!fits(program.weightsBytes))
        return invalid(fmt::format("its {} bytes at weights offset {} do not fit the {}-byte weight segment",
                                   tensor.byteSize, tensor.offset, program.weightsBytes));
      break;
    case Storage::Input:
      if (tensor.index >= bound.inputs)
        return invalid(fmt::format("it is input {}, but the model has {} inputs", tensor.index, bound.inputs));
      break;
    case Storage::Output:
      if (tensor.index >= bound.outputs)
        return invalid(fmt::format("it is output {}, but the model has {} outputs", tensor.index, bound.outputs));
      break;
    case Storage::State:
      if (tensor.index >= bound.states)
        return invalid(fmt::format("it is state {}, but the model has {} states", tensor.index, bound.states));
      if (!fits(program.stateBytes))
        return invalid(fmt::format("its {} bytes at state offset {} do not fit the {}-byte state", tensor.byteSize,
                                   tensor.offset, program.stateBytes));
      break;
  }
  return tensor;
}

// Input or output bindings: binding i names the one tensor with storage
// `storage` and index i, so each index is bound exactly once.
Status decodeBindings(const flatbuffers::Vector<flatbuffers::Offset<fb::Binding>> *bindings, Storage storage,
                      Program &program, std::vector<TensorInfo> &infos, std::vector<uint32_t> &tensorIds) {
  const char *what = storageName(storage);
  std::set<std::string> names;
  size_t count = bindings ? bindings->size() : 0;
  for (size_t i = 0; i < count; ++i) {
    const fb::Binding *binding = bindings->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (!binding->name() || binding->name()->size() == 0) return invalid(fmt::format("{} {} has no name", what, i));
    std::string name = binding->name()->str();
    if (!names.insert(name).second) return invalid(fmt::format("two {}s are named \"{}\"", what, name));
    uint32_t id = binding->tensor();
    if (id >= program.tensors.size())
      return invalid(fmt::format("{} \"{}\" names tensor {}, but there are {} tensors", what, name, id,
                                 program.tensors.size()));
    const Tensor &tensor = program.tensors[id];
    if (tensor.storage != storage)
      return invalid(fmt::format("{} \"{}\" (number {}) names tensor {}, which has {} storage", what, name, i, id,
                                 storageName(tensor.storage)));
    if (tensor.index != i)
      return invalid(fmt::format("{} \"{}\" (number {}) names tensor {}, which is {} {}", what, name, i, id, what,
                                 tensor.index));
    if (binding->upper_bound() < 0)
      return invalid(fmt::format("{} \"{}\" has a negative upper bound {}", what, name, binding->upper_bound()));
    if (binding->first_run() && storage != Storage::Input)
      return invalid(fmt::format("{} \"{}\" is marked first-run, which only an input can be", what, name));
    infos.push_back(TensorInfo{name, tensor.dtype, tensor.shape.vector(), binding->upper_bound(), {},
                               binding->first_run()});
    tensorIds.push_back(id);
  }
  // Any other tensor claiming one of these buffers would alias it with a
  // different shape.
  for (size_t id = 0; id < program.tensors.size(); ++id) {
    const Tensor &tensor = program.tensors[id];
    if (tensor.storage == storage && tensorIds[tensor.index] != id)
      return invalid(fmt::format("tensor {} claims {} {}, which is bound to tensor {}", id, what, tensor.index,
                                 tensorIds[tensor.index]));
  }
  return Status();
}

Status decodeParams(const fb::Model &model, Program &program) {
  if (!model.params()) return Status();
  for (size_t i = 0; i < model.params()->size(); ++i) {
    const fb::Parameter *param = model.params()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (!param->name()) return invalid(fmt::format("parameter {} has no name", i));
    uint32_t id = param->tensor();
    if (id >= program.tensors.size() || program.tensors[id].storage != Storage::Weights)
      return invalid(fmt::format("parameter \"{}\" names tensor {}, which is not a weight tensor",
                                 param->name()->str(), id));
    const Tensor &tensor = program.tensors[id];
    program.paramStorage.push_back(
        ParamStorage{tensor.dtype, tensor.shape.vector(), param->folded(), tensor.offset, tensor.byteSize});
    if (!param->shape()) {  // an artifact from before declared types: the tensor's
      program.params.push_back(TensorInfo{param->name()->str(), tensor.dtype, tensor.shape.vector(), 0, {}});
      continue;
    }
    TensorInfo info{param->name()->str(), DType::F32, readInt64Vector(param->shape()), 0, {}};
    auto where = [&](const std::string &what) {
      return invalid(fmt::format("parameter \"{}\": {}", info.name, what));
    };
    StatusOr<DType> dtype = decodeDType(param->dtype());
    if (!dtype.ok()) return where(dtype.status().message());
    info.dtype = dtype.value();
    if (StatusOr<int64_t> elements = checkedShape(info.shape, info.dtype); !elements.ok())
      return where(elements.status().message());
    program.params.push_back(std::move(info));
  }
  return Status();
}

Status checkArenaJustified(const Program &program) {
  // The arena is allocated as claimed, so a claim its tensors do not justify
  // (terabytes for a few floats) is refused, not attempted.
  uint64_t arenaEnd = 0;
  for (const Tensor &tensor : program.tensors)
    if (tensor.storage == Storage::Arena) arenaEnd = std::max(arenaEnd, tensor.offset + tensor.byteSize);
  uint64_t justified = (arenaEnd + kArenaRounding - 1) / kArenaRounding * kArenaRounding;
  if (program.arenaBytes > justified)
    return invalid(fmt::format("the arena of {} bytes is larger than its tensors need ({} bytes, rounded up to {})",
                               program.arenaBytes, arenaEnd, kArenaRounding));
  return Status();
}

// Each session allocates the state as claimed; state tensors have fixed
// shapes, so the claim is checked at any sizes.
Status checkStateJustified(const Program &program) {
  uint64_t stateEnd = 0;
  for (const Tensor &tensor : program.tensors)
    if (tensor.storage == Storage::State) stateEnd = std::max(stateEnd, tensor.offset + tensor.byteSize);
  if (program.stateBytes > (stateEnd + kArenaRounding - 1) / kArenaRounding * kArenaRounding)
    return invalid(fmt::format("the state of {} bytes is larger than its tensors need ({} bytes, rounded up to {})",
                               program.stateBytes, stateEnd, kArenaRounding));
  return Status();
}

TensorPlacement placementOf(const Tensor &tensor) {
  static constexpr const char *kStorageNames[] = {"arena", "weights", "input", "output", "state"};
  return TensorPlacement{tensor.dtype,  tensor.shape.vector(), {},
                         kStorageNames[static_cast<size_t>(tensor.storage)],
                         tensor.index,  tensor.offset,         tensor.byteSize};
}

}  // namespace

Status decodeTensors(const fb::Model &model, const SizeResolver &sizes, ArenaClaim arena, Program &program) {
  const BindingCounts bound = bindingCounts(model);
  if (bound.outputs == 0) return invalid("the model has no outputs");
  size_t tensorCount = model.tensors() ? model.tensors()->size() : 0;
  for (size_t id = 0; id < tensorCount; ++id) {
    StatusOr<Tensor> tensor =
        decodeTensor(*model.tensors()->Get(static_cast<flatbuffers::uoffset_t>(id)), program, bound, sizes);
    if (!tensor.ok()) return invalid(fmt::format("tensor {}: {}", id, tensor.status().message()));
    program.tensors.push_back(std::move(tensor).value());
    program.tensorPlacements.push_back(placementOf(program.tensors.back()));
  }
  if (arena == ArenaClaim::JustifiedByTheseSizes) EIN_RETURN_IF_ERROR(checkArenaJustified(program));
  EIN_RETURN_IF_ERROR(checkStateJustified(program));
  EIN_RETURN_IF_ERROR(decodeBindings(model.inputs(), Storage::Input, program, program.inputs, program.inputTensors));
  EIN_RETURN_IF_ERROR(
      decodeBindings(model.outputs(), Storage::Output, program, program.outputs, program.outputTensors));
  EIN_RETURN_IF_ERROR(decodeBindings(model.states(), Storage::State, program, program.states, program.stateTensors));
  if (program.positionDim >= 0) {
    EIN_ASSIGN_OR_RETURN(program.positionAdvance, sizes(readSize(model.position_advance()), "position_advance"));
    if (program.positionAdvance < 0)
      return invalid(fmt::format("the position advances by {} rows, a negative number", program.positionAdvance));
  }
  return decodeParams(model, program);
}

namespace {

// Steps that run only at a sequence's first run (schema Step.first_run) are
// skipped at later runs, so what they write must not be read then: they
// write arena and state tensors only, and a step of every run reads neither
// a first-run input nor an arena tensor that only first-run steps write. A
// state they write is kept from then on: no step of every run writes it (so
// that sequences forked from one share it: SequencePool).
Status checkFirstRunSteps(const Program &program) {
  std::vector<bool> firstRunInput(program.tensors.size(), false), writtenAlways(program.tensors.size(), false),
      writtenFirst(program.tensors.size(), false);
  bool any = false;
  for (size_t i = 0; i < program.inputs.size(); ++i)
    if (program.inputs[i].firstRunOnly) firstRunInput[program.inputTensors[i]] = any = true;
  for (size_t s = 0; s < program.steps.size(); ++s)
    for (const StepOperand &operand : program.stepInfos[s].operands)
      if (operand.written) (program.steps[s].firstRun ? writtenFirst : writtenAlways)[operand.tensor] = true;
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const Step &step = program.steps[s];
    any = any || step.firstRun;
    for (const StepOperand &operand : program.stepInfos[s].operands) {
      const Tensor &tensor = program.tensors[operand.tensor];
      if (step.firstRun && operand.written && tensor.storage != Storage::Arena && tensor.storage != Storage::State)
        return invalid(fmt::format("{} runs at a sequence's first run only but writes tensor {}, which has {} storage",
                                   step.label, operand.tensor, storageName(tensor.storage)));
      if (!step.firstRun && operand.written && tensor.storage == Storage::State && writtenFirst[operand.tensor])
        return invalid(fmt::format("{} runs at every run but writes tensor {}, a state a sequence's first run keeps",
                                   step.label, operand.tensor));
      if (!step.firstRun && !operand.written &&
          (firstRunInput[operand.tensor] ||
           (tensor.storage == Storage::Arena && writtenFirst[operand.tensor] && !writtenAlways[operand.tensor])))
        return invalid(fmt::format("{} runs at every run but reads tensor {}, which only a sequence's first run sets",
                                   step.label, operand.tensor));
    }
  }
  if (any && program.positionDim < 0)
    return invalid("the model has steps or inputs of a sequence's first run but no position");
  // A step run once for the sequences sharing their kept states reads no
  // state of theirs but those and writes none.
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const Step &step = program.steps[s];
    if (!step.rowsOverKept) continue;
    if (!step.perSequence || step.firstRun)
      return invalid(fmt::format("{} is marked rows_over_kept but {}", step.label,
                                 step.firstRun ? "runs at a sequence's first run" : "not per sequence"));
    for (const StepOperand &operand : program.stepInfos[s].operands)
      if (program.tensors[operand.tensor].storage == Storage::State &&
          (operand.written || !writtenFirst[operand.tensor]))
        return invalid(fmt::format("{} is marked rows_over_kept but {} tensor {}, a state a sequence's first run does "
                                   "not keep",
                                   step.label, operand.written ? "writes" : "reads", operand.tensor));
  }
  return Status();
}

}  // namespace

Status decodeSteps(const fb::Model &model, const SizeResolver &sizes, Program &program) {
  size_t stepCount = model.steps() ? model.steps()->size() : 0;
  for (size_t index = 0; index < stepCount; ++index)
    EIN_RETURN_IF_ERROR(
        decodeStep(*model.steps()->Get(static_cast<flatbuffers::uoffset_t>(index)), index, sizes, program));
  return checkFirstRunSteps(program);
}

Status redecode(const fb::Model &model, const SizeResolver &sizes, std::span<const uint32_t> tensors,
                std::span<const uint32_t> steps, Program &program) {
  const BindingCounts bound = bindingCounts(model);
  for (uint32_t id : tensors) {
    StatusOr<Tensor> tensor = decodeTensor(*model.tensors()->Get(id), program, bound, sizes);
    if (!tensor.ok()) return invalid(fmt::format("tensor {}: {}", id, tensor.status().message()));
    program.tensors[id] = std::move(tensor).value();
  }
  // What decodeTensors derives from tensors' shapes: the bound infos' shapes
  // and the state's claim (bindings and storage no size changes).
  if (!tensors.empty()) {
    auto reshape = [&](std::vector<TensorInfo> &infos, const std::vector<uint32_t> &ids) {
      for (size_t i = 0; i < infos.size(); ++i) infos[i].shape = program.tensors[ids[i]].shape.vector();
    };
    reshape(program.inputs, program.inputTensors);
    reshape(program.outputs, program.outputTensors);
    reshape(program.states, program.stateTensors);
    EIN_RETURN_IF_ERROR(checkStateJustified(program));
  }
  if (program.positionDim >= 0) {
    EIN_ASSIGN_OR_RETURN(program.positionAdvance, sizes(readSize(model.position_advance()), "position_advance"));
    if (program.positionAdvance < 0)
      return invalid(fmt::format("the position advances by {} rows, a negative number", program.positionAdvance));
  }
  for (uint32_t index : steps)
    EIN_RETURN_IF_ERROR(
        decodeStep(*model.steps()->Get(index), index, sizes, program, program.steps[index], program.stepInfos[index],
                   /*again=*/true));
  return Status();
}

StatusOr<std::unique_ptr<Program>> decodeFixedParts(const Framing &framing, ArtifactBytes bytes, std::string name) {
  const fb::Model &model = *framing.model;
  auto program = std::make_unique<Program>();
  program->name = std::move(name);
  program->artifact = {bytes.data, bytes.size};
  program->bytes = std::move(bytes.owner);
  program->weights = framing.weights;
  program->weightsBytes = framing.weightsBytes;
  program->formatVersion = model.format_version();
  switch (model.target()) {
    case fb::Target::Cpu: program->target = Device::Cpu; break;
    case fb::Target::Cuda: program->target = Device::Cuda; break;
    default: return invalid(fmt::format("unknown target {}", static_cast<int>(model.target())));
  }
  switch (model.precision()) {
    case fb::Precision::Fp32: program->precision = Precision::Fp32; break;
    case fb::Precision::Bf16: program->precision = Precision::Bf16; break;
    case fb::Precision::Fp16: program->precision = Precision::Fp16; break;
    case fb::Precision::Int8: program->precision = Precision::Int8; break;
    case fb::Precision::Int4: program->precision = Precision::Int4; break;
    default: return invalid(fmt::format("unknown precision {}", static_cast<int>(model.precision())));
  }
  if ((program->precision == Precision::Int8 || program->precision == Precision::Int4) &&
      program->target != Device::Cpu)
    return invalid(fmt::format("precision {} is for the cpu target only", precisionName(program->precision)));
  program->producer = model.producer() ? model.producer()->str() : "";
  program->source = model.source() ? model.source()->str() : "";
  if (model.fixed_dims())
    for (const fb::FixedDim *fixed : *model.fixed_dims()) {
      if (!fixed->name() || fixed->name()->size() == 0) return invalid("a fixed dim has no name");
      program->fixedDims.push_back({fixed->name()->str(), fixed->value(),
                                    fixed->declared_at() ? fixed->declared_at()->str() : ""});
    }
  program->arenaBytes = model.arena_bytes();
  if (program->arenaBytes > kMaxArenaBytes)
    return invalid(fmt::format("the arena of {} bytes exceeds the runtime's limit of 2^43 bytes", program->arenaBytes));
  program->stateBytes = model.state_bytes();
  if (program->stateBytes > kMaxArenaBytes)
    return invalid(fmt::format("the state of {} bytes exceeds the runtime's limit of 2^43 bytes", program->stateBytes));
  const size_t dimCount = model.dims() ? model.dims()->size() : 0;
  if (model.position_dim() < -1 || model.position_dim() >= static_cast<int64_t>(dimCount))
    return invalid(fmt::format("the position dim {} is not one of the {} dims", model.position_dim(), dimCount));
  if ((model.position_dim() >= 0) != (model.states() && model.states()->size() > 0))
    return invalid("a model has a position dim exactly when it has state");
  program->positionDim = model.position_dim();
  if (model.sequence_tokens_dim() < -1 || model.sequence_tokens_dim() >= static_cast<int64_t>(dimCount) ||
      (model.sequence_tokens_dim() >= 0 &&
       (model.position_dim() < 0 || model.sequence_tokens_dim() == model.position_dim())))
    return invalid(fmt::format("the sequences' token dim {} is not one of the {} dims other than the position",
                               model.sequence_tokens_dim(), dimCount));
  program->sequenceTokensDim = model.sequence_tokens_dim();
  program->oneSequence = model.one_sequence() ? model.one_sequence()->str() : "";
  return program;
}

std::unique_ptr<Program> copyFixedParts(const Program &base) {
  auto program = std::make_unique<Program>();
  program->name = base.name;
  program->bytes = base.bytes;
  program->artifact = base.artifact;
  program->weights = base.weights;
  program->weightsBytes = base.weightsBytes;
  program->arenaBytes = base.arenaBytes;
  program->stateBytes = base.stateBytes;
  program->positionDim = base.positionDim;
  program->sequenceTokensDim = base.sequenceTokensDim;
  program->oneSequence = base.oneSequence;
  program->formatVersion = base.formatVersion;
  program->target = base.target;
  program->precision = base.precision;
  program->producer = base.producer;
  program->source = base.source;
  program->fixedDims = base.fixedDims;
  return program;
}

}  // namespace ein::detail
