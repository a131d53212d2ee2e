// Continuous batching for a decoder that serves many sequences (a
// SequencePool underneath): requests are submitted from any thread, each a
// prompt and its own generation options; one thread of the scheduler runs
// step after step, each the next token of every sequence generating and,
// within the step's tokens, chunks of the prompts of sequences starting (a
// long prompt is taken in chunks between decode steps, so it does not stall
// the others). Sequences join and leave between steps; each request's tokens
// stream to its caller as they are chosen (README "Generating text").
#pragma once

#include <atomic>
#include <cstddef>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ein/beam_search.hpp"
#include "ein/generate.hpp"
#include "ein/sequence_pool.hpp"
#include "ein/status.hpp"

namespace ein {

struct SchedulerOptions {
  // Sequences generating at once; more requests wait for a place.
  int maxSequences = 16;
  int threads = defaultThreadCount();
  // The most tokens one step runs: every generating sequence's next token
  // first, then prompt chunks up to this. 0: 256, or the model's most per
  // run when smaller. At least maxSequences.
  int64_t stepTokens = 0;
  // Requests waiting for a place at most; a submit beyond fails with ResourceExhausted.
  size_t maxWaiting = 1024;
  // A request whose prompt begins as the tokens a sequence's cache holds (a
  // finished request's conversation, a shared system prompt) starts from
  // them instead of running them again: from a free sequence's cache as it
  // is, or from a copy of a generating one's when that saves at least
  // kCopiedPrefixMinimum more tokens. The tokens are the same as without.
  bool reusePrefixes = true;
  static constexpr int64_t kCopiedPrefixMinimum = 16;
  // The paged key/value cache (SequencePoolOptions): rows a block, and
  // blocks (0: as many as every sequence's whole cache takes). With fewer,
  // a step takes what blocks are free: the caches kept of finished requests
  // go first, a sequence that finds none waits, and when none can go on the
  // youngest request holding blocks is preempted: its blocks go to the
  // others, it waits again ahead of every other waiting request, and when
  // it has a sequence and blocks again its prompt and tokens so far run
  // again (recomputed, as vLLM's preemption does) before it goes on with the
  // same sampler. Its stream goes on as if nothing happened. A request that
  // holds every block in use and needs more ends with ResourceExhausted.
  int64_t cacheBlockRows = 16;
  int64_t cacheBlocks = 0;
};

// One submitted generation, shared by its caller and the scheduler; any
// thread may read it, and dropping it does not stop the generation (cancel() does).
class Request {
 public:
  // Blocks until the next token that next() has not returned yet: the
  // token; nullopt once every token has been returned and the request has
  // ended (finishReason() says why); or the error that ended it.
  StatusOr<std::optional<int64_t>> next();
  // Blocks until the request ends: every token it produced and why it ended
  // (a beam search's: its best hypothesis, whose tokens next() returns once
  // it has ended).
  StatusOr<GeneratedSequence> wait();
  // A beam search's (Scheduler::submitBeamSearch): blocks until it ends; its
  // best returnSequences hypotheses, best first (none when it was
  // cancelled). A generation's: InvalidArgument.
  StatusOr<std::vector<Hypothesis>> hypotheses();
  // Ends the request before the scheduler's next step (FinishReason::Cancelled);
  // its tokens so far stand. Nothing happens to a request that has ended.
  void cancel();
  bool done() const;
  FinishReason finishReason() const;
  int64_t promptTokens() const { return static_cast<int64_t>(prompt_.size()); }
  // The sequences it holds while it generates: its beams, or one.
  int sequences() const { return beamSearch_ ? beamSearch_->beams : 1; }
  // The prompt's first tokens whose keys and values came from an earlier
  // sequence (SchedulerOptions::reusePrefixes) instead of a run; known once it started.
  int64_t cachedPromptTokens() const;
  // How many times the request gave its cache blocks to others and ran its
  // tokens again (SchedulerOptions::cacheBlocks).
  int64_t preemptions() const;

 private:
  friend class Scheduler;
  // A first-run input (an encoder's) as the request holds it until its
  // sequence's first run.
  struct HeldInput {
    std::string name;
    ElementType dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> data;
  };
  Request(std::vector<int64_t> prompt, GenerationOptions options, std::optional<BeamSearchOptions> beamSearch,
          int64_t beamLimit, std::vector<HeldInput> firstRunInputs)
      : prompt_(std::move(prompt)),
        options_(std::move(options)),
        beamSearch_(std::move(beamSearch)),
        beamLimit_(beamLimit),
        firstRunInputs_(std::move(firstRunInputs)) {}
  std::vector<InputTensor> firstRunInputs() const;
  // Called by the scheduler's thread.
  void push(int64_t token);
  void end(FinishReason reason, Status status = Status());

