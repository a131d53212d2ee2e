#include "api/execution_context.hpp"

#include <fmt/format.h>

namespace ein::detail {

StatusOr<std::unique_ptr<ExecutionContext>> ExecutionContext::create(const Model &model,
                                                                     const SessionOptions &options) {
  std::unique_ptr<ExecutionContext> context(new ExecutionContext(model));
  StatusOr<std::unique_ptr<Executor>> executor = createExecutor(model.program(), options);
  if (!executor.ok()) return executor.status();
  context->executor_ = std::move(executor).value();
  // A static model's buffers have their one size; a dynamic model's start
  // empty (byteSize() is 0) and grow to the largest run that needs them.
  for (const TensorInfo &input : model.inputs()) {
    StatusOr<AlignedBuffer> buffer = AlignedBuffer::allocate(input.byteSize(), fmt::format("input \"{}\"", input.name));
    if (!buffer.ok()) return buffer.status();
    context->inputs_.push_back(std::move(buffer).value());
    context->inputPointers_.push_back(context->inputs_.back().data());
    context->inputShapes_.emplace_back(input.shape);
  }
  for (const TensorInfo &output : model.outputs()) {
    StatusOr<AlignedBuffer> buffer =
        AlignedBuffer::allocate(output.byteSize(), fmt::format("output \"{}\"", output.name));
    if (!buffer.ok()) return buffer.status();
    context->outputs_.push_back(std::move(buffer).value());
    context->outputPointers_.push_back(context->outputs_.back().data());
  }
  return context;
}

StatusOr<const Program *> ExecutionContext::select(int64_t position) {
  return selector_.select(inputShapes_, position, *executor_);
}

StatusOr<std::byte *> ExecutionContext::stageInput(size_t index, size_t bytes) {
  auto name = [&] { return fmt::format("input \"{}\"", model_.inputs()[index].name); };
  if (Status status = inputs_[index].reserve(bytes, name); !status.ok()) return status;
  inputPointers_[index] = inputs_[index].data();
  return inputs_[index].data();
}

StatusOr<std::byte *> ExecutionContext::stageOutput(size_t index, size_t bytes) {
  auto name = [&] { return fmt::format("output \"{}\"", model_.outputs()[index].name); };
  if (Status status = outputs_[index].reserve(bytes, name); !status.ok()) return status;
  outputPointers_[index] = outputs_[index].data();
  return outputs_[index].data();
}

}  // namespace ein::detail
