#include "ein/scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "api/beam_searcher.hpp"
#include "api/generation_rules.hpp"

namespace ein {

namespace {

Status invalidArgument(std::string message) { return Status(StatusCode::InvalidArgument, std::move(message)); }

// A step's tokens by default. While a step reads a prompt chunk the other
// streams wait for it: on a CPU a chunk of 512 takes seconds (the 1.1B
// Llama at bf16, 2 Zen 3 cores). 256 halved the p99 inter-token latency
// there (8 and 32 streaming clients, bench/llm_server.py) at the same
// throughput (within 2%).
constexpr int64_t kDefaultStepTokens = 256;

}  // namespace

// A request with sequences of the pool: the tokens its cache must hold
// before it chooses one (its prompt, or after a preemption its prompt and
// every token chosen), how many of them have run, the token it chose last
// (its next run's) and its sampler; a beam search's search and its beams'
// next tokens.
struct Scheduler::Going {
  std::shared_ptr<Request> request;
  uint64_t admitted = 0;  // order of admission: prompts run first come, first served
  // Its sequences: the feed runs in the first; beam state i is sequence slots[i].
  std::vector<size_t> slots;
  std::vector<int64_t> feed;
  size_t prefilled = 0;   // feed tokens run
  int64_t last = 0;
  uint64_t sampler = 0;
  // Admitted again after a preemption: its tokens so far start only when
  // the free blocks hold them all, so that it does not take a block an
  // older sequence needs and lose it again (fewBlocksFor).
  bool resumed = false;
  std::unique_ptr<detail::BeamSearcher> search;
  detail::BeamSearcher::Step beams;  // the step the search chose last
  bool ended = false;  // finished or preempted: step() drops it

  bool prefilling() const { return prefilled < feed.size(); }
};

// Request

StatusOr<std::optional<int64_t>> Request::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return returned_ < tokens_.size() || ended_; });
  if (returned_ < tokens_.size()) return std::optional<int64_t>(tokens_[returned_++]);
  if (!error_.ok()) return error_;
  return std::optional<int64_t>();
}

StatusOr<GeneratedSequence> Request::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return ended_; });
  if (!error_.ok()) return error_;
  return GeneratedSequence{tokens_, finish_};
}

StatusOr<std::vector<Hypothesis>> Request::hypotheses() {
  if (!beamSearch_) return invalidArgument("the request is a generation, not a beam search: it has no hypotheses");
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return ended_; });
  if (!error_.ok()) return error_;
  return hypotheses_;
}

void Request::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
}

bool Request::done() const {
  std::lock_guard lock(mutex_);
  return ended_;
}

int64_t Request::cachedPromptTokens() const {
  std::lock_guard lock(mutex_);
  return cached_;
}

int64_t Request::preemptions() const {
  std::lock_guard lock(mutex_);
  return preemptions_;
}

FinishReason Request::finishReason() const {
  std::lock_guard lock(mutex_);
  return finish_;
}

std::vector<InputTensor> Request::firstRunInputs() const {
  std::vector<InputTensor> views;
  for (const HeldInput &input : firstRunInputs_)
    views.push_back({input.name, input.dtype, input.shape, input.data.data(), input.data.size()});
  return views;
}

void Request::push(int64_t token) {
  {
    std::lock_guard lock(mutex_);
    tokens_.push_back(token);
  }
  changed_.notify_all();
}

void Request::end(FinishReason reason, Status status) {
  {
    std::lock_guard lock(mutex_);
    if (ended_ || ending_) return;
    ending_ = true;
  }
  // Before the end can be seen: wait() returns after onEnd has.
  if (options_.onEnd) {
    try {
      options_.onEnd(reason, status);
    } catch (...) {  // the request ends all the same; a callback's failure is its own
    }
  }
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
    finish_ = reason;
    error_ = std::move(status);
  }
  changed_.notify_all();
}

// Scheduler

