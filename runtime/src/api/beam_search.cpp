#include "ein/beam_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "api/beam_searcher.hpp"
#include "api/generation_rules.hpp"
#include "backends/cpu/kernels/isa/isa.hpp"
#include "ein/sequence_pool.hpp"
#include "util/limits.hpp"

namespace ein {
namespace {

Status invalidArgument(std::string message) { return Status(StatusCode::InvalidArgument, std::move(message)); }

struct Continuation {
  float score = 0.0f;
  size_t beam = 0;
  int64_t token = 0;
};

// The log of the sum of exp(logits): log_softmax(x) = x - logSumExp(x).
// The exponentials of x - max in f32 by the CPU's vector kernels, summed in
// double (four sums, so the adds overlap).
float logSumExp(std::span<const float> logits, std::vector<float> &scratch) {
  const detail::cpu::IsaKernels &isa = detail::cpu::bestKernels();
  const auto n = static_cast<int64_t>(logits.size());
  const float top = isa.reduceRow(logits.data(), n, detail::ReduceKind::Max);
  scratch.assign(logits.begin(), logits.end());
  isa.expShiftSum(scratch.data(), n, top);
  double sums[4] = {0.0, 0.0, 0.0, 0.0};
  size_t i = 0;
  for (; i + 4 <= scratch.size(); i += 4)
    for (size_t lane = 0; lane < 4; ++lane) sums[lane] += scratch[i + lane];
  for (; i < scratch.size(); ++i) sums[0] += scratch[i];
  return static_cast<float>(top + std::log((sums[0] + sums[1]) + (sums[2] + sums[3])));
}

// The tokens the logits processors ban next, for a beam holding `tokens`:
// suppressed tokens, and those that would repeat an n-gram. Sorted, unique.
std::vector<int64_t> bannedTokens(std::span<const int64_t> prompt, const std::vector<int64_t> &tokens,
                                  const BeamSearchOptions &options) {
  std::vector<int64_t> banned(options.suppressTokens.begin(), options.suppressTokens.end());
  if (tokens.empty()) banned.insert(banned.end(), options.beginSuppressTokens.begin(), options.beginSuppressTokens.end());
  if (const int64_t n = options.noRepeatNgramSize; n > 0) {
    std::vector<int64_t> sequence(prompt.begin(), prompt.end());
    sequence.insert(sequence.end(), tokens.begin(), tokens.end());
    const auto length = static_cast<int64_t>(sequence.size());
    // Every earlier n-gram that begins with the last n - 1 tokens bans its last token.
    if (length + 1 >= n)
      for (int64_t start = 0; start + n <= length; ++start)
        if (std::equal(sequence.begin() + start, sequence.begin() + start + n - 1, sequence.end() - (n - 1)))
          banned.push_back(sequence[static_cast<size_t>(start + n - 1)]);
  }
  std::sort(banned.begin(), banned.end());
  banned.erase(std::unique(banned.begin(), banned.end()), banned.end());
  return banned;
}

// The beams' states: numbered from 0, the prompt's run in state 0.
class BeamStates {
 public:
  virtual ~BeamStates() = default;
  // Runs the prompt in state 0: its last token's logits.
  virtual StatusOr<std::span<const float>> start(std::span<const int64_t> prompt) = 0;
  // State `into` becomes a copy of state `from`.
  virtual Status copy(size_t into, size_t from) = 0;
  // Runs token tokens[i] in state states[i] for every i; then logits(i) is its row.
  virtual Status next(std::span<const size_t> states, std::span<const int64_t> tokens) = 0;
  virtual std::span<const float> logits(size_t i) const = 0;
};

// A session per state: the caller's, and more of its model and options.
class SessionStates final : public BeamStates {
 public:
  static StatusOr<std::unique_ptr<SessionStates>> create(Session &session, const TensorInfo &ids, std::string logits,
                                                         size_t count) {
    std::unique_ptr<SessionStates> states(new SessionStates(ids, std::move(logits)));
    states->sessions_.push_back(&session);
    while (states->sessions_.size() < count) {
      StatusOr<std::unique_ptr<Session>> other = Session::create(session.sharedModel(), session.options());
      if (!other.ok()) return other.status();
      states->owned_.push_back(std::move(other).value());
      states->sessions_.push_back(states->owned_.back().get());
    }
    return states;
  }
  StatusOr<std::span<const float>> start(std::span<const int64_t> prompt) override {
    return detail::runTokens(*sessions_[0], ids_, logits_, prompt);
  }
  Status copy(size_t into, size_t from) override { return sessions_[into]->copyStateFrom(*sessions_[from]); }
  Status next(std::span<const size_t> states, std::span<const int64_t> tokens) override {
    rows_.clear();
    for (size_t i = 0; i < states.size(); ++i) {
      StatusOr<std::span<const float>> row = detail::runTokens(*sessions_[states[i]], ids_, logits_, tokens.subspan(i, 1));
      if (!row.ok()) return row.status();
      rows_.push_back(row.value());  // each session's own output: valid until its next run
    }
    return Status();
  }
  std::span<const float> logits(size_t i) const override { return rows_[i]; }

