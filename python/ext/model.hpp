// ein.Model's native half: a loaded artifact and the Runner that runs it from
// any number of Python threads (the GIL is released while kernels run).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "arrays.hpp"
#include "ein/beam_search.hpp"
#include "ein/generate.hpp"
#include "ein/model.hpp"
#include "ein/runner.hpp"
#include "ein/scheduler.hpp"
#include "ein/session.hpp"

namespace ein::python {

// Per input, the name of the fixed dim that sizes each axis, where the model
// text says (`input x: f32[n, d]` -> {"n", "d"}; "" for other axes), so that
// a wrong size can say which dim is fixed. Known for compiled models only
// (an artifact keeps sizes, not the names of fixed dims).
using InputAxisDims = std::map<std::string, std::vector<std::string>>;

// The kernel threads when the caller gives none: the runtime's default (the
// CPUs this process may use), as ein-run's.
int defaultThreads();

// Where and how a model runs: `threads` kernel threads (resolved, >= 1) on
// `device`.
struct Placement {
  int threads = 1;
  DeviceSpec device;
};

// The placement for `model` from Python's arguments: threads 0 is the
// default; no device is the artifact's target. An unknown device spec is a
// ValueError, a device of another kind than the artifact's target a
// DeviceError (in Python words).
Placement placementFor(const Model &model, int threads, const std::optional<std::string> &device);
// "cpu", "cuda", "cuda:1".
std::string deviceText(const DeviceSpec &device);
// Turns a failure to create a runner or session on `device` into the
// exception a Python caller expects: DeviceError when the device is not
// available, the status's class otherwise.
[[noreturn]] void throwCreateStatus(const Status &status, const DeviceSpec &device);


// The inputs as the runtime reads them. `arrays` keeps the caller's arrays
// imported and `copies` the C-order copies of strided views until the run
// is over; `names` and `shapes` hold what the tensors' views point to.
struct StagedInputs {
  std::vector<std::string> names;
  std::vector<AnyArray> arrays;
  std::vector<std::vector<std::byte>> copies;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<InputTensor> tensors;
};

class PyModel {
 public:
  PyModel(std::shared_ptr<const Model> model, Placement placement, InputAxisDims axisDims = {});

  static std::unique_ptr<PyModel> load(const std::string &path, int threads, std::optional<std::string> device);
  static std::unique_ptr<PyModel> fromArtifact(const std::vector<uint8_t> &artifact, const std::string &name,
                                               int threads, std::optional<std::string> device,
                                               InputAxisDims axisDims);

  // [(name, dtype, shape, id_bound)], dtype as the runtime names it ("f32").
  nanobind::list inputs() const;
  nanobind::list outputs() const;
  // The ranged dims: name -> (min, max); empty for a model of fixed shapes.
  nanobind::dict dims() const;
  std::string describe() const;
  void save(const std::string &path) const;
  int threads() const { return placement.threads; }
  std::string device() const { return deviceText(placement.device); }
  const Placement &where() const { return placement; }
  const Model &model() const { return *loaded; }
  const std::shared_ptr<const Model> &shared() const { return loaded; }
  const std::shared_ptr<const InputAxisDims> &axisDims() const { return inputAxisDims; }

  // Runs on `inputs` (name -> array) with `threads` kernel threads (0: the
  // model's); outputs named in `out` are written there, the others into new
  // NumPy arrays. Returns name -> array.
  nanobind::dict run(nanobind::dict inputs, nanobind::dict out, int threads);
  // ein::generate through a Scheduler of up to `maxSequences` sequences, for many prompts at once.
  std::vector<std::vector<int64_t>> generateMany(const std::vector<std::vector<int64_t>> &prompts,
                                                 int64_t maxNewTokens, float temperature, int64_t topK, float topP,
                                                 uint64_t seed, const std::vector<int64_t> &stopTokens, int threads,
                                                 int maxSequences, nanobind::list encoderInputs);
  // ein::beamSearch in a new session, `inputs` set first: the hypotheses
  // (new tokens, score), best first. earlyStopping: "false", "true", "never".
  std::vector<std::pair<std::vector<int64_t>, double>> beamSearch(
      const std::vector<int64_t> &prompt, int beams, int64_t maxNewTokens, float lengthPenalty,
      const std::string &earlyStopping, int returnSequences, const std::vector<int64_t> &stopTokens,
      int64_t noRepeatNgramSize, const std::vector<int64_t> &suppressTokens,
      const std::vector<int64_t> &beginSuppressTokens, int threads, nanobind::dict inputs);
  // ein::beamSearch of every prompt through a Scheduler of up to
  // `maxSequences` sequences (at least a search's beams): each prompt's
  // hypotheses, as beamSearch gives them. Prompt i's encoder inputs:
  // encoderInputs[i] (an encoder-decoder's), or none.
  std::vector<std::vector<std::pair<std::vector<int64_t>, double>>> beamSearchMany(
      const std::vector<std::vector<int64_t>> &prompts, int beams, int64_t maxNewTokens, float lengthPenalty,
      const std::string &earlyStopping, int returnSequences, const std::vector<int64_t> &stopTokens,
      int64_t noRepeatNgramSize, const std::vector<int64_t> &suppressTokens,
      const std::vector<int64_t> &beginSuppressTokens, int threads, int maxSequences, nanobind::list encoderInputs);
  // ein::generate in a new session (a decoder with a key/value cache),
  // `inputs` set first (an encoder-decoder's encoder inputs).
  std::vector<int64_t> generate(const std::vector<int64_t> &prompt, int64_t maxNewTokens, float temperature,
                                int64_t topK, float topP, uint64_t seed, const std::vector<int64_t> &stopTokens,
                                int threads, nanobind::dict inputs);

