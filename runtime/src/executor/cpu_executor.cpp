#include "executor/cpu_executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/kernels.hpp"
#include "util/aligned_buffer.hpp"
#include "util/limits.hpp"
#include "util/thread_pool.hpp"

namespace ein::detail {
namespace {

class CpuExecutor final : public Executor {
 public:
  CpuExecutor(const Program &program, AlignedBuffer arena, AlignedBuffer scratch, size_t scratchStride,
              std::vector<cpu::KernelFn> kernels, int threads)
      : program_(program), arena_(std::move(arena)), scratch_(std::move(scratch)), scratchStride_(scratchStride),
        kernels_(std::move(kernels)), bases_(program.tensors.size(), nullptr),
        pool_(threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr),
        profile_(std::getenv("EIN_PROFILE") != nullptr) {
    // Arena and weight tensors never move: resolve them once. Weights are
    // only read (the verifier allows writes to the arena and outputs only),
    // so the cast away from const never leads to a write.
    for (size_t id = 0; id < program.tensors.size(); ++id) {
      const Tensor &tensor = program.tensors[id];
      if (tensor.storage == Storage::Arena) bases_[id] = arena_.data() + tensor.offset;
      if (tensor.storage == Storage::Weights) bases_[id] = const_cast<std::byte *>(program.weights) + tensor.offset;
    }
  }

  // EIN_PROFILE=1 in the environment: time per operation kind, printed to
  // stderr when the session ends (a development aid; off it costs a branch).
  ~CpuExecutor() override {
    if (!profile_) return;
    for (const auto &[op, time] : profileTimes_)
      std::fprintf(stderr, "profile: %-24s %8.3f ms in %lld calls\n", op.c_str(), time.seconds * 1e3, time.calls);
  }

  Status run(std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs) override {
    if (inputs.size() != program_.inputs.size() || outputs.size() != program_.outputs.size())
      return Status(StatusCode::Internal, "executor called with the wrong number of buffers");
    for (size_t i = 0; i < inputs.size(); ++i) bases_[program_.inputTensors[i]] = const_cast<std::byte *>(inputs[i]);
    for (size_t i = 0; i < outputs.size(); ++i) bases_[program_.outputTensors[i]] = outputs[i];
    cpu::KernelContext context{program_.tensors, bases_.data(), reinterpret_cast<float *>(scratch_.data()),
                               scratchStride_,   pool_.get(),   &cpu::bestKernels(),
                               &program_.packed};
    for (size_t s = 0; s < program_.steps.size(); ++s) {
      const Step &step = program_.steps[s];
      const auto start = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      Status status = kernels_[s](step.kernel, context);
      if (profile_) {
        StepTime &time = profileTimes_[program_.stepInfos[s].op];
        time.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        ++time.calls;
      }
      if (!status.ok()) return Status(status.code(), step.label + ": " + status.message());
    }
    return Status();
  }

 private:
  const Program &program_;
  AlignedBuffer arena_;
  AlignedBuffer scratch_;  // per-step working memory, sized for the largest need, per thread
  size_t scratchStride_;   // floats of scratch per thread
  std::vector<cpu::KernelFn> kernels_;  // one per step
  std::vector<std::byte *> bases_;    // base address of each tensor
  std::unique_ptr<ThreadPool> pool_;  // null with one thread
  struct StepTime {
    double seconds = 0;
    long long calls = 0;
  };
  bool profile_;
  std::map<std::string, StepTime> profileTimes_;  // by StepInfo::op
};

}  // namespace

StatusOr<std::unique_ptr<Executor>> createCpuExecutor(const Program &program, const SessionOptions &options) {
  StatusOr<AlignedBuffer> arena = AlignedBuffer::allocate(program.arenaBytes, "the arena");
  if (!arena.ok()) return arena.status();
  size_t scratchFloats = 0;
  std::vector<cpu::KernelFn> kernels;
  for (const Step &step : program.steps) {
    kernels.push_back(cpu::selectKernel(step.kernel));
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
  // Each thread's share starts on a cache line; the product is checked so a
  // hostile size fails the allocation instead of wrapping.
  scratchFloats = (scratchFloats + 15) / 16 * 16;
  const auto threads = static_cast<size_t>(options.threads);
  if (scratchFloats > SIZE_MAX / sizeof(float) / threads)
    return Status(StatusCode::ResourceExhausted, "the kernels' scratch memory is too large");
  StatusOr<AlignedBuffer> scratch =
      AlignedBuffer::allocate(scratchFloats * threads * sizeof(float), "kernel scratch memory");
  if (!scratch.ok()) return scratch.status();
  return std::unique_ptr<Executor>(new CpuExecutor(program, std::move(arena).value(), std::move(scratch).value(),
                                                   scratchFloats, std::move(kernels), options.threads));
}

}  // namespace ein::detail
