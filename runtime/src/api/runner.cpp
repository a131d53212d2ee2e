#include "ein/runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "api/execution_context.hpp"
#include "api/io_checks.hpp"
#include "program/program.hpp"

namespace ein::detail {

// One call's context: what it computes with (its buffers stage an input or
// output whose caller memory is not aligned to its element size, and the
// outputs the caller did not ask for), and which of the model's inputs and
// outputs the caller named, kept here so that a call allocates nothing.
struct RunContext {
  std::unique_ptr<ExecutionContext> execution;
  std::vector<const InputTensor *> givenInputs;
  std::vector<const OutputBuffer *> givenOutputs;
};

// The contexts of one Runner: idle ones wait in `idle_`; a call takes one,
// or creates one when none is idle (below the cap), or waits for one.
class RunContextPool {
 public:
  RunContextPool(const Model &model, SessionOptions executorOptions, size_t cap)
      : model_(model), executorOptions_(executorOptions), cap_(cap) {}

  // A context for one call, handed back when the lease ends.
  class Lease {
   public:
    Lease(RunContextPool &pool, std::unique_ptr<RunContext> context) : pool_(&pool), context_(std::move(context)) {}
    Lease(Lease &&) = default;
    Lease &operator=(Lease &&) = delete;
    ~Lease() {
      if (context_) pool_->release(std::move(context_));
    }
    RunContext &context() const { return *context_; }

   private:
    RunContextPool *pool_;
    std::unique_ptr<RunContext> context_;
  };

  // Creates a context and puts it in the pool (Runner::create's first one).
  Status grow() {
    StatusOr<std::unique_ptr<RunContext>> context = create();
    if (!context.ok()) return context.status();
    std::lock_guard lock(mutex_);
    ++created_;
    idle_.reserve(created_);
    idle_.push_back(std::move(context).value());
    return Status();
  }

  // An idle context, a new one when none is idle and the cap allows, or the
  // next one freed. Allocates only when it creates a context.
  StatusOr<Lease> acquire() {
    {
      std::unique_lock lock(mutex_);
      freed_.wait(lock, [&] { return !idle_.empty() || cap_ == 0 || created_ < cap_; });
      if (!idle_.empty()) {
        std::unique_ptr<RunContext> context = std::move(idle_.back());
        idle_.pop_back();
        return Lease(*this, std::move(context));
      }
      ++created_;  // reserved; allocated outside the lock, so other calls go on meanwhile
      idle_.reserve(created_);  // so that release() never allocates
    }
    StatusOr<std::unique_ptr<RunContext>> context = create();
    if (!context.ok()) {
      {
        std::lock_guard lock(mutex_);
        --created_;
      }
      freed_.notify_one();  // a waiter may create one in its place
      return context.status();
    }
    return Lease(*this, std::move(context).value());
  }

  size_t size() const {
    std::lock_guard lock(mutex_);
    return created_;
  }

 private:
  void release(std::unique_ptr<RunContext> context) {
    {
      std::lock_guard lock(mutex_);
      idle_.push_back(std::move(context));  // within the capacity reserved for every context
    }
    freed_.notify_one();
  }

  StatusOr<std::unique_ptr<RunContext>> create() {
    auto context = std::make_unique<RunContext>();
    StatusOr<std::unique_ptr<ExecutionContext>> execution = ExecutionContext::create(model_, executorOptions_);
    if (!execution.ok()) return execution.status();
    context->execution = std::move(execution).value();
    context->givenInputs.resize(model_.inputs().size());
    context->givenOutputs.resize(model_.outputs().size());
    return context;
  }