 private:
  // `generation` in a new session with `inputs` set (an encoder's), without
  // the GIL; its error raised.
  template <typename Result>
  Result generateIn(int threads, nanobind::dict inputs, const std::function<StatusOr<Result>(Session &)> &generation);
  // A scheduler of the model for Model.generate's many prompts (`what` names them in an error).
  std::unique_ptr<Scheduler> schedulerFor(int maxSequences, int threads, const char *what) const;
  // Each prompt's encoder inputs (dicts), staged; views of them per prompt.
  struct FirstRunInputs {
    std::vector<StagedInputs> staged;
    std::vector<std::vector<InputTensor>> tensors;
  };
  FirstRunInputs firstRunInputsOf(nanobind::list encoderInputs) const;
  // The runner with `threads` kernel threads per call, made on first use;
  // runners share the model (and its prepacked weights).
  Runner &runnerFor(int threads);

  std::shared_ptr<const Model> loaded;
  Placement placement;
  std::shared_ptr<const InputAxisDims> inputAxisDims;
  std::mutex runnersMutex;
  std::map<int, std::unique_ptr<Runner>> runners;
};

// Shared with session.cpp: a run's inputs checked and staged for the
// runtime, and new output arrays.

// Every key of `given` names one of `tensors`; `what` is "input" or "output".
void checkNames(nanobind::dict given, const std::vector<TensorInfo> &tensors, const char *what);

// The inputs of `infos` that `given` names; with firstRunOnlyOptional, also
// every other input but one read at a sequence's first run only (a session
// keeps those set, and needs them at position 0 only).
std::vector<TensorInfo> givenInputs(nanobind::dict given, const std::vector<TensorInfo> &infos,
                                    bool firstRunOnlyOptional);
StagedInputs stageInputs(nanobind::dict inputs, const std::vector<TensorInfo> &infos, const InputAxisDims *axisDims);
// The inputs `inputs` names (an encoder-decoder's encoder inputs, which a
// sequence's first run reads), checked against the model's names, staged.
StagedInputs stageNamedInputs(nanobind::dict inputs, const Model &model, const InputAxisDims *axisDims);

// The options Model.generate and Session.generate pass to the runtime.
GenerationOptions generationOptions(int64_t maxNewTokens, float temperature, int64_t topK, float topP, uint64_t seed,
                                    std::vector<int64_t> stopTokens);
// The options Model.generate(num_beams=...) and Scheduler.submit pass to
// the runtime's beam search. earlyStopping: "false", "true", "never".
BeamSearchOptions beamSearchOptions(int beams, int64_t maxNewTokens, float lengthPenalty,
                                    const std::string &earlyStopping, int returnSequences,
                                    std::vector<int64_t> stopTokens, int64_t noRepeatNgramSize,
                                    std::vector<int64_t> suppressTokens, std::vector<int64_t> beginSuppressTokens);
// Hypotheses as Python sees them: (new tokens, score) pairs, best first.
std::vector<std::pair<std::vector<int64_t>, double>> hypothesesToPython(std::vector<Hypothesis> found);
// A finish reason as Python sees it: "length", "stop", "cancelled", or None while it goes on.
std::optional<std::string> finishReasonText(FinishReason reason);

// A new NumPy array of `dtype` and `shape`, 64-byte aligned, owning its memory.
nanobind::ndarray<nanobind::numpy> newOutputArray(DType dtype, const std::vector<int64_t> &shape);

void bindModel(nanobind::module_ &module);

}  // namespace ein::python
