#include "session.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <span>
#include <string>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "ein/describe.hpp"
#include "errors.hpp"

namespace nb = nanobind;

namespace ein::python {
namespace {

// Holds a session for the length of one call, or says that another thread has it.
class Claim {
 public:
  explicit Claim(SessionCore &core) : lock(core.mutex, std::try_to_lock) {
    if (!lock)
      throw PythonError("Error",
                        "the session is in use by another thread: a Session runs one call at a time (give each "
                        "thread its own session, or call Model.run, which any number of threads may call at once)");
  }

 private:
  std::unique_lock<std::mutex> lock;
};

std::shared_ptr<SessionCore> newCore(std::shared_ptr<const Model> model, std::shared_ptr<const InputAxisDims> axisDims,
                                     Placement placement) {
  auto core = std::make_shared<SessionCore>();
  core->model = std::move(model);
  core->axisDims = std::move(axisDims);
  core->placement = placement;
  auto session = Session::create(core->model, {.threads = placement.threads, .device = placement.device.device,
                                               .deviceIndex = placement.device.index});
  if (!session.ok()) throwCreateStatus(session.status(), placement.device);
  core->session = std::move(session).value();
  return core;
}

Status invalidArgument(std::string message) { return Status(StatusCode::InvalidArgument, std::move(message)); }

// ein::generate's choice of the ids input and logits output: "ids" and
// "logits", else the model's only integer [1, t] input and only f32
// [1, t, vocab] output.
template <typename Fits>
StatusOr<const TensorInfo *> pick(const std::vector<TensorInfo> &infos, const std::string &name, Fits fits,
                                  const char *what) {
  for (const TensorInfo &info : infos)
    if (info.name == name) return &info;
  const TensorInfo *only = nullptr;
  for (const TensorInfo &info : infos)
    if (fits(info)) {
      if (only) return invalidArgument(std::string("the model has several ") + what + "s: name the one to use");
      only = &info;
    }
  if (!only) return invalidArgument(std::string("the model has no ") + what + " \"" + name + "\"");
  return only;
}

// One run over `tokens` as the ids [1, n], as ein::generate's step: the
// last row of logits.
StatusOr<std::span<const float>> step(Session &session, const TensorInfo &ids, const std::string &logitsName,
                                      std::span<const int64_t> tokens) {
  const int64_t count = static_cast<int64_t>(tokens.size());
  const std::vector<int64_t> shape = {1, count};
  Status status;
  if (ids.dtype == DType::I64) {
    status = session.setInput(ids.name, DType::I64, shape, tokens.data(), tokens.size_bytes());
  } else {
    std::vector<int32_t> narrow(tokens.begin(), tokens.end());
    status = session.setInput(ids.name, DType::I32, shape, narrow.data(), narrow.size() * sizeof(int32_t));
  }
  if (!status.ok()) return status;
  if (status = session.run(); !status.ok()) return status;
  StatusOr<TensorRef> logits = session.output(logitsName);
  if (!logits.ok()) return logits.status();
  const TensorRef &ref = logits.value();
  if (ref.shape.size() != 3 || ref.shape[0] != 1 || ref.shape[1] != count || ref.shape[2] < 1)
    return invalidArgument("logits output \"" + logitsName + "\" has shape " + shapeText(ref.shape) +
                           ", expected [1, " + std::to_string(count) + ", vocab]");
  const int64_t vocab = ref.shape[2];
  const float *data = static_cast<const float *>(ref.data);
  return std::span<const float>(data + (count - 1) * vocab, static_cast<size_t>(vocab));
}

}  // namespace

PySession::PySession(const PyModel &model, int threads) {
  Placement placement = model.where();
  if (threads > 0) placement.threads = threads;
  core = newCore(model.shared(), model.axisDims(), placement);
}

nb::dict PySession::run(nb::dict inputs) {
  Claim claim(*core);
  const Model &model = *core->model;
  checkNames(inputs, model.inputs(), "input");
  StagedInputs staged = stageInputs(inputs, model.inputs(), core->axisDims.get());
  ++core->epoch;
  Session &session = *core->session;
  Status status;
  {
    nb::gil_scoped_release released;
    for (const InputTensor &input : staged.tensors) {
      status = session.setInput(input.name, input.dtype, input.shape, input.data, input.bytes);
      if (!status.ok()) break;
    }
    if (status.ok()) status = session.run();
  }
  if (!status.ok()) throwStatus(status);
  nb::dict results;
  for (size_t i = 0; i < model.outputs().size(); ++i) {
    StatusOr<TensorRef> output = session.output(i);
    if (!output.ok()) throwStatus(output.status());
    const TensorRef &ref = output.value();
    nb::ndarray<nb::numpy> array = newOutputArray(ref.dtype, std::vector<int64_t>(ref.shape.begin(), ref.shape.end()));
    std::memcpy(array.data(), ref.data, ref.bytes);
    results[model.outputs()[i].name.c_str()] = nb::cast(array);
  }
  return results;
}

int64_t PySession::position() {
  Claim claim(*core);
  return core->session->position();
}

void PySession::reset() {
  Claim claim(*core);
  ++core->epoch;
  if (Status status = core->session->resetState(); !status.ok()) throwStatus(status);
}

std::unique_ptr<PySession> PySession::fork() {
  Claim claim(*core);
  std::shared_ptr<SessionCore> copy = newCore(core->model, core->axisDims, core->placement);
  Status status;
  {
    nb::gil_scoped_release released;
    status = copy->session->copyStateFrom(*core->session);
  }
  if (!status.ok()) throwStatus(status);
  return std::make_unique<PySession>(std::move(copy));
}

std::unique_ptr<PyGeneration> PySession::generate(std::vector<int64_t> prompt, int64_t maxNewTokens,
                                                  float temperature, int64_t topK, float topP, uint64_t seed,
                                                  std::vector<int64_t> stopTokens) {
  Claim claim(*core);
  const Model &model = *core->model;
  if (model.states().empty())
    throwStatus(invalidArgument("'" + model.name() +
                                "' keeps no state (a key/value cache): generation needs a decoder that appends to one"));
  StatusOr<const TensorInfo *> ids = pick(
      model.inputs(), "ids",
      [](const TensorInfo &info) {
        return (info.dtype == DType::I32 || info.dtype == DType::I64) && info.shape.size() == 2;
      },
      "ids input");
  if (!ids.ok()) throwStatus(ids.status());
  StatusOr<const TensorInfo *> logits = pick(
      model.outputs(), "logits",
      [](const TensorInfo &info) { return info.dtype == DType::F32 && info.shape.size() == 3; }, "logits output");
  if (!logits.ok()) throwStatus(logits.status());
  if (const int64_t vocabulary = ids.value()->upperBound; vocabulary > 0)
    for (size_t i = 0; i < prompt.size(); ++i)
      if (prompt[i] < 0 || prompt[i] >= vocabulary)
        throwStatus(invalidArgument("prompt token " + std::to_string(i) + " is " + std::to_string(prompt[i]) +
                                    ", outside the vocabulary [0, " + std::to_string(vocabulary) + ") of input \"" +
                                    ids.value()->name + "\""));
  GenerationOptions options;
  options.maxNewTokens = maxNewTokens;
  options.temperature = temperature;
  options.topK = topK;
  options.topP = topP;
  options.seed = seed;
  options.stopTokens = std::move(stopTokens);
  const uint64_t epoch = ++core->epoch;  // an older generation on this session ends here
  core->lastGeneration = GenerationStats{static_cast<int64_t>(prompt.size()), 0, 0, 0};
  return std::make_unique<PyGeneration>(core, epoch, std::move(prompt), std::move(options), ids.value(),
                                        logits.value()->name);
}

nb::object PySession::lastGeneration() {
  Claim claim(*core);
  if (!core->lastGeneration) return nb::none();
  const GenerationStats &stats = *core->lastGeneration;
  return nb::make_tuple(stats.promptTokens, stats.prefillSeconds, stats.decodeTokens, stats.decodeSeconds);
}

PyGeneration::PyGeneration(std::shared_ptr<SessionCore> core, uint64_t epoch, std::vector<int64_t> prompt,
                           GenerationOptions options, const TensorInfo *ids, std::string logits)
    : core(std::move(core)), epoch(epoch), prompt(std::move(prompt)), options(std::move(options)), ids(ids),
      logits(std::move(logits)), samplerState(this->options.seed) {}

std::optional<int64_t> PyGeneration::next() {
  Claim claim(*core);
  if (done) return std::nullopt;
  if (core->epoch != epoch)
    throw PythonError("Error",
                      "this generation cannot go on: its session has run, been reset or begun another generation "
                      "since its last token");
  using Clock = std::chrono::steady_clock;
  const bool first = !started;
  StatusOr<std::span<const float>> row = std::span<const float>();
  bool hasNaN = false;
  int64_t token = -1;
  double seconds = 0;
  {
    nb::gil_scoped_release released;
    const Clock::time_point start = Clock::now();
    const int64_t previous[1] = {last};
    row = first ? step(*core->session, *ids, logits, prompt) : step(*core->session, *ids, logits, previous);
    if (row.ok() && options.maxNewTokens > 0) {
      const std::span<const float> values = row.value();
      hasNaN = std::any_of(values.begin(), values.end(), [](float logit) { return std::isnan(logit); });
      if (!hasNaN) token = chooseToken(values, options, samplerState);
    }
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  started = true;
  if (!row.ok()) {
    done = true;
    throwStatus(row.status());
  }
  GenerationStats &stats = *core->lastGeneration;
  if (first) {
    stats.prefillSeconds += seconds;
  } else {
    stats.decodeSeconds += seconds;
    ++stats.decodeTokens;
  }
  if (options.maxNewTokens == 0) {  // ein::generate runs the prompt and returns no token
    done = true;
    return std::nullopt;
  }
  if (hasNaN) {
    done = true;
    throwStatus(Status(StatusCode::OutOfRange, "the logits for new token " + std::to_string(produced) +
                                                   " hold NaN: the model computed no distribution"));
  }
  ++produced;
  last = token;
  const auto &stops = options.stopTokens;
  if (produced == options.maxNewTokens || std::find(stops.begin(), stops.end(), token) != stops.end()) done = true;
  return token;
}

void bindSession(nb::module_ &module) {
  nb::class_<PyGeneration>(module, "_Generation").def("next", &PyGeneration::next);
  nb::class_<PySession>(module, "_Session")
      .def(nb::init<const PyModel &, int>(), nb::arg("model"), nb::arg("threads"))
      .def("run", &PySession::run, nb::arg("inputs"))
      .def_prop_ro("position", &PySession::position)
      .def_prop_ro("threads", &PySession::threads)
      .def_prop_ro("device", &PySession::device)
      .def("reset", &PySession::reset)
      .def("fork", &PySession::fork)
      .def("generate", &PySession::generate, nb::arg("prompt"), nb::arg("max_new_tokens"), nb::arg("temperature"),
           nb::arg("top_k"), nb::arg("top_p"), nb::arg("seed"), nb::arg("stop_tokens"))
      .def("last_generation", &PySession::lastGeneration);
}

}  // namespace ein::python