 private:
  SessionStates(const TensorInfo &ids, std::string logits) : ids_(ids), logits_(std::move(logits)) {}
  const TensorInfo &ids_;
  const std::string logits_;
  std::vector<Session *> sessions_;
  std::vector<std::unique_ptr<Session>> owned_;
  std::vector<std::span<const float>> rows_;
};

// A sequence of one pool per state: every beam's next token in one run,
// which reads the weights once, and what the prompt's first run keeps (an
// encoder's keys and values) shared by them all.
class PoolStates final : public BeamStates {
 public:
  // Null when the model runs one sequence per run, the session is not on the
  // CPU or not at a sequence's start (the pool starts sequences anew): the
  // beams take a session each then. Fails as SequencePool::create does
  // otherwise (more beams than a pool's sequences, out of memory).
  static StatusOr<std::unique_ptr<PoolStates>> create(const Session &session, size_t count) {
    if (session.position() != 0 || session.options().device != Device::Cpu ||
        !SequencePool::servesMany(session.model()).ok())
      return std::unique_ptr<PoolStates>();
    StatusOr<std::unique_ptr<SequencePool>> pool =
        SequencePool::create(session.sharedModel(), {static_cast<int>(count), session.options().threads});
    if (!pool.ok()) return pool.status();
    return std::unique_ptr<PoolStates>(new PoolStates(session, std::move(pool).value()));
  }
  StatusOr<std::span<const float>> start(std::span<const int64_t> prompt) override {
    // The first-run inputs (an encoder's) as set on the session.
    std::vector<InputTensor> inputs;
    const std::vector<TensorInfo> &infos = session_.model().inputs();
    for (size_t i = 0; i < infos.size(); ++i) {
      if (!infos[i].firstRunOnly) continue;
      StatusOr<TensorRef> value = session_.input(i);
      if (!value.ok())
        return Status(value.status().code(),
                      value.status().message() + ": a sequence's first run reads it (an encoder's input)");
      inputs.push_back({infos[i].name, elementType(value->dtype), value->shape, value->data, value->bytes});
    }
    const SequenceTokens run[] = {{0, prompt, inputs}};
    if (Status status = pool_->run(run); !status.ok()) return status;
    return pool_->lastLogits(0);
  }
  Status copy(size_t into, size_t from) override {
    return pool_->copy(static_cast<int>(into), static_cast<int>(from));
  }
  Status next(std::span<const size_t> states, std::span<const int64_t> tokens) override {
    std::vector<SequenceTokens> run;
    for (size_t i = 0; i < states.size(); ++i) run.push_back({static_cast<int>(states[i]), tokens.subspan(i, 1)});
    return pool_->run(run);
  }
  std::span<const float> logits(size_t i) const override { return pool_->lastLogits(i); }

