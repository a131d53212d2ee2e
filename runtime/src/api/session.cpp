#include "ein/session.hpp"

#include <fmt/format.h>

#include <cstring>

#include "api/execution_context.hpp"
#include "api/io_checks.hpp"
#include "program/program.hpp"

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
  StatusOr<std::unique_ptr<detail::ExecutionContext>> context = detail::ExecutionContext::create(*model, options);
  if (!context.ok()) return context.status();
  session->context_ = std::move(context).value();
  for (const TensorInfo &input : model->inputs()) session->inputShapes_.push_back(input.shape);
  session->inputIsSet_.assign(model->inputs().size(), false);
  session->firstRunShapes_.resize(model->inputs().size());
  session->inputSetBy_.assign(model->inputs().size(), std::thread::id());
  return session;
}

Status Session::setInput(std::string_view name, ElementType type, std::span<const int64_t> shape, const void *data,
                         size_t bytes) {
  Claim claim(*this);
  if (!claim.held()) return busy("is in use by another thread");
  const std::vector<TensorInfo> &infos = model_->inputs();
  for (size_t i = 0; i < infos.size(); ++i) {
    if (infos[i].name != name) continue;
    if (infos[i].firstRunOnly && position_ > 0)
      return Status(StatusCode::InvalidArgument,
                    fmt::format("input \"{}\" is read at a sequence's first run only (its result is kept in the "
                                "state), and this session is at position {}: reset the state to start a new sequence",
                                name, position_));
    if (Status status = detail::checkInput(infos[i], model_->dims(), type, shape, data, bytes); !status.ok())
      return status;
    if (Status status = detail::checkInputValues(infos[i], type, shape, data); !status.ok()) return status;
    const size_t stored = bytes / elementSize(type) * dtypeSize(infos[i].dtype);
    StatusOr<std::byte *> copy = context_->stageInput(i, stored);
    if (!copy.ok()) return copy.status();
    // A value that does not fit leaves the input unset: no run reads a half-converted copy.
    inputIsSet_[i] = false;
    if (Status status = detail::convertInput(infos[i], type, shape, data, copy.value()); !status.ok()) return status;
    inputShapes_[i].assign(shape.begin(), shape.end());
    context_->setInputShape(i, inputShapes_[i]);
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
    if (infos[i].firstRunOnly && position_ > 0) {
      // Not read again; its shape at the first run binds its dims.
      context_->setInputShape(i, firstRunShapes_[i]);
      continue;
    }
    if (!inputIsSet_[i])
      return Status(StatusCode::InvalidArgument,
                    fmt::format("input \"{}\" ({}) is not set{}", infos[i].name, detail::describe(infos[i]),
                                infos[i].firstRunOnly ? ": a sequence's first run reads it (an encoder's input, "
                                                        "whose result the state keeps)"
                                                      : ""));
    if (inputSetBy_[i] != self)
      return busy(fmt::format("cannot run: input \"{}\" was set by another thread (set the inputs on the thread that runs)",
                              infos[i].name));
  }
  lastRunBy_ = self;
  StatusOr<const detail::Program *> program = context_->select(position_);
  if (!program.ok()) return program.status();
  if (model_->dynamicProgram())
    for (size_t i = 0; i < program.value()->outputs.size(); ++i)
      if (StatusOr<std::byte *> output = context_->stageOutput(i, program.value()->outputs[i].byteSize()); !output.ok())
        return output.status();
  if (Status status = context_->run(); !status.ok()) return status;
  if (position_ == 0)
    for (size_t i = 0; i < infos.size(); ++i)
      if (infos[i].firstRunOnly) firstRunShapes_[i] = inputShapes_[i];
  // The steps appended positionAdvance rows to every state (the model's
  // checks kept them within the states' capacity before any step ran).
  position_ += program.value()->positionAdvance;
  return Status();
}

int64_t Session::position() const { return position_; }

Status Session::resetState() {
  Claim claim(*this);
  if (!claim.held()) return busy("is in use by another thread");
  position_ = 0;
  return Status();
}

Status Session::copyStateFrom(const Session &other) {
  if (&other == this) return Status();
  if (&other.model() != &model())
    return Status(StatusCode::InvalidArgument, "cannot copy state between sessions of different models");
  Claim claim(*this);
  if (!claim.held()) return busy("is in use by another thread");
  Claim source(other);
  if (!source.held()) return other.busy("is in use by another thread");
  // Only the rows up to the position hold values, but the copy is one block.
  if (Status status = context_->copyStateFrom(*other.context_); !status.ok()) return status;
  position_ = other.position_;
  firstRunShapes_ = other.firstRunShapes_;
  return Status();
}

std::span<const int64_t> Session::inputShape(size_t index) const {
  if (index >= inputShapes_.size()) return {};
  if (model_->inputs()[index].firstRunOnly && position_ > 0) return firstRunShapes_[index];
  return inputIsSet_[index] ? std::span<const int64_t>(inputShapes_[index]) : std::span<const int64_t>();
}

size_t Session::outputCount() const { return model_->outputs().size(); }

size_t Session::instantiations() const { return context_->instantiations(); }

StatusOr<TensorRef> Session::input(size_t index) const {
  Claim claim(*this);
  if (!claim.held()) return busy("is in use by another thread");
  const std::vector<TensorInfo> &infos = model_->inputs();
  if (index >= infos.size())
    return Status(StatusCode::OutOfRange, fmt::format("input {} does not exist (the model has {})", index, infos.size()));
  if (!inputIsSet_[index])
    return Status(StatusCode::InvalidArgument, fmt::format("input \"{}\" is not set", infos[index].name));
  uint64_t elements = 1;
  for (int64_t size : inputShapes_[index]) elements *= static_cast<uint64_t>(size);
  return TensorRef{infos[index].dtype, inputShapes_[index], context_->inputBuffer(index).data(),
                   static_cast<size_t>(dtypeBytes(infos[index].dtype, elements))};
}

StatusOr<TensorRef> Session::output(size_t index) const {
  Claim claim(*this);
  if (!claim.held()) return busy("is in use by another thread");
  if (lastRunBy_ != std::thread::id() && lastRunBy_ != std::this_thread::get_id())
    return busy("cannot give its outputs: the last run was made by another thread");
  const detail::Program *program = context_->current();
  if (!program)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("session of '{}' has no outputs yet: a model with dims has output shapes only after a "
                              "successful run",
                              model_->name()));
  const std::vector<TensorInfo> &infos = program->outputs;
  if (index >= infos.size())
    return Status(StatusCode::OutOfRange, fmt::format("output {} does not exist (the model has {})", index, infos.size()));
  // A run at new dims that could not grow this buffer failed: there is no
  // output of that size to give.
  const detail::AlignedBuffer &buffer = context_->outputBuffer(index);
  if (buffer.size() < infos[index].byteSize())
    return Status(StatusCode::ResourceExhausted,
                  fmt::format("output \"{}\" has no value: the last run could not allocate it", infos[index].name));
  return TensorRef{infos[index].dtype, infos[index].shape, buffer.data(), infos[index].byteSize()};
}

StatusOr<TensorRef> Session::output(std::string_view name) const {
  const std::vector<TensorInfo> &infos = model_->outputs();
  for (size_t i = 0; i < infos.size(); ++i)
    if (infos[i].name == name) return output(i);
  return detail::noSuchOutput(name, infos);
}

}  // namespace ein