  const std::vector<int64_t> prompt_;
  const GenerationOptions options_;
  // A beam search's options, and its most new tokens (maxNewTokens, or
  // fewer where the cache ends).
  const std::optional<BeamSearchOptions> beamSearch_;
  const int64_t beamLimit_;
  const std::vector<HeldInput> firstRunInputs_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int64_t> tokens_;
  size_t returned_ = 0;  // tokens next() has returned
  FinishReason finish_ = FinishReason::None;
  bool ending_ = false;  // end() was called: the first call ends it
  bool ended_ = false;
  Status error_;
  std::vector<Hypothesis> hypotheses_;
  bool cancelled_ = false;
  int64_t cached_ = 0;
  int64_t preemptions_ = 0;
  // The scheduler's thread's alone: set when the request's sequence is
  // preempted, taken when it is admitted again.
  struct Resumption {
    // What its cache must hold again: the prompt, then every token chosen (a
    // beam search starts again from its prompt: it has streamed nothing).
    std::vector<int64_t> tokens;
    uint64_t sampler = 0;
    uint64_t admitted = 0;  // its place in the order of admission, kept
  };
  std::optional<Resumption> resumption_;
};

class Scheduler {
 public:
  // Fails as SequencePool::create does for a model that serves one sequence
  // per run, and for options outside their ranges. Starts the scheduler's
  // thread. reusePrefixes has no effect for a model that keeps state at a
  // sequence's first run: its cache depends on more than the prompt.
  static StatusOr<std::unique_ptr<Scheduler>> create(std::shared_ptr<const Model> model,
                                                     SchedulerOptions options = {});
  ~Scheduler();  // shutdown()
  Scheduler(const Scheduler &) = delete;
  Scheduler &operator=(const Scheduler &) = delete;

  const Model &model() const { return pool_->model(); }
  int maxSequences() const { return pool_->maxSequences(); }
  int64_t stepTokens() const { return stepTokens_; }
  // The most tokens a sequence holds: its prompt and the tokens fed back
  // (SequencePool::maxSequenceTokens); a generation ends there (CacheFull).
  int64_t maxSequenceTokens() const { return pool_->maxSequenceTokens(); }

  // From any thread. Checks the prompt (not empty, every id inside the
  // vocabulary, fitting the cache), the options and the first-run inputs
  // before it queues the request; a generation that fills the cache ends
  // with CacheFull. An encoder-decoder's request gives the inputs its
  // sequence's first run reads (the encoder's: Whisper's features, T5's ids
  // and mask), copied here: that run takes the prompt's first stepTokens()
  // alone, in a step of its own before the others' (SequencePool::run), and
  // a prompt never starts from another request's cache. The
  // options' onToken, when set, is called on the scheduler's thread with
  // each token as it is chosen (before next() returns it); returning false
  // cancels the request. idsInput and logitsOutput name the model's ids
  // input and its output, or are empty.
  StatusOr<std::shared_ptr<Request>> submit(std::span<const int64_t> prompt, GenerationOptions options = {},
                                            std::span<const InputTensor> firstRunInputs = {});
  // A beam search of `prompt` as ein::beamSearch does it alone (the same
  // hypotheses), its beams a sequence each: checked as submit() checks a
  // prompt, and that the beams are at most maxSequences() and, with a
  // bounded paged cache, that its first step's blocks fit it (the prompt's,
  // shared, and one a beam for its first token).
  // It waits until that many sequences are free; preempted, it starts again.
  // Request::hypotheses() returns what it found.
  StatusOr<std::shared_ptr<Request>> submitBeamSearch(std::span<const int64_t> prompt, BeamSearchOptions options,
                                                      std::span<const InputTensor> firstRunInputs = {});

  // Ends every request not yet ended (Cancelled, their tokens standing) and
  // stops the scheduler's thread; a later submit fails. Waits for the step
  // running to finish (but for a call from an onToken, which returns at once).
  void shutdown();

  // Requests generating, and waiting for a place (a snapshot). A request
  // no longer counts once its end can be seen (wait() or next() returns).
  size_t running() const;
  size_t waiting() const;
  // The paged cache's blocks (0: not paged) and those the requests
  // generating hold (a snapshot after the last step; the caches kept of
  // finished requests hold blocks too, given back when a step needs them).
  int64_t cacheBlocks() const { return pool_->cacheBlocks(); }
  int64_t cacheBlocksUsed() const { return cacheBlocksUsed_.load(std::memory_order_relaxed); }

