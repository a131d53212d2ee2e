#include "ein/session.hpp"

#include <fmt/format.h>

#include <cstring>

#include "executor/executor.hpp"
#include "io_checks.hpp"
#include "program.hpp"
#include "util/aligned_buffer.hpp"

namespace ein {

// Claims the session for one call; a second thread's call fails instead of
// waiting, since a session shared by two threads is a bug to report, not a
// lock to contend on.
class Session::Claim {
 public:
  explicit Claim(const Session &session)
      : session_(session), held_(!session.inUse_.exchange(true, std::memory_order_acquire)) {}
  ~Claim() {
    if (held_) session_.inUse_.store(false, std::memory_order_release);
  }
  Claim(const Claim &) = delete;
  Claim &operator=(const Claim &) = delete;
  bool held() const { return held_; }

 private:
  const Session &session_;
  bool held_;
};

Status Session::busy(const std::string &what) const {
  return Status(StatusCode::Busy, fmt::format("session of '{}' {}; a Session is single-threaded (use ein::Runner to "
                                              "share one model across threads, or one session per thread)",
                                              model_->name(), what));
}

Session::Session(std::shared_ptr<const Model> model, SessionOptions options)
    : model_(std::move(model)), options_(options) {}

Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model, SessionOptions options) {
  if (Status status = detail::checkCanRun(model.get(), options.threads, options.device, options.deviceIndex);
      !status.ok())
    return status;
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
  session->inputSetBy_.assign(model->inputs().size(), std::thread::id());
  for (const auto &buffer : session->inputs_) session->inputPointers_.push_back(buffer.data());
  for (const auto &buffer : session->outputs_) session->outputPointers_.push_back(buffer.data());
  return session;
}

Status Session::setInput(std::string_view name, DType dtype, std::span<const int64_t> shape, const void *data,
                         size_t bytes) {
  Claim claim(*this);
  if (!claim.held()) return busy("is in use by another thread");
  const std::vector<TensorInfo> &infos = model_->inputs();
  for (size_t i = 0; i < infos.size(); ++i) {
    if (infos[i].name != name) continue;
    if (Status status = detail::checkInput(infos[i], dtype, shape, data, bytes); !status.ok()) return status;
    if (bytes) std::memcpy(inputs_[i].data(), data, bytes);
    inputIsSet_[i] = true;
    inputSetBy_[i] = std::this_thread::get_id();
    return Status();
  }
  return detail::noSuchInput(name, infos);
}

Status Session::run() {
  Claim claim(*this);
  if (!claim.held()) return busy("is in use by another thread");
  const std::vector<TensorInfo> &infos = model_->inputs();
  const std::thread::id self = std::this_thread::get_id();
  for (size_t i = 0; i < infos.size(); ++i) {
    if (!inputIsSet_[i])
      return Status(StatusCode::InvalidArgument, fmt::format("input \"{}\" ({}) is not set", infos[i].name,
                                                             detail::describe(infos[i].dtype, infos[i].shape)));
    if (inputSetBy_[i] != self)
      return busy(fmt::format("cannot run: input \"{}\" was set by another thread (set the inputs on the thread that runs)",
                              infos[i].name));
  }
  lastRunBy_ = self;
  return executor_->run(inputPointers_, outputPointers_);
}

size_t Session::outputCount() const { return outputs_.size(); }

StatusOr<TensorRef> Session::output(size_t index) const {
  Claim claim(*this);
  if (!claim.held()) return busy("is in use by another thread");
  if (lastRunBy_ != std::thread::id() && lastRunBy_ != std::this_thread::get_id())
    return busy("cannot give its outputs: the last run was made by another thread");
  const std::vector<TensorInfo> &infos = model_->outputs();
  if (index >= infos.size())
    return Status(StatusCode::OutOfRange, fmt::format("output {} does not exist (the model has {})", index, infos.size()));
  return TensorRef{infos[index].dtype, infos[index].shape, outputs_[index].data(), outputs_[index].size()};
}

StatusOr<TensorRef> Session::output(std::string_view name) const {
  const std::vector<TensorInfo> &infos = model_->outputs();
  for (size_t i = 0; i < infos.size(); ++i)
    if (infos[i].name == name) return output(i);
  return detail::noSuchOutput(name, infos);
}

}  // namespace ein
