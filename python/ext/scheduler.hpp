// ein._Scheduler and ein._Request: ein::Scheduler for Python (the package's
// ein.Scheduler wraps them). Every call that may wait releases the GIL.
#pragma once

#include <nanobind/nanobind.h>

namespace ein::python {

void bindScheduler(nanobind::module_ &module);

}  // namespace ein::python
