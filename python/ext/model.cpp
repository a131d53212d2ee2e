#include "model.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "ein/beam_search.hpp"
#include "ein/describe.hpp"
#include "ein/generate.hpp"
#include "ein/scheduler.hpp"
#include "errors.hpp"

namespace nb = nanobind;

namespace ein::python {
namespace {

std::string quoted(const std::string &name) { return "\"" + name + "\""; }

std::string namesOf(const std::vector<TensorInfo> &tensors) {
  std::string names;
  for (const TensorInfo &tensor : tensors) names += (names.empty() ? "" : ", ") + tensor.name;
  return names.empty() ? "none" : names;
}

// (name, dtype, shape, id bound); a shape entry is the axis's size, or the
// expression over the dims ("t", "t + 1") where it depends on them.
nb::list tensorList(const std::vector<TensorInfo> &tensors) {
  nb::list list;
  for (const TensorInfo &tensor : tensors) {
    nb::list shape;
    for (size_t axis = 0; axis < tensor.shape.size(); ++axis) {
      bool named = axis < tensor.dims.size() && !tensor.dims[axis].empty();
      shape.append(named ? nb::object(nb::str(tensor.dims[axis].c_str())) : nb::object(nb::int_(tensor.shape[axis])));
    }
    list.append(
        nb::make_tuple(tensor.name, dtypeName(tensor.dtype), nb::tuple(shape), tensor.upperBound, tensor.firstRunOnly));
  }
  return list;
}

// Whether `shape` fits `tensor`'s: the same rank and its fixed sizes; the
// runtime checks the axes that depend on dims (ranges, agreement).
bool fits(const std::vector<int64_t> &shape, const TensorInfo &tensor) {
  if (shape.size() != tensor.shape.size()) return false;
  for (size_t axis = 0; axis < shape.size(); ++axis)
    if (tensor.shape[axis] != -1 && tensor.shape[axis] != shape[axis]) return false;
  return true;
}

size_t byteSize(DType dtype, const std::vector<int64_t> &shape) {
  size_t bytes = dtypeSize(dtype);
  for (int64_t size : shape) bytes *= static_cast<size_t>(size);
  return bytes;
}

// What a shape that does not fit `tensor` gets wrong on a fixed axis, when
// it has the right rank: "; axis 0 is dim 'n', fixed at 3 ..." with how to
// make that dim ranged; "" otherwise. `axisDims` names the axes' fixed dims
// where the model text did.
std::string fixedAxisNote(const std::vector<int64_t> &shape, const TensorInfo &tensor,
                          const std::vector<std::string> *axisDims) {
  if (shape.size() != tensor.shape.size()) return "";
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    const int64_t fixed = tensor.shape[axis];
    if (fixed == -1 || fixed == shape[axis]) continue;
    const std::string at = "; axis " + std::to_string(axis) + " ";
    const std::string largest = std::to_string(std::max(fixed, shape[axis]));
    if (axisDims && axis < axisDims->size() && !(*axisDims)[axis].empty()) {
      const std::string &dim = (*axisDims)[axis];
      return at + "is dim '" + dim + "', fixed at " + std::to_string(fixed) +
             " in this model: to run other sizes, make it ranged (ein.compile(..., dims={'" + dim + "': (1, " +
             largest + ")}), or `dim " + dim + " = 1.." + largest + "` in the model)";
    }
    return at + "is fixed at " + std::to_string(fixed) +
           " in this model: to run other sizes, compile it with the dim that sizes this axis ranged "
           "(ein.compile(..., dims={NAME: (MIN, MAX)}))";
  }
  return "";
}

// The array given for `tensor`, checked against its dtype and shape.
AnyArray inputArray(nb::dict inputs, const TensorInfo &tensor, const std::vector<std::string> *axisDims) {
  std::string expected = typeText(tensor);
  if (!inputs.contains(tensor.name.c_str()))
    throw PythonError("InputError", "input " + quoted(tensor.name) + " (" + expected + ") is not given", tensor.name);
  nb::object value = inputs[tensor.name.c_str()];
  AnyArray array;
  if (!nb::try_cast(value, array))
    throw PythonError("InputError",
                      "input " + quoted(tensor.name) + " expects " + expected + ", got a " +
                          nb::cast<std::string>(nb::type_name(value.type())) +
                          ", which is not a CPU array (NumPy, DLPack or the buffer protocol)",
                      tensor.name);
  // The element type converts by the runtime's policy (int64 ids for an
  // i32 input, float64 for f32); the runtime checks each value as it converts.
  std::vector<int64_t> shape = shapeOf(array);
  const std::optional<ElementType> type = inputElementType(array.dtype(), tensor.dtype);
  const char *why = type ? whyNotConverted(*type, tensor.dtype) : "";
  if (!type || !convertsTo(*type, tensor.dtype) || !fits(shape, tensor))
    throw PythonError("InputError",
                      "input " + quoted(tensor.name) + " expects " + expected + ", got " + dtypeText(array.dtype()) +
                          shapeText(shape) + (*why ? std::string(": ") + why : fixedAxisNote(shape, tensor, axisDims)),
                      tensor.name);
  return array;
}

// The caller's buffer for `tensor`, of `shape` at this run, which the run
// writes in place.
WritableArray outputBuffer(nb::handle value, const TensorInfo &tensor, const std::vector<int64_t> &shape) {
  std::string expected = typeText(tensor.dtype, shape);
  WritableArray buffer;
  std::string problem;
  if (!nb::try_cast(value, buffer))
    problem = "got a " + nb::cast<std::string>(nb::type_name(value.type())) +
              ", which is not a writable CPU array";
  else if (AnyArray view(buffer); !holds(view.dtype(), tensor.dtype) || shapeOf(view) != shape)
    problem = "got " + dtypeText(view.dtype()) + shapeText(shapeOf(view));
  else if (!isCContiguous(view))
    problem = "got a non-contiguous array";
  if (!problem.empty())
    throw PythonError("InputError", "out= buffer for output " + quoted(tensor.name) + " must be a C-contiguous " +
                                        expected + " array, " + problem,
                      tensor.name);
  return buffer;
}

// Where the run writes each output: the caller's out= buffer or a new NumPy
// array. `results` maps every output to its array and holds the new ones;
// `given` keeps the caller's buffers imported.
struct PreparedOutputs {
  nb::dict results;
  std::vector<WritableArray> given;
  std::vector<OutputBuffer> buffers;
};

// Outputs of `shapes` (the model's at this run's inputs).
PreparedOutputs prepareOutputs(nb::dict out, const std::vector<TensorInfo> &infos,
                               const std::vector<std::vector<int64_t>> &shapes) {
  PreparedOutputs prepared;
  for (size_t i = 0; i < infos.size(); ++i) {
    const TensorInfo &tensor = infos[i];
    void *data = nullptr;
    if (out.contains(tensor.name.c_str())) {
      nb::object buffer = out[tensor.name.c_str()];
      data = prepared.given.emplace_back(outputBuffer(buffer, tensor, shapes[i])).data();
      prepared.results[tensor.name.c_str()] = buffer;
    } else {
      nb::ndarray<nb::numpy> array = newOutputArray(tensor.dtype, shapes[i]);
      data = array.data();
      prepared.results[tensor.name.c_str()] = nb::cast(array);
    }
    prepared.buffers.push_back({tensor.name, data, byteSize(tensor.dtype, shapes[i])});
  }
  return prepared;
}

}  // namespace

