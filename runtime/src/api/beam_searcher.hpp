// Beam search step by step, apart from where the beams' states live: alone
// in a session (beamSearch, beam_search.cpp) or among a scheduler's requests
// (scheduler.cpp). The caller keeps `beams` states numbered 0 .. beams - 1,
// the prompt's run in state 0; each step tells it which states to copy and
// which token to run in which state, and it returns each beam's logits.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "ein/beam_search.hpp"
#include "ein/generate.hpp"
#include "ein/status.hpp"

namespace ein::detail {

// The options' ranges (beams, returnSequences, maxNewTokens, lengthPenalty, noRepeatNgramSize).
Status checkBeamSearchOptions(const BeamSearchOptions &options);

// The most new tokens a search from a prompt ending at `promptEnd` makes:
// maxNewTokens, or fewer where the cache ends. New token j > 1 needs a run
// of one token at position promptEnd + j - 2, which `fitsAt` says fits.
int64_t newTokenLimit(int64_t maxNewTokens, int64_t promptEnd, const std::function<bool(int64_t position)> &fitsAt);

// A next token and its log-probability, after the logits processors.
struct TokenLogProb {
  float logProb;
  int64_t token;
};

// The best min(count, logits.size()) tokens by log-probability, logits[t] -
// shift in f32 (a banned token's -inf; `banned` sorted and unique), the
// higher first, on a tie the lower token.
std::vector<TokenLogProb> bestLogProbs(std::span<const float> logits, float shift, std::span<const int64_t> banned,
                                       size_t count);

class BeamSearcher {
 public:
  // `limit`: the most new tokens, maxNewTokens or fewer where the cache ends.
  BeamSearcher(BeamSearchOptions options, std::vector<int64_t> prompt, int64_t limit);

  // The next tokens to run: first state copies[i].first becomes a copy of
  // state copies[i].second (no copy reads a state another writes), then
  // beam b's token tokens[b] runs in state states[b].
  struct Step {
    std::vector<std::pair<size_t, size_t>> copies;
    std::vector<size_t> states;
    std::vector<int64_t> tokens;
  };

  // The logits of the prompt's last token (run in state 0).
  Status start(std::span<const float> logits);
  // Chooses every beam's next token; nullopt when the search has ended.
  std::optional<Step> advance();
  // After the step advance() returned ran: beam b's logits.
  Status observe(size_t beam, std::span<const float> logits);

  // Once advance() returned nullopt: the best options.returnSequences
  // hypotheses, best first, and why the best ended (Stop: a stop token;
  // CacheFull: at a limit below maxNewTokens; Length otherwise).
  std::vector<Hypothesis> results() const;
  FinishReason finishReason() const;
  const BeamSearchOptions &options() const { return options_; }

 private:
  using Candidate = TokenLogProb;
  struct Beam {
    std::vector<int64_t> tokens;  // the new tokens
    float score = 0.0f;           // summed log-probabilities
    std::vector<Candidate> next;  // its best next tokens (bestNextTokens)
  };
  // transformers' score of a beam that is not there yet (the first step's
  // copies of the prompt, a continuation masked out).
  static constexpr float kAbsent = -1.0e9f;
  struct Finished {
    std::vector<int64_t> tokens;
    double score = kAbsent;
    bool filled = false;  // a slot no hypothesis has filled yet otherwise
  };
  bool allFilled() const;
  bool isStop(int64_t token) const;
  // How many continuations of each beam a step ranks: enough that `beams`
  // of them do not end.
  size_t kept() const;
  // The best kept() next tokens of a beam holding `tokens`, by log_softmax
  // of `logits` after the logits processors (bestLogProbs).
  std::vector<Candidate> bestNextTokens(std::span<const float> logits, const std::vector<int64_t> &tokens);

  const BeamSearchOptions options_;
  const std::vector<int64_t> prompt_;
  const int64_t limit_;
  std::vector<Beam> beams_;
  std::vector<size_t> stateOf_;  // beam b's state
  std::vector<bool> hasState_;   // an absent beam (the first step's) has none yet
  std::vector<Finished> finished_;
  std::vector<float> exponentials_;  // bestNextTokens' scratch
  int64_t produced_ = 0;
  bool improvable_ = true;
  bool ended_ = false;
};

}  // namespace ein::detail
