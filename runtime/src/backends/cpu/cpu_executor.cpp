#include "backends/cpu/cpu_executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "backends/cpu/kernels/kernels.hpp"
#include "backends/step_profile.hpp"
#include "util/aligned_buffer.hpp"
#include "util/limits.hpp"
#include "util/status_macros.hpp"
#include "util/thread_pool.hpp"

namespace ein::detail {
namespace {

// The scratch floats per thread the steps of `program` need, rounded to a
// cache line, or an error for a step beyond the limit.
StatusOr<size_t> scratchFloatsFor(const Program &program) {
  size_t scratchFloats = 0;
  for (const Step &step : program.steps) {
    size_t stepFloats = cpu::scratchFloats(step.kernel);
    // Steps that compute something need scratch in proportion to tensors
    // they read, so only a model beyond the limits gets here; it is refused
    // before anything is allocated.
    if (stepFloats > kMaxScratchBytesPerThread / sizeof(float))
      return Status(StatusCode::InvalidArtifact,
                    fmt::format("{} needs {} bytes of scratch memory per thread, beyond the runtime's limit of {}",
                                step.label, std::min<uint64_t>(stepFloats, UINT64_MAX / sizeof(float)) * sizeof(float),
                                kMaxScratchBytesPerThread));
    scratchFloats = std::max(scratchFloats, stepFloats);
  }
  // Each thread's share starts on a cache line.
  return (scratchFloats + 15) / 16 * 16;
}

class CpuExecutor final : public ExecutorImplementation {
 public:
  CpuExecutor(const Program &model, AlignedBuffer arena, AlignedBuffer state, int threads)
      : model_(model), arena_(std::move(arena)), state_(std::move(state)), threads_(threads),
        pool_(threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr),
        profile_(StepProfile::wanted() ? std::make_unique<StepProfile>() : nullptr) {}

  Status copyStateFrom(ExecutorImplementation &source) override {
    const auto *cpu = dynamic_cast<const CpuExecutor *>(&source);
    if (!cpu || cpu->state_.size() != state_.size())
      return Status(StatusCode::Internal, "the sessions' states differ in device or size");
    if (state_.size()) std::memcpy(state_.data(), cpu->state_.data(), state_.size());
    return Status();
  }

  Status prepare(const Program &program) override {
    program_ = nullptr;  // until this succeeds
    EIN_ASSIGN_OR_RETURN(size_t scratchFloats, scratchFloatsFor(program));
    EIN_RETURN_IF_ERROR(growScratch(scratchFloats));
    kernels_.clear();
    for (const Step &step : program.steps) kernels_.push_back(cpu::selectKernel(step.kernel));
    // Arena and weight tensors never move within a program: resolve them
    // once. Weights are only read (the verifier allows writes to the arena
    // and outputs only), so the cast away from const never leads to a write.
    bases_.assign(program.tensors.size(), nullptr);
    for (size_t id = 0; id < program.tensors.size(); ++id) {
      const Tensor &tensor = program.tensors[id];
      if (tensor.storage == Storage::Arena) bases_[id] = arena_.data() + tensor.offset;
      if (tensor.storage == Storage::Weights) bases_[id] = const_cast<std::byte *>(program.weights) + tensor.offset;
      if (tensor.storage == Storage::State) bases_[id] = state_.data() + tensor.offset;
    }
    program_ = &program;
    return Status();
  }

  Status run(std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs) override {
    if (!program_) return Status(StatusCode::Internal, "executor run before a program was prepared");
    const Program &program = *program_;
    if (inputs.size() != program.inputs.size() || outputs.size() != program.outputs.size())
      return Status(StatusCode::Internal, "executor called with the wrong number of buffers");
    cpu::beginKernelEpoch();  // the calling thread may have run other libraries since our last run
    for (size_t i = 0; i < inputs.size(); ++i) bases_[program.inputTensors[i]] = const_cast<std::byte *>(inputs[i]);
    for (size_t i = 0; i < outputs.size(); ++i) bases_[program.outputTensors[i]] = outputs[i];
    // Pre-packed weights belong to the model's program, which an
    // instantiation's gemms index.
    cpu::KernelContext context{program.tensors, bases_.data(), reinterpret_cast<float *>(scratch_.data()),
                               scratchStride_,  pool_.get(),   &cpu::bestKernels(),
                               &model_.packed};
    for (size_t s = 0; s < program.steps.size(); ++s) {
      const Step &step = program.steps[s];
      const auto start = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      Status status = kernels_[s](step.kernel, context);
      if (profile_)
        profile_->add(s, program.stepInfos[s],
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (!status.ok()) return Status(status.code(), step.label + ": " + status.message());
    }
    return Status();
  }

 private:
  // Scratch sized for the largest need prepared so far: a dynamic model's
  // contexts allocate only when a run needs more than any before, and then
  // half as much again, so a need that creeps up (attention over a cache
  // growing by a row per decode step) allocates a logarithmic number of times.
  Status growScratch(size_t floatsPerThread) {
    if (scratchAllocated_ && floatsPerThread <= scratchStride_) return Status();
    if (scratchAllocated_) floatsPerThread = std::max(floatsPerThread, (scratchStride_ + scratchStride_ / 2 + 15) / 16 * 16);
    // The product is checked so a hostile size fails the allocation instead of wrapping.
    const auto threads = static_cast<size_t>(threads_);
    if (floatsPerThread > SIZE_MAX / sizeof(float) / threads)
      return Status(StatusCode::ResourceExhausted, "the kernels' scratch memory is too large");
    StatusOr<AlignedBuffer> scratch =
        AlignedBuffer::allocate(floatsPerThread * threads * sizeof(float), "kernel scratch memory");
    if (!scratch.ok()) return scratch.status();
    scratch_ = std::move(scratch).value();
    scratchStride_ = floatsPerThread;
    scratchAllocated_ = true;
    return Status();
  }

  const Program &model_;           // the model's program: arena size, packed weights
  const Program *program_ = nullptr;  // the prepared one (the model's, or an instantiation)
  AlignedBuffer arena_;
  AlignedBuffer state_;  // the session's state (Storage::State), kept from run to run
  int threads_;
  AlignedBuffer scratch_;  // per-step working memory, sized for the largest need, per thread
  size_t scratchStride_ = 0;  // floats of scratch per thread
  bool scratchAllocated_ = false;
  std::vector<cpu::KernelFn> kernels_;  // one per step
  std::vector<std::byte *> bases_;    // base address of each tensor
  std::unique_ptr<ThreadPool> pool_;  // null with one thread
  std::unique_ptr<StepProfile> profile_;  // EIN_PROFILE
};

}  // namespace

StatusOr<std::unique_ptr<ExecutorImplementation>> createCpuExecutor(const Program &program, const SessionOptions &options) {
  StatusOr<AlignedBuffer> arena = AlignedBuffer::allocate(program.arenaBytes, "the arena");
  if (!arena.ok()) return arena.status();
  StatusOr<AlignedBuffer> state = AlignedBuffer::allocate(program.stateBytes, "the session's state");
  if (!state.ok()) return state.status();
  return std::unique_ptr<ExecutorImplementation>(
      new CpuExecutor(program, std::move(arena).value(), std::move(state).value(), options.threads));
}

}  // namespace ein::detail