// Every key of `given` names one of `tensors`; `what` is "input" or "output".
void checkNames(nb::dict given, const std::vector<TensorInfo> &tensors, const char *what) {
  for (auto [key, value] : given) {
    std::string name = nb::isinstance<nb::str>(key) ? nb::cast<std::string>(key) : nb::cast<std::string>(nb::repr(key));
    bool known = false;
    for (const TensorInfo &tensor : tensors) known = known || tensor.name == name;
    if (!known)
      throw PythonError("InputError", "the model has no " + std::string(what) + " " + quoted(name) + " (" + what +
                                          "s: " + namesOf(tensors) + ")",
                        name);
  }
}

std::vector<TensorInfo> givenInputs(nb::dict given, const std::vector<TensorInfo> &infos, bool firstRunOnlyOptional) {
  std::vector<TensorInfo> chosen;
  for (const TensorInfo &tensor : infos)
    if (given.contains(tensor.name.c_str()) || (firstRunOnlyOptional && !tensor.firstRunOnly)) chosen.push_back(tensor);
  return chosen;
}

StagedInputs stageInputs(nb::dict inputs, const std::vector<TensorInfo> &infos, const InputAxisDims *axisDims) {
  StagedInputs staged;
  // The tensors' names and shapes point into these.
  staged.names.reserve(infos.size());
  staged.shapes.reserve(infos.size());
  for (const TensorInfo &tensor : infos) {
    const std::vector<std::string> *names = nullptr;
    if (axisDims)
      if (auto found = axisDims->find(tensor.name); found != axisDims->end()) names = &found->second;
    const AnyArray &array = staged.arrays.emplace_back(inputArray(inputs, tensor, names));
    const void *data = array.data();
    // The runner reads contiguous memory in place; a strided view is copied.
    if (!isCContiguous(array)) {
      std::vector<std::byte> &copy = staged.copies.emplace_back(array.nbytes());
      copyInCOrder(array, copy.data());
      data = copy.data();
    }
    const std::vector<int64_t> &shape = staged.shapes.emplace_back(shapeOf(array));
    const std::string &name = staged.names.emplace_back(tensor.name);
    staged.tensors.push_back({name, *inputElementType(array.dtype(), tensor.dtype), shape, data, array.nbytes()});
  }
  return staged;
}