Scheduler::Scheduler(std::unique_ptr<SequencePool> pool, const SchedulerOptions &options, int64_t stepTokens)
    : pool_(std::move(pool)),
      stepTokens_(stepTokens),
      maxWaiting_(options.maxWaiting),
      reusePrefixes_(options.reusePrefixes && !pool_->firstRunsAlone()),
      ownerOf_(static_cast<size_t>(pool_->maxSequences()), nullptr),
      held_(static_cast<size_t>(pool_->maxSequences())) {}

Scheduler::~Scheduler() { shutdown(); }

StatusOr<std::unique_ptr<Scheduler>> Scheduler::create(std::shared_ptr<const Model> model, SchedulerOptions options) {
  StatusOr<std::unique_ptr<SequencePool>> pool = SequencePool::create(
      std::move(model), {options.maxSequences, options.threads, options.cacheBlockRows, options.cacheBlocks});
  if (!pool.ok()) return pool.status();
  const int64_t most = pool.value()->maxTokensPerRun();
  if (options.stepTokens < 0)
    return invalidArgument(fmt::format("stepTokens is {}; it must not be negative", options.stepTokens));
  const int64_t stepTokens = options.stepTokens > 0 ? options.stepTokens : std::min(kDefaultStepTokens, most);
  if (stepTokens > most)
    return invalidArgument(fmt::format("stepTokens is {}; '{}' runs at most {} tokens at once", stepTokens,
                                       pool.value()->model().name(), most));
  if (stepTokens < options.maxSequences)
    return invalidArgument(fmt::format("stepTokens ({}) must be at least maxSequences ({}): every sequence's next "
                                       "token runs in each step",
                                       stepTokens, options.maxSequences));
  if (options.maxWaiting < 1) return invalidArgument("maxWaiting must be at least 1");
  std::unique_ptr<Scheduler> scheduler(new Scheduler(std::move(pool).value(), options, stepTokens));
  scheduler->thread_ = std::thread([raw = scheduler.get()] { raw->loop(); });
  return scheduler;
}

void Scheduler::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  // From an onToken on the scheduler's thread, the loop ends after this step.
  if (std::this_thread::get_id() == thread_.get_id()) return;
  std::call_once(joined_, [&] { thread_.join(); });
}

size_t Scheduler::running() const {
  std::lock_guard lock(mutex_);
  return running_;
}

size_t Scheduler::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_.size();
}

Status Scheduler::checkSubmission(std::span<const int64_t> prompt, const std::string &idsInput,
                                  const std::string &logitsOutput, std::span<const InputTensor> firstRunInputs) const {
  const Model &model = pool_->model();
  const TensorInfo &ids = pool_->idsInput();
  if (!idsInput.empty() && idsInput != ids.name)
    return invalidArgument(fmt::format("the model's ids input is \"{}\", not \"{}\"", ids.name, idsInput));
  if (!logitsOutput.empty() && logitsOutput != model.outputs()[0].name)
    return invalidArgument(
        fmt::format("the model's logits output is \"{}\", not \"{}\"", model.outputs()[0].name, logitsOutput));
  if (prompt.empty()) return invalidArgument("the prompt is empty");
  if (Status status = detail::checkPromptIds(prompt, ids, "prompt"); !status.ok()) return status;
  if (Status status = pool_->checkFirstRunInputs(firstRunInputs); !status.ok()) return status;
  // Its last token at its last position: the prompt runs in chunks, so only
  // the cache bounds it, not the tokens of one run.
  if (Status status = pool_->fitsFirstRun(firstRunInputs, 1, static_cast<int64_t>(prompt.size()) - 1); !status.ok())
    return Status(status.code(),
                  fmt::format("the prompt of {} tokens does not fit: {}", prompt.size(), status.message()));
  if (const int64_t rows = pool_->cacheBlockRows(); rows > 0) {
    const auto blocks = (static_cast<int64_t>(prompt.size()) + rows - 1) / rows;
    if (blocks > pool_->cacheBlocks())
      return Status(StatusCode::ResourceExhausted,
                    fmt::format("the prompt of {} tokens takes {} cache blocks of {} rows; the cache has {}",
                                prompt.size(), blocks, rows, pool_->cacheBlocks()));
  }
  return Status();
}

