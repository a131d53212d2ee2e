// Errors on their way to Python: thrown as PythonError, raised as the
// exception class of the same name in ein._errors (the Python package defines
// the classes, so that they carry attributes and docstrings).
#pragma once

#include <stdexcept>
#include <string>

#include "ein/status.hpp"

namespace ein::python {

class PythonError : public std::runtime_error {
 public:
  // `exceptionClass`: "InputError", "ArtifactError", "Error"; `name`: the
  // input or output concerned, if one is.
  PythonError(std::string exceptionClass, const std::string &message, std::string name = "")
      : std::runtime_error(message), exceptionClass(std::move(exceptionClass)), name(std::move(name)) {}

  std::string exceptionClass;
  std::string name;
};

// The exception a runtime error becomes: inputs the caller got wrong are
// InputError, a malformed artifact ArtifactError, the rest Error.
[[noreturn]] void throwStatus(const Status &status);

// Turns PythonError into the Python exception; called once at import.
void registerErrorTranslator();

}  // namespace ein::python
