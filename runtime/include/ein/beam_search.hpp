// Beam search with a decoder whose key/value cache is session state (an
// encoder-decoder's too: Whisper, T5), following transformers' beam search
// step for step: each step extends every live beam by every token, keeps the
// best 2 x beams (more with several stop tokens) continuations by summed
// log-probability, moves those that end (a stop token, or the length limit)
// among the best `beams` into the finished hypotheses, scored by their sum
// over length ** lengthPenalty, and continues with the best `beams` that do
// not end. Each live beam has a state: for a model that serves many
// sequences (SequencePool) from a CPU session at position 0, a sequence of
// one pool, every beam's next token in one run (the weights read once a
// step) and what the prompt's first run keeps (an encoder's keys and values)
// shared by all; otherwise a session each, the caller's the first. A beam
// that continues in two forks its state, one that dies frees its own.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ein/session.hpp"
#include "ein/status.hpp"

namespace ein {

// When beam search ends before maxNewTokens (transformers' early_stopping).
enum class EarlyStopping {
  Heuristic,  // false: when no live beam can beat the worst finished one at its current length
  WhenFull,   // true: as soon as `beams` hypotheses have finished
  Never,      // "never": when no live beam can beat them at any length up to the limit
};

struct BeamSearchOptions {
  int beams = 4;
  int64_t maxNewTokens = 32;
  // A finished hypothesis scores its summed log-probabilities divided by
  // (its new tokens) ** lengthPenalty: > 0 favours longer ones.
  float lengthPenalty = 1.0f;
  EarlyStopping earlyStopping = EarlyStopping::Heuristic;
  // How many of the best hypotheses to return (at most `beams`).
  int returnSequences = 1;
  // The tokens that end a hypothesis (its end-of-sequence ids; kept in it).
  std::vector<int64_t> stopTokens;
  // No n-gram of this size appears twice in a hypothesis (the prompt
  // included; 0: any may).
  int64_t noRepeatNgramSize = 0;
  // Tokens never chosen; and tokens not chosen as the first new token
  // (Whisper's suppress_tokens and begin_suppress_tokens).
  std::vector<int64_t> suppressTokens, beginSuppressTokens;
  // As GenerationOptions' (empty: the defaults).
  std::string idsInput, logitsOutput;
};

struct Hypothesis {
  std::vector<int64_t> tokens;  // the new tokens, a stop token last where one ended it
  double score = 0.0;           // summed log-probabilities / tokens ** lengthPenalty
};

// Runs the prompt from the session's position (an encoder-decoder's encoder
// inputs set on it before) and searches; returns the best
// options.returnSequences hypotheses, best first. The beams' states are
// made for the search, of the session's model and options; the session's
// own state ends as none of the beams' in particular: reset it before its
// next sequence. Checks as Generation::start does, and that 1 <= beams,
// 1 <= returnSequences <= beams and the prompt and new tokens fit the cache.
StatusOr<std::vector<Hypothesis>> beamSearch(Session &session, std::span<const int64_t> prompt,
                                             const BeamSearchOptions &options);

}  // namespace ein