StatusOr<std::shared_ptr<Request>> Scheduler::submit(std::span<const int64_t> prompt, GenerationOptions options,
                                                     std::span<const InputTensor> firstRunInputs) {
  if (Status status = checkSubmission(prompt, options.idsInput, options.logitsOutput, firstRunInputs); !status.ok())
    return status;
  if (Status status = detail::checkGenerationOptions(options); !status.ok()) return status;
  return queue(prompt, std::move(options), std::nullopt, 0, firstRunInputs);
}

StatusOr<std::shared_ptr<Request>> Scheduler::submitBeamSearch(std::span<const int64_t> prompt,
                                                               BeamSearchOptions options,
                                                               std::span<const InputTensor> firstRunInputs) {
  if (Status status = detail::checkBeamSearchOptions(options); !status.ok()) return status;
  if (options.beams > maxSequences())
    return invalidArgument(fmt::format("{} beams take a sequence each; the scheduler has {} (maxSequences)",
                                       options.beams, maxSequences()));
  if (Status status = checkSubmission(prompt, options.idsInput, options.logitsOutput, firstRunInputs); !status.ok())
    return status;
  const auto promptEnd = static_cast<int64_t>(prompt.size());
  if (const int64_t rows = pool_->cacheBlockRows(); rows > 0) {
    // Its first step: the prompt's blocks, shared by the beams, and a block
    // a beam for its first token (a part-filled last block copied for all
    // but one of them).
    const int64_t blocks = (promptEnd + rows - 1) / rows + options.beams - (promptEnd % rows != 0 ? 1 : 0);
    if (blocks > pool_->cacheBlocks())
      return Status(StatusCode::ResourceExhausted,
                    fmt::format("{} beams over a prompt of {} tokens take {} cache blocks of {} rows; the cache has {}",
                                options.beams, prompt.size(), blocks, rows, pool_->cacheBlocks()));
  }
  const int64_t limit = detail::newTokenLimit(options.maxNewTokens, promptEnd, [&](int64_t position) {
    return pool_->fitsFirstRun(firstRunInputs, 1, position).ok();
  });
  GenerationOptions generation;
  generation.maxNewTokens = options.maxNewTokens;
  generation.stopTokens = options.stopTokens;
  return queue(prompt, std::move(generation), std::move(options), limit, firstRunInputs);
}

StatusOr<std::shared_ptr<Request>> Scheduler::queue(std::span<const int64_t> prompt, GenerationOptions options,
                                                    std::optional<BeamSearchOptions> beamSearch, int64_t beamLimit,
                                                    std::span<const InputTensor> firstRunInputs) {
  std::vector<Request::HeldInput> held;
  for (const InputTensor &input : firstRunInputs) {
    const auto *bytes = static_cast<const std::byte *>(input.data);
    held.push_back({std::string(input.name), input.dtype, {input.shape.begin(), input.shape.end()},
                    {bytes, bytes + input.bytes}});
  }
  std::shared_ptr<Request> request(new Request({prompt.begin(), prompt.end()}, std::move(options),
                                               std::move(beamSearch), beamLimit, std::move(held)));
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return invalidArgument("the scheduler has shut down");
    // The queue also holds requests about to take free sequences.
    const size_t free = ownerOf_.size() - sequencesTaken_;
    if (waiting_.size() >= maxWaiting_ + free)
      return Status(StatusCode::ResourceExhausted,
                    fmt::format("{} requests wait for a sequence already (maxWaiting)", waiting_.size() - free));
    waiting_.push_back(request);
  }
  wake_.notify_all();
  return request;
}

