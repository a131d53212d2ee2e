// One execution context of a model: it owns the arena (allocated once, when
// the session is created), a copy of each input and the output buffers.
// Runs reuse them, so running allocates nothing. Sessions share the model and
// its weights.
//
//   auto session = ein::Session::create(model.value(), {.threads = 1, .device = ein::Device::Cpu});
//   session.value()->setInput("img", ein::DType::F32, {1, 3, 224, 224}, pixels, sizeof pixels);
//   session.value()->run();
//   ein::StatusOr<ein::TensorRef> logits = session.value()->output("logits");
//
// A session is single-threaded: set its inputs, run it and read its outputs
// on one thread. To run one model from many threads, use ein::Runner
// (runner.hpp), which gives each concurrent call its own context; or give
// each thread its own session. A session may move between threads (e.g. a
// pool of sessions that workers check out), one whole set/run/read sequence
// at a time. It guards against being shared, and fails with StatusCode::Busy
// instead of computing with another thread's inputs or scratch:
//   - a call (setInput, run, output) made while another thread is inside a
//     call on the same session fails at once;
//   - run() fails if an input was last set by another thread (the inputs of
//     one run are those its own thread set: two threads that interleave
//     their setInput calls would otherwise each run on a mix);
//   - output() fails if the last run was made by another thread.
// What it cannot see: a TensorRef that output() returned is a view, valid
// until the next run on any thread; reading it while another thread runs the
// session is a data race. Copy outputs out before handing the session on.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "ein/model.hpp"
#include "ein/status.hpp"
#include "ein/types.hpp"

namespace ein {

namespace detail {
class ExecutionContext;
struct SessionTestPeer;  // lets the tests hold a session's claim (concurrency_test.cpp)
}  // namespace detail

struct SessionOptions {
  // Worker threads (the reference CPU kernels use one); by default the CPUs
  // this process may use, as ein-run, the C API and Python default to.
  int threads = defaultThreadCount();
  Device device = Device::Cpu;
  // Which device of its kind (parseDeviceSpec's "cuda:1" is 1). -1, the
  // default: CUDA device $EIN_CUDA_DEVICE, else 0. The CPU has only 0.
  int deviceIndex = -1;
};

// A read-only look at an output; valid until the next run() (from any
// thread) or the session's end.
struct TensorRef {
  DType dtype = DType::F32;
  std::span<const int64_t> shape;
  const void *data = nullptr;
  size_t bytes = 0;
};

class Session {
 public:
  // Fails if the device is not built in, the artifact targets another device,
  // or the memory cannot be allocated.
  static StatusOr<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model, SessionOptions options = {});

  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  const Model &model() const { return *model_; }
  const std::shared_ptr<const Model> &sharedModel() const { return model_; }
  const SessionOptions &options() const { return options_; }

  // Copies `bytes` bytes from `data` into input `name`. The dtype and shape
  // must be the model's: equal on every fixed axis, and on an axis that
  // depends on the model's dims (TensorInfo::dims) any size they allow (a
  // bare dim within its range here; run() checks that the inputs agree on
  // the dims and the model's run-time checks). `bytes` is the shape's byte
  // size. The caller's buffer is not kept: it may be reused as soon as this
  // returns. For a model with dims, the session's copy grows to the largest
  // input set so far (an allocation only then).
  // The element type may also be one the input conversion policy converts
  // to the input's dtype (types.hpp: int64 ids for an i32 input, f64 for
  // f32), `bytes` then the shape's byte size in that type; a value that does
  // not fit the input's type is an error naming the element.
  Status setInput(std::string_view name, ElementType type, std::span<const int64_t> shape, const void *data,
                  size_t bytes);
  Status setInput(std::string_view name, DType dtype, std::span<const int64_t> shape, const void *data,
                  size_t bytes) {
    return setInput(name, elementType(dtype), shape, data, bytes);
  }
  Status setInput(std::string_view name, DType dtype, std::initializer_list<int64_t> shape, const void *data,
                  size_t bytes) {
    return setInput(name, elementType(dtype), std::span<const int64_t>(shape.begin(), shape.size()), data, bytes);
  }

  // Runs every step; every input must have been set, by this thread (they
  // stay set across runs). An input read only at a sequence's first run
  // (TensorInfo::firstRunOnly, an encoder's) is needed at position 0 only:
  // later runs skip what reads it, and setting it then is an error
  // (resetState() starts a new sequence to encode anew). A model with dims reads them from the input
  // shapes; new dims instantiate its program (the same dims as one of the
  // last four distinct ones reuse theirs), and output buffers grow to the
  // largest outputs so far.
  Status run();

  // A model with state (a key/value cache, LANGUAGE.md "Session state")
  // keeps it here from run to run. position() is the rows appended to its
  // states since the session began or was reset, the value of the model's
  // position dim: each successful run appends and moves it on; a run that
  // fails (an append past a state's capacity included) leaves both as they
  // were. resetState() starts over at 0; copyStateFrom() makes this
  // session's state and position the other's (same model), to fork a
  // prefix. Models without state have position 0 always.
  int64_t position() const;
  Status resetState();
  Status copyStateFrom(const Session &other);

  // The shape input `index` binds its dims with at the next run: as last
  // set, or for an input read at the first run only, at a later run, as at
  // the sequence's first run. Empty while it is unset.
  std::span<const int64_t> inputShape(size_t index) const;

  // The value input `index` was last set with, in the input's type (a
  // converted copy); an error while it is unset.
  StatusOr<TensorRef> input(size_t index) const;

  size_t outputCount() const;
  // The output of the last run, with its actual shape (for a model with
  // dims, the shape at the run's dims; an error before the first run).
  StatusOr<TensorRef> output(size_t index) const;
  StatusOr<TensorRef> output(std::string_view name) const;

 private:
  friend struct detail::SessionTestPeer;
  size_t instantiations() const;  // for SessionTestPeer
  class Claim;  // holds inUse_ for the length of one call

  Session(std::shared_ptr<const Model> model, SessionOptions options);
  Status busy(const std::string &what) const;

  std::shared_ptr<const Model> model_;
  SessionOptions options_;
  // The executor, the program at the last run's dims, and the input copies
  // and output buffers.
  std::unique_ptr<detail::ExecutionContext> context_;
  std::vector<bool> inputIsSet_;
  std::vector<std::vector<int64_t>> inputShapes_;  // the shape each input was last set with
  // Of the inputs read at the first run only: their shapes at this
  // sequence's first run, which bind their dims at later runs.
  std::vector<std::vector<int64_t>> firstRunShapes_;
  int64_t position_ = 0;

  // Whether a thread is inside setInput, run or output. The fields below are
  // only touched while holding it, which orders them between threads.
  mutable std::atomic<bool> inUse_{false};
  std::vector<std::thread::id> inputSetBy_;  // per input: the thread that last set it
  std::thread::id lastRunBy_;                // none before the first run
};

}  // namespace ein
