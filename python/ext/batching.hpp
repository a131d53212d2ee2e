// ein._ein.BatchSignature: the runtime's dynamic batching (ein/batching.hpp)
// for ein.serve's Python route (ein._batching), so that both routes check,
// group and pad requests by the same code.
#pragma once

#include <nanobind/nanobind.h>

namespace ein::python {

void bindBatching(nanobind::module_ &module);

}  // namespace ein::python