void Scheduler::loop() {
  while (true) {
    std::vector<std::shared_ptr<Request>> starting;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !waiting_.empty() || running_ > 0; });
      if (stopping_) break;
      // First come, first served: a beam search waiting for its sequences
      // holds back those after it.
      while (!waiting_.empty() &&
             static_cast<size_t>(waiting_.front()->sequences()) <= ownerOf_.size() - sequencesTaken_) {
        sequencesTaken_ += static_cast<size_t>(waiting_.front()->sequences());
        starting.push_back(std::move(waiting_.front()));
        waiting_.pop_front();
      }
      running_ += starting.size();
    }
    for (std::shared_ptr<Request> &request : starting) admit(std::move(request));
    step();
    std::vector<int> generating;
    for (size_t slot = 0; slot < ownerOf_.size(); ++slot)
      if (ownerOf_[slot]) generating.push_back(static_cast<int>(slot));
    cacheBlocksUsed_.store(pool_->blocksHeld(generating), std::memory_order_relaxed);
  }
  // Shut down: every request not ended ends, cancelled.
  std::deque<std::shared_ptr<Request>> left;
  {
    std::lock_guard lock(mutex_);
    left.swap(waiting_);
    running_ = 0;
    sequencesTaken_ = 0;
  }
  for (const std::unique_ptr<Going> &going : going_)
    if (!going->ended) going->request->end(FinishReason::Cancelled);
  for (const std::shared_ptr<Request> &request : left) request->end(FinishReason::Cancelled);
}

namespace {

// How many of `prompt`'s first tokens `held` begins with, leaving the
// prompt's last token to run (its logits choose the first new token).
size_t sharedPrefix(const std::vector<int64_t> &held, const std::vector<int64_t> &prompt) {
  const size_t most = std::min(held.size(), prompt.size() - 1);
  return static_cast<size_t>(std::mismatch(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(most),
                                            prompt.begin()).first -
                             held.begin());
}

}  // namespace

void Scheduler::admit(std::shared_ptr<Request> request) {
  // A preempted request runs its prompt and tokens so far again, in its old place.
  std::optional<Request::Resumption> resumption = std::move(request->resumption_);
  request->resumption_.reset();
  std::vector<int64_t> feed = resumption ? std::move(resumption->tokens) : request->prompt_;
  // The free sequence whose cache begins most like those tokens; when none
  // does, the one holding least (what the others hold may serve a later one).
  const size_t none = ownerOf_.size();
  size_t slot = none, kept = 0;
  for (size_t s = 0; s < ownerOf_.size(); ++s) {
    if (ownerOf_[s]) continue;
    const size_t shared = reusePrefixes_ ? sharedPrefix(held_[s], feed) : 0;
    if (slot == none || shared > kept || (shared == kept && held_[s].size() < held_[slot].size())) {
      slot = s;
      kept = shared;
    }
  }
  if (reusePrefixes_) {  // a generating sequence's, copied, when it holds more of it
    size_t source = none, longest = kept;
    for (size_t s = 0; s < ownerOf_.size(); ++s)
      if (ownerOf_[s])
        if (const size_t shared = sharedPrefix(held_[s], feed); shared > longest) {
          source = s;
          longest = shared;
        }
    if (source < none && longest >= kept + SchedulerOptions::kCopiedPrefixMinimum &&
        pool_->copy(static_cast<int>(slot), static_cast<int>(source)).ok()) {
      held_[slot] = held_[source];
      kept = longest;
    }
  }
  if (Status status = pool_->truncate(static_cast<int>(slot), static_cast<int64_t>(kept)); !status.ok()) {
    endRunning(*request, FinishReason::None, std::move(status));
    return;
  }
  held_[slot].resize(kept);
  if (!resumption) {
    std::lock_guard lock(request->mutex_);
    request->cached_ = static_cast<int64_t>(kept);
  }
  auto going = std::make_unique<Going>();
  going->slots.push_back(slot);
  // A beam search's other beams: the free sequences holding least, their
  // caches given back now (each becomes a copy of a beam's when it forks).
  for (int beam = 1; beam < request->sequences(); ++beam) {
    size_t other = none;
    for (size_t s = 0; s < ownerOf_.size(); ++s)
      if (!ownerOf_[s] && s != slot &&
          std::find(going->slots.begin(), going->slots.end(), s) == going->slots.end() &&
          (other == none || held_[s].size() < held_[other].size()))
        other = s;
    if (pool_->reset(static_cast<int>(other)).ok()) held_[other].clear();
    going->slots.push_back(other);
  }
  if (request->beamSearch_)
    going->search =
        std::make_unique<detail::BeamSearcher>(*request->beamSearch_, request->prompt_, request->beamLimit_);
  going->admitted = resumption ? resumption->admitted : admitted_++;
  going->feed = std::move(feed);
  going->prefilled = kept;
  going->sampler = resumption ? resumption->sampler : request->options_.seed;
  going->resumed = resumption.has_value();
  going->request = std::move(request);
  for (size_t s : going->slots) ownerOf_[s] = going.get();
  going_.push_back(std::move(going));
}

