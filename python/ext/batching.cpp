#include "batching.hpp"

#include <algorithm>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "ein/batching.hpp"
#include "errors.hpp"

namespace nb = nanobind;

namespace ein::python {
namespace {

DType parseDType(const std::string &name) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool, DType::I8, DType::I4})
    if (name == dtypeName(dtype)) return dtype;
  throw nb::value_error(("unknown dtype \"" + name + "\"").c_str());
}

// A TensorInfo from a Python one (ein.TensorInfo or the like: name, dtype
// name, shape of sizes and dim expressions, id_bound).
TensorInfo tensorInfo(nb::handle info) {
  TensorInfo tensor;
  tensor.name = nb::cast<std::string>(info.attr("name"));
  tensor.dtype = parseDType(nb::cast<std::string>(info.attr("dtype")));
  nb::object bound = info.attr("id_bound");
  tensor.upperBound = bound.is_none() ? 0 : nb::cast<int64_t>(bound);
  for (nb::handle axis : info.attr("shape")) {
    if (nb::isinstance<nb::str>(axis)) {
      tensor.shape.push_back(-1);
      tensor.dims.push_back(nb::cast<std::string>(axis));
    } else {
      tensor.shape.push_back(nb::cast<int64_t>(axis));
      tensor.dims.emplace_back();
    }
  }
  return tensor;
}

std::vector<TensorInfo> tensorInfos(nb::handle infos) {
  std::vector<TensorInfo> tensors;
  for (nb::handle info : infos) tensors.push_back(tensorInfo(info));
  return tensors;
}

}  // namespace

void bindBatching(nb::module_ &module) {
  nb::class_<BatchSignature>(module, "BatchSignature")
      .def(
          "__init__",
          [](BatchSignature *self, const std::vector<std::tuple<std::string, int64_t, int64_t>> &dims, nb::handle inputs,
             nb::handle outputs, const std::vector<std::string> &padDims) {
            std::vector<DimInfo> dimInfos;
            for (const auto &[name, min, max] : dims) dimInfos.push_back({name, min, max});
            auto signature = BatchSignature::create(dimInfos, tensorInfos(inputs), tensorInfos(outputs), padDims);
            if (!signature.ok()) throw nb::value_error(signature.status().message().c_str());
            new (self) BatchSignature(std::move(signature).value());
          },
          nb::arg("dims"), nb::arg("inputs"), nb::arg("outputs"), nb::arg("pad_dims"))
      .def_prop_ro("batch_dim", [](const BatchSignature &signature) { return signature.dims[signature.batchDim].name; })
      .def(
          "check",
          [](const BatchSignature &signature, const std::vector<std::pair<std::string, AnyArray>> &arrays) {
            std::vector<std::vector<int64_t>> shapes;
            std::vector<InputTensor> inputs;
            shapes.reserve(arrays.size());
            for (const auto &[name, array] : arrays) {
              if (!isCContiguous(array)) throw nb::value_error("check takes C-contiguous arrays");
              auto expected = std::find_if(signature.inputs.begin(), signature.inputs.end(),
                                           [&](const BatchedTensor &tensor) { return tensor.name == name; });
              // An element type the runtime names, or the array's own name for one it has none for.
              auto type = inputElementType(array.dtype(), expected == signature.inputs.end() ? DType::F32 : expected->dtype);
              shapes.push_back(shapeOf(array));
              if (!type)
                throw PythonError("InputError",
                                  "input \"" + name + "\" has dtype " + dtypeText(array.dtype()) + ", which no model takes");
              inputs.emplace_back(name, *type, shapes.back(), array.data(), array.nbytes());
            }
            auto dims = checkRequest(signature, inputs);
            if (!dims.ok()) throwStatus(dims.status());
            return std::move(dims).value();
          },
          nb::arg("arrays"),
          "The request's value of every dim (-1 where no input names it); InputError says what is wrong.")
      .def(
          "plan",
          [](const BatchSignature &signature, const std::vector<std::vector<int64_t>> &requestDims, double maxPadding) {
            return planRuns(signature, requestDims, maxPadding);
          },
          nb::arg("request_dims"), nb::arg("max_padding"), "Runs of request indices, cheapest first (planRuns).");
}

}  // namespace ein::python
