#include "session.hpp"

#include <chrono>
#include <cstring>
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
  StagedInputs staged = stageInputs(inputs, givenInputs(inputs, model.inputs(), true), core->axisDims.get());
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
  StatusOr<Generation> generation = Generation::start(
      *core->session, prompt, generationOptions(maxNewTokens, temperature, topK, topP, seed, std::move(stopTokens)));
  if (!generation.ok()) throwStatus(generation.status());
  const uint64_t epoch = ++core->epoch;  // an older generation on this session ends here
  core->lastGeneration = GenerationStats{static_cast<int64_t>(prompt.size()), 0, 0, 0};
  return std::make_unique<PyGeneration>(core, epoch, std::move(generation).value());
}

nb::object PySession::lastGeneration() {
  Claim claim(*core);
  if (!core->lastGeneration) return nb::none();
  const GenerationStats &stats = *core->lastGeneration;
  return nb::make_tuple(stats.promptTokens, stats.prefillSeconds, stats.decodeTokens, stats.decodeSeconds);
}

std::optional<int64_t> PyGeneration::next() {
  Claim claim(*core);
  if (core->epoch != epoch)
    throw PythonError("Error",
                      "this generation cannot go on: its session has run, been reset or begun another generation "
                      "since its last token");
  const bool prefill = !generation.prefilled();
  StatusOr<std::optional<int64_t>> token = std::optional<int64_t>();
  double seconds = 0;
  {
    nb::gil_scoped_release released;
    const auto start = std::chrono::steady_clock::now();
    token = generation.next();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (!token.ok()) throwStatus(token.status());
  GenerationStats &stats = *core->lastGeneration;
  if (prefill) {
    stats.prefillSeconds += seconds;
  } else if (token.value()) {
    stats.decodeSeconds += seconds;
    ++stats.decodeTokens;
  }
  return token.value();
}

std::optional<std::string> PyGeneration::finishReason() const { return finishReasonText(generation.finishReason()); }

void bindSession(nb::module_ &module) {
  nb::class_<PyGeneration>(module, "_Generation")
      .def("next", &PyGeneration::next)
      .def_prop_ro("finish_reason", &PyGeneration::finishReason);
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