bool Scheduler::fewBlocksFor(const Going &going, int64_t taken) {
  if (!going.resumed || going.prefilled > 0) return false;
  return !takeBlocks(going.slots[0], static_cast<int64_t>(going.feed.size()), taken);  // a probe: `taken` is a copy
}

void Scheduler::preempt(Going &going) {
  for (size_t slot : going.slots) {
    ownerOf_[slot] = nullptr;
    if (pool_->reset(static_cast<int>(slot)).ok()) held_[slot].clear();
  }
  going.ended = true;
  Request &request = *going.request;
  // Only this thread appends to tokens_.
  std::vector<int64_t> tokens = request.prompt_;
  tokens.insert(tokens.end(), request.tokens_.begin(), request.tokens_.end());
  request.resumption_ = Request::Resumption{std::move(tokens), going.sampler, going.admitted};
  {
    std::lock_guard lock(request.mutex_);
    ++request.preemptions_;
  }
  std::lock_guard lock(mutex_);
  --running_;
  sequencesTaken_ -= going.slots.size();
  waiting_.push_front(std::move(going.request));
}

void Scheduler::endRunning(Request &request, FinishReason reason, Status status) {
  {
    std::lock_guard lock(mutex_);
    --running_;
    sequencesTaken_ -= static_cast<size_t>(request.sequences());
  }
  request.end(reason, std::move(status));  // after the count, which its waiter may read
}

void Scheduler::finish(Going &going, FinishReason reason, Status status) {
  if (going.ended) return;
  going.ended = true;
  for (size_t slot : going.slots) ownerOf_[slot] = nullptr;
  endRunning(*going.request, reason, std::move(status));
}

bool Scheduler::takeBlocks(size_t slot, int64_t tokens, int64_t &taken) {
  return takeFreeBlocks(pool_->blocksToRun(static_cast<int>(slot), tokens), taken);
}

bool Scheduler::takeFreeBlocks(int64_t needed, int64_t &taken) {
  if (pool_->cacheBlockRows() == 0) return true;
  for (size_t idle = 0; needed > pool_->freeCacheBlocks() - taken && idle < ownerOf_.size(); ++idle)
    if (!ownerOf_[idle] && !held_[idle].empty() && pool_->reset(static_cast<int>(idle)).ok()) held_[idle].clear();
  if (needed > pool_->freeCacheBlocks() - taken) return false;
  taken += needed;
  return true;
}

