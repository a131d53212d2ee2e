#include "backends/cuda/cuda_executor.hpp"

#include "backends/cuda/cuda_executor_impl.hpp"

namespace ein::detail {
namespace cuda_host {

Status CudaExecutor::initialise(int device) {
  // Before any other call: every allocation, stream and handle below belongs
  // to the current device of this thread.
  cudaError_t error = cudaSetDevice(device);
  if (error == cudaSuccess) device_ = device;
  if (error == cudaSuccess) error = cudaGetDeviceProperties(&properties_, device);
  if (error != cudaSuccess)
    return Status(StatusCode::Unimplemented, fmt::format("CUDA device {}: {}", device, cudaMessage(error)));
  if (properties_.major < 8)
    return Status(StatusCode::Unimplemented,
                  fmt::format("CUDA device {} ({}) has compute capability {}.{}; the CUDA kernels need 8.0 or newer",
                              device, properties_.name, properties_.major, properties_.minor));
  if (StepProfile::wanted()) profile_ = std::make_unique<CudaStepProfile>();
  if ((error = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)) != cudaSuccess)
    return Status(StatusCode::Internal, "cudaStreamCreate: " + cudaMessage(error));
  if (const cublasStatus_t status = cublasLtCreate(&lt_.handle); status != CUBLAS_STATUS_SUCCESS)
    return Status(StatusCode::Internal, std::string("cublasLtCreate: ") + cublasLtGetStatusString(status));