 private:
  PoolStates(const Session &session, std::unique_ptr<SequencePool> pool) : session_(session), pool_(std::move(pool)) {}
  const Session &session_;
  std::unique_ptr<SequencePool> pool_;
};

}  // namespace

namespace detail {

std::vector<TokenLogProb> bestLogProbs(std::span<const float> logits, float shift, std::span<const int64_t> banned,
                                       size_t count) {
  // One pass keeps the best so far in order: a later token only displaces
  // one it beats (equal ones keep the lower token ahead).
  const size_t n = logits.size();
  count = std::min(count, n);
  std::vector<TokenLogProb> best;
  best.reserve(count + 1);
  auto nextBan = banned.begin();
  // Once `count` are kept, a token whose logit is not above the worst kept
  // one's cannot enter: x - shift rounds monotonically in x (a banned worst,
  // at -inf, lets every logit be looked at).
  float threshold = -std::numeric_limits<float>::infinity();
  auto consider = [&](size_t token) {
    float logProb = logits[token] - shift;
    while (nextBan != banned.end() && *nextBan < static_cast<int64_t>(token)) ++nextBan;
    if (nextBan != banned.end() && *nextBan == static_cast<int64_t>(token))
      logProb = -std::numeric_limits<float>::infinity();
    if (best.size() == count && !(logProb > best.back().logProb)) return;
    auto at = std::upper_bound(best.begin(), best.end(), logProb,
                               [](float value, const TokenLogProb &c) { return value > c.logProb; });
    best.insert(at, {logProb, static_cast<int64_t>(token)});
    if (best.size() > count) best.pop_back();
    if (best.size() == count)
      threshold = best.back().logProb == -std::numeric_limits<float>::infinity()
                      ? -std::numeric_limits<float>::infinity()
                      : logits[static_cast<size_t>(best.back().token)];
  };
  size_t token = 0;
  for (; token < n && best.size() < count; ++token) consider(token);
  // Then 8 logits at a time against the threshold (branch-free, so that it
  // stays in vectors), the rare block with one above it token by token.
  constexpr size_t kBlock = 8;
  for (; token + kBlock <= n; token += kBlock) {
    bool above = false;
    for (size_t i = 0; i < kBlock; ++i) above |= logits[token + i] > threshold;
    if (above)
      for (size_t i = 0; i < kBlock; ++i)
        if (logits[token + i] > threshold) consider(token + i);
  }
  for (; token < n; ++token)
    if (logits[token] > threshold) consider(token);
  return best;
}

Status checkBeamSearchOptions(const BeamSearchOptions &options) {
  // Each beam is a sequence of a pool (or a session of its own).
  if (options.beams < 1 || options.beams > detail::kMaxSequenceSlots)
    return invalidArgument(
        fmt::format("beams must lie in [1, {}], got {}", detail::kMaxSequenceSlots, options.beams));
  if (options.returnSequences < 1 || options.returnSequences > options.beams)
    return invalidArgument(
        fmt::format("returnSequences must lie in [1, beams = {}], got {}", options.beams, options.returnSequences));
  if (options.maxNewTokens < 1)
    return invalidArgument(fmt::format("maxNewTokens must be at least 1, got {}", options.maxNewTokens));
  if (!std::isfinite(options.lengthPenalty)) return invalidArgument("lengthPenalty must be a finite number");
  if (options.noRepeatNgramSize < 0) return invalidArgument("noRepeatNgramSize must not be negative");
  return Status();
}

int64_t newTokenLimit(int64_t maxNewTokens, int64_t promptEnd, const std::function<bool(int64_t position)> &fitsAt) {
  int64_t limit = 1;
  while (limit < maxNewTokens && fitsAt(promptEnd + limit - 1)) ++limit;
  return limit;
}

BeamSearcher::BeamSearcher(BeamSearchOptions options, std::vector<int64_t> prompt, int64_t limit)
    : options_(std::move(options)),
      prompt_(std::move(prompt)),
      limit_(limit),
      beams_(static_cast<size_t>(options_.beams)),
      stateOf_(beams_.size()),
      hasState_(beams_.size(), false),
      finished_(beams_.size()) {
  for (size_t b = 0; b < beams_.size(); ++b) stateOf_[b] = b;
  hasState_[0] = true;
}

size_t BeamSearcher::kept() const {
  return std::max<size_t>(2, 1 + options_.stopTokens.size()) * beams_.size();
}

std::vector<BeamSearcher::Candidate> BeamSearcher::bestNextTokens(std::span<const float> logits,
                                                                  const std::vector<int64_t> &tokens) {
  return bestLogProbs(logits, logSumExp(logits, exponentials_), bannedTokens(prompt_, tokens, options_), kept());
}

bool BeamSearcher::allFilled() const {
  return std::all_of(finished_.begin(), finished_.end(), [](const Finished &f) { return f.filled; });
}

bool BeamSearcher::isStop(int64_t token) const {
  return std::find(options_.stopTokens.begin(), options_.stopTokens.end(), token) != options_.stopTokens.end();
}

Status BeamSearcher::start(std::span<const float> logits) {
  if (Status status = checkLogits(logits, 0); !status.ok()) return status;
  // As transformers: every beam starts as the prompt, all but the first absent.
  beams_[0].next = bestNextTokens(logits, {});
  for (size_t b = 1; b < beams_.size(); ++b) {
    beams_[b].next = beams_[0].next;
    beams_[b].score = kAbsent;
  }
  return Status();
}

Status BeamSearcher::observe(size_t beam, std::span<const float> logits) {
  if (Status status = checkLogits(logits, produced_); !status.ok()) return status;
  beams_[beam].next = bestNextTokens(logits, beams_[beam].tokens);
  return Status();
}

std::optional<BeamSearcher::Step> BeamSearcher::advance() {
  if (ended_) return std::nullopt;
  const size_t beamCount = beams_.size();
  // The best kept() continuations of every beam by every token: only a
  // beam's own best kept() tokens can be among them (ranked, the higher
  // score first; on a tie the lower beam, then token).
  const size_t kept = this->kept();
  std::vector<Continuation> all;
  all.reserve(beamCount * kept);
  for (size_t b = 0; b < beamCount; ++b)
    for (const Candidate &candidate : beams_[b].next)
      all.push_back({beams_[b].score + candidate.logProb, b, candidate.token});
  const size_t count = std::min(kept, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(count), all.end(),
                    [](const Continuation &a, const Continuation &c) {
                      if (a.score != c.score) return a.score > c.score;
                      return a.beam != c.beam ? a.beam < c.beam : a.token < c.token;
                    });
  all.resize(count);
  const bool lastToken = produced_ + 1 >= limit_;
  std::vector<bool> ends(count);
  for (size_t k = 0; k < count; ++k) ends[k] = lastToken || isStop(all[k].token);

  // Those among the best `beams` that end join the finished hypotheses,
  // unless these are full (early stopping) or cannot improve.
  if (improvable_ && !(allFilled() && options_.earlyStopping == EarlyStopping::WhenFull)) {
    const double lengthScale = std::pow(static_cast<double>(produced_ + 1), options_.lengthPenalty);
    std::vector<Finished> merged = finished_;
    for (size_t k = 0; k < std::min(count, beamCount); ++k)
      if (ends[k]) {
        std::vector<int64_t> tokens = beams_[all[k].beam].tokens;
        tokens.push_back(all[k].token);
        merged.push_back({std::move(tokens), static_cast<float>(all[k].score / lengthScale), true});
      }
    std::stable_sort(merged.begin(), merged.end(),
                     [](const Finished &a, const Finished &c) { return a.score > c.score; });
    merged.resize(beamCount);
    finished_ = std::move(merged);
  }

  // The best `beams` continuations that do not end go on.
  std::vector<Continuation> next;
  for (size_t k = 0; k < count && next.size() < beamCount; ++k)
    if (!ends[k]) next.push_back(all[k]);
  const bool allEnd = std::all_of(ends.begin(), ends.end(), [](bool e) { return e; });
  const float bestRunning = next.empty() ? kAbsent : next.front().score;

  // transformers' test whether a live beam can still beat the finished ones.
  const int64_t length = options_.earlyStopping == EarlyStopping::Never && options_.lengthPenalty > 0.0f
                             ? limit_
                             : produced_ + 1;
  const double best = bestRunning / std::pow(static_cast<double>(length), options_.lengthPenalty);
  const bool full = allFilled();
  double worst = static_cast<double>(kAbsent);  // a slot still open bounds nothing
  if (full) {
    worst = finished_.front().score;
    for (const Finished &f : finished_) worst = std::min(worst, f.score);
  }
  improvable_ = improvable_ && best > worst;
  if (!improvable_ || (full && options_.earlyStopping == EarlyStopping::WhenFull) || allEnd) {
    ended_ = true;
    return std::nullopt;
  }
  while (next.size() < beamCount) next.push_back({kAbsent, next.empty() ? 0 : next.back().beam, 0});

  // Each continuing beam takes over its parent's state; a parent that
  // goes on twice hands a copy to a state whose beam ended. A copy's
  // source is a state some continuation took over, never one written.
  Step step;
  std::vector<int> owner(beamCount, -1);   // beam b's state goes to continuation owner[b]
  std::vector<size_t> ownerOf(beamCount);  // continuation i's state: that of beam ownerOf[i]
  std::vector<size_t> needCopy;
  for (size_t i = 0; i < beamCount; ++i) {
    const size_t parent = next[i].beam;
    if (owner[parent] < 0 && hasState_[parent]) {
      owner[parent] = static_cast<int>(i);
      ownerOf[i] = parent;
    } else {
      needCopy.push_back(i);
    }
  }
  std::vector<size_t> freeStates;
  for (size_t b = 0; b < beamCount; ++b)
    if (owner[b] < 0) freeStates.push_back(b);
  for (size_t j = 0; j < needCopy.size(); ++j) {
    const size_t i = needCopy[j], into = freeStates[j], parent = next[i].beam;
    const size_t from = hasState_[parent] ? parent : 0;
    step.copies.emplace_back(stateOf_[into], stateOf_[from]);
    ownerOf[i] = into;
  }
  std::vector<Beam> continued(beamCount);
  for (size_t i = 0; i < beamCount; ++i) {
    step.states.push_back(stateOf_[ownerOf[i]]);
    continued[i].tokens = beams_[next[i].beam].tokens;
    continued[i].tokens.push_back(next[i].token);
    continued[i].score = next[i].score;
    step.tokens.push_back(next[i].token);
  }
  beams_ = std::move(continued);
  stateOf_ = step.states;
  hasState_.assign(beamCount, true);
  ++produced_;
  return step;
}

std::vector<Hypothesis> BeamSearcher::results() const {
  std::vector<Hypothesis> best;
  for (const Finished &f : finished_)
    if (f.filled && best.size() < static_cast<size_t>(options_.returnSequences)) best.push_back({f.tokens, f.score});
  return best;
}

FinishReason BeamSearcher::finishReason() const {
  if (!ended_) return FinishReason::None;
  const std::vector<Hypothesis> best = results();
  if (best.empty()) return FinishReason::Length;
  const std::vector<int64_t> &tokens = best.front().tokens;
  if (!tokens.empty() && isStop(tokens.back())) return FinishReason::Stop;
  return limit_ < options_.maxNewTokens && static_cast<int64_t>(tokens.size()) >= limit_ ? FinishReason::CacheFull
                                                                                         : FinishReason::Length;
}

}  // namespace detail

StatusOr<std::vector<Hypothesis>> beamSearch(Session &session, std::span<const int64_t> prompt,
                                             const BeamSearchOptions &options) {
  if (Status status = detail::checkBeamSearchOptions(options); !status.ok()) return status;
  StatusOr<detail::DecoderBindings> bindings =
      detail::checkDecoder(session, prompt, options.idsInput, options.logitsOutput, "beam search");
  if (!bindings.ok()) return bindings.status();
  const TensorInfo *ids = bindings.value().ids;
  const std::string logitsName = bindings.value().logits;
  const int64_t limit =
      detail::newTokenLimit(options.maxNewTokens, session.position() + static_cast<int64_t>(prompt.size()),
                            [&](int64_t position) { return detail::fitsAt(session, *ids, 1, position).ok(); });

  const auto beamCount = static_cast<size_t>(options.beams);
  StatusOr<std::unique_ptr<PoolStates>> pool = PoolStates::create(session, beamCount);
  if (!pool.ok()) return pool.status();
  std::unique_ptr<BeamStates> states = std::move(pool).value();
  if (!states) {
    StatusOr<std::unique_ptr<SessionStates>> sessions = SessionStates::create(session, *ids, logitsName, beamCount);
    if (!sessions.ok()) return sessions.status();
    states = std::move(sessions).value();
  }

  detail::BeamSearcher search(options, {prompt.begin(), prompt.end()}, limit);
  StatusOr<std::span<const float>> first = states->start(prompt);
  if (!first.ok()) return first.status();
  if (Status status = search.start(first.value()); !status.ok()) return status;
  while (std::optional<detail::BeamSearcher::Step> step = search.advance()) {
    for (const auto &[into, from] : step->copies)
      if (Status status = states->copy(into, from); !status.ok()) return status;
    if (Status status = states->next(step->states, step->tokens); !status.ok()) return status;
    for (size_t b = 0; b < beamCount; ++b)
      if (Status status = search.observe(b, states->logits(b)); !status.ok()) return status;
  }
  return search.results();
}

}  // namespace ein
