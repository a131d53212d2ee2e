// Token generation with a decoder whose key/value cache is session state
// (LANGUAGE.md "Session state"): a prefill over the prompt, then one decode
// step per token, each feeding the token it chose. Ids in, ids out: the
// tokenizer stays outside (README "Generating text").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ein/sequence_pool.hpp"
#include "ein/session.hpp"
#include "ein/status.hpp"

namespace ein {

// Why a generation ended.
enum class FinishReason {
  None,       // it has not ended
  Length,     // maxNewTokens were produced (with 0: the prompt ran)
  Stop,       // a stop token was produced (it is returned)
  CacheFull,  // the state (key/value cache) holds no row for another token
  Cancelled,  // its caller cancelled it, or the scheduler shut down (ein/scheduler.hpp)
};
// "length" (both Length and CacheFull, as the OpenAI API says), "stop",
// "cancelled", or "" for None.
const char *finishReasonName(FinishReason reason);

struct GenerationOptions {
  int64_t maxNewTokens = 32;
  // Generation stops after producing any of these (it is returned).
  std::vector<int64_t> stopTokens;
  // 0: greedy (the first most likely token). Otherwise the logits are
  // divided by it, cut to the topK most likely (0: all) and to the smallest
  // set whose probability reaches topP (1: all), and a token drawn with a
  // generator seeded by `seed`: the same seed gives the same tokens.
  float temperature = 0.0f;
  int64_t topK = 0;
  float topP = 1.0f;
  uint64_t seed = 0;
  // The model's ids input ([1, t], i32 or i64) and logits output ([1, t,
  // vocab] f32, the last row read); empty: "ids" and "logits", or the model's
  // only integer input (but an encoder's) and only output. An encoder-
  // decoder's encoder inputs (read at the first run only) are set on the
  // session before: the decoder attends to what it keeps of them.
  std::string idsInput, logitsOutput;
  // Called with each new token; returning false stops generation.
  std::function<bool(int64_t token)> onToken;
  // Scheduler requests only (ein/scheduler.hpp): called once when the
  // request ends, after its last onToken and before wait() returns, with why
  // and the error that ended it (ok otherwise), on the scheduler's thread or
  // the one that shut it down; a streaming server's cue to close the stream.
  std::function<void(FinishReason reason, const Status &status)> onEnd;
};


// Generation one token at a time, for callers that stream tokens, stop at any
// point or time each phase: the first next() runs the prompt and chooses a
// token, each later one runs the previous token and chooses the next, so
// nothing is computed ahead of the caller and stopping early leaves the
// session at the last token it ran. generate() is a loop over next().
// The session must outlive the generation and run nothing else meanwhile.
class Generation {
 public:
  // Checks the session's model (state, the ids input and logits output),
  // the options and the prompt (not empty; every id inside the vocabulary
  // of the ids input; fitting the cache from the session's position, with
  // the model's message when it does not); runs nothing. onToken is not
  // called: the caller has each token.
  static StatusOr<Generation> start(Session &session, std::span<const int64_t> prompt, GenerationOptions options);

  // The next token, or nullopt once generation has ended: maxNewTokens
  // produced (with 0, after the prompt's run), a stop token returned by the
  // call before, or the cache full (the tokens so far stand; the session
  // stays at the last token it ran). An error ends it too.
  StatusOr<std::optional<int64_t>> next();
  bool prefilled() const { return started_; }  // whether the prompt has run
  int64_t produced() const { return produced_; }
  FinishReason finishReason() const { return finish_; }

 private:
  Generation() = default;

  Session *session_ = nullptr;
  std::vector<int64_t> prompt_;
  GenerationOptions options_;
  const TensorInfo *ids_ = nullptr;  // in the session's model
  std::string logits_;
  uint64_t samplerState_ = 0;
  int64_t produced_ = 0, last_ = 0;
  bool started_ = false, done_ = false;
  FinishReason finish_ = FinishReason::None;
};

// Runs the prompt from the session's current position (resetState() first to
// start a new sequence), then generates; returns the new tokens. A prompt
// that does not fit the model's cache fails before anything runs; a
// generation that fills the cache ends there with the tokens it made
// (`finish`, when given, says why it ended).
StatusOr<std::vector<int64_t>> generate(Session &session, std::span<const int64_t> prompt,
                                        const GenerationOptions &options = {}, FinishReason *finish = nullptr);

// One prompt's generation among many.
struct GeneratedSequence {
  std::vector<int64_t> tokens;
  FinishReason finish = FinishReason::None;
};

// Generates for every prompt with the pool's sequences, continuously batched:
// each run takes the next token of every sequence going and, within the
// model's tokens per run, the prompts of sequences starting (as a sequence
// ends, the next prompt takes its place). Each prompt's tokens are those it
// would get alone (greedy; sampling draws from options.seed per prompt).
// A prompt that cannot fit the cache fails the call before anything runs;
// options.onToken is not called. The pool's sequences are reset as used.
StatusOr<std::vector<GeneratedSequence>> generate(SequencePool &pool,
                                                  std::span<const std::vector<int64_t>> prompts,
                                                  const GenerationOptions &options = {});

// The token `options` choose from one row of logits (greedy or sampled), with
// `state` the sampling generator's state (seeded from options.seed by generate()).
int64_t chooseToken(std::span<const float> logits, const GenerationOptions &options, uint64_t &state);

}  // namespace ein