StagedInputs stageNamedInputs(nb::dict inputs, const Model &model, const InputAxisDims *axisDims) {
  checkNames(inputs, model.inputs(), "input");
  return stageInputs(inputs, givenInputs(inputs, model.inputs(), false), axisDims);
}

nb::ndarray<nb::numpy> newOutputArray(DType dtype, const std::vector<int64_t> &shape) {
  // aligned_alloc wants a multiple of the alignment, and some bytes even
  // for an empty tensor.
  void *data = std::aligned_alloc(64, (byteSize(dtype, shape) / 64 + 1) * 64);
  if (!data) throw std::bad_alloc();
  nb::capsule owner(data, [](void *pointer) noexcept { std::free(pointer); });
  std::vector<size_t> sizes(shape.begin(), shape.end());
  return nb::ndarray<nb::numpy>(data, sizes.size(), sizes.data(), owner, nullptr, numpyDType(dtype));
}

int defaultThreads() { return ein::defaultThreadCount(); }

std::string deviceText(const DeviceSpec &device) {
  std::string text = deviceName(device.device);
  return device.index >= 0 ? text + ":" + std::to_string(device.index) : text;
}

Placement placementFor(const Model &model, int threads, const std::optional<std::string> &device) {
  Placement placement{threads > 0 ? threads : defaultThreads(), {model.target(), -1}};
  if (!device) return placement;
  std::optional<DeviceSpec> parsed = parseDeviceSpec(*device);
  if (!parsed)
    throw PythonError("ValueError", "device='" + *device + "': unknown device (devices: 'cpu', 'cuda', 'cuda:N')");
  if (parsed->device != model.target())
    throw PythonError("DeviceError", "'" + model.name() + "' was compiled for " + deviceName(model.target()) +
                                         " and cannot run on device '" + *device + "': compile it with device='" +
                                         deviceName(parsed->device) + "' (ein.compile) to run it there");
  placement.device = *parsed;
  return placement;
}

void throwCreateStatus(const Status &status, const DeviceSpec &device) {
  // The CPU is always there; on CUDA a failure that is not about the caller's
  // arguments or the artifact means the device cannot run it here.
  const bool deviceMissing = status.code() == StatusCode::Unimplemented ||
                             (device.device == Device::Cuda && status.code() != StatusCode::InvalidArtifact &&
                              status.code() != StatusCode::ResourceExhausted);
  if (deviceMissing)
    throw PythonError("DeviceError", "device '" + deviceText(device) + "' cannot run this model here: " +
                                         status.message());
  throwStatus(status);
}

