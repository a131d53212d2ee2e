#include "ein/model.hpp"

#include "loader/artifact_bytes.hpp"
#include "loader/artifact_framing.hpp"
#include "loader/program_decoder.hpp"
#include "kernels/cpu/kernels.hpp"
#include "program.hpp"

namespace ein {
namespace {

// Frames, verifies and decodes; errors name the artifact.
StatusOr<std::unique_ptr<const detail::Program>> verifyAndDecode(StatusOr<detail::ArtifactBytes> bytes,
                                                                  const std::string &name) {
  if (!bytes.ok()) return bytes.status();  // already names the file
  StatusOr<detail::Framing> framing = detail::verifyFraming(bytes->data, bytes->size);
  if (!framing.ok()) return Status(framing.status().code(), name + ": " + framing.status().message());
  StatusOr<std::unique_ptr<detail::Program>> program =
      detail::decodeProgram(framing.value(), std::move(bytes).value(), name);
  if (!program.ok()) return Status(program.status().code(), name + ": " + program.status().message());
  // Once per model, shared by its sessions.
  detail::cpu::prepackGemmWeights(*program.value());
  return std::unique_ptr<const detail::Program>(std::move(program).value());
}

}  // namespace

int64_t TensorInfo::numElements() const {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

size_t TensorInfo::byteSize() const { return static_cast<size_t>(numElements()) * dtypeSize(dtype); }

Model::Model(std::unique_ptr<const detail::Program> program) : program_(std::move(program)) {}
Model::~Model() = default;

StatusOr<std::shared_ptr<const Model>> Model::load(const std::string &path) {
  auto program = verifyAndDecode(detail::mapFileReadOnly(path), path);
  if (!program.ok()) return program.status();
  return std::shared_ptr<const Model>(new Model(std::move(program).value()));
}

StatusOr<std::shared_ptr<const Model>> Model::loadFromMemory(const void *data, size_t size, const std::string &name) {
  auto program = verifyAndDecode(detail::copyToAlignedMemory(data, size), name);
  if (!program.ok()) return program.status();
  return std::shared_ptr<const Model>(new Model(std::move(program).value()));
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
  }
  return "unknown";
}
const std::string &Model::producer() const { return program_->producer; }
const std::string &Model::source() const { return program_->source; }
const std::vector<TensorInfo> &Model::inputs() const { return program_->inputs; }
const std::vector<TensorInfo> &Model::outputs() const { return program_->outputs; }
const std::vector<TensorInfo> &Model::params() const { return program_->params; }
const std::vector<StepInfo> &Model::steps() const { return program_->stepInfos; }
uint64_t Model::arenaBytes() const { return program_->arenaBytes; }
uint64_t Model::weightsBytes() const { return program_->weightsBytes; }
std::span<const std::byte> Model::artifactBytes() const { return program_->artifact; }

}  // namespace ein
