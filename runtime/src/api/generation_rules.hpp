// The rules one generation follows, alone in a Session (generate.cpp) or
// among many in a Scheduler (scheduler.cpp): its checks and when it ends.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ein/generate.hpp"
#include "ein/model.hpp"
#include "ein/status.hpp"

namespace ein::detail {

// The model's ids input and logits output named so (empty: "ids" and
// "logits", or the only input and output that can be).
StatusOr<const TensorInfo *> idsInputOf(const Model &model, const std::string &name);
StatusOr<const TensorInfo *> logitsOutputOf(const Model &model, const std::string &name);
// One run over `tokens` as the ids [1, n] (converted to the input's type by
// the session); the last row of logits, valid until the session's next run.
StatusOr<std::span<const float>> runTokens(Session &session, const TensorInfo &ids, const std::string &logitsName,
                                           std::span<const int64_t> tokens);

// What a generation (or beam search: `what`) from `prompt` in `session`
// reads and writes: the model's ids input and logits output, once the model
// keeps state, the prompt is not empty, lies in the vocabulary and fits the
// cache from the session's position.
struct DecoderBindings {
  const TensorInfo *ids = nullptr;
  std::string logits;
};
StatusOr<DecoderBindings> checkDecoder(const Session &session, std::span<const int64_t> prompt,
                                       const std::string &idsInput, const std::string &logitsOutput, const char *what);

Status checkGenerationOptions(const GenerationOptions &options);
// Every id of `prompt` inside the vocabulary of input `ids`, if it has one;
// `which` names the prompt in the message ("prompt", "prompt 3").
Status checkPromptIds(std::span<const int64_t> prompt, const TensorInfo &ids, const std::string &which);
// Whether a session's run (the next one, or one at `position`) of `tokens`
// ids in `ids`, the other inputs at their shapes in the session
// (Session::inputShape), fits the model (its dims' ranges and checks: the
// cache's rows among them), with the model's message when it does not.
Status fitsAt(const Session &session, const TensorInfo &ids, int64_t tokens,
              std::optional<int64_t> position = std::nullopt);
// Why generation ends after choosing `token`, its `produced`-th: a stop
// token, or the last of maxNewTokens; None when it goes on.
FinishReason finishAfter(int64_t token, int64_t produced, const GenerationOptions &options);
// A row of logits to choose new token `produced` from: an error when it holds NaN.
Status checkLogits(std::span<const float> logits, int64_t produced);

}  // namespace ein::detail
