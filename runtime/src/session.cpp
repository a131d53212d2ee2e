#include "ein/session.hpp"

#include <fmt/format.h>

#include <cstring>

#include "executor/executor.hpp"
#include "program.hpp"
#include "util/aligned_buffer.hpp"

namespace ein {
namespace {

std::string describe(DType dtype, std::span<const int64_t> shape) {
  return fmt::format("{}[{}]", dtypeName(dtype), fmt::join(shape.begin(), shape.end(), ", "));
}

std::string namesOf(const std::vector<TensorInfo> &infos) {
  std::string names;
  for (const TensorInfo &info : infos) names += (names.empty() ? "" : ", ") + info.name;
  return names.empty() ? "none" : names;
}

}  // namespace

Session::Session(std::shared_ptr<const Model> model, SessionOptions options)
    : model_(std::move(model)), options_(options) {}

Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model, SessionOptions options) {
  if (!model) return Status(StatusCode::InvalidArgument, "no model");
  if (options.threads < 1)
    return Status(StatusCode::InvalidArgument, fmt::format("threads must be at least 1, got {}", options.threads));
  if (!detail::deviceAvailable(options.device)) return detail::deviceUnavailable(options.device);
  if (options.deviceIndex < -1 || (options.device == Device::Cpu && options.deviceIndex > 0))
    return Status(StatusCode::InvalidArgument,
                  fmt::format("no device {}:{}", deviceName(options.device), options.deviceIndex));
  if (options.device != model->target())
    return Status(StatusCode::InvalidArgument,
                  fmt::format("{} was compiled for {}; it cannot run on {} (recompile with --target {})", model->name(),
                              deviceName(model->target()), deviceName(options.device), deviceName(options.device)));

  std::unique_ptr<Session> session(new Session(model, options));
  StatusOr<std::unique_ptr<detail::Executor>> executor = detail::createExecutor(model->program(), options);
  if (!executor.ok()) return executor.status();
  session->executor_ = std::move(executor).value();
  for (const TensorInfo &input : model->inputs()) {
    StatusOr<detail::AlignedBuffer> buffer =
        detail::AlignedBuffer::allocate(input.byteSize(), fmt::format("input \"{}\"", input.name));
    if (!buffer.ok()) return buffer.status();
    session->inputs_.push_back(std::move(buffer).value());
  }
  for (const TensorInfo &output : model->outputs()) {
    StatusOr<detail::AlignedBuffer> buffer =
        detail::AlignedBuffer::allocate(output.byteSize(), fmt::format("output \"{}\"", output.name));
    if (!buffer.ok()) return buffer.status();
    session->outputs_.push_back(std::move(buffer).value());
  }
  session->inputIsSet_.assign(model->inputs().size(), false);
  for (const auto &buffer : session->inputs_) session->inputPointers_.push_back(buffer.data());
  for (const auto &buffer : session->outputs_) session->outputPointers_.push_back(buffer.data());
  return session;
}

Status Session::setInput(std::string_view name, DType dtype, std::span<const int64_t> shape, const void *data,
                         size_t bytes) {
  const std::vector<TensorInfo> &infos = model_->inputs();
  for (size_t i = 0; i < infos.size(); ++i) {
    const TensorInfo &info = infos[i];
    if (info.name != name) continue;
    bool shapeMatches = shape.size() == info.shape.size() && std::equal(shape.begin(), shape.end(), info.shape.begin());
    if (dtype != info.dtype || !shapeMatches)
      return Status(StatusCode::InvalidArgument, fmt::format("input \"{}\" expects {}, got {}", info.name,
                                                             describe(info.dtype, info.shape), describe(dtype, shape)));
    if (bytes != info.byteSize())
      return Status(StatusCode::InvalidArgument,
                    fmt::format("input \"{}\" expects {} bytes, got {}", info.name, info.byteSize(), bytes));
    if (bytes && !data) return Status(StatusCode::InvalidArgument, fmt::format("input \"{}\": no data", info.name));
    if (bytes) std::memcpy(inputs_[i].data(), data, bytes);
    inputIsSet_[i] = true;
    return Status();
  }
  return Status(StatusCode::NotFound,
                fmt::format("the model has no input \"{}\" (inputs: {})", name, namesOf(infos)));
}

Status Session::run() {
  const std::vector<TensorInfo> &infos = model_->inputs();
  for (size_t i = 0; i < infos.size(); ++i)
    if (!inputIsSet_[i])
      return Status(StatusCode::InvalidArgument,
                    fmt::format("input \"{}\" ({}) is not set", infos[i].name, describe(infos[i].dtype, infos[i].shape)));
  return executor_->run(inputPointers_, outputPointers_);
}

size_t Session::outputCount() const { return outputs_.size(); }

StatusOr<TensorRef> Session::output(size_t index) const {
  const std::vector<TensorInfo> &infos = model_->outputs();
  if (index >= infos.size())
    return Status(StatusCode::OutOfRange, fmt::format("output {} does not exist (the model has {})", index, infos.size()));
  return TensorRef{infos[index].dtype, infos[index].shape, outputs_[index].data(), outputs_[index].size()};
}

StatusOr<TensorRef> Session::output(std::string_view name) const {
  const std::vector<TensorInfo> &infos = model_->outputs();
  for (size_t i = 0; i < infos.size(); ++i)
    if (infos[i].name == name) return output(i);
  return Status(StatusCode::NotFound, fmt::format("the model has no output \"{}\" (outputs: {})", name, namesOf(infos)));
}

}  // namespace ein