PyModel::PyModel(std::shared_ptr<const Model> model, Placement where, InputAxisDims axisDims)
    : loaded(std::move(model)), placement(where),
      inputAxisDims(std::make_shared<const InputAxisDims>(std::move(axisDims))) {
  // The first runner (a session, for a model with state) now, so that a
  // model that cannot run here fails at load.
  if (loaded->states().empty()) {
    runnerFor(placement.threads);
  } else if (auto session = Session::create(
                 loaded, {.threads = placement.threads, .device = placement.device.device,
                          .deviceIndex = placement.device.index});
             !session.ok()) {
    throwCreateStatus(session.status(), placement.device);
  }
}

GenerationOptions generationOptions(int64_t maxNewTokens, float temperature, int64_t topK, float topP, uint64_t seed,
                                    std::vector<int64_t> stopTokens) {
  GenerationOptions options;
  options.maxNewTokens = maxNewTokens;
  options.temperature = temperature;
  options.topK = topK;
  options.topP = topP;
  options.seed = seed;
  options.stopTokens = std::move(stopTokens);
  return options;
}

std::optional<std::string> finishReasonText(FinishReason reason) {
  if (reason == FinishReason::None) return std::nullopt;
  return std::string(finishReasonName(reason));
}

template <typename Result>
Result PyModel::generateIn(int threads, nb::dict inputs, const std::function<StatusOr<Result>(Session &)> &generation) {
  auto session = Session::create(loaded, {.threads = threads ? threads : placement.threads,
                                         .device = placement.device.device, .deviceIndex = placement.device.index});
  if (!session.ok()) throwCreateStatus(session.status(), placement.device);
  StagedInputs staged = stageNamedInputs(inputs, *loaded, inputAxisDims.get());
  StatusOr<Result> result = Result();
  {
    nb::gil_scoped_release released;
    Status status;
    for (const InputTensor &input : staged.tensors) {
      status = session.value()->setInput(input.name, input.dtype, input.shape, input.data, input.bytes);
      if (!status.ok()) break;
    }
    result = status.ok() ? generation(*session.value()) : StatusOr<Result>(status);
  }
  if (!result.ok()) throwStatus(result.status());
  return std::move(result).value();
}

std::vector<int64_t> PyModel::generate(const std::vector<int64_t> &prompt, int64_t maxNewTokens, float temperature,
                                       int64_t topK, float topP, uint64_t seed,
                                       const std::vector<int64_t> &stopTokens, int threads, nb::dict inputs) {
  const GenerationOptions options = generationOptions(maxNewTokens, temperature, topK, topP, seed, stopTokens);
  return generateIn<std::vector<int64_t>>(threads, inputs,
                                          [&](Session &session) { return ein::generate(session, prompt, options); });
}

BeamSearchOptions beamSearchOptions(int beams, int64_t maxNewTokens, float lengthPenalty,
                                    const std::string &earlyStopping, int returnSequences,
                                    std::vector<int64_t> stopTokens, int64_t noRepeatNgramSize,
                                    std::vector<int64_t> suppressTokens, std::vector<int64_t> beginSuppressTokens) {
  BeamSearchOptions options;
  options.beams = beams;
  options.maxNewTokens = maxNewTokens;
  options.lengthPenalty = lengthPenalty;
  options.earlyStopping = earlyStopping == "true"    ? EarlyStopping::WhenFull
                          : earlyStopping == "never" ? EarlyStopping::Never
                                                     : EarlyStopping::Heuristic;
  options.returnSequences = returnSequences;
  options.stopTokens = std::move(stopTokens);
  options.noRepeatNgramSize = noRepeatNgramSize;
  options.suppressTokens = std::move(suppressTokens);
  options.beginSuppressTokens = std::move(beginSuppressTokens);
  return options;
}