  const Model &model_;
  const SessionOptions executorOptions_;
  const size_t cap_;  // 0: none
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<RunContext>> idle_;
  size_t created_ = 0;  // idle, in use, or being created
};

namespace {

bool alignedFor(const void *data, DType dtype) { return reinterpret_cast<uintptr_t>(data) % dtypeSize(dtype) == 0; }

bool overlap(const void *a, size_t aBytes, const void *b, size_t bBytes) {
  if (!aBytes || !bBytes) return false;
  const auto begin = reinterpret_cast<uintptr_t>(a), otherBegin = reinterpret_cast<uintptr_t>(b);
  return begin < otherBegin + bBytes && otherBegin < begin + aBytes;
}

// Matches the caller's inputs to the model's, checks them, selects the
// program at their dims and binds the context's inputs: the caller's memory
// where it is aligned to the element size (no copy), a staging buffer
// otherwise.
StatusOr<const Program *> bindInputs(const Model &model, std::span<const InputTensor> inputs, RunContext &context) {
  const std::vector<TensorInfo> &infos = model.inputs();
  std::fill(context.givenInputs.begin(), context.givenInputs.end(), nullptr);
  for (const InputTensor &input : inputs) {
    size_t index = 0;
    while (index < infos.size() && infos[index].name != input.name) ++index;
    if (index == infos.size()) return noSuchInput(input.name, infos);
    const TensorInfo &info = infos[index];
    if (context.givenInputs[index])
      return Status(StatusCode::InvalidArgument, fmt::format("input \"{}\" is given twice", info.name));
    if (Status status = checkInput(info, model.dims(), input.dtype, input.shape, input.data, input.bytes);
        !status.ok())
      return status;
    if (Status status = checkInputValues(info, input.dtype, input.shape, input.data); !status.ok()) return status;
    context.givenInputs[index] = &input;
    context.execution->setInputShape(index, input.shape);
  }
  for (size_t i = 0; i < infos.size(); ++i)
    if (!context.givenInputs[i])
      return Status(StatusCode::InvalidArgument,
                    fmt::format("input \"{}\" ({}) is not given", infos[i].name, describe(infos[i])));
  StatusOr<const Program *> program = context.execution->select(/*position=*/0);  // state: a new sequence
  if (!program.ok()) return program.status();
  for (size_t i = 0; i < infos.size(); ++i) {
    const InputTensor *input = context.givenInputs[i];
    const bool converts = input->dtype != elementType(infos[i].dtype);
    if (!converts && input->bytes && alignedFor(input->data, infos[i].dtype)) {
      context.execution->bindInput(i, static_cast<const std::byte *>(input->data));
      continue;
    }
    const size_t stored = input->bytes / elementSize(input->dtype) * dtypeSize(infos[i].dtype);
    StatusOr<std::byte *> staged = context.execution->stageInput(i, stored);
    if (!staged.ok()) return staged.status();
    if (Status status = convertInput(infos[i], input->dtype, input->shape, input->data, staged.value()); !status.ok())
      return status;
  }
  return program;
}

// Matches the caller's output buffers to `program`'s outputs (the sizes at
// this call's dims), checks them and binds the context's outputs.
Status bindOutputs(const Program &program, std::span<const InputTensor> inputs, std::span<const OutputBuffer> outputs,
                   RunContext &context) {
  std::fill(context.givenOutputs.begin(), context.givenOutputs.end(), nullptr);
  for (const OutputBuffer &output : outputs) {
    size_t index = 0;
    while (index < program.outputs.size() && program.outputs[index].name != output.name) ++index;
    if (index == program.outputs.size()) return noSuchOutput(output.name, program.outputs);
    const TensorInfo &info = program.outputs[index];
    if (context.givenOutputs[index])
      return Status(StatusCode::InvalidArgument, fmt::format("output \"{}\" is given twice", info.name));
    if (output.bytes != info.byteSize())
      return Status(StatusCode::InvalidArgument,
                    fmt::format("output \"{}\" ({}) needs {} bytes, got a buffer of {}", info.name,
                                describe(info.dtype, info.shape), info.byteSize(), output.bytes));
    if (output.bytes && !output.data)
      return Status(StatusCode::InvalidArgument, fmt::format("output \"{}\": no buffer", info.name));
    // The kernels read what they wrote to an output and the inputs until the
    // last step: a shared byte would give wrong results.
    for (const InputTensor &input : inputs)
      if (overlap(output.data, output.bytes, input.data, input.bytes))
        return Status(StatusCode::InvalidArgument,
                      fmt::format("output \"{}\"'s buffer overlaps input \"{}\"", info.name, input.name));
    for (size_t other = 0; other < program.outputs.size(); ++other)
      if (const OutputBuffer *given = context.givenOutputs[other];
          given && overlap(output.data, output.bytes, given->data, given->bytes))
        return Status(StatusCode::InvalidArgument,
                      fmt::format("output \"{}\"'s buffer overlaps output \"{}\"'s", info.name, given->name));
    context.givenOutputs[index] = &output;
  }
  for (size_t i = 0; i < program.outputs.size(); ++i) {
    const OutputBuffer *output = context.givenOutputs[i];
    if (output && output->bytes && alignedFor(output->data, program.outputs[i].dtype)) {
      context.execution->bindOutput(i, static_cast<std::byte *>(output->data));
      continue;
    }
    if (StatusOr<std::byte *> staged = context.execution->stageOutput(i, program.outputs[i].byteSize()); !staged.ok())
      return staged.status();
  }
  return Status();
}

// Runs the bound program and copies staged outputs to the caller's buffers.
Status execute(const Program &program, RunContext &context) {
  if (Status status = context.execution->run(); !status.ok()) return status;
  for (size_t i = 0; i < program.outputs.size(); ++i)
    if (const OutputBuffer *output = context.givenOutputs[i];
        output && output->bytes && context.execution->boundOutput(i) != output->data)
      std::memcpy(output->data, context.execution->boundOutput(i), output->bytes);
  return Status();
}

}  // namespace
}  // namespace ein::detail

