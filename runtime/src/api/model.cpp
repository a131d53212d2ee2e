#include "ein/model.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "api/io_checks.hpp"

#include "loader/artifact_bytes.hpp"
#include "loader/artifact_framing.hpp"
#include "loader/dynamic_program.hpp"
#include "loader/program_decoder.hpp"
#include "program/program.hpp"

namespace ein {
namespace {

struct Decoded {
  std::unique_ptr<const detail::Program> program;
  std::unique_ptr<const detail::DynamicProgram> dynamic;  // null without dims
};

StatusOr<Decoded> decode(const detail::Framing &framing, detail::ArtifactBytes bytes, const std::string &name,
                         const LoadOptions &options) {
  const schema::Model &model = *framing.model;
  StatusOr<std::unique_ptr<detail::Program>> program = detail::decodeFixedParts(framing, std::move(bytes), name);
  if (!program.ok()) return program.status();
  StatusOr<detail::SizeProgram> sizes = detail::SizeProgram::decode(model);
  if (!sizes.ok()) return sizes.status();
  // Every model loads as one with dims; one without has no DynamicProgram.
  StatusOr<std::unique_ptr<const detail::DynamicProgram>> dynamic =
      detail::DynamicProgram::load(model, std::move(sizes).value(), *program.value(), options.prepackWeights);
  if (!dynamic.ok()) return dynamic.status();
  return Decoded{std::move(program).value(), std::move(dynamic).value()};
}

// Frames, verifies and decodes; errors name the artifact.
StatusOr<Decoded> verifyAndDecode(StatusOr<detail::ArtifactBytes> bytes, const std::string &name,
                                  const LoadOptions &options = {}) {
  if (!bytes.ok()) return bytes.status();  // already names the file
  StatusOr<detail::Framing> framing = detail::verifyFraming(bytes->data, bytes->size);
  if (!framing.ok()) return Status(framing.status().code(), name + ": " + framing.status().message());
  StatusOr<Decoded> decoded = decode(framing.value(), std::move(bytes).value(), name, options);
  if (!decoded.ok()) return Status(decoded.status().code(), name + ": " + decoded.status().message());
  return decoded;
}

}  // namespace

bool TensorInfo::dynamic() const {
  for (int64_t size : shape)
    if (size < 0) return true;
  return false;
}

int64_t TensorInfo::numElements() const {
  if (dynamic()) return -1;
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

size_t TensorInfo::byteSize() const { return dynamic() ? 0 : static_cast<size_t>(numElements()) * dtypeSize(dtype); }

Model::Model(std::unique_ptr<const detail::Program> program, std::unique_ptr<const detail::DynamicProgram> dynamic)
    : program_(std::move(program)), dynamic_(std::move(dynamic)) {}
Model::~Model() = default;

StatusOr<std::shared_ptr<const Model>> Model::load(const std::string &path, const LoadOptions &options) {
  StatusOr<detail::ArtifactBytes> bytes = detail::mapFileReadOnly(path);
  if (!bytes.ok()) return bytes.status();  // already names the file
  const detail::ArtifactBytes mapping = bytes.value();
  StatusOr<Decoded> decoded = verifyAndDecode(std::move(bytes), path, options);
  if (!decoded.ok()) return decoded.status();
  detail::populateMapping(mapping);
  return std::shared_ptr<const Model>(new Model(std::move(decoded->program), std::move(decoded->dynamic)));
}

StatusOr<std::shared_ptr<const Model>> Model::loadFromMemory(const void *data, size_t size, const std::string &name) {
  StatusOr<Decoded> decoded = verifyAndDecode(detail::copyToAlignedMemory(data, size), name);
  if (!decoded.ok()) return decoded.status();
  return std::shared_ptr<const Model>(new Model(std::move(decoded->program), std::move(decoded->dynamic)));
}

StatusOr<std::vector<std::vector<int64_t>>> Model::outputShapes(std::span<const std::vector<int64_t>> inputShapes,
                                                                int64_t position) const {
  const std::vector<TensorInfo> &inputs = program_->inputs;
  if (inputShapes.size() != inputs.size())
    return Status(StatusCode::InvalidArgument,
                  fmt::format("{} input shapes given; the model has {} inputs", inputShapes.size(), inputs.size()));
  std::vector<std::span<const int64_t>> shapes(inputShapes.begin(), inputShapes.end());
  if (!dynamic_) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!std::equal(shapes[i].begin(), shapes[i].end(), inputs[i].shape.begin(), inputs[i].shape.end()))
        return Status(StatusCode::InvalidArgument,
                      fmt::format("input \"{}\" expects {}, got {}", inputs[i].name,
                                  detail::describe(inputs[i].dtype, inputs[i].shape),
                                  detail::describe(inputs[i].dtype, shapes[i])));
    std::vector<std::vector<int64_t>> outputs;
    for (const TensorInfo &output : program_->outputs) outputs.push_back(output.shape);
    return outputs;
  }
  StatusOr<detail::DimBinding> binding = dynamic_->bind(shapes, position);
  if (!binding.ok()) return binding.status();
  return dynamic_->outputShapes(binding.value());
}

StatusOr<std::vector<std::vector<int64_t>>> Model::inputShapes(std::span<const int64_t> dimValues) const {
  if (dynamic_) return dynamic_->inputShapes(dimValues);
  if (!dimValues.empty())
    return Status(StatusCode::InvalidArgument,
                  fmt::format("{} values given for the dims; the model has none", dimValues.size()));
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorInfo &input : program_->inputs) shapes.push_back(input.shape);
  return shapes;
}

const std::vector<DimInfo> &Model::dims() const {
  static const std::vector<DimInfo> none;
  return dynamic_ ? dynamic_->sizes().dims() : none;
}

const std::string &Model::name() const { return program_->name; }
uint32_t Model::formatVersion() const { return program_->formatVersion; }
Device Model::target() const { return program_->target; }
Precision Model::precision() const { return program_->precision; }

const char *precisionName(Precision precision) {
  switch (precision) {
    case Precision::Fp32: return "fp32";
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
    case Precision::Int8: return "int8";
    case Precision::Int4: return "int4";
  }
  return "unknown";
}
const std::string &Model::producer() const { return program_->producer; }
const std::string &Model::source() const { return program_->source; }
const std::vector<FixedDimInfo> &Model::fixedDims() const { return program_->fixedDims; }
const std::vector<TensorInfo> &Model::inputs() const { return program_->inputs; }
const std::vector<TensorInfo> &Model::outputs() const { return program_->outputs; }
const std::vector<TensorInfo> &Model::params() const { return program_->params; }
const std::vector<ParamStorage> &Model::paramStorage() const { return program_->paramStorage; }
const std::vector<TensorInfo> &Model::states() const { return program_->states; }
int Model::positionDim() const { return program_->positionDim; }
int Model::sequenceTokensDim() const { return program_->sequenceTokensDim; }
const std::string &Model::oneSequenceReason() const { return program_->oneSequence; }
const std::vector<StepInfo> &Model::steps() const { return program_->stepInfos; }
const std::vector<TensorPlacement> &Model::tensors() const { return program_->tensorPlacements; }
uint64_t Model::arenaBytes() const { return program_->arenaBytes; }
uint64_t Model::weightsBytes() const { return program_->weightsBytes; }
std::span<const std::byte> Model::artifactBytes() const { return program_->artifact; }

}  // namespace ein