std::vector<std::pair<std::vector<int64_t>, double>> hypothesesToPython(std::vector<Hypothesis> found) {
  std::vector<std::pair<std::vector<int64_t>, double>> result;
  for (Hypothesis &hypothesis : found) result.emplace_back(std::move(hypothesis.tokens), hypothesis.score);
  return result;
}

std::vector<std::pair<std::vector<int64_t>, double>> PyModel::beamSearch(
    const std::vector<int64_t> &prompt, int beams, int64_t maxNewTokens, float lengthPenalty,
    const std::string &earlyStopping, int returnSequences, const std::vector<int64_t> &stopTokens,
    int64_t noRepeatNgramSize, const std::vector<int64_t> &suppressTokens,
    const std::vector<int64_t> &beginSuppressTokens, int threads, nb::dict inputs) {
  const BeamSearchOptions options =
      beamSearchOptions(beams, maxNewTokens, lengthPenalty, earlyStopping, returnSequences, stopTokens,
                        noRepeatNgramSize, suppressTokens, beginSuppressTokens);
  return hypothesesToPython(generateIn<std::vector<Hypothesis>>(
      threads, inputs, [&](Session &session) { return ein::beamSearch(session, prompt, options); }));
}

std::vector<std::vector<std::pair<std::vector<int64_t>, double>>> PyModel::beamSearchMany(
    const std::vector<std::vector<int64_t>> &prompts, int beams, int64_t maxNewTokens, float lengthPenalty,
    const std::string &earlyStopping, int returnSequences, const std::vector<int64_t> &stopTokens,
    int64_t noRepeatNgramSize, const std::vector<int64_t> &suppressTokens,
    const std::vector<int64_t> &beginSuppressTokens, int threads, int maxSequences, nb::list encoderInputs) {
  const BeamSearchOptions options =
      beamSearchOptions(beams, maxNewTokens, lengthPenalty, earlyStopping, returnSequences, stopTokens,
                        noRepeatNgramSize, suppressTokens, beginSuppressTokens);
  std::unique_ptr<Scheduler> scheduler = schedulerFor(std::max(maxSequences, beams), threads, "beam search");
  FirstRunInputs inputs = firstRunInputsOf(encoderInputs);
  StatusOr<std::vector<std::vector<Hypothesis>>> found = std::vector<std::vector<Hypothesis>>();
  {
    nb::gil_scoped_release released;
    found = ein::beamSearch(*scheduler, prompts, options, inputs.tensors);
  }
  if (!found.ok()) throwStatus(found.status());
  std::vector<std::vector<std::pair<std::vector<int64_t>, double>>> result;
  for (std::vector<Hypothesis> &hypotheses : found.value()) result.push_back(hypothesesToPython(std::move(hypotheses)));
  return result;
}

std::unique_ptr<Scheduler> PyModel::schedulerFor(int maxSequences, int threads, const char *what) const {
  if (placement.device.device != Device::Cpu)
    throw PythonError("DeviceError", std::string(what) + " for many prompts at once runs on the CPU for now");
  SchedulerOptions scheduling;
  scheduling.maxSequences = maxSequences;
  scheduling.threads = threads ? threads : placement.threads;
  auto scheduler = Scheduler::create(loaded, scheduling);
  if (!scheduler.ok()) throwStatus(scheduler.status());
  return std::move(scheduler).value();
}

PyModel::FirstRunInputs PyModel::firstRunInputsOf(nb::list encoderInputs) const {
  FirstRunInputs inputs;
  for (nb::handle row : encoderInputs) {
    inputs.staged.push_back(stageNamedInputs(nb::cast<nb::dict>(row), *loaded, inputAxisDims.get()));
    inputs.tensors.push_back(inputs.staged.back().tensors);
  }
  return inputs;
}

