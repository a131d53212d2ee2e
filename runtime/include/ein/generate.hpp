// Token generation with a decoder whose key/value cache is session state
// (LANGUAGE.md "Session state"): a prefill over the prompt, then one decode
// step per token, each feeding the token it chose. Ids in, ids out: the
// tokenizer stays outside (README "Generating text").
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ein/session.hpp"
#include "ein/status.hpp"

namespace ein {

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
  // only integer input and only output.
  std::string idsInput, logitsOutput;
  // Called with each new token; returning false stops generation.
  std::function<bool(int64_t token)> onToken;
};

// Runs the prompt from the session's current position (resetState() first to
// start a new sequence), then generates; returns the new tokens. A prompt or
// generation longer than the model's cache fails with the model's message,
// the tokens so far being lost with it.
StatusOr<std::vector<int64_t>> generate(Session &session, std::span<const int64_t> prompt,
                                        const GenerationOptions &options = {});

// The token `options` choose from one row of logits (greedy or sampled), with
// `state` the sampling generator's state (seeded from options.seed by generate()).
int64_t chooseToken(std::span<const float> logits, const GenerationOptions &options, uint64_t &state);

}  // namespace ein
