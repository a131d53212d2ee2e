#include "errors.hpp"

#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace ein::python {
namespace {

// The class in ein._errors, or a builtin exception ("FileNotFoundError").
nb::object exceptionClass(const std::string &name) {
  nb::module_ errors = nb::module_::import_("ein._errors");
  if (nb::hasattr(errors, name.c_str())) return errors.attr(name.c_str());
  return nb::module_::import_("builtins").attr(name.c_str());
}

void raise(const PythonError &error) {
  nb::object type = exceptionClass(error.exceptionClass);
  nb::object exception = type(error.what());
  if (!error.name.empty()) nb::setattr(exception, "name", nb::str(error.name.c_str()));
  PyErr_SetObject(type.ptr(), exception.ptr());
}

}  // namespace

void throwStatus(const Status &status) {
  switch (status.code()) {
    case StatusCode::InvalidArgument:
    case StatusCode::NotFound:
    case StatusCode::OutOfRange: throw PythonError("InputError", status.message());
    case StatusCode::InvalidArtifact: throw PythonError("ArtifactError", status.message());
    default: throw PythonError("Error", status.toString());
  }
}

void registerErrorTranslator() {
  nb::register_exception_translator([](const std::exception_ptr &thrown, void *) {
    try {
      std::rethrow_exception(thrown);
    } catch (const PythonError &error) {
      raise(error);
    }
  });
}

}  // namespace ein::python
