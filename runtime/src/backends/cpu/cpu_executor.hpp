// Runs a program on the host with the reference CPU kernels.
#pragma once

#include <memory>

#include "backends/backend_table.hpp"

namespace ein::detail {

// The states of `slots`, one per sequence runSequences may run at once,
// and their paged states' pool of blocks.
StatusOr<std::unique_ptr<ExecutorImplementation>> createCpuExecutor(const Program &program, const SessionOptions &options,
                                                                    const StateSlots &slots = {});

}  // namespace ein::detail
