// The native module ein._ein; the package's Python code (python/src/ein)
// gives it its public API and documentation.
#include <nanobind/nanobind.h>

#include "batching.hpp"
#include "compile.hpp"
#include "errors.hpp"
#include "model.hpp"
#include "scheduler.hpp"
#include "session.hpp"

NB_MODULE(_ein, module) {
  module.doc() = "ein's native module: the compiler library and the runtime (use the ein package)";
  ein::python::registerErrorTranslator();
  ein::python::bindModel(module);
  ein::python::bindCompile(module);
  ein::python::bindSession(module);
  ein::python::bindScheduler(module);
  ein::python::bindBatching(module);
}
