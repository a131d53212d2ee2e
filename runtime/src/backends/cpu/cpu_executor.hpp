// Runs a program on the host with the reference CPU kernels.
#pragma once

#include <memory>

#include "backends/backend_table.hpp"

namespace ein::detail {

// `sequenceSlots` states, one per sequence runSequences may run at once.
StatusOr<std::unique_ptr<ExecutorImplementation>> createCpuExecutor(const Program &program, const SessionOptions &options,
                                                                    int sequenceSlots = 1);

}  // namespace ein::detail
