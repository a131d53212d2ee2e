#include <cstring>
#include <new>

#include "ein/runtime.hpp"
#include "kernels/cpu/kernels.hpp"
#include "program.hpp"

namespace ein {
namespace {

std::byte *allocateArena(uint64_t bytes) {
  return static_cast<std::byte *>(::operator new[](std::max<uint64_t>(bytes, 1), std::align_val_t{64}));
}
void freeArena(std::byte *arena) { ::operator delete[](arena, std::align_val_t{64}); }

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace

Session::Session(std::shared_ptr<const Model> model, SessionOptions options)
    : model_(std::move(model)), options_(std::move(options)), arena_(allocateArena(model_->arenaBytes()), freeArena) {
  for (const TensorInfo &input : model_->inputs()) inputs_.emplace_back(input.byteSize());
  inputSet_.assign(model_->inputs().size(), false);
  for (const TensorInfo &output : model_->outputs()) outputs_.emplace_back(output.byteSize());
}

StatusOr<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model, SessionOptions options) {
  if (!model) return Status(StatusCode::InvalidArgument, "no model");
  if (options.device != "cpu")
    return Status(StatusCode::Unimplemented, "device '" + options.device + "' is not available in this build (devices: cpu)");
  if (model->target() != "cpu")
    return Status(StatusCode::Unimplemented, "the artifact targets '" + model->target() + "', which this runtime cannot run");
  if (options.threads < 1) return Status(StatusCode::InvalidArgument, "threads must be at least 1");
  // The arena and buffer sizes come from the artifact: a size the machine
  // cannot provide is an error, not an abort.
  uint64_t arenaBytes = model->arenaBytes();
  try {
    return std::unique_ptr<Session>(new Session(std::move(model), std::move(options)));
  } catch (const std::bad_alloc &) {
    return Status(StatusCode::OutOfRange, "cannot allocate the session's memory (arena of " +
                                              std::to_string(arenaBytes) + " bytes plus inputs and outputs)");
  }
}

Status Session::setInput(std::string_view name, DType dtype, const std::vector<int64_t> &shape, const void *data,
                         size_t bytes) {
  const auto &infos = model_->inputs();
  for (size_t i = 0; i < infos.size(); ++i) {
    if (infos[i].name != name) continue;
    const TensorInfo &info = infos[i];
    if (dtype != info.dtype || shape != info.shape)
      return Status(StatusCode::InvalidArgument, "input \"" + info.name + "\" must be " + dtypeName(info.dtype) +
                                                     shapeText(info.shape) + ", got " + dtypeName(dtype) + shapeText(shape));
    if (bytes != info.byteSize())
      return Status(StatusCode::InvalidArgument, "input \"" + info.name + "\" needs " + std::to_string(info.byteSize()) +
                                                     " bytes, got " + std::to_string(bytes));
    if (bytes) std::memcpy(inputs_[i].data(), data, bytes);
    inputSet_[i] = true;
    return Status::success();
  }
  std::string names;
  for (const TensorInfo &info : infos) names += (names.empty() ? "" : ", ") + info.name;
  return Status(StatusCode::NotFound, "the model has no input \"" + std::string(name) + "\" (inputs: " + names + ")");
}

int Session::outputIndex(std::string_view name) const {
  const auto &infos = model_->outputs();
  for (size_t i = 0; i < infos.size(); ++i)
    if (infos[i].name == name) return static_cast<int>(i);
  return -1;
}

Status Session::run() {
  const detail::Program &program = model_->program();
  for (size_t i = 0; i < inputSet_.size(); ++i)
    if (!inputSet_[i])
      return Status(StatusCode::InvalidArgument, "input \"" + program.inputs[i].name + "\" (" +
                                                     dtypeName(program.inputs[i].dtype) + shapeText(program.inputs[i].shape) +
                                                     ") is not set");
  std::vector<std::byte *> bases(program.tensors.size());
  for (size_t t = 0; t < program.tensors.size(); ++t) {
    const detail::TensorSlot &slot = program.tensors[t];
    switch (slot.storage) {
      case detail::Storage::Arena: bases[t] = arena_.get() + slot.offset; break;
      case detail::Storage::Weights: bases[t] = const_cast<std::byte *>(program.weights) + slot.offset; break;
      case detail::Storage::Input: bases[t] = inputs_[slot.index].data(); break;
      case detail::Storage::Output: bases[t] = outputs_[slot.index].data(); break;
    }
  }
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const detail::Step &step = program.steps[s];
    Status status;
    std::visit(
        [&](const auto &kernel) {
          using T = std::decay_t<decltype(kernel)>;
          if constexpr (std::is_same_v<T, detail::Gemm>) cpu::gemmF32Reference(kernel, bases.data());
          else if constexpr (std::is_same_v<T, detail::Elementwise>)
            cpu::elementwiseF32Reference(kernel, program.tensors, bases.data());
          else if constexpr (std::is_same_v<T, detail::Softmax>) cpu::softmaxF32Reference(kernel, bases.data());
          else if constexpr (std::is_same_v<T, detail::Reduce>) cpu::reduceF32Reference(kernel, bases.data());
          else if constexpr (std::is_same_v<T, detail::Gather>)
            status = cpu::gatherF32Reference(kernel, program.tensors, bases.data());
          else if constexpr (std::is_same_v<T, detail::Copy>)
            cpu::copyReference(kernel, dtypeSize(program.tensors[kernel.x.tensor].dtype), bases.data());
        },
        step.kernel);
    if (!status.ok())
      return Status(status.code(), "step " + std::to_string(s) + " (" + program.stepInfos[s].op +
                                       (step.location.empty() ? "" : " at " + step.location) + "): " + status.message());
  }
  return Status::success();
}

}  // namespace ein