 private:
  struct Going;
  // A batch entry's request, and its beam (0 for a generation).
  struct Entry {
    Going *going;
    size_t beam;
  };
  Scheduler(std::unique_ptr<SequencePool> pool, const SchedulerOptions &options, int64_t stepTokens);
  // submit()'s checks of a prompt, the names in `options` and the first-run inputs.
  Status checkSubmission(std::span<const int64_t> prompt, const std::string &idsInput,
                         const std::string &logitsOutput, std::span<const InputTensor> firstRunInputs) const;
  // Queues a checked request.
  StatusOr<std::shared_ptr<Request>> queue(std::span<const int64_t> prompt, GenerationOptions options,
                                           std::optional<BeamSearchOptions> beamSearch, int64_t beamLimit,
                                           std::span<const InputTensor> firstRunInputs);
  void loop();
  // Gives `request` its free sequences, the first starting from the longest
  // prefix of its prompt some sequence's cache holds (reusePrefixes).
  void admit(std::shared_ptr<Request> request);
  // One step: a starting sequence's first run alone where the model keeps
  // state then, the next token of every sequence going, then prompt chunks.
  void step();
  // The requests generating, oldest admitted first.
  std::vector<Going *> goingInOrder() const;
  // The oldest starting request's first run, alone (SequencePool::run), where
  // the cache has its blocks; whether it ran.
  bool runFirstRun(const std::vector<Going *> &going);
  // Runs `batch` (its entries' tokens), then takes each entry's next token
  // where its prompt has run, or a beam search's next step once all its
  // beams' logits are in; a failed run ends its requests.
  void runAndChoose(const std::vector<SequenceTokens> &batch, const std::vector<Entry> &entries);
  // A beam search's next step: forks its beams' sequences as its search
  // says, or ends the request with what it found.
  void advanceBeams(Going &going);
  // Counts a running request's sequences free, then ends the request: a
  // caller woken by the end sees the count already down.
  void endRunning(Request &request, FinishReason reason, Status status);
  // Frees the request's sequences and ends it (endRunning()); step() drops it after.
  void finish(Going &going, FinishReason reason, Status status = Status());
  // Frees the request's sequences and their cache blocks and queues it
  // first among those waiting, to run its tokens so far again (Resumption).
  void preempt(Going &going);
  // Whether `going` is a preempted request that has yet to start its
  // tokens so far and the free blocks (less `taken`) cannot hold them all.
  bool fewBlocksFor(const Going &going, int64_t taken);
  // Whether `tokens` more for `slot` fit the paged cache's free blocks less
  // the `taken` by this step so far (counted in), giving back the caches
  // kept of finished requests while they do not.
  bool takeBlocks(size_t slot, int64_t tokens, int64_t &taken);
  // The same for `needed` blocks.
  bool takeFreeBlocks(int64_t needed, int64_t &taken);

  std::unique_ptr<SequencePool> pool_;
  const int64_t stepTokens_;
  const size_t maxWaiting_;
  const bool reusePrefixes_;
  // The scheduler's thread's alone: the requests generating, each
  // sequence's (null: free), and the tokens whose keys and values each
  // sequence's cache holds (also after its request ended).
  std::vector<std::unique_ptr<Going>> going_;
  std::vector<Going *> ownerOf_;
  std::vector<std::vector<int64_t>> held_;
  uint64_t admitted_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Request>> waiting_;
  size_t running_ = 0;
  size_t sequencesTaken_ = 0;  // by the requests running
  bool stopping_ = false;
  std::atomic<int64_t> cacheBlocksUsed_{0};
  std::thread thread_;
  std::once_flag joined_;
};

// Submits every prompt with the same options and waits for them all: each
// prompt's tokens are those it would get alone (greedy; sampling draws from
// options.seed per prompt). An encoder-decoder's prompt i comes with
// firstRunInputs[i] (empty for a decoder). A prompt that cannot run fails
// the call, and the prompts submitted before it are cancelled.
StatusOr<std::vector<GeneratedSequence>> generate(
    Scheduler &scheduler, std::span<const std::vector<int64_t>> prompts, const GenerationOptions &options = {},
    std::span<const std::vector<InputTensor>> firstRunInputs = {});

// The same for beam searches (submitBeamSearch): each prompt's hypotheses,
// those it finds alone.
StatusOr<std::vector<std::vector<Hypothesis>>> beamSearch(
    Scheduler &scheduler, std::span<const std::vector<int64_t>> prompts, const BeamSearchOptions &options,
    std::span<const std::vector<InputTensor>> firstRunInputs = {});

}  // namespace ein
