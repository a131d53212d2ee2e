// Many sequences of one decoder, run together: a decoder written for one
// sequence (session state, a position, an integer ids input [1, t] and a
// logits output [1, t, vocab]) keeps a state per sequence here, and one run
// takes tokens of any number of them (a prompt for one, the next token for
// others), laid end to end: the projections, norms and MLP read their
// weights once for all the tokens; appends and attention run per sequence,
// over its own cache (LANGUAGE.md "Many sequences at once"). The caches
// (the states only appended to and read as attention's keys and values)
// are paged, as vLLM's PagedAttention: one pool of blocks of a few rows for
// every sequence, a sequence taking blocks as it grows and giving them back
// when it is reset; a copied sequence shares the blocks of the one it was
// copied from until it writes into one of them.
//
// An encoder-decoder (an input read at a sequence's first run only, whose
// result keep() holds in the state: Whisper's audio, T5's source) runs a
// sequence's first run alone, with those inputs; its later runs run with
// the others'. Sequences copied from one share what it keeps (the
// encoder's keys and values), so the beams of one search read one copy.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ein/model.hpp"
#include "ein/session.hpp"
#include "ein/status.hpp"

namespace ein {

namespace detail {
class Executor;
struct Program;
struct DimBinding;
struct RowwiseTail;
}  // namespace detail

struct SequencePoolOptions {
  // Sequences kept at once.
  int maxSequences = 16;
  int threads = defaultThreadCount();
  // The key/value cache's rows a block, and its blocks: 0 blocks, as many
  // as every sequence's whole cache takes (so the pool never runs out);
  // fewer bound its memory, and a run needing more blocks than are free
  // fails. 0 rows a block: no paging, each sequence a whole cache of its own.
  int64_t cacheBlockRows = 16;
  int64_t cacheBlocks = 0;
  static constexpr int64_t kMaxCacheBlocks = int64_t{1} << 24;
};

// One sequence's part of a run: its next tokens, appended at its position.
struct SequenceTokens {
  int sequence = 0;  // 0 .. maxSequences - 1
  std::span<const int64_t> tokens;
  // At the sequence's first run (position 0), each input of the model read
  // then only (TensorInfo::firstRunOnly), given as Session::setInput takes
  // one; empty at later runs and for a model without such inputs.
  std::span<const InputTensor> firstRunInputs = {};
};

class SequencePool {
 public:
  // Fails for a model that serves one sequence per run (the compiler's reason
  // when it gave one), or one without the ids input and logits output (its
  // only inputs besides those read at a sequence's first run).
  static StatusOr<std::unique_ptr<SequencePool>> create(std::shared_ptr<const Model> model,
                                                        SequencePoolOptions options = {});
  // Whether create() takes `model` (as far as the model itself decides it):
  // OK, or the reason it serves one sequence per run.
  static Status servesMany(const Model &model);
  ~SequencePool();
  SequencePool(const SequencePool &) = delete;
  SequencePool &operator=(const SequencePool &) = delete;

  const Model &model() const { return *model_; }
  int maxSequences() const { return static_cast<int>(positions_.size()); }
  // The most tokens one run takes, all sequences together: the model's
  // token dim's largest value that its checks allow from position 0.
  int64_t maxTokensPerRun() const { return maxTokensPerRun_; }
  // The most tokens one sequence's state holds (its cache's rows): a prompt
  // and the tokens fed back after it.
  int64_t maxSequenceTokens() const { return maxSequenceTokens_; }
  // Whether a sequence's first run (position 0) must be a run of its own:
  // the model keeps state then (keep(), an encoder-decoder's).
  bool firstRunsAlone() const { return firstRunSteps_; }
  // The input of the ids, read at every run.
  const TensorInfo &idsInput() const { return model_->inputs()[idsInput_]; }
  // Checks a sequence's first-run inputs as its first run will: every
  // input the model reads then given once, of its type and shape, with
  // values inside its bounds. For a caller that holds them for a later run.
  Status checkFirstRunInputs(std::span<const InputTensor> inputs) const;
  // Whether `tokens` more ids for `sequence` fit its cache and the model's
  // dims, as its next run checks them.
  Status fits(int sequence, int64_t tokens) const;
  // The same for a sequence that starts with `firstRunInputs` (their
  // shapes bind the dims they name) and runs `tokens` ids from `position`.
  Status fitsFirstRun(std::span<const InputTensor> firstRunInputs, int64_t tokens, int64_t position) const;
  // The rows in a sequence's state; reset() empties it.
  int64_t position(int sequence) const;
  Status reset(int sequence);
  // Keeps the first `rows` rows of a sequence's state (at most its
  // position), as if only the tokens that made them had run: the next run
  // appends at `rows`. A prefix kept for a new sequence that begins alike.
  Status truncate(int sequence, int64_t rows);
  // Makes sequence `target`'s state and position `source`'s: a fork, each
  // going on its own way after. A paged cache's blocks are shared, not
  // copied, until one of them writes into a shared block; what `source`
  // kept at its first run is shared until `target` runs a first run anew.
  Status copy(int target, int source);

