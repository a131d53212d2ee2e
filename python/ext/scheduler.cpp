#include "scheduler.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "ein/scheduler.hpp"
#include "errors.hpp"
#include "model.hpp"

namespace nb = nanobind;

namespace ein::python {
namespace {

class PyRequest {
 public:
  explicit PyRequest(std::shared_ptr<Request> request) : request(std::move(request)) {}

  // The next token, or None once the request has ended.
  std::optional<int64_t> next() {
    StatusOr<std::optional<int64_t>> token = std::optional<int64_t>();
    {
      nb::gil_scoped_release released;
      token = request->next();
    }
    if (!token.ok()) throwStatus(token.status());
    return token.value();
  }

  std::vector<int64_t> wait() {
    StatusOr<GeneratedSequence> result = GeneratedSequence();
    {
      nb::gil_scoped_release released;
      result = request->wait();
    }
    if (!result.ok()) throwStatus(result.status());
    return std::move(result).value().tokens;
  }

  // A beam search's hypotheses (new tokens, score), best first, once it has ended.
  std::vector<std::pair<std::vector<int64_t>, double>> hypotheses() {
    StatusOr<std::vector<Hypothesis>> found = std::vector<Hypothesis>();
    {
      nb::gil_scoped_release released;
      found = request->hypotheses();
    }
    if (!found.ok()) throwStatus(found.status());
    return hypothesesToPython(std::move(found).value());
  }

  void cancel() { request->cancel(); }
  bool done() const { return request->done(); }
  std::optional<std::string> finishReason() const { return finishReasonText(request->finishReason()); }
  int64_t promptTokens() const { return request->promptTokens(); }
  int64_t cachedTokens() const { return request->cachedPromptTokens(); }
  int64_t preemptions() const { return request->preemptions(); }

 private:
  std::shared_ptr<Request> request;
};

class PyScheduler {
 public:
  PyScheduler(const PyModel &model, int maxSequences, int threads, int64_t stepTokens, size_t maxWaiting,
              bool reusePrefixes, int64_t cacheBlockRows, int64_t cacheBlocks)
      : axisDims(model.axisDims()) {
    if (model.where().device.device != Device::Cpu)
      throw PythonError("DeviceError", "a scheduler runs on the CPU for now");
    SchedulerOptions options;
    options.maxSequences = maxSequences;
    options.threads = threads ? threads : model.threads();
    options.stepTokens = stepTokens;
    options.maxWaiting = maxWaiting;
    options.reusePrefixes = reusePrefixes;
    options.cacheBlockRows = cacheBlockRows;
    options.cacheBlocks = cacheBlocks;
    StatusOr<std::unique_ptr<Scheduler>> created = Scheduler::create(model.shared(), options);
    if (!created.ok()) throwStatus(created.status());
    scheduler = std::move(created).value();
  }

  std::unique_ptr<PyRequest> submit(const std::vector<int64_t> &prompt, int64_t maxNewTokens, float temperature,
                                    int64_t topK, float topP, uint64_t seed, std::vector<int64_t> stopTokens,
                                    nb::dict encoderInputs) {
    // Copied by submit.
    const StagedInputs staged = stageNamedInputs(encoderInputs, scheduler->model(), axisDims.get());
    StatusOr<std::shared_ptr<Request>> request = scheduler->submit(
        prompt, generationOptions(maxNewTokens, temperature, topK, topP, seed, std::move(stopTokens)),
        staged.tensors);
    if (!request.ok()) throwStatus(request.status());
    return std::make_unique<PyRequest>(std::move(request).value());
  }

  std::unique_ptr<PyRequest> submitBeamSearch(const std::vector<int64_t> &prompt, int beams, int64_t maxNewTokens,
                                              float lengthPenalty, const std::string &earlyStopping,
                                              int returnSequences, std::vector<int64_t> stopTokens,
                                              int64_t noRepeatNgramSize, std::vector<int64_t> suppressTokens,
                                              std::vector<int64_t> beginSuppressTokens, nb::dict encoderInputs) {
    const StagedInputs staged = stageNamedInputs(encoderInputs, scheduler->model(), axisDims.get());
    StatusOr<std::shared_ptr<Request>> request = scheduler->submitBeamSearch(
        prompt,
        beamSearchOptions(beams, maxNewTokens, lengthPenalty, earlyStopping, returnSequences, std::move(stopTokens),
                          noRepeatNgramSize, std::move(suppressTokens), std::move(beginSuppressTokens)),
        staged.tensors);
    if (!request.ok()) throwStatus(request.status());
    return std::make_unique<PyRequest>(std::move(request).value());
  }

  void shutdown() {
    nb::gil_scoped_release released;  // waits for the step running
    scheduler->shutdown();
  }

  std::shared_ptr<const InputAxisDims> axisDims;  // the model's
  std::unique_ptr<Scheduler> scheduler;
};

}  // namespace

void bindScheduler(nb::module_ &module) {
  nb::class_<PyRequest>(module, "_Request")
      .def("next", &PyRequest::next)
      .def("wait", &PyRequest::wait)
      .def("hypotheses", &PyRequest::hypotheses)
      .def("cancel", &PyRequest::cancel)
      .def_prop_ro("done", &PyRequest::done)
      .def_prop_ro("finish_reason", &PyRequest::finishReason)
      .def_prop_ro("prompt_tokens", &PyRequest::promptTokens)
      .def_prop_ro("cached_tokens", &PyRequest::cachedTokens)
      .def_prop_ro("preemptions", &PyRequest::preemptions);
  nb::class_<PyScheduler>(module, "_Scheduler")
      .def(nb::init<const PyModel &, int, int, int64_t, size_t, bool, int64_t, int64_t>(), nb::arg("model"),
           nb::arg("max_sequences"), nb::arg("threads"), nb::arg("step_tokens"), nb::arg("max_waiting"),
           nb::arg("reuse_prefixes"), nb::arg("cache_block_rows"), nb::arg("cache_blocks"))
      .def("submit", &PyScheduler::submit, nb::arg("prompt"), nb::arg("max_new_tokens"), nb::arg("temperature"),
           nb::arg("top_k"), nb::arg("top_p"), nb::arg("seed"), nb::arg("stop_tokens"), nb::arg("encoder_inputs"))
      .def("submit_beam_search", &PyScheduler::submitBeamSearch, nb::arg("prompt"), nb::arg("beams"),
           nb::arg("max_new_tokens"), nb::arg("length_penalty"), nb::arg("early_stopping"),
           nb::arg("return_sequences"), nb::arg("stop_tokens"), nb::arg("no_repeat_ngram_size"),
           nb::arg("suppress_tokens"), nb::arg("begin_suppress_tokens"), nb::arg("encoder_inputs"))
      .def("shutdown", &PyScheduler::shutdown)
      .def_prop_ro("running", [](const PyScheduler &self) { return self.scheduler->running(); })
      .def_prop_ro("waiting", [](const PyScheduler &self) { return self.scheduler->waiting(); })
      .def_prop_ro("max_sequences", [](const PyScheduler &self) { return self.scheduler->maxSequences(); })
      .def_prop_ro("step_tokens", [](const PyScheduler &self) { return self.scheduler->stepTokens(); })
      .def_prop_ro("max_sequence_tokens", [](const PyScheduler &self) { return self.scheduler->maxSequenceTokens(); })
      .def_prop_ro("cache_blocks", [](const PyScheduler &self) { return self.scheduler->cacheBlocks(); })
      .def_prop_ro("cache_blocks_used", [](const PyScheduler &self) { return self.scheduler->cacheBlocksUsed(); });
}

}  // namespace ein::python
