// Runs a program on the host with the reference CPU kernels.
#pragma once

#include <memory>

#include "backends/executor.hpp"

namespace ein::detail {

StatusOr<std::unique_ptr<Executor>> createCpuExecutor(const Program &program, const SessionOptions &options);

}  // namespace ein::detail