  // The paged cache: rows a block (0: not paged, when the model keeps no
  // state only appended to and read as keys and values, or the options
  // said so; other states keep a whole copy per sequence either way),
  // its blocks, those no sequence holds, and the blocks a run of `tokens`
  // more for `sequence` would take from them (new rows and shared blocks
  // it writes into, copied first).
  int64_t cacheBlockRows() const { return blockRows_; }
  int64_t cacheBlocks() const { return static_cast<int64_t>(references_.size()); }
  int64_t freeCacheBlocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t blocksToRun(int sequence, int64_t tokens) const;
  // The same for a run of `batch` (its tokens' counts read): the new rows'
  // and copies of the shared blocks it writes into, a block all whose
  // holders write into it copied for all but the last.
  int64_t blocksToRun(std::span<const SequenceTokens> batch) const;
  // The blocks these sequences hold, each counted once.
  int64_t blocksHeld(std::span<const int> sequences) const;

  // One thread at a time: a call while another thread is inside run() or
  // reset() fails with StatusCode::Busy.
  // Runs every entry's tokens for its sequence (each sequence at most once),
  // all in one pass. Checked before anything runs: the sequences, the ids
  // (inside the vocabulary), each sequence's tokens fitting its cache from
  // its position, the run's tokens together fitting the model's token dim,
  // and for a model with steps of a sequence's first run, that such a run
  // is the run's only entry, with every first-run input (checked as
  // Session::setInput checks it). A failed run leaves every sequence as it was.
  Status run(std::span<const SequenceTokens> batch);
  // After run(): the logits of entry `entry`'s last token.
  std::span<const float> lastLogits(size_t entry) const;

 private:
  struct Instantiation;
  SequencePool(std::shared_ptr<const Model> model, int maxSequences);
  Status checkSequence(int sequence) const;
  // The blocks a run of `tokens` more for `sequence` adds to its table; the
  // shared blocks it writes into are appended to `shared`.
  int64_t blocksWritten(int sequence, int64_t tokens, std::vector<uint32_t> &shared) const;
  // Gives back `sequence`'s blocks from block `first` on.
  void releaseBlocks(int sequence, size_t first);
  // Makes `sequence`'s blocks hold its rows up to `rows`, its own from row `from` on.
  Status takeBlocks(int sequence, int64_t from, int64_t rows);
  // The model's program at `tokens` ids from `position`, its first-run
  // inputs of `firstRunShapes` (one per input; the ids' is not read).
  StatusOr<const detail::Program *> programFor(std::unique_ptr<Instantiation> &kept, int64_t tokens,
                                               int64_t position,
                                               const std::vector<std::vector<int64_t>> &firstRunShapes);
  // Checks entry `entry`'s first-run inputs and stages them for the run
  // (staged_, firstRunStaged_).
  Status stageFirstRunInputs(size_t entry, const SequenceTokens &part);
  std::string firstRunNames() const;  // "features, mask"
  // The index of the input named `name` that a first run reads (the
  // inputs' count when there is none).
  size_t firstRunInputIndex(std::string_view name) const;
  // The model's dims bound by `tokens` ids at `position`, its first-run
  // inputs of `firstRunShapes` (one per input; the ids' is not read).
  StatusOr<detail::DimBinding> bindingAt(const std::vector<std::vector<int64_t>> &firstRunShapes, int64_t tokens,
                                         int64_t position) const;
  // Gives `sequence` a kept slot of its own, for a first run.
  void ownKeptSlot(int sequence);

  std::shared_ptr<const Model> model_;
  std::unique_ptr<detail::Executor> executor_;
  size_t idsInput_ = 0;
  bool firstRunSteps_ = false;  // the model keeps state at a sequence's first run
  // It has steps that sequences sharing a kept slot run together (Step::rowsOverKept).
  bool rowsOverKeptSteps_ = false;
  int64_t vocabulary_ = 0;  // the logits' last axis
  int64_t maxTokensPerRun_ = 0, maxSequenceTokens_ = 0;
  std::vector<int64_t> positions_;
  // Each sequence's first-run inputs' shapes (per input; empty: not read
  // then), which bind their dims at its later runs.
  std::vector<std::vector<std::vector<int64_t>>> firstRunShapes_;
  std::vector<uint32_t> keptSlotOf_;       // each sequence's kept slot
  std::vector<uint32_t> keptReferences_;   // the sequences sharing each kept slot
  // The run's first-run inputs and their shapes, per input.
  std::vector<std::vector<std::byte>> staged_;
  std::vector<std::vector<int64_t>> firstRunStaged_;
  int64_t blockRows_ = 0;
  std::vector<std::vector<uint32_t>> tables_;  // each sequence's blocks, in row order
  std::vector<uint32_t> references_;           // the sequences holding each block
  std::vector<uint32_t> free_;                 // blocks none holds
  // The program at all of a run's tokens, and each sequence's at its own.
  std::unique_ptr<Instantiation> all_;
  std::vector<std::unique_ptr<Instantiation>> sequences_;
  // Each kept slot's sequences' program at their tokens together (SequenceSlice::keptGroup).
  std::vector<std::unique_ptr<Instantiation>> keptGroups_;
  // The model's last steps, which compute the logits row by row (none:
  // not so), and the program they run over the rows read at.
  std::unique_ptr<detail::RowwiseTail> rowwiseTail_;
  std::unique_ptr<Instantiation> tail_;
  std::vector<int64_t> ids_;
  std::vector<uint64_t> readRows_;  // each entry's last token's row among the run's
  std::vector<float> logits_;
  std::vector<size_t> lastRows_;  // each entry's last token's row in logits_
  std::atomic<bool> inUse_{false};
};

}  // namespace ein
