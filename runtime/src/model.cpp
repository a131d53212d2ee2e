#include "ein/runtime.hpp"
#include "program.hpp"

namespace ein {

const char *statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::Ok: return "ok";
    case StatusCode::InvalidArgument: return "invalid argument";
    case StatusCode::InvalidArtifact: return "invalid artifact";
    case StatusCode::OutOfRange: return "out of range";
    case StatusCode::NotFound: return "not found";
    case StatusCode::Unimplemented: return "unimplemented";
    case StatusCode::IoError: return "I/O error";
    case StatusCode::Internal: return "internal error";
  }
  return "unknown";
}

size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: return 2;
    case DType::I64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::Bool: return "bool";
  }
  return "?";
}

int64_t TensorInfo::numElements() const {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

Model::Model(std::unique_ptr<detail::Program> program) : program_(std::move(program)) {}
Model::~Model() = default;

const std::vector<TensorInfo> &Model::inputs() const { return program_->inputs; }
const std::vector<TensorInfo> &Model::outputs() const { return program_->outputs; }
const std::vector<TensorInfo> &Model::params() const { return program_->params; }
const std::vector<StepInfo> &Model::steps() const { return program_->stepInfos; }
uint64_t Model::arenaBytes() const { return program_->arenaBytes; }
uint64_t Model::weightsBytes() const { return program_->weightsBytes; }
uint32_t Model::formatVersion() const { return program_->formatVersion; }
const std::string &Model::target() const { return program_->target; }
const std::string &Model::producer() const { return program_->producer; }
const std::string &Model::source() const { return program_->source; }

}  // namespace ein
