// Runs one model from any number of threads at once. Each call of run()
// borrows an execution context (arena, executor, per-thread kernel scratch,
// staging buffers) from a pool, so concurrent calls never share working
// memory, and returns it when done. The pool starts with one context and
// grows only when more calls are in flight than it has contexts (optionally
// capped): a server with W worker threads ends up with at most W contexts,
// and a run allocates nothing once the pool has grown (except the outputs
// the returning overload of run() makes for the caller). A model with dims
// runs each call at its inputs' shapes: a context keeps the program
// instantiated at the dims of its last four distinct calls and instantiates
// (decodes and verifies the steps again) only for other dims; its
// staging buffers and kernel scratch grow to the largest call it has served,
// the arena never (it is planned for the dims' maxima). On the CPU the
// weights (and their prepacked copies) live in the Model and are shared by
// every context; on CUDA each context holds its own device arena and copy of
// the weights, so cap the pool there (maxConcurrentRuns).
//
//   auto runner = ein::Runner::create(model.value(), {.threads = 1});
//   // from any thread:
//   std::vector<int64_t> shape = {1, 3, 224, 224};
//   ein::InputTensor img{"img", ein::DType::F32, shape, pixels.data(), pixels.size() * sizeof(float)};
//   std::vector<float> logits(1000);
//   ein::OutputBuffer out{"logits", logits.data(), logits.size() * sizeof(float)};
//   ein::Status status = runner.value()->run({img}, {out});
//
// Threads: `threads` is per call. Each context has its own kernel thread
// pool of `threads` threads (the caller plus threads - 1 workers), so C
// concurrent calls keep up to C x threads threads busy. For a server that
// calls run() from many threads, threads = 1 (the default) is usually best;
// to bound memory and threads, set maxConcurrentRuns: calls beyond it wait
// for a context to come free instead of creating one.
//
// Compare Session (session.hpp): one context that the caller owns and uses
// from one thread at a time, with inputs copied in and outputs read in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ein/model.hpp"
#include "ein/status.hpp"
#include "ein/types.hpp"

namespace ein {

namespace detail {
class RunContextPool;
}

struct RunnerOptions {
  int threads = 1;  // kernel threads per call (see above)
  Device device = Device::Cpu;
  int deviceIndex = -1;  // as SessionOptions::deviceIndex
  // The most contexts the pool creates, so the most calls that compute at
  // once; further calls wait. 0: no cap (one context per call in flight).
  int maxConcurrentRuns = 0;
};

// Where one call writes output `name`: `bytes` must be the output's byte size
// at this call's input shapes (Model::outputs() gives dtype and shape; for a
// model with dims, Model::outputShapes(inputShapes) the actual shape, or use
// the run() overload that returns the outputs). The buffer must not overlap
// an input or another output.
struct OutputBuffer {
  std::string_view name;
  void *data = nullptr;
  size_t bytes = 0;
};

// An output that the caller owns, returned by run(inputs).
struct OutputTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;
};

class Runner {
 public:
  // Creates the first context at once, so an unavailable device, a device
  // mismatch or too little memory fails here, as Session::create does.
  static StatusOr<std::unique_ptr<Runner>> create(std::shared_ptr<const Model> model, RunnerOptions options = {});

  ~Runner();  // no call may still be running
  Runner(const Runner &) = delete;
  Runner &operator=(const Runner &) = delete;

  const Model &model() const { return *model_; }
  const RunnerOptions &options() const { return options_; }

  // Thread-safe: runs the model on `inputs` (every model input exactly once)
  // and writes the outputs named in `outputs` into the caller's buffers;
  // outputs not named are computed and dropped. Nothing the caller passes is
  // kept after the call returns. On an error the buffers' contents are
  // unspecified.
  Status run(std::span<const InputTensor> inputs, std::span<const OutputBuffer> outputs);
  // Thread-safe: the same, returning every output in the model's order, in
  // memory the caller owns, with its actual shape.
  StatusOr<std::vector<OutputTensor>> run(std::span<const InputTensor> inputs);
  // For braced lists: runner->run({image}, {logits}).
  Status run(std::initializer_list<InputTensor> inputs, std::initializer_list<OutputBuffer> outputs) {
    return run(std::span<const InputTensor>(inputs.begin(), inputs.size()),
               std::span<const OutputBuffer>(outputs.begin(), outputs.size()));
  }
  StatusOr<std::vector<OutputTensor>> run(std::initializer_list<InputTensor> inputs) {
    return run(std::span<const InputTensor>(inputs.begin(), inputs.size()));
  }

  // How many contexts the pool holds (idle or in use); for tests and tuning.
  size_t contextCount() const;

 private:
  Runner(std::shared_ptr<const Model> model, RunnerOptions options);

  std::shared_ptr<const Model> model_;
  RunnerOptions options_;
  std::unique_ptr<detail::RunContextPool> pool_;
};

}  // namespace ein
