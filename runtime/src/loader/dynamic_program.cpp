#include "loader/dynamic_program.hpp"

#include <fmt/format.h>

#include <optional>

#include "api/io_checks.hpp"
#include "backends/backend.hpp"
#include "loader/flatbuffer_vectors.hpp"
#include "loader/program_decoder.hpp"
#include "util/status_macros.hpp"

namespace ein::detail {
namespace {

namespace fb = ein::schema;

Status invalid(std::string message) { return Status(StatusCode::InvalidArtifact, std::move(message)); }
Status badInput(std::string message) { return Status(StatusCode::InvalidArgument, std::move(message)); }

std::string dimsAt(const SizeProgram &sizes, std::span<const int64_t> dims) {
  std::string text;
  for (size_t d = 0; d < dims.size(); ++d)
    text += fmt::format("{}{} = {}", text.empty() ? "" : ", ", sizes.dims()[d].name, dims[d]);
  return text;
}

std::vector<int64_t> shapeFields(const fb::Model &model, uint32_t tensor) {
  return readSizes(model.tensors()->Get(tensor)->shape());
}

// A gemm whose weight operand b reads the same elements at every dim value
// (k, n and b's offset and strides are constants) can use one matrix packed
// at load.
bool weightOperandIsFixed(const fb::Step &step, const SizeProgram &sizes) {
  const fb::Gemm *gemm = step.kernel_as_Gemm();
  if (!gemm || !gemm->b()) return false;
  bool fixed = !sizes.dependsOnDims(readSize(gemm->k())) && !sizes.dependsOnDims(readSize(gemm->n())) &&
               !sizes.dependsOnDims(readSize(gemm->b()->offset()));
  for (int64_t stride : readSizes(gemm->b()->strides())) fixed = fixed && !sizes.dependsOnDims(stride);
  return fixed;
}

// Per axis of a shape's size fields, its expression's text where it depends
// on the dims ("t + 1"), else "".
std::vector<std::string> axisExpressions(const SizeProgram &sizes, const std::vector<int64_t> &fields) {
  std::vector<std::string> dims(fields.size());
  for (size_t axis = 0; axis < fields.size(); ++axis)
    if (sizes.dependsOnDims(fields[axis])) dims[axis] = sizes.text(fields[axis]);
  return dims;
}

// Input and output infos as the model shows them: -1 and the expression's
// text for each axis that depends on the dims.
void showDims(const SizeProgram &sizes, const std::vector<std::vector<int64_t>> &fields,
              std::vector<TensorInfo> &infos) {
  for (size_t i = 0; i < infos.size(); ++i) {
    infos[i].dims = axisExpressions(sizes, fields[i]);
    for (size_t axis = 0; axis < fields[i].size(); ++axis)
      if (!infos[i].dims[axis].empty()) infos[i].shape[axis] = -1;
  }
}

}  // namespace

StatusOr<std::unique_ptr<const DynamicProgram>> DynamicProgram::load(const fb::Model &model, SizeProgram sizes,
                                                                     Program &base, bool prepackWeights) {
  // Size references exist only where there are expressions (a model without
  // them has plain sizes, which the decoder bounds).
  if (sizes.dynamic() || sizes.expressionCount() > 0)
    EIN_RETURN_IF_ERROR(checkSizeReferences(model, sizes.expressionCount()));
  std::unique_ptr<DynamicProgram> dynamic(new DynamicProgram(model, std::move(sizes), base));
  dynamic->prepackWeights_ = prepackWeights;
  StatusOr<MaximaProbe> probe = dynamic->decodeAtMaxima();
  if (!probe.ok()) return probe.status();
  Program &atMaxima = *probe->program;
  if (!dynamic->sizes_.dynamic()) {
    // No dims: the sizes at the maxima are the model's only ones, so its
    // steps must verify there, every gemm's weights are fixed, and the
    // program there is the model's one program, run as it is (no binding,
    // no instantiation: no DynamicProgram is kept).
    EIN_RETURN_IF_ERROR(dynamic->decodeStepsAtMaxima(probe.value()));
    base = std::move(atMaxima);
    return std::unique_ptr<const DynamicProgram>();
  }
  EIN_RETURN_IF_ERROR(dynamic->checkWeightsAreFixed(atMaxima));
  for (uint32_t tensor : atMaxima.inputTensors) dynamic->inputFields_.push_back(shapeFields(model, tensor));
  for (uint32_t tensor : atMaxima.outputTensors) dynamic->outputFields_.push_back(shapeFields(model, tensor));
  EIN_RETURN_IF_ERROR(dynamic->findDimSources(atMaxima));
  dynamic->findPositionDependents();
  // The steps shown and the weights packed once come from the maxima; for a
  // model with state, from the maxima with its position at 0: a full cache
  // cannot take the largest chunk (a check excludes the plain maxima).
  std::optional<StatusOr<MaximaProbe>> atPositionZero;
  if (base.positionDim >= 0) atPositionZero = dynamic->decodeAtPositionZero();
  MaximaProbe &stepsProbe = atPositionZero && atPositionZero->ok() ? atPositionZero->value() : probe.value();

  base.dynamicBase = true;
  base.inputs = atMaxima.inputs;
  base.outputs = atMaxima.outputs;
  base.params = atMaxima.params;
  base.paramStorage = atMaxima.paramStorage;
  base.states = atMaxima.states;
  base.stateTensors = atMaxima.stateTensors;
  base.inputTensors = atMaxima.inputTensors;
  base.outputTensors = atMaxima.outputTensors;
  showDims(dynamic->sizes_, dynamic->inputFields_, base.inputs);
  showDims(dynamic->sizes_, dynamic->outputFields_, base.outputs);
  EIN_RETURN_IF_ERROR(dynamic->decodeStepsAtMaxima(stepsProbe));
  base.packed = std::move(stepsProbe.program->packed);
  base.stepInfos = std::move(stepsProbe.program->stepInfos);
  base.tensorPlacements = std::move(stepsProbe.program->tensorPlacements);
  for (size_t i = 0; i < base.tensorPlacements.size(); ++i)
    base.tensorPlacements[i].dims = axisExpressions(dynamic->sizes_, shapeFields(model, static_cast<uint32_t>(i)));
  return std::unique_ptr<const DynamicProgram>(std::move(dynamic));
}

// The program at the dims' maxima, the sizes the arena is planned for: its
// tensors and bindings must verify there (its steps are decoded later, by
// decodeStepsAtMaxima). Without dims these are the model's only sizes: every
// check must pass and every size have a value.
StatusOr<DynamicProgram::MaximaProbe> DynamicProgram::decodeAtMaxima() const {
  MaximaProbe probe;
  std::vector<int64_t> maxima;
  for (const DimInfo &dim : sizes_.dims()) maxima.push_back(dim.max);
  SizeProgram::Values values = sizes_.valuesAt(maxima);
  if (!sizes_.dynamic()) {
    if (Status status = sizes_.check({}, values); !status.ok()) return invalid(status.message());
    if (!values.missing.empty()) return invalid(sizes_.noValue(values.missing.front(), {}).message());
  }
  // A size may have no value at the maxima (a check excludes them, e.g. a
  // slice end past its rows): it reads as 0 here, and the arena's claim is
  // then not held to these sizes.
  for (size_t missing : values.missing) values.values[missing] = 0;
  const ArenaClaim arena =
      values.missing.empty() ? ArenaClaim::JustifiedByTheseSizes : ArenaClaim::PlannedForOtherSizes;
  probe.values = std::move(values.values);
  probe.program = copyFixedParts(base_);
  if (Status status = decodeTensors(model_, SizeResolver(probe.values), arena, *probe.program); !status.ok())
    return sizes_.dynamic()
               ? invalid(fmt::format("at the dims' maxima ({}): {}", dimsAt(sizes_, maxima), status.message()))
               : status;
  return probe;
}

// The program at the dims' maxima but the position dim's minimum, the
// arena's claim not held to these sizes.
StatusOr<DynamicProgram::MaximaProbe> DynamicProgram::decodeAtPositionZero() const {
  MaximaProbe probe;
  std::vector<int64_t> dims;
  for (const DimInfo &dim : sizes_.dims()) dims.push_back(dim.max);
  dims[static_cast<size_t>(base_.positionDim)] = sizes_.dims()[static_cast<size_t>(base_.positionDim)].min;
  SizeProgram::Values values = sizes_.valuesAt(dims);
  if (!values.missing.empty()) return sizes_.noValue(values.missing.front(), dims);
  probe.values = std::move(values.values);
  probe.program = copyFixedParts(base_);
  EIN_RETURN_IF_ERROR(decodeTensors(model_, SizeResolver(probe.values), ArenaClaim::PlannedForOtherSizes, *probe.program));
  return probe;
}

// Weights are stored once: their shapes are the same at every dim value.
Status DynamicProgram::checkWeightsAreFixed(const Program &atMaxima) const {
  for (size_t id = 0; id < atMaxima.tensors.size(); ++id) {
    if (atMaxima.tensors[id].storage != Storage::Weights) continue;
    for (int64_t field : shapeFields(model_, static_cast<uint32_t>(id)))
      if (sizes_.dependsOnDims(field))
        return invalid(fmt::format("tensor {}: a weight tensor's shape depends on the dims ({})", id,
                                   sizes_.text(field)));
  }
  return Status();
}

// Decodes the steps into `probe` and packs its gemm weights for every run:
// those of gemms whose weight view no dim changes (without dims, every
// gemm's). A dynamic model's maxima may be excluded by a check, so steps that
// fail to verify there leave `probe` without steps (ein-inspect shows none,
// nothing is packed); without dims they are an error.
Status DynamicProgram::decodeStepsAtMaxima(MaximaProbe &probe) {
  const size_t stepCount = model_.steps() ? model_.steps()->size() : 0;
  packedByStep_.assign(stepCount, -1);
  if (Status status = decodeSteps(model_, SizeResolver(probe.values), *probe.program); !status.ok()) {
    if (!sizes_.dynamic()) return status;
    probe.program->steps.clear();
    probe.program->stepInfos.clear();
    return Status();
  }
  // Without dims no size depends on one, so every gemm's weights are fixed.
  std::vector<bool> fixedWeights(stepCount);
  for (size_t s = 0; s < stepCount; ++s)
    fixedWeights[s] = weightOperandIsFixed(*model_.steps()->Get(static_cast<flatbuffers::uoffset_t>(s)), sizes_);
  if (prepackWeights_) prepareWeightsForTarget(*probe.program, &fixedWeights);
  for (size_t s = 0; s < stepCount; ++s)
    if (const auto *gemm = std::get_if<Gemm>(&probe.program->steps[s].kernel)) packedByStep_[s] = gemm->packedB;
  return Status();
}

Status DynamicProgram::findDimSources(const Program &probe) {
  dimSources_.assign(sizes_.dims().size(), AxisOfInput{SIZE_MAX, 0});
  if (base_.positionDim >= 0) dimSources_[static_cast<size_t>(base_.positionDim)] = {kPositionSource, 0};
  for (size_t input = inputFields_.size(); input-- > 0;)
    for (size_t axis = inputFields_[input].size(); axis-- > 0;)
      if (std::optional<size_t> dim = sizes_.bareDim(inputFields_[input][axis])) dimSources_[*dim] = {input, axis};
  for (size_t d = 0; d < dimSources_.size(); ++d)
    if (dimSources_[d].input == SIZE_MAX)
      return invalid(fmt::format("dim {} is the whole size of no input axis, so a run could not learn its value "
                                 "from the input shapes ({} inputs)",
                                 sizes_.dims()[d].name, probe.inputs.size()));
  return Status();
}

void DynamicProgram::findPositionDependents() {
  if (base_.positionDim < 0) return;
  const auto position = static_cast<size_t>(base_.positionDim);
  const size_t tensorCount = model_.tensors() ? model_.tensors()->size() : 0;
  std::vector<bool> moves(tensorCount, false);
  for (uint32_t id = 0; id < tensorCount; ++id)
    for (int64_t field : shapeFields(model_, id))
      if (sizes_.dependsOnDim(field, position)) moves[id] = true;
  for (uint32_t id = 0; id < tensorCount; ++id)
    if (moves[id]) positionTensors_.push_back(id);
  const size_t stepCount = model_.steps() ? model_.steps()->size() : 0;
  std::vector<int64_t> fields;
  std::vector<uint32_t> tensors;
  for (uint32_t s = 0; s < stepCount; ++s) {
    fields.clear();
    tensors.clear();
    collectStepReferences(*model_.steps()->Get(s), fields, tensors);
    bool depends = false;
    for (int64_t field : fields) depends = depends || sizes_.dependsOnDim(field, position);
    for (uint32_t tensor : tensors) depends = depends || (tensor < tensorCount && moves[tensor]);
    if (depends) positionSteps_.push_back(s);
  }
}

bool DynamicProgram::sameDimsButPosition(const Program &program, std::span<const int64_t> dims) const {
  if (base_.positionDim < 0 || program.dimValues.size() != dims.size()) return false;
  for (size_t d = 0; d < dims.size(); ++d)
    if (d != static_cast<size_t>(base_.positionDim) && program.dimValues[d] != dims[d]) return false;
  return true;
}

Status DynamicProgram::reposition(Program &program, const DimBinding &binding) const {
  const SizeResolver resolve(binding.values);
  if (Status status = redecode(model_, resolve, positionTensors_, positionSteps_, program); !status.ok())
    return Status(status.code(),
                  fmt::format("{}: at {}: {}", base_.name, dimsAt(sizes_, binding.dims), status.message()));
  for (uint32_t s : positionSteps_)
    if (auto *gemm = std::get_if<Gemm>(&program.steps[s].kernel)) gemm->packedB = packedByStep_[s];
  program.dimValues = binding.dims;
  return Status();
}

bool DynamicProgram::readDims(InputShapes shapes, int64_t position, std::vector<int64_t> &dims) const {
  if (shapes.size() != inputFields_.size()) return false;
  for (size_t i = 0; i < shapes.size(); ++i)
    if (shapes[i].size() != inputFields_[i].size()) return false;
  dims.resize(dimSources_.size());
  for (size_t d = 0; d < dimSources_.size(); ++d)
    dims[d] = dimSources_[d].input == kPositionSource ? position : shapes[dimSources_[d].input][dimSources_[d].axis];
  return true;
}

StatusOr<DimBinding> DynamicProgram::bind(InputShapes shapes, int64_t position) const {
  DimBinding binding;
  if (!readDims(shapes, position, binding.dims)) {
    for (size_t i = 0; i < inputFields_.size() && i < shapes.size(); ++i)
      if (shapes[i].size() != inputFields_[i].size())
        return badInput(fmt::format("input \"{}\" has rank {}, but the model expects {}", base_.inputs[i].name,
                                    shapes[i].size(), describe(base_.inputs[i])));
    return Status(StatusCode::Internal, fmt::format("{} input shapes for {} inputs", shapes.size(),
                                                    inputFields_.size()));
  }
  for (size_t d = 0; d < binding.dims.size(); ++d) {
    const DimInfo &dim = sizes_.dims()[d];
    if (dimSources_[d].input == kPositionSource && (binding.dims[d] < dim.min || binding.dims[d] > dim.max))
      return badInput(fmt::format("the session's position {} lies outside dim {}'s range {}..{}", binding.dims[d],
                                  dim.name, dim.min, dim.max));
    if (binding.dims[d] < dim.min || binding.dims[d] > dim.max)
      return badInput(fmt::format("input \"{}\" axis {} is {}, but dim {} ranges over {}..{}",
                                  base_.inputs[dimSources_[d].input].name, dimSources_[d].axis, binding.dims[d],
                                  dim.name, dim.min, dim.max));
  }
  // Inputs that disagree, then the model's checks, before any size without a
  // value: the compiler's checks are what exclude such dims, and say why.
  SizeProgram::Values values = sizes_.valuesAt(binding.dims);
  EIN_RETURN_IF_ERROR(checkInputAxes(shapes, binding.dims, values));
  EIN_RETURN_IF_ERROR(sizes_.check(binding.dims, values));
  if (!values.missing.empty()) return sizes_.noValue(values.missing.front(), binding.dims);
  binding.values = std::move(values.values);
  return binding;
}

Status DynamicProgram::checkInputAxes(InputShapes shapes, std::span<const int64_t> dims,
                                      const SizeProgram::Values &values) const {
  for (size_t input = 0; input < shapes.size(); ++input)
    for (size_t axis = 0; axis < shapes[input].size(); ++axis) {
      EIN_ASSIGN_OR_RETURN(int64_t expected, sizes_.valueOf(inputFields_[input][axis], dims, values));
      if (shapes[input][axis] != expected)
        return badInput(axisMismatch(input, axis, shapes[input][axis], expected, dims));
    }
  return Status();
}

std::string DynamicProgram::axisMismatch(size_t input, size_t axis, int64_t given, int64_t expected,
                                         std::span<const int64_t> dims) const {
  const int64_t field = inputFields_[input][axis];
  const std::string head = fmt::format("input \"{}\" axis {} is {}", base_.inputs[input].name, axis, given);
  if (std::optional<size_t> dim = sizes_.bareDim(field); dim && dimSources_[*dim].input != kPositionSource) {
    const AxisOfInput &source = dimSources_[*dim];
    return fmt::format("{}, but {} = {} (from input \"{}\" axis {})", head, sizes_.dims()[*dim].name, expected,
                       base_.inputs[source.input].name, source.axis);
  }
  if (sizes_.dependsOnDims(field))
    return fmt::format("{}, but {} = {} ({})", head, sizes_.text(field), expected,
                       sizes_.dimsText({field}, dims));
  return fmt::format("{}, but the model expects {}", head, expected);
}

StatusOr<std::unique_ptr<Program>> DynamicProgram::instantiate(const DimBinding &binding) const {
  std::unique_ptr<Program> program = copyFixedParts(base_);
  const SizeResolver resolve(binding.values);
  Status status = decodeTensors(model_, resolve, ArenaClaim::PlannedForOtherSizes, *program);
  if (status.ok()) status = decodeSteps(model_, resolve, *program);
  if (!status.ok())
    return Status(status.code(),
                  fmt::format("{}: at {}: {}", base_.name, dimsAt(sizes_, binding.dims), status.message()));
  for (size_t s = 0; s < program->steps.size(); ++s)
    if (auto *gemm = std::get_if<Gemm>(&program->steps[s].kernel)) gemm->packedB = packedByStep_[s];
  program->dimValues = binding.dims;
  return program;
}

StatusOr<std::vector<std::vector<int64_t>>> DynamicProgram::shapesAt(const std::vector<std::vector<int64_t>> &fields,
                                                                     std::span<const int64_t> dims,
                                                                     const SizeProgram::Values &values) const {
  std::vector<std::vector<int64_t>> shapes;
  for (const std::vector<int64_t> &tensorFields : fields) {
    std::vector<int64_t> &shape = shapes.emplace_back();
    for (int64_t field : tensorFields) {
      EIN_ASSIGN_OR_RETURN(int64_t size, sizes_.valueOf(field, dims, values));
      shape.push_back(size);
    }
  }
  return shapes;
}

std::vector<std::vector<int64_t>> DynamicProgram::outputShapes(const DimBinding &binding) const {
  // A binding has every size's value, so this cannot fail.
  return shapesAt(outputFields_, binding.dims, SizeProgram::Values{binding.values, {}}).value();
}

StatusOr<std::vector<std::vector<int64_t>>> DynamicProgram::inputShapes(std::span<const int64_t> dims) const {
  const std::vector<DimInfo> &ranges = sizes_.dims();
  if (dims.size() != ranges.size())
    return badInput(fmt::format("{} values given for the model's {} dims", dims.size(), ranges.size()));
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] < ranges[d].min || dims[d] > ranges[d].max)
      return badInput(fmt::format("{} = {}, but dim {} ranges over {}..{}", ranges[d].name, dims[d], ranges[d].name,
                                  ranges[d].min, ranges[d].max));
  return shapesAt(inputFields_, dims, sizes_.valuesAt(dims));
}

}  // namespace ein::detail