std::vector<Scheduler::Going *> Scheduler::goingInOrder() const {
  std::vector<Going *> going;
  for (const std::unique_ptr<Going> &g : going_)
    if (!g->ended) going.push_back(g.get());
  std::sort(going.begin(), going.end(), [](const Going *a, const Going *b) { return a->admitted < b->admitted; });
  return going;
}

void Scheduler::step() {
  for (const std::unique_ptr<Going> &going : going_) {
    bool cancelled;
    {
      std::lock_guard lock(going->request->mutex_);
      cancelled = going->request->cancelled_;
    }
    if (cancelled) finish(*going, FinishReason::Cancelled);
  }
  const bool ranFirstRun = pool_->firstRunsAlone() && runFirstRun(goingInOrder());
  // Every generating sequence's next token (all of a beam search's beams or
  // none), then the prompts in the order they came, each as much as the
  // step has room for; the oldest first to the cache's free blocks. A
  // request whose first run must run alone waits for a later step's.
  std::vector<SequenceTokens> batch;
  std::vector<Entry> entries;
  int64_t tokens = 0, taken = 0;
  std::vector<Going *> starting;
  const std::vector<Going *> going = goingInOrder();
  for (Going *g : going) {
    if (g->prefilling()) {
      if (g->prefilled > 0 || !pool_->firstRunsAlone()) starting.push_back(g);
      continue;
    }
    if (g->search) {
      std::vector<SequenceTokens> beams;
      for (size_t b = 0; b < g->beams.states.size(); ++b)
        beams.push_back({static_cast<int>(g->slots[g->beams.states[b]]),
                         std::span<const int64_t>(&g->beams.tokens[b], 1)});
      // Beams writing into the block they share copy it for all but one.
      if (!takeFreeBlocks(pool_->blocksToRun(beams), taken)) continue;  // waits for blocks
      for (size_t b = 0; b < beams.size(); ++b) {
        batch.push_back(beams[b]);
        entries.push_back({g, b});
      }
      tokens += static_cast<int64_t>(beams.size());
      continue;
    }
    if (!takeBlocks(g->slots[0], 1, taken)) continue;  // waits for a block
    batch.push_back({static_cast<int>(g->slots[0]), std::span<const int64_t>(&g->last, 1)});
    entries.push_back({g, 0});
    ++tokens;
  }
  for (Going *g : starting) {
    if (tokens == stepTokens_) break;
    if (fewBlocksFor(*g, taken)) continue;
    const size_t slot = g->slots[0];
    const std::vector<int64_t> &prompt = g->feed;
    const size_t from = g->prefilled;
    auto chunk = std::min<int64_t>(static_cast<int64_t>(prompt.size() - from), stepTokens_ - tokens);
    if (!takeBlocks(slot, chunk, taken)) {  // as much of it as the free blocks hold
      int64_t fits = 0;
      for (int64_t high = chunk - 1; fits < high;) {
        const int64_t middle = fits + (high - fits + 1) / 2;
        if (int64_t probe = taken; takeBlocks(slot, middle, probe))
          fits = middle;
        else
          high = middle - 1;
      }
      if (fits == 0 || !takeBlocks(slot, fits, taken)) continue;
      chunk = fits;
    }
    batch.push_back({static_cast<int>(slot), std::span<const int64_t>(prompt).subspan(from, static_cast<size_t>(chunk))});
    entries.push_back({g, 0});
    tokens += chunk;
  }
  if (batch.empty() && !ranFirstRun && !going.empty()) {
    // Every sequence waits for a block that only another could give back:
    // the youngest request holding blocks is preempted, and they go to the
    // others. One holding every block in use can never go on: it ends. (A
    // preempted request holds fewer blocks than the cache has, so its
    // tokens fit it again; a prompt fits it by submit's check.)
    std::vector<Going *> holders;  // the youngest first
    for (auto g = going.rbegin(); g != going.rend(); ++g) {
      std::vector<int> sequences((*g)->slots.begin(), (*g)->slots.end());
      if (pool_->blocksHeld(sequences) > 0) holders.push_back(*g);
    }
    if (holders.size() >= 2) {
      preempt(*holders.front());
    } else {
      Going &ending = holders.empty() ? *going.back() : *holders.front();
      finish(ending, FinishReason::None,
             Status(StatusCode::ResourceExhausted,
                    fmt::format("the key/value cache's {} blocks of {} rows cannot hold this request's next tokens",
                                pool_->cacheBlocks(), pool_->cacheBlockRows())));
      for (size_t slot : ending.slots)
        if (pool_->reset(static_cast<int>(slot)).ok()) held_[slot].clear();
    }
  }
  if (!batch.empty()) runAndChoose(batch, entries);
  std::erase_if(going_, [](const std::unique_ptr<Going> &g) { return g->ended; });
}

