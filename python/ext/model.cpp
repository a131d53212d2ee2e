#include "model.hpp"

#include <cstdlib>
#include <fstream>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "ein/describe.hpp"
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

nb::list tensorList(const std::vector<TensorInfo> &tensors) {
  nb::list list;
  for (const TensorInfo &tensor : tensors)
    list.append(nb::make_tuple(tensor.name, dtypeName(tensor.dtype), nb::tuple(nb::cast(tensor.shape)),
                               tensor.upperBound));
  return list;
}

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

// The array given for `tensor`, checked against its dtype and shape.
AnyArray inputArray(nb::dict inputs, const TensorInfo &tensor) {
  std::string expected = typeText(tensor.dtype, tensor.shape);
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
  std::vector<int64_t> shape = shapeOf(array);
  if (!holds(array.dtype(), tensor.dtype) || shape != tensor.shape)
    throw PythonError("InputError",
                      "input " + quoted(tensor.name) + " expects " + expected + ", got " +
                          dtypeText(array.dtype()) + shapeText(shape),
                      tensor.name);
  return array;
}

// The caller's buffer for `tensor`, which the run writes in place.
WritableArray outputBuffer(nb::handle value, const TensorInfo &tensor) {
  std::string expected = typeText(tensor.dtype, tensor.shape);
  WritableArray buffer;
  std::string problem;
  if (!nb::try_cast(value, buffer))
    problem = "got a " + nb::cast<std::string>(nb::type_name(value.type())) +
              ", which is not a writable CPU array";
  else if (AnyArray view(buffer); !holds(view.dtype(), tensor.dtype) || shapeOf(view) != tensor.shape)
    problem = "got " + dtypeText(view.dtype()) + shapeText(shapeOf(view));
  else if (!isCContiguous(view))
    problem = "got a non-contiguous array";
  if (!problem.empty())
    throw PythonError("InputError", "out= buffer for output " + quoted(tensor.name) + " must be a C-contiguous " +
                                        expected + " array, " + problem,
                      tensor.name);
  return buffer;
}

// A new NumPy array for `tensor`, 64-byte aligned, owning its memory.
nb::ndarray<nb::numpy> newOutputArray(const TensorInfo &tensor) {
  // aligned_alloc wants a multiple of the alignment, and some bytes even
  // for an empty tensor.
  void *data = std::aligned_alloc(64, (tensor.byteSize() / 64 + 1) * 64);
  if (!data) throw std::bad_alloc();
  nb::capsule owner(data, [](void *pointer) noexcept { std::free(pointer); });
  std::vector<size_t> shape(tensor.shape.begin(), tensor.shape.end());
  return nb::ndarray<nb::numpy>(data, shape.size(), shape.data(), owner, nullptr, numpyDType(tensor.dtype));
}

// The inputs as the runner reads them. `arrays` keeps the caller's arrays
// imported and `copies` the C-order copies of strided views until the run
// is over.
struct StagedInputs {
  std::vector<AnyArray> arrays;
  std::vector<std::vector<std::byte>> copies;
  std::vector<InputTensor> tensors;
};

StagedInputs stageInputs(nb::dict inputs, const std::vector<TensorInfo> &infos) {
  StagedInputs staged;
  for (const TensorInfo &tensor : infos) {
    const AnyArray &array = staged.arrays.emplace_back(inputArray(inputs, tensor));
    const void *data = array.data();
    // The runner reads contiguous memory in place; a strided view is copied.
    if (!isCContiguous(array)) {
      std::vector<std::byte> &copy = staged.copies.emplace_back(array.nbytes());
      copyInCOrder(array, copy.data());
      data = copy.data();
    }
    staged.tensors.push_back({tensor.name, tensor.dtype, tensor.shape, data, tensor.byteSize()});
  }
  return staged;
}

// Where the run writes each output: the caller's out= buffer or a new NumPy
// array. `results` maps every output to its array and holds the new ones;
// `given` keeps the caller's buffers imported.
struct PreparedOutputs {
  nb::dict results;
  std::vector<WritableArray> given;
  std::vector<OutputBuffer> buffers;
};