std::vector<std::vector<int64_t>> PyModel::generateMany(const std::vector<std::vector<int64_t>> &prompts,
                                                        int64_t maxNewTokens, float temperature, int64_t topK,
                                                        float topP, uint64_t seed,
                                                        const std::vector<int64_t> &stopTokens, int threads,
                                                        int maxSequences, nb::list encoderInputs) {
  std::unique_ptr<Scheduler> scheduler = schedulerFor(maxSequences, threads, "generating");
  const GenerationOptions options = generationOptions(maxNewTokens, temperature, topK, topP, seed, stopTokens);
  FirstRunInputs inputs = firstRunInputsOf(encoderInputs);
  StatusOr<std::vector<GeneratedSequence>> produced = std::vector<GeneratedSequence>();
  {
    nb::gil_scoped_release released;
    produced = ein::generate(*scheduler, prompts, options, inputs.tensors);
  }
  if (!produced.ok()) throwStatus(produced.status());
  std::vector<std::vector<int64_t>> tokens;
  for (GeneratedSequence &sequence : produced.value()) tokens.push_back(std::move(sequence.tokens));
  return tokens;
}

Runner &PyModel::runnerFor(int threads) {
  std::lock_guard<std::mutex> lock(runnersMutex);
  std::unique_ptr<Runner> &runner = runners[threads];
  if (!runner) {
    auto created = Runner::create(
        loaded, {.threads = threads, .device = placement.device.device, .deviceIndex = placement.device.index});
    if (!created.ok()) {
      runners.erase(threads);
      throwCreateStatus(created.status(), placement.device);
    }
    runner = std::move(created).value();
  }
  return *runner;
}

std::unique_ptr<PyModel> PyModel::load(const std::string &path, int threads, std::optional<std::string> device) {
  auto model = Model::load(path);
  if (model.status().code() == StatusCode::NotFound) throw PythonError("FileNotFoundError", model.status().message());
  if (model.status().code() == StatusCode::IoError) throw PythonError("OSError", model.status().message());
  if (!model.ok()) throwStatus(model.status());
  Placement placement = placementFor(*model.value(), threads, device);
  return std::make_unique<PyModel>(std::move(model).value(), placement);
}

std::unique_ptr<PyModel> PyModel::fromArtifact(const std::vector<uint8_t> &artifact, const std::string &name,
                                               int threads, std::optional<std::string> device,
                                               InputAxisDims axisDims) {
  auto model = Model::loadFromMemory(artifact.data(), artifact.size(), name);
  if (!model.ok()) throwStatus(model.status());
  Placement placement = placementFor(*model.value(), threads, device);
  return std::make_unique<PyModel>(std::move(model).value(), placement, std::move(axisDims));
}

nb::list PyModel::inputs() const { return tensorList(loaded->inputs()); }
nb::list PyModel::outputs() const { return tensorList(loaded->outputs()); }

nb::dict PyModel::dims() const {
  nb::dict dims;
  for (const DimInfo &dim : loaded->dims()) dims[dim.name.c_str()] = nb::make_tuple(dim.min, dim.max);
  return dims;
}
std::string PyModel::describe() const { return describeModel(*loaded); }

void PyModel::save(const std::string &path) const {
  std::span<const std::byte> bytes = loaded->artifactBytes();
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) throw PythonError("OSError", "cannot write " + path);
}

nb::dict PyModel::run(nb::dict inputs, nb::dict out, int threads) {
  Runner &runner = runnerFor(threads ? threads : placement.threads);
  checkNames(inputs, loaded->inputs(), "input");
  checkNames(out, loaded->outputs(), "output");
  StagedInputs staged = stageInputs(inputs, loaded->inputs(), inputAxisDims.get());
  // The outputs' shapes at these inputs, with the run's checks (dims,
  // ranges, agreement) reported before anything is allocated.
  auto shapes = loaded->outputShapes(staged.shapes);
  if (!shapes.ok()) throwStatus(shapes.status());
  PreparedOutputs prepared = prepareOutputs(out, loaded->outputs(), *shapes);
  Status status;
  {
    nb::gil_scoped_release released;
    status = runner.run(staged.tensors, prepared.buffers);
  }
  if (!status.ok()) throwStatus(status);
  return prepared.results;
}