bool Scheduler::runFirstRun(const std::vector<Going *> &going) {
  for (Going *g : going) {
    if (g->prefilled > 0) continue;
    const std::vector<int64_t> &feed = g->feed;
    const auto chunk = std::min<int64_t>(static_cast<int64_t>(feed.size()), stepTokens_);
    int64_t taken = 0;
    // The oldest first: it waits for blocks, and so do the younger.
    if (fewBlocksFor(*g, taken) || !takeBlocks(g->slots[0], chunk, taken)) return false;
    const std::vector<InputTensor> inputs = g->request->firstRunInputs();
    const std::vector<SequenceTokens> alone = {
        {static_cast<int>(g->slots[0]), std::span<const int64_t>(feed).first(static_cast<size_t>(chunk)), inputs}};
    runAndChoose(alone, {{g, 0}});
    return true;
  }
  return false;
}

void Scheduler::runAndChoose(const std::vector<SequenceTokens> &batch, const std::vector<Entry> &entries) {
  if (Status status = pool_->run(batch); !status.ok()) {
    // Checked before anything ran: the run's requests end with its error, the others go on.
    for (const Entry &entry : entries) finish(*entry.going, FinishReason::None, status);
    return;
  }
  for (size_t entry = 0; entry < entries.size(); ++entry) {
    std::vector<int64_t> &held = held_[static_cast<size_t>(batch[entry].sequence)];
    held.insert(held.end(), batch[entry].tokens.begin(), batch[entry].tokens.end());
  }
  for (size_t entry = 0; entry < entries.size(); ++entry) {
    Going &going = *entries[entry].going;
    if (going.ended) continue;
    Request &request = *going.request;
    const GenerationOptions &options = request.options_;
    const bool prefilling = going.prefilling();
    if (prefilling) {
      going.prefilled += batch[entry].tokens.size();
      if (going.prefilling()) continue;  // more of the prompt to run
    }
    const std::span<const float> logits = pool_->lastLogits(entry);
    if (going.search) {
      // The prompt's logits start the search; a step's go on once every beam's are in.
      const size_t beam = entries[entry].beam;
      Status status = prefilling ? going.search->start(logits) : going.search->observe(beam, logits);
      if (!status.ok())
        finish(going, FinishReason::None, std::move(status));
      else if (prefilling || beam + 1 == going.beams.states.size())
        advanceBeams(going);
      continue;
    }
    if (options.maxNewTokens == 0) {  // the prompt ran; no token is wanted
      finish(going, FinishReason::Length);
      continue;
    }
    const auto produced = static_cast<int64_t>(request.tokens_.size());  // only this thread appends
    if (Status status = detail::checkLogits(logits, produced); !status.ok()) {
      finish(going, FinishReason::None, status);
      continue;
    }
    going.last = chooseToken(logits, options, going.sampler);
    FinishReason reason = detail::finishAfter(going.last, produced + 1, options);
    if (options.onToken) {
      bool goOn = false;
      try {
        goOn = options.onToken(going.last);
      } catch (...) {  // the caller's code must not end the scheduler's thread
        finish(going, FinishReason::None, Status(StatusCode::Internal, "the request's onToken threw an exception"));
        continue;
      }
      if (!goOn) reason = FinishReason::Cancelled;
    }
    request.push(going.last);
    if (reason == FinishReason::None && !pool_->fits(static_cast<int>(going.slots[0]), 1).ok())
      reason = FinishReason::CacheFull;
    if (reason != FinishReason::None) finish(going, reason);
  }
}