  // Device memory: the arena, the session's state (zeros at first), the
  // weights (uploaded once) and cuBLASLt's workspace; the inputs, outputs and
  // gather error slots follow the prepared program's sizes.
  EIN_ASSIGN_OR_RETURN(arena_, allocate(model_.arenaBytes, "the arena"));
  EIN_ASSIGN_OR_RETURN(state_, allocate(model_.stateBytes, "the session's state"));
  if ((error = cudaMemset(state_.get(), 0, model_.stateBytes)) != cudaSuccess)
    return Status(StatusCode::Internal, "clearing the session's state: " + cudaMessage(error));
  EIN_ASSIGN_OR_RETURN(weights_, allocate(model_.weightsBytes, "the weights"));
  if (model_.weightsBytes &&
      (error = cudaMemcpy(weights_.get(), model_.weights, model_.weightsBytes, cudaMemcpyHostToDevice)) != cudaSuccess)
    return Status(StatusCode::Internal, "uploading the weights: " + cudaMessage(error));
  EIN_ASSIGN_OR_RETURN(workspace_, allocate(kWorkspaceBytes, "the cuBLASLt workspace"));
  lt_.workspace = workspace_.get();
  lt_.workspaceBytes = kWorkspaceBytes;
  return Status();
}

// Device copies of the inputs and outputs, regrown only when a program
// needs more than any before.
Status CudaExecutor::growInputsAndOutputs(const Program &program) {
  std::vector<size_t> ioOffsets;
  size_t ioBytes = 0;
  for (const std::vector<TensorInfo> *infos : {&program.inputs, &program.outputs})
    for (const TensorInfo &info : *infos) {
      ioOffsets.push_back(ioBytes);
      ioBytes += (bytesOf(info) + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
    }
  if (!io_ || ioBytes > ioBytes_) {
    io_.reset();
    EIN_ASSIGN_OR_RETURN(io_, allocate(ioBytes, "the inputs and outputs"));
    ioBytes_ = ioBytes;
  }
  auto *io = static_cast<std::byte *>(io_.get());
  inputAddresses_.clear();
  outputAddresses_.clear();
  for (size_t i = 0; i < program.inputs.size(); ++i) inputAddresses_.push_back(io + ioOffsets[i]);
  for (size_t i = 0; i < program.outputs.size(); ++i)
    outputAddresses_.push_back(io + ioOffsets[program.inputs.size() + i]);
  return Status();
}

// The bf16 copies of a that gemms over bf16 weights hand cuBLASLt: as large
// as the largest such a, allocated before planning (plans hold its address).
Status CudaExecutor::growGemmScratch(const Program &program) {
  // Saturating: a hostile artifact's sizes make the allocation fail, never wrap.
  unsigned __int128 bytes = 0;
  for (const Step &step : program.steps)
    if (const auto *gemm = std::get_if<Gemm>(&step.kernel); gemm && program.tensors[gemm->b.tensor].dtype == DType::BF16) {
      unsigned __int128 elements = 2;
      for (int64_t size : {gemm->batch.product(), gemm->m, gemm->k})
        elements = std::min<unsigned __int128>(elements * static_cast<uint64_t>(std::max<int64_t>(size, 0)), SIZE_MAX);
      bytes = std::max(bytes, elements);
    }
  if (bytes > gemmScratchBytes_) {
    gemmScratch_.reset();
    gemmScratchBytes_ = 0;
    EIN_ASSIGN_OR_RETURN(gemmScratch_, allocate(static_cast<size_t>(bytes), "the bf16 copies of gemm operands"));
    gemmScratchBytes_ = static_cast<size_t>(bytes);
  }
  return Status();
}

// One upload for every element-wise program of the prepared steps.
Status CudaExecutor::uploadElementwiseTables() {
  if (tableBytes_.empty()) return Status();
  if (tableBytes_.size() > tablesCapacity_) {
    tables_.reset();
    tablesCapacity_ = 0;
    EIN_ASSIGN_OR_RETURN(tables_, allocate(tableBytes_.size(), "the element-wise programs"));
    tablesCapacity_ = tableBytes_.size();
  }
  const cudaError_t error = cudaMemcpy(tables_.get(), tableBytes_.data(), tableBytes_.size(), cudaMemcpyHostToDevice);
  if (error != cudaSuccess) return Status(StatusCode::Internal, "uploading the element-wise programs: " + cudaMessage(error));
  for (size_t i = 0; i < elementwise_.size(); ++i)
    elementwise_[i].table = static_cast<const std::byte *>(tables_.get()) + elementwiseTableOffsets_[i];
  return Status();
}

Status CudaExecutor::prepare(const Program &program) {
  cudaError_t error = cudaSetDevice(device_);
  // A failed run may have left work queued that reads the old plan.
  if (error == cudaSuccess) error = cudaStreamSynchronize(stream_);
  if (error != cudaSuccess) return Status(StatusCode::Internal, "preparing the CUDA device: " + cudaMessage(error));
  program_ = nullptr;  // until this succeeds
  steps_.clear();
  elementwise_.clear();
  elementwiseTableOffsets_.clear();
  tableBytes_.clear();
  gathers_.clear();
  // Kept plans are reused by later prepares; a bound on their number keeps a
  // session that sees ever new shapes from growing without end.
  if (ltPlans_.size() > kMaxKeptGemmPlans) ltPlans_.clear();
  EIN_RETURN_IF_ERROR(growInputsAndOutputs(program));
  EIN_RETURN_IF_ERROR(growGemmScratch(program));
  bases_.clear();
  for (const Tensor &tensor : program.tensors) {
    switch (tensor.storage) {
      case Storage::Arena: bases_.push_back(static_cast<std::byte *>(arena_.get()) + tensor.offset); break;
      case Storage::Weights: bases_.push_back(static_cast<std::byte *>(weights_.get()) + tensor.offset); break;
      case Storage::Input: bases_.push_back(inputAddresses_[tensor.index]); break;
      case Storage::Output: bases_.push_back(outputAddresses_[tensor.index]); break;
      case Storage::State: bases_.push_back(static_cast<std::byte *>(state_.get()) + tensor.offset); break;
    }
  }

  size_t gatherCount = 0;
  for (const Step &step : program.steps) gatherCount += std::holds_alternative<Gather>(step.kernel);
  if (!errorSlots_ || gatherCount > errorSlotCount_) {
    errorSlots_.reset();
    EIN_ASSIGN_OR_RETURN(errorSlots_, allocate(gatherCount * sizeof(unsigned long long), "the gather checks"));
    errorSlotCount_ = gatherCount;
  }
  program_ = &program;  // plan() reads it
  for (size_t s = 0; s < program.steps.size(); ++s)
    if (Status status = std::visit([&](const auto &op) { return plan(s, op); }, program.steps[s].kernel);
        !status.ok()) {
      program_ = nullptr;
      return status;
    }
  if (Status status = uploadElementwiseTables(); !status.ok()) {
    program_ = nullptr;
    return status;
  }
  if (verbose_)
    std::fprintf(stderr, "ein cuda: %s (sm_%d%d), precision %s, %zu steps, arena %llu bytes\n", properties_.name,
                 properties_.major, properties_.minor, precisionText(program.precision), steps_.size(),
                 static_cast<unsigned long long>(program.arenaBytes));
  return Status();
}

Status CudaExecutor::run(std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs) {
  if (!program_) return Status(StatusCode::Internal, "executor run before a program was prepared");
  if (inputs.size() != program_->inputs.size() || outputs.size() != program_->outputs.size())
    return Status(StatusCode::Internal, "executor called with the wrong number of buffers");
  // The calling thread may have another current device (another session, or none set yet).
  cudaError_t error = cudaSetDevice(device_);
  if (error != cudaSuccess)
    return Status(StatusCode::Internal, fmt::format("selecting CUDA device {}: {}", device_, cudaMessage(error)));
  for (size_t i = 0; i < inputs.size() && error == cudaSuccess; ++i)
    if (const size_t bytes = bytesOf(program_->inputs[i]))
      error = cudaMemcpyAsync(inputAddresses_[i], inputs[i], bytes, cudaMemcpyHostToDevice, stream_);
  if (error == cudaSuccess && !gathers_.empty())
    error = cudaMemsetAsync(errorSlots_.get(), 0xff, gathers_.size() * sizeof(unsigned long long), stream_);
  if (error != cudaSuccess) return Status(StatusCode::Internal, "copying the inputs to the device: " + cudaMessage(error));

  for (size_t s = 0; s < steps_.size(); ++s) {
    if (profile_) profile_->begin(stream_);
    const std::string message = steps_[s](stream_);
    if (!message.empty()) return fail(s, StatusCode::Internal, message);
    if (profile_) profile_->end(stream_, s, program_->stepInfos[s]);
    if (syncEachStep_ && (error = cudaStreamSynchronize(stream_)) != cudaSuccess)
      return fail(s, StatusCode::Internal, cudaMessage(error));
  }

  for (size_t i = 0; i < outputs.size() && error == cudaSuccess; ++i)
    if (const size_t bytes = bytesOf(program_->outputs[i]))
      error = cudaMemcpyAsync(outputs[i], outputAddresses_[i], bytes, cudaMemcpyDeviceToHost, stream_);
  if (error == cudaSuccess) error = cudaStreamSynchronize(stream_);
  if (error != cudaSuccess)
    return Status(StatusCode::Internal, "running on the CUDA device: " + cudaMessage(error) +
                                            " (EIN_CUDA_SYNC=1 names the failing step)");

  if (!gathers_.empty()) {
    std::vector<unsigned long long> firstBad(gathers_.size());
    error = cudaMemcpy(firstBad.data(), errorSlots_.get(), firstBad.size() * sizeof firstBad[0], cudaMemcpyDeviceToHost);
    if (error != cudaSuccess) return Status(StatusCode::Internal, "reading the gather checks: " + cudaMessage(error));
    for (size_t g = 0; g < gathers_.size(); ++g) {
      if (firstBad[g] == ~0ull) continue;
      const GatherCheck &check = gathers_[g];
      const auto position = static_cast<int64_t>(firstBad[g]);
      const int64_t at = ec::offsetOf(check.ids, check.idsView, position);
      int64_t id = 0;
      const size_t bytes = check.wideIds ? 8 : 4;
      int32_t narrow = 0;
      error = cudaMemcpy(check.wideIds ? static_cast<void *>(&id) : static_cast<void *>(&narrow),
                         static_cast<const std::byte *>(check.idsView.data) + at * bytes, bytes, cudaMemcpyDeviceToHost);
      if (!check.wideIds) id = narrow;
      return fail(check.step, StatusCode::OutOfRange,
                  fmt::format("id {} (ids element {}) is outside [0, {})", id, position, check.rows));
    }
  }
  return Status();
}

Status CudaExecutor::copyStateFrom(ExecutorImplementation &source) {
  auto *cuda = dynamic_cast<CudaExecutor *>(&source);
  if (!cuda || cuda->model_.stateBytes != model_.stateBytes)
    return Status(StatusCode::Internal, "the sessions' states differ in device or size");
  // Device to device, across devices too; the source's queued runs finish first.
  cudaError_t error = cudaSetDevice(cuda->device_);
  if (error == cudaSuccess) error = cudaStreamSynchronize(cuda->stream_);
  if (error == cudaSuccess) error = cudaSetDevice(device_);
  if (error == cudaSuccess && model_.stateBytes)
    error = cudaMemcpyPeerAsync(state_.get(), device_, cuda->state_.get(), cuda->device_, model_.stateBytes, stream_);
  if (error == cudaSuccess) error = cudaStreamSynchronize(stream_);
  if (error != cudaSuccess) return Status(StatusCode::Internal, "copying the session's state: " + cudaMessage(error));
  return Status();
}

}  // namespace cuda_host

using cuda_host::CudaExecutor;
using cuda_host::cudaMessage;

StatusOr<int> cudaDeviceCount() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess)
    return Status(StatusCode::Unimplemented, "no CUDA device: cudaGetDeviceCount returned " + cudaMessage(error));
  if (count == 0) return Status(StatusCode::Unimplemented, "no CUDA device: cudaGetDeviceCount found none");
  return count;
}

StatusOr<std::unique_ptr<ExecutorImplementation>> createCudaExecutor(const Program &program, const SessionOptions &options) {
  StatusOr<int> count = cudaDeviceCount();
  if (!count.ok()) return count.status();
  int device = options.deviceIndex;
  const char *chosen = std::getenv("EIN_CUDA_DEVICE");
  if (device < 0) device = chosen ? std::atoi(chosen) : 0;
  if (device < 0 || device >= count.value())
    return Status(StatusCode::InvalidArgument,
                  fmt::format("CUDA device {} ({}) but there {} {} CUDA device{}", device,
                              options.deviceIndex >= 0 ? "asked for" : chosen ? "EIN_CUDA_DEVICE" : "the default",
                              count.value() == 1 ? "is" : "are", count.value(), count.value() == 1 ? "" : "s"));
  auto executor = std::make_unique<CudaExecutor>(program);
  EIN_RETURN_IF_ERROR(executor->initialise(device));
  return std::unique_ptr<ExecutorImplementation>(std::move(executor));
}

}  // namespace ein::detail