PreparedOutputs prepareOutputs(nb::dict out, const std::vector<TensorInfo> &infos) {
  PreparedOutputs prepared;
  for (const TensorInfo &tensor : infos) {
    void *data = nullptr;
    if (out.contains(tensor.name.c_str())) {
      nb::object buffer = out[tensor.name.c_str()];
      data = prepared.given.emplace_back(outputBuffer(buffer, tensor)).data();
      prepared.results[tensor.name.c_str()] = buffer;
    } else {
      nb::ndarray<nb::numpy> array = newOutputArray(tensor);
      data = array.data();
      prepared.results[tensor.name.c_str()] = nb::cast(array);
    }
    prepared.buffers.push_back({tensor.name, data, tensor.byteSize()});
  }
  return prepared;
}

}  // namespace

PyModel::PyModel(std::shared_ptr<const Model> model, int threads) : loaded(std::move(model)), defaultThreads(threads) {
  // The first runner now, so that a model that cannot run here fails at load.
  runnerFor(threads);
}

Runner &PyModel::runnerFor(int threads) {
  std::lock_guard<std::mutex> lock(runnersMutex);
  std::unique_ptr<Runner> &runner = runners[threads];
  if (!runner) {
    auto created = Runner::create(loaded, {.threads = threads});
    if (!created.ok()) {
      runners.erase(threads);
      throwStatus(created.status());
    }
    runner = std::move(created).value();
  }
  return *runner;
}

std::unique_ptr<PyModel> PyModel::load(const std::string &path, int threads) {
  auto model = Model::load(path);
  if (model.status().code() == StatusCode::NotFound) throw PythonError("FileNotFoundError", model.status().message());
  if (model.status().code() == StatusCode::IoError) throw PythonError("OSError", model.status().message());
  if (!model.ok()) throwStatus(model.status());
  return std::make_unique<PyModel>(std::move(model).value(), threads);
}

std::unique_ptr<PyModel> PyModel::fromArtifact(const std::vector<uint8_t> &artifact, const std::string &name,
                                               int threads) {
  auto model = Model::loadFromMemory(artifact.data(), artifact.size(), name);
  if (!model.ok()) throwStatus(model.status());
  return std::make_unique<PyModel>(std::move(model).value(), threads);
}

nb::list PyModel::inputs() const { return tensorList(loaded->inputs()); }
nb::list PyModel::outputs() const { return tensorList(loaded->outputs()); }
std::string PyModel::describe() const { return describeModel(*loaded); }

void PyModel::save(const std::string &path) const {
  std::span<const std::byte> bytes = loaded->artifactBytes();
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) throw PythonError("OSError", "cannot write " + path);
}

nb::dict PyModel::run(nb::dict inputs, nb::dict out, int threads) {
  Runner &runner = runnerFor(threads ? threads : defaultThreads);
  checkNames(inputs, loaded->inputs(), "input");
  checkNames(out, loaded->outputs(), "output");
  StagedInputs staged = stageInputs(inputs, loaded->inputs());
  PreparedOutputs prepared = prepareOutputs(out, loaded->outputs());
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
      .def_static("load", &PyModel::load, nb::arg("path"), nb::arg("threads"))
      .def_prop_ro("inputs", &PyModel::inputs)
      .def_prop_ro("outputs", &PyModel::outputs)
      .def_prop_ro("threads", &PyModel::threads)
      .def_prop_ro("name", [](const PyModel &self) { return self.model().name(); })
      .def_prop_ro("target", [](const PyModel &self) { return std::string(deviceName(self.model().target())); })
      .def_prop_ro("precision",
                   [](const PyModel &self) { return std::string(precisionName(self.model().precision())); })
      .def("describe", &PyModel::describe)
      .def("save", &PyModel::save, nb::arg("path"))
      .def("run", &PyModel::run, nb::arg("inputs"), nb::arg("out"), nb::arg("threads"));
}

}  // namespace ein::python
