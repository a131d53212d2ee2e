// Runs a program on the host with the reference CPU kernels.
#pragma once

#include <memory>

#include "backends/backend_table.hpp"

namespace ein::detail {

StatusOr<std::unique_ptr<ExecutorImplementation>> createCpuExecutor(const Program &program, const SessionOptions &options);

}  // namespace ein::detail
