// ein.Session's native half: one ein::Session (an execution context that
// keeps a decoder's key/value cache from run to run) and step-by-step
// generation on it, one token per next() of the Python iterator.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include "ein/generate.hpp"
#include "ein/session.hpp"
#include "model.hpp"

namespace ein::python {

// What the last generation on a session did, as ein-run --generate prints it:
// the prefill (the prompt's run and the first token's choice) and the
// decode steps after it (each a run on the previous token and a choice),
// timed inside the runtime only (not while the caller holds a token).
struct GenerationStats {
  int64_t promptTokens = 0;
  double prefillSeconds = 0;
  int64_t decodeTokens = 0;
  double decodeSeconds = 0;
};

// The state a session and its generations share.
struct SessionCore {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const InputAxisDims> axisDims;
  Placement placement;
  std::unique_ptr<Session> session;
  // Held for the length of each call, so that two Python threads never run
  // one session at once (the second is told, not made to wait).
  std::mutex mutex;
  // Moved on by every call that changes what the session computes from
  // (run, reset, a new generation), so that an older generation knows it
  // may not go on.
  uint64_t epoch = 0;
  std::optional<GenerationStats> lastGeneration;
};

class PyGeneration;

class PySession {
 public:
  PySession(const PyModel &model, int threads);
  explicit PySession(std::shared_ptr<SessionCore> core) : core(std::move(core)) {}

  // Runs on `inputs` (name -> array, every input); for a model with state,
  // appends to it. Returns name -> new NumPy array.
  nanobind::dict run(nanobind::dict inputs);
  int64_t position();
  void reset();
  // A new session of the same model and placement whose state and position
  // are copies of this one's.
  std::unique_ptr<PySession> fork();
  // Starts a generation from the current position; nothing runs until the
  // first next().
  std::unique_ptr<PyGeneration> generate(std::vector<int64_t> prompt, int64_t maxNewTokens, float temperature,
                                         int64_t topK, float topP, uint64_t seed, std::vector<int64_t> stopTokens);
  // (prompt_tokens, prefill_seconds, decode_tokens, decode_seconds) or None.
  nanobind::object lastGeneration();
  int threads() const { return core->placement.threads; }
  std::string device() const { return deviceText(core->placement.device); }

 private:
  std::shared_ptr<SessionCore> core;
};

// One generation, stepped by the caller through ein::Generation (the loop
// ein::generate runs, so the tokens are Model.generate's): nothing is
// computed ahead of the consumer, and stopping early leaves the session at
// the last token it ran. Each step is timed into the session's stats.
class PyGeneration {
 public:
  PyGeneration(std::shared_ptr<SessionCore> core, uint64_t epoch, Generation generation)
      : core(std::move(core)), epoch(epoch), generation(std::move(generation)) {}

  // The next token, or None when the generation is over.
  std::optional<int64_t> next();
  // "length" (max_new_tokens, or the cache full), "stop", or None while it goes on.
  std::optional<std::string> finishReason() const;

 private:
  std::shared_ptr<SessionCore> core;
  uint64_t epoch;
  Generation generation;  // on core->session
};

void bindSession(nanobind::module_ &module);

}  // namespace ein::python