void bindModel(nb::module_ &module) {
  nb::class_<PyModel>(module, "_Model")
      .def_static("load", &PyModel::load, nb::arg("path"), nb::arg("threads"), nb::arg("device").none())
      .def_prop_ro("inputs", &PyModel::inputs)
      .def_prop_ro("outputs", &PyModel::outputs)
      .def_prop_ro("dims", &PyModel::dims)
      .def_prop_ro("threads", &PyModel::threads)
      .def_prop_ro("device", &PyModel::device)
      .def_prop_ro("name", [](const PyModel &self) { return self.model().name(); })
      // Whether generate_many (a scheduler) can run it: a model that serves
      // many sequences, placed on the CPU.
      .def_prop_ro("serves_many_sequences",
                   [](const PyModel &self) {
                     return SequencePool::servesMany(self.model()).ok() && self.where().device.device == Device::Cpu;
                   })
      .def_prop_ro("target", [](const PyModel &self) { return std::string(deviceName(self.model().target())); })
      .def_prop_ro("precision",
                   [](const PyModel &self) { return std::string(precisionName(self.model().precision())); })
      .def("describe", &PyModel::describe)
      .def("inspect", [](const PyModel &self) { return describeModelJson(self.model()); })
      .def("input_shapes",
           [](const PyModel &self, const std::vector<int64_t> &dimValues) {
             auto shapes = self.model().inputShapes(dimValues);
             if (!shapes.ok()) throwStatus(shapes.status());
             return shapes.value();
           },
           nb::arg("dim_values"))
      .def("save", &PyModel::save, nb::arg("path"))
      .def("run", &PyModel::run, nb::arg("inputs"), nb::arg("out"), nb::arg("threads"))
      .def("generate", &PyModel::generate, nb::arg("prompt"), nb::arg("max_new_tokens"), nb::arg("temperature"),
           nb::arg("top_k"), nb::arg("top_p"), nb::arg("seed"), nb::arg("stop_tokens"), nb::arg("threads"),
           nb::arg("inputs"))
      .def("beam_search", &PyModel::beamSearch, nb::arg("prompt"), nb::arg("beams"), nb::arg("max_new_tokens"),
           nb::arg("length_penalty"), nb::arg("early_stopping"), nb::arg("return_sequences"), nb::arg("stop_tokens"),
           nb::arg("no_repeat_ngram_size"), nb::arg("suppress_tokens"), nb::arg("begin_suppress_tokens"),
           nb::arg("threads"), nb::arg("inputs"))
      .def("generate_many", &PyModel::generateMany, nb::arg("prompts"), nb::arg("max_new_tokens"),
           nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"), nb::arg("seed"), nb::arg("stop_tokens"),
           nb::arg("threads"), nb::arg("max_sequences"), nb::arg("encoder_inputs"))
      .def("beam_search_many", &PyModel::beamSearchMany, nb::arg("prompts"), nb::arg("beams"),
           nb::arg("max_new_tokens"), nb::arg("length_penalty"), nb::arg("early_stopping"),
           nb::arg("return_sequences"), nb::arg("stop_tokens"), nb::arg("no_repeat_ngram_size"),
           nb::arg("suppress_tokens"), nb::arg("begin_suppress_tokens"), nb::arg("threads"),
           nb::arg("max_sequences"), nb::arg("encoder_inputs"));
  module.def(
      "inspect_artifact",
      [](const std::string &path) {
        // Read, not run: the weights stay as stored (no packed copy).
        auto model = Model::load(path, {.prepackWeights = false});
        if (!model.ok()) throwStatus(model.status());
        return describeModelJson(*model.value());
      },
      nb::arg("path"), "What ein-inspect --json prints for the artifact at path.");
  module.def("default_thread_count", &defaultThreads,
             "The kernel threads a model gets when threads is not given: the runtime's default.");
  module.def("parse_device", [](const std::string &text) -> std::optional<std::string> {
    std::optional<DeviceSpec> parsed = parseDeviceSpec(text);
    if (!parsed) return std::nullopt;
    return std::string(deviceName(parsed->device));
  }, nb::arg("text"), "The kind of device a spec names (\"cpu\", \"cuda\"), or None for an unknown spec.");
}

}  // namespace ein::python
