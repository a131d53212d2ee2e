// The CUDA executor: runs a verified program on the first CUDA device. At
// creation it allocates the arena (one cudaMalloc of the compiler's
// arena_bytes, planned for the dims' maxima) and uploads the weights once;
// prepare() plans every step of a program (views resolved to device
// addresses, cuBLASLt algorithms chosen): a static model's once, a dynamic
// model's at each new instantiation. It fails with a Status, never a crash,
// when there is no usable device. Each run copies the inputs to the device,
// enqueues the steps on one stream and copies the outputs back.
#pragma once

#include <memory>
#include <string>

#include "backends/backend_table.hpp"

namespace ein::detail {

StatusOr<std::unique_ptr<ExecutorImplementation>> createCudaExecutor(const Program &program, const SessionOptions &options);

// The number of CUDA devices, or an error ("no CUDA device: cudaGetDeviceCount
// returned ...") when there is none; for tests that skip without a GPU.
StatusOr<int> cudaDeviceCount();

}  // namespace ein::detail