void Scheduler::advanceBeams(Going &going) {
  std::optional<detail::BeamSearcher::Step> step = going.search->advance();
  if (!step) {
    Request &request = *going.request;
    std::vector<Hypothesis> found = going.search->results();
    {
      std::lock_guard lock(request.mutex_);
      if (!found.empty()) request.tokens_ = found.front().tokens;
      request.hypotheses_ = std::move(found);
    }
    finish(going, going.search->finishReason());
    return;
  }
  // Forks share the cache blocks they hold until one writes into them.
  for (const auto &[into, from] : step->copies) {
    const size_t target = going.slots[into], source = going.slots[from];
    if (Status status = pool_->copy(static_cast<int>(target), static_cast<int>(source)); !status.ok()) {
      finish(going, FinishReason::None, std::move(status));
      return;
    }
    held_[target] = held_[source];
  }
  going.beams = std::move(step).value();
}

namespace {

// Submits every prompt (an encoder-decoder's with its first-run inputs) and
// waits for each request's `result`; a prompt refused cancels those submitted before it.
template <typename T, typename Submit, typename Result>
StatusOr<std::vector<T>> submitAll(std::span<const std::vector<int64_t>> prompts,
                                   std::span<const std::vector<InputTensor>> firstRunInputs, Submit submit,
                                   Result result) {
  if (!firstRunInputs.empty() && firstRunInputs.size() != prompts.size())
    return invalidArgument(fmt::format("{} prompts, but first-run inputs for {}", prompts.size(),
                                       firstRunInputs.size()));
  std::vector<std::shared_ptr<Request>> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    StatusOr<std::shared_ptr<Request>> request =
        submit(prompts[i],
               firstRunInputs.empty() ? std::span<const InputTensor>() : std::span<const InputTensor>(firstRunInputs[i]));
    if (!request.ok()) {
      for (const std::shared_ptr<Request> &submitted : requests) submitted->cancel();
      return Status(request.status().code(), fmt::format("prompt {}: {}", i, request.status().message()));
    }
    requests.push_back(std::move(request).value());
  }
  std::vector<T> results;
  for (const std::shared_ptr<Request> &request : requests) {
    auto found = result(*request);
    if (!found.ok()) return found.status();
    results.push_back(std::move(found).value());
  }
  return results;
}

}  // namespace

StatusOr<std::vector<GeneratedSequence>> generate(Scheduler &scheduler, std::span<const std::vector<int64_t>> prompts,
                                                  const GenerationOptions &options,
                                                  std::span<const std::vector<InputTensor>> firstRunInputs) {
  return submitAll<GeneratedSequence>(
      prompts, firstRunInputs,
      [&](std::span<const int64_t> prompt, std::span<const InputTensor> inputs) {
        return scheduler.submit(prompt, options, inputs);
      },
      [](Request &request) { return request.wait(); });
}

StatusOr<std::vector<std::vector<Hypothesis>>> beamSearch(Scheduler &scheduler,
                                                          std::span<const std::vector<int64_t>> prompts,
                                                          const BeamSearchOptions &options,
                                                          std::span<const std::vector<InputTensor>> firstRunInputs) {
  return submitAll<std::vector<Hypothesis>>(
      prompts, firstRunInputs,
      [&](std::span<const int64_t> prompt, std::span<const InputTensor> inputs) {
        return scheduler.submitBeamSearch(prompt, options, inputs);
      },
      [](Request &request) { return request.hypotheses(); });
}

}  // namespace ein
