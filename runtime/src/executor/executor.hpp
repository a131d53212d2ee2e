// The seam between a session and a device. A session validates and holds the
// host-side inputs and outputs; an executor runs the verified program on one
// device. The CPU executor runs the reference kernels; a CUDA executor would
// own device memory for the arena and weights, upload the inputs and download
// the outputs inside run().
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "ein/session.hpp"
#include "ein/status.hpp"
#include "program.hpp"

namespace ein::detail {

class Executor {
 public:
  virtual ~Executor() = default;
  // inputs[i] and outputs[i] are host buffers of the model's i-th input and
  // output, of the sizes the model gives. Errors name the failing step.
  virtual Status run(std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs) = 0;
};

// Whether this build can run on `device`, and the error when it cannot.
bool deviceAvailable(Device device);
Status deviceUnavailable(Device device);

// Prepares `program` (which must outlive the executor) for `options.device`:
// allocates its memory and chooses each step's kernel.
StatusOr<std::unique_ptr<Executor>> createExecutor(const Program &program, const SessionOptions &options);

}  // namespace ein::detail