namespace ein {

Runner::Runner(std::shared_ptr<const Model> model, RunnerOptions options)
    : model_(std::move(model)), options_(options) {}

Runner::~Runner() = default;

StatusOr<std::unique_ptr<Runner>> Runner::create(std::shared_ptr<const Model> model, RunnerOptions options) {
  if (Status status = detail::checkCanRun(model.get(), options.threads, options.device, options.deviceIndex);
      !status.ok())
    return status;
  if (options.maxConcurrentRuns < 0)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("maxConcurrentRuns must be 0 (no cap) or more, got {}", options.maxConcurrentRuns));
  std::unique_ptr<Runner> runner(new Runner(model, options));
  runner->pool_ = std::make_unique<detail::RunContextPool>(
      *model, SessionOptions{options.threads, options.device, options.deviceIndex},
      static_cast<size_t>(options.maxConcurrentRuns));
  if (Status status = runner->pool_->grow(); !status.ok()) return status;
  return runner;
}

Status Runner::run(std::span<const InputTensor> inputs, std::span<const OutputBuffer> outputs) {
  StatusOr<detail::RunContextPool::Lease> lease = pool_->acquire();
  if (!lease.ok()) return lease.status();
  detail::RunContext &context = lease->context();
  StatusOr<const detail::Program *> program = detail::bindInputs(*model_, inputs, context);
  if (!program.ok()) return program.status();
  if (Status status = detail::bindOutputs(*program.value(), inputs, outputs, context); !status.ok()) return status;
  return detail::execute(*program.value(), context);
}

StatusOr<std::vector<OutputTensor>> Runner::run(std::span<const InputTensor> inputs) {
  StatusOr<detail::RunContextPool::Lease> lease = pool_->acquire();
  if (!lease.ok()) return lease.status();
  detail::RunContext &context = lease->context();
  StatusOr<const detail::Program *> program = detail::bindInputs(*model_, inputs, context);
  if (!program.ok()) return program.status();
  // The outputs' shapes at this call's dims.
  const std::vector<TensorInfo> &infos = program.value()->outputs;
  std::vector<OutputTensor> outputs(infos.size());
  std::vector<OutputBuffer> buffers(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    outputs[i] = {infos[i].name, infos[i].dtype, infos[i].shape, std::vector<std::byte>(infos[i].byteSize())};
    buffers[i] = {outputs[i].name, outputs[i].data.data(), outputs[i].data.size()};
  }
  if (Status status = detail::bindOutputs(*program.value(), inputs, buffers, context); !status.ok()) return status;
  if (Status status = detail::execute(*program.value(), context); !status.ok()) return status;
  return outputs;
}

size_t Runner::contextCount() const { return pool_->size(); }

}  // namespace ein
