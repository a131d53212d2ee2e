#include "ein/sequence_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "api/generation_rules.hpp"
#include "api/io_checks.hpp"
#include "backends/executor.hpp"
#include "loader/dynamic_program.hpp"
#include "util/limits.hpp"
#include "program/paged_state.hpp"
#include "program/rowwise_tail.hpp"
#include "program/program.hpp"

namespace ein {

// A program instantiated at some tokens and position, kept for the next run:
// moved to a new position when only that changed (a decode step), else
// instantiated again.
struct SequencePool::Instantiation {
  std::unique_ptr<detail::Program> program;
};

namespace {

Status invalidArgument(std::string message) { return Status(StatusCode::InvalidArgument, std::move(message)); }

constexpr int64_t kMaxCacheBlockRows = 65536;

size_t blocksHolding(int64_t rows, int64_t blockRows) { return static_cast<size_t>((rows + blockRows - 1) / blockRows); }

// Holds the pool for one call; a second thread's call fails instead of waiting.
class Claim {
 public:
  explicit Claim(std::atomic<bool> &inUse) : inUse_(inUse), held_(!inUse.exchange(true, std::memory_order_acquire)) {}
  ~Claim() {
    if (held_) inUse_.store(false, std::memory_order_release);
  }
  Claim(const Claim &) = delete;
  Claim &operator=(const Claim &) = delete;
  Status status() const {
    return held_ ? Status()
                 : Status(StatusCode::Busy, "the sequence pool is in use by another thread; it takes one at a time");
  }

 private:
  std::atomic<bool> &inUse_;
  bool held_;
};

// `model`'s ids input, where it serves many sequences: the compiler planned
// it so, and it takes one integer ids input [1, t] (besides inputs read at a
// sequence's first run only) and gives one f32 logits output [1, t, vocab].
// Why not otherwise.
StatusOr<size_t> manySequencesIdsInput(const Model &model) {
  const detail::Program &program = model.program();
  if (program.sequenceTokensDim < 0 || !model.dynamicProgram())
    return invalidArgument(fmt::format(
        "'{}' serves one sequence per run{}", model.name(),
        program.oneSequence.empty() ? std::string(" (it keeps no state, or was compiled before einc planned many)")
                                    : ": " + program.oneSequence));
  const std::vector<TensorInfo> &inputs = model.inputs(), &outputs = model.outputs();
  // The ids: the one input read at every run.
  std::optional<size_t> idsInput;
  size_t everyRun = 0;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].firstRunOnly) {
      ++everyRun;
      idsInput = i;
    }
  const bool ids = everyRun == 1 &&
                   (inputs[*idsInput].dtype == DType::I64 || inputs[*idsInput].dtype == DType::I32) &&
                   inputs[*idsInput].shape.size() == 2;
  const bool logits = outputs.size() == 1 && outputs[0].dtype == DType::F32 && outputs[0].shape.size() == 3 &&
                      outputs[0].shape[2] > 0;
  if (!ids || !logits)
    return invalidArgument(fmt::format("'{}' must take one integer ids input [1, t] (besides inputs read at a "
                                       "sequence's first run only) and give one f32 logits output [1, t, vocab] "
                                       "to serve many sequences",
                                       model.name()));
  return *idsInput;
}

}  // namespace

SequencePool::SequencePool(std::shared_ptr<const Model> model, int maxSequences)
    : model_(std::move(model)), positions_(static_cast<size_t>(maxSequences), 0),
      firstRunShapes_(static_cast<size_t>(maxSequences), std::vector<std::vector<int64_t>>(model_->inputs().size())),
      keptSlotOf_(static_cast<size_t>(maxSequences)), keptReferences_(static_cast<size_t>(maxSequences), 1),
      staged_(model_->inputs().size()), firstRunStaged_(model_->inputs().size()),
      tables_(static_cast<size_t>(maxSequences)) {
  sequences_.resize(static_cast<size_t>(maxSequences));
  keptGroups_.resize(static_cast<size_t>(maxSequences));
  for (size_t sequence = 0; sequence < keptSlotOf_.size(); ++sequence)
    keptSlotOf_[sequence] = static_cast<uint32_t>(sequence);
}

SequencePool::~SequencePool() = default;

Status SequencePool::servesMany(const Model &model) { return manySequencesIdsInput(model).status(); }

StatusOr<std::unique_ptr<SequencePool>> SequencePool::create(std::shared_ptr<const Model> model,
                                                            SequencePoolOptions options) {
  if (!model) return invalidArgument("no model");
  StatusOr<size_t> idsInput = manySequencesIdsInput(*model);
  if (!idsInput.ok()) return idsInput.status();
  if (options.maxSequences < 1 || options.maxSequences > detail::kMaxSequenceSlots)
    return invalidArgument(
        fmt::format("maxSequences is {}; it takes 1 to {}", options.maxSequences, detail::kMaxSequenceSlots));
  if (Status status = detail::checkCanRun(model.get(), options.threads, Device::Cpu, -1); !status.ok()) return status;
  const detail::Program &program = model->program();
  const std::vector<TensorInfo> &inputs = model->inputs(), &outputs = model->outputs();
  // Every input but the ids is read at a sequence's first run only.
  const bool firstRunInputs = inputs.size() > 1;
  std::unique_ptr<SequencePool> pool(new SequencePool(model, options.maxSequences));
  pool->idsInput_ = *idsInput;
  pool->vocabulary_ = outputs[0].shape[2];
  // First-run inputs at their dims' least values: for the checks below and
  // the probe, which runs do not depend on.
  std::vector<std::vector<int64_t>> leastFirstRun(inputs.size());
  if (firstRunInputs) {
    std::vector<int64_t> least;
    for (const DimInfo &dim : model->dims()) least.push_back(dim.min);
    StatusOr<std::vector<std::vector<int64_t>>> shapes = model->dynamicProgram()->inputShapes(least);
    if (!shapes.ok()) return shapes.status();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].firstRunOnly) leastFirstRun[i] = shapes.value()[i];
  }
  // The largest run: the token dim's maximum, less where a check (the cache's
  // rows) allows fewer tokens from position 0; and the most rows a sequence
  // holds: one token at the last position a check allows. The checks only
  // tighten as either grows.
  const DimInfo &tokens = model->dims()[static_cast<size_t>(program.sequenceTokensDim)];
  auto fits = [&](int64_t count, int64_t position) {
    std::vector<std::vector<int64_t>> shapes = leastFirstRun;
    shapes[*idsInput] = {1, count};
    return model->outputShapes(shapes, position).ok();
  };
  auto largest = [](int64_t low, int64_t high, auto &&holds) {  // the largest in [low, high] that holds
    while (low < high) {
      const int64_t middle = low + (high - low + 1) / 2;
      if (holds(middle))
        low = middle;
      else
        high = middle - 1;
    }
    return low;
  };
  if (tokens.min < 1 || !fits(tokens.min, 0))
    return invalidArgument(fmt::format("'{}' cannot run {} token{} from an empty cache", model->name(),
                                       std::max<int64_t>(tokens.min, 1), tokens.min > 1 ? "s" : ""));
  pool->maxTokensPerRun_ = largest(tokens.min, tokens.max, [&](int64_t count) { return fits(count, 0); });
  pool->maxSequenceTokens_ = pool->maxTokensPerRun_;
  if (const int positionDim = model->positionDim(); positionDim >= 0)
    pool->maxSequenceTokens_ = 1 + largest(0, model->dims()[static_cast<size_t>(positionDim)].max,
                                           [&](int64_t last) { return fits(1, last); });
  if (options.cacheBlockRows < 0 || options.cacheBlockRows > kMaxCacheBlockRows)
    return invalidArgument(
        fmt::format("cacheBlockRows is {}; it takes 0 (no paging) to {}", options.cacheBlockRows, kMaxCacheBlockRows));
  if (options.cacheBlocks < 0 || options.cacheBlocks > SequencePoolOptions::kMaxCacheBlocks)
    return invalidArgument(fmt::format("cacheBlocks is {}; it takes 0 (enough for every sequence) to {}",
                                       options.cacheBlocks, SequencePoolOptions::kMaxCacheBlocks));
  detail::StateSlots slots;
  slots.sequences = options.maxSequences;
  // The program where attention reads two keys tells which states are kept
  // at a sequence's first run, and which are only appended to and read as
  // keys and values: paged.
  std::unique_ptr<Instantiation> probe;
  if (pool->maxSequenceTokens_ >= 2)
    if (StatusOr<const detail::Program *> probed = pool->programFor(probe, 1, 1, leastFirstRun); probed.ok()) {
      slots.probe = probed.value();
      for (const detail::Step &step : probed.value()->steps) {
        pool->firstRunSteps_ = pool->firstRunSteps_ || step.firstRun;
        pool->rowsOverKeptSteps_ = pool->rowsOverKeptSteps_ || step.rowsOverKept;
      }
    }
  if (firstRunInputs && !slots.probe)
    return invalidArgument(fmt::format("'{}' cannot run a token after its first run from its first-run inputs' least "
                                       "shapes",
                                       model->name()));
  if (options.cacheBlockRows > 0 && slots.probe)
    if (detail::pagedStatesOf(*slots.probe, options.cacheBlockRows).any()) {
      const int64_t blocksPerSequence = (pool->maxSequenceTokens_ + options.cacheBlockRows - 1) / options.cacheBlockRows;
      const int64_t blocks = options.cacheBlocks > 0 ? options.cacheBlocks : blocksPerSequence * options.maxSequences;
      if (blocks > SequencePoolOptions::kMaxCacheBlocks)
        return invalidArgument(fmt::format("{} sequences of {} rows take {} cache blocks of {} rows, beyond {}: give "
                                           "cacheBlocks or more rows a block",
                                           options.maxSequences, pool->maxSequenceTokens_, blocks,
                                           options.cacheBlockRows, SequencePoolOptions::kMaxCacheBlocks));
      slots.blockRows = options.cacheBlockRows;
      slots.cacheBlocks = static_cast<uint32_t>(blocks);
      pool->blockRows_ = options.cacheBlockRows;
      pool->references_.assign(static_cast<size_t>(blocks), 0);
      for (int64_t block = blocks; block-- > 0;) pool->free_.push_back(static_cast<uint32_t>(block));
    }
  // The steps that compute the logits row by row, which a run runs over
  // the rows read only: the same steps at any tokens and position.
  std::unique_ptr<Instantiation> start;
  if (StatusOr<const detail::Program *> program = pool->programFor(start, tokens.min, 0, leastFirstRun); program.ok())
    if (std::optional<detail::RowwiseTail> tail = detail::rowwiseTailOf(*program.value()))
      pool->rowwiseTail_ = std::make_unique<detail::RowwiseTail>(std::move(tail).value());
  SessionOptions session;
  session.threads = options.threads;
  StatusOr<std::unique_ptr<detail::Executor>> executor = detail::createExecutor(program, session, slots);
  if (!executor.ok()) return executor.status();
  pool->executor_ = std::move(executor).value();
  return pool;
}

int64_t SequencePool::position(int sequence) const {
  return sequence >= 0 && sequence < maxSequences() ? positions_[static_cast<size_t>(sequence)] : -1;
}

Status SequencePool::checkSequence(int sequence) const {
  if (sequence < 0 || sequence >= maxSequences())
    return invalidArgument(fmt::format("sequence {} is not one of the pool's 0..{}", sequence, maxSequences() - 1));
  return Status();
}

Status SequencePool::reset(int sequence) { return truncate(sequence, 0); }

Status SequencePool::truncate(int sequence, int64_t rows) {
  Claim claim(inUse_);
  if (!claim.status().ok()) return claim.status();
  if (Status status = checkSequence(sequence); !status.ok()) return status;
  int64_t &position = positions_[static_cast<size_t>(sequence)];
  if (rows < 0 || rows > position)
    return invalidArgument(
        fmt::format("sequence {} holds {} rows; it cannot keep {}", sequence, position, rows));
  position = rows;
  if (blockRows_ > 0) releaseBlocks(sequence, blocksHolding(rows, blockRows_));
  return Status();
}

void SequencePool::releaseBlocks(int sequence, size_t first) {
  std::vector<uint32_t> &table = tables_[static_cast<size_t>(sequence)];
  for (size_t n = first; n < table.size(); ++n)
    if (--references_[table[n]] == 0) free_.push_back(table[n]);
  if (first < table.size()) table.resize(first);
}

int64_t SequencePool::blocksWritten(int sequence, int64_t tokens, std::vector<uint32_t> &shared) const {
  const std::vector<uint32_t> &table = tables_[static_cast<size_t>(sequence)];
  const int64_t from = positions_[static_cast<size_t>(sequence)];
  const size_t needed = blocksHolding(from + tokens, blockRows_);
  for (size_t n = static_cast<size_t>(from / blockRows_); n < std::min(table.size(), needed); ++n)
    if (references_[table[n]] > 1) shared.push_back(table[n]);
  return needed > table.size() ? static_cast<int64_t>(needed - table.size()) : 0;
}

int64_t SequencePool::blocksToRun(int sequence, int64_t tokens) const {
  if (blockRows_ == 0 || !checkSequence(sequence).ok() || tokens < 1) return 0;
  std::vector<uint32_t> shared;  // each copied before it is written
  const int64_t added = blocksWritten(sequence, tokens, shared);
  return added + static_cast<int64_t>(shared.size());
}

int64_t SequencePool::blocksToRun(std::span<const SequenceTokens> batch) const {
  int64_t taken = 0;
  std::vector<uint32_t> shared;  // each shared block the run writes into, once a sequence writing it
  for (const SequenceTokens &part : batch)
    taken += blocksWritten(part.sequence, static_cast<int64_t>(part.tokens.size()), shared);
  std::map<uint32_t, uint32_t> writers;
  for (uint32_t block : shared) ++writers[block];
  // Every writer copies a shared block but the last, when all its holders write.
  for (const auto &[block, count] : writers) taken += count - (count == references_[block] ? 1 : 0);
  return taken;
}

int64_t SequencePool::blocksHeld(std::span<const int> sequences) const {
  std::vector<bool> held(references_.size(), false);
  int64_t count = 0;
  for (int sequence : sequences)
    if (checkSequence(sequence).ok())
      for (uint32_t block : tables_[static_cast<size_t>(sequence)]) {
        count += !held[block];
        held[block] = true;
      }
  return count;
}

Status SequencePool::takeBlocks(int sequence, int64_t from, int64_t rows) {
  std::vector<uint32_t> &table = tables_[static_cast<size_t>(sequence)];
  const size_t needed = blocksHolding(rows, blockRows_);
  for (size_t n = static_cast<size_t>(from / blockRows_); n < std::min(table.size(), needed); ++n) {
    if (references_[table[n]] == 1) continue;
    const uint32_t copy = free_.back();
    if (Status status = executor_->copyBlock(copy, table[n]); !status.ok()) return status;
    free_.pop_back();
    --references_[table[n]];
    references_[copy] = 1;
    table[n] = copy;
  }
  while (table.size() < needed) {
    table.push_back(free_.back());
    references_[free_.back()] = 1;
    free_.pop_back();
  }
  return Status();
}

Status SequencePool::copy(int target, int source) {
  Claim claim(inUse_);
  if (!claim.status().ok()) return claim.status();
  if (Status status = checkSequence(target); !status.ok()) return status;
  if (Status status = checkSequence(source); !status.ok()) return status;
  if (target == source) return Status();
  if (Status status = executor_->copySlot(static_cast<uint32_t>(target), static_cast<uint32_t>(source)); !status.ok())
    return status;
  positions_[static_cast<size_t>(target)] = positions_[static_cast<size_t>(source)];
  firstRunShapes_[static_cast<size_t>(target)] = firstRunShapes_[static_cast<size_t>(source)];
  --keptReferences_[keptSlotOf_[static_cast<size_t>(target)]];
  keptSlotOf_[static_cast<size_t>(target)] = keptSlotOf_[static_cast<size_t>(source)];
  ++keptReferences_[keptSlotOf_[static_cast<size_t>(target)]];
  if (blockRows_ > 0) {  // shared until written
    releaseBlocks(target, 0);
    tables_[static_cast<size_t>(target)] = tables_[static_cast<size_t>(source)];
    for (uint32_t block : tables_[static_cast<size_t>(target)]) ++references_[block];
  }
  return Status();
}

void SequencePool::ownKeptSlot(int sequence) {
  uint32_t &slot = keptSlotOf_[static_cast<size_t>(sequence)];
  if (keptReferences_[slot] == 1) return;
  --keptReferences_[slot];
  // Each sequence holds one kept slot and this one shares its own, so one is free.
  slot = static_cast<uint32_t>(std::find(keptReferences_.begin(), keptReferences_.end(), 0u) - keptReferences_.begin());
  keptReferences_[slot] = 1;
}

StatusOr<const detail::Program *> SequencePool::programFor(std::unique_ptr<Instantiation> &kept, int64_t tokens,
                                                           int64_t position,
                                                           const std::vector<std::vector<int64_t>> &firstRunShapes) {
  const detail::DynamicProgram &dynamic = *model_->dynamicProgram();
  StatusOr<detail::DimBinding> binding = bindingAt(firstRunShapes, tokens, position);
  if (!binding.ok()) return binding.status();
  if (kept && kept->program->dimValues == binding->dims) return kept->program.get();
  if (kept && dynamic.sameDimsButPosition(*kept->program, binding->dims)) {
    if (Status status = dynamic.reposition(*kept->program, binding.value()); status.ok()) return kept->program.get();
    kept.reset();  // left part-way: instantiated again below
  }
  StatusOr<std::unique_ptr<detail::Program>> instance = dynamic.instantiate(binding.value());
  if (!instance.ok()) return instance.status();
  kept = std::make_unique<Instantiation>(Instantiation{std::move(instance).value()});
  return kept->program.get();
}

Status SequencePool::checkFirstRunInputs(std::span<const InputTensor> given) const {
  const std::vector<TensorInfo> &inputs = model_->inputs();
  std::vector<bool> seen(inputs.size(), false);
  for (const InputTensor &input : given) {
    const size_t i = firstRunInputIndex(input.name);
    if (i == inputs.size())
      return invalidArgument(fmt::format("'{}' reads no input \"{}\" at a sequence's first run (those it reads "
                                         "then: {})",
                                         model_->name(), input.name, firstRunNames()));
    if (seen[i]) return invalidArgument(fmt::format("input \"{}\" is given twice", input.name));
    seen[i] = true;
    const TensorInfo &info = inputs[i];
    if (Status status = detail::checkInput(info, model_->dims(), input.dtype, input.shape, input.data, input.bytes);
        !status.ok())
      return status;
    if (Status status = detail::checkInputValues(info, input.dtype, input.shape, input.data); !status.ok())
      return status;
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].firstRunOnly && !seen[i])
      return invalidArgument(fmt::format("a sequence's first run reads input \"{}\" ({}), which is not given",
                                         inputs[i].name, detail::describe(inputs[i])));
  return Status();
}

Status SequencePool::stageFirstRunInputs(size_t entry, const SequenceTokens &part) {
  if (Status status = checkFirstRunInputs(part.firstRunInputs); !status.ok())
    return Status(status.code(), fmt::format("entry {}: sequence {} starts: {}", entry, part.sequence, status.message()));
  const std::vector<TensorInfo> &inputs = model_->inputs();
  for (const InputTensor &input : part.firstRunInputs) {
    const size_t i = firstRunInputIndex(input.name);  // one of them: checked above
    const TensorInfo &info = inputs[i];
    staged_[i].resize(input.bytes / elementSize(input.dtype) * dtypeSize(info.dtype));
    if (Status status = detail::convertInput(info, input.dtype, input.shape, input.data, staged_[i].data());
        !status.ok())
      return Status(status.code(), fmt::format("entry {}: {}", entry, status.message()));
    firstRunStaged_[i].assign(input.shape.begin(), input.shape.end());
  }
  return Status();
}

StatusOr<detail::DimBinding> SequencePool::bindingAt(const std::vector<std::vector<int64_t>> &firstRunShapes,
                                                     int64_t tokens, int64_t position) const {
  const std::vector<int64_t> ids = {1, tokens};
  std::vector<std::span<const int64_t>> shapes(firstRunShapes.begin(), firstRunShapes.end());
  shapes[idsInput_] = ids;
  return model_->dynamicProgram()->bind(shapes, position);
}

Status SequencePool::fits(int sequence, int64_t tokens) const {
  if (Status status = checkSequence(sequence); !status.ok()) return status;
  return bindingAt(firstRunShapes_[static_cast<size_t>(sequence)], tokens, positions_[static_cast<size_t>(sequence)])
      .status();
}

Status SequencePool::fitsFirstRun(std::span<const InputTensor> firstRunInputs, int64_t tokens,
                                  int64_t position) const {
  std::vector<std::vector<int64_t>> shapes(model_->inputs().size());
  for (const InputTensor &input : firstRunInputs)
    if (const size_t i = firstRunInputIndex(input.name); i < shapes.size())
      shapes[i].assign(input.shape.begin(), input.shape.end());
  return bindingAt(shapes, tokens, position).status();
}

size_t SequencePool::firstRunInputIndex(std::string_view name) const {
  const std::vector<TensorInfo> &inputs = model_->inputs();
  size_t i = 0;
  while (i < inputs.size() && (inputs[i].name != name || !inputs[i].firstRunOnly)) ++i;
  return i;
}

std::string SequencePool::firstRunNames() const {
  std::vector<TensorInfo> firstRun;
  for (const TensorInfo &input : model_->inputs())
    if (input.firstRunOnly) firstRun.push_back(input);
  return detail::namesOf(firstRun);
}

Status SequencePool::run(std::span<const SequenceTokens> batch) {
  Claim claim(inUse_);
  if (!claim.status().ok()) return claim.status();
  lastRows_.clear();
  if (batch.empty()) return invalidArgument("the run has no sequences");
  const TensorInfo &ids = model_->inputs()[idsInput_];
  std::vector<bool> seen(positions_.size(), false);
  int64_t tokens = 0;
  // A sequence's first run runs the steps that keep what its first-run inputs give: alone.
  bool firstRun = false;
  for (size_t entry = 0; entry < batch.size(); ++entry) {
    const SequenceTokens &part = batch[entry];
    if (Status status = checkSequence(part.sequence); !status.ok())
      return invalidArgument(fmt::format("entry {}: {}", entry, status.message()));
    if (seen[static_cast<size_t>(part.sequence)])
      return invalidArgument(fmt::format("entry {}: sequence {} is in the run twice", entry, part.sequence));
    seen[static_cast<size_t>(part.sequence)] = true;
    if (part.tokens.empty()) return invalidArgument(fmt::format("entry {}: sequence {} has no tokens", entry, part.sequence));
    for (size_t i = 0; i < part.tokens.size(); ++i)
      if (ids.upperBound > 0 && (part.tokens[i] < 0 || part.tokens[i] >= ids.upperBound))
        return invalidArgument(fmt::format("entry {}: token {} is {}, outside the vocabulary [0, {}) of input \"{}\"",
                                           entry, i, part.tokens[i], ids.upperBound, ids.name));
    const int64_t position = positions_[static_cast<size_t>(part.sequence)];
    if (position > 0 && !part.firstRunInputs.empty())
      return invalidArgument(fmt::format("entry {}: sequence {} is at position {}, past its first run: it reads no "
                                         "first-run inputs until reset",
                                         entry, part.sequence, position));
    if (position == 0 && firstRunSteps_) {
      if (batch.size() > 1)
        return invalidArgument(fmt::format("entry {}: sequence {} starts, and '{}' keeps state at a sequence's first "
                                           "run: that run takes the sequence alone",
                                           entry, part.sequence, model_->name()));
      if (Status status = stageFirstRunInputs(entry, part); !status.ok()) return status;
      firstRun = true;
    } else if (!part.firstRunInputs.empty()) {
      return invalidArgument(fmt::format("entry {}: '{}' reads no inputs at a sequence's first run only", entry,
                                         model_->name()));
    }
    tokens += static_cast<int64_t>(part.tokens.size());
  }
  // Each sequence's first-run inputs bind their dims: at its first run as
  // given, after it as then. `all` runs no step that depends on them but
  // those of a first run, alone: it binds them as the first entry's.
  const std::vector<std::vector<int64_t>> &allShapes =
      firstRun ? firstRunStaged_ : firstRunShapes_[static_cast<size_t>(batch[0].sequence)];
  // Every program first: a sequence that does not fit fails the run before anything runs.
  StatusOr<const detail::Program *> all = programFor(all_, tokens, 0, allShapes);
  if (!all.ok())
    return Status(all.status().code(), fmt::format("the run's {} tokens together: {}", tokens, all.status().message()));
  std::vector<detail::SequenceSlice> slices;
  uint64_t first = 0;
  for (size_t entry = 0; entry < batch.size(); ++entry) {
    const SequenceTokens &part = batch[entry];
    const auto sequence = static_cast<size_t>(part.sequence);
    const auto count = static_cast<int64_t>(part.tokens.size());
    StatusOr<const detail::Program *> own =
        programFor(sequences_[sequence], count, positions_[sequence], firstRun ? firstRunStaged_ : firstRunShapes_[sequence]);
    if (!own.ok())
      return Status(own.status().code(), fmt::format("entry {}: sequence {} at position {}: {}", entry, part.sequence,
                                                     positions_[sequence], own.status().message()));
    slices.push_back({own.value(), first, static_cast<uint32_t>(part.sequence), 0, {}});
    first += static_cast<uint64_t>(count);
  }
  // Only each entry's last token's logits are read: where the model's last
  // steps compute them row by row, they run over those rows alone.
  readRows_.clear();
  for (uint64_t row = 0; const SequenceTokens &part : batch) {
    row += part.tokens.size();
    readRows_.push_back(row - 1);
  }
  const detail::Program *tail = nullptr;
  if (rowwiseTail_ && readRows_.size() < static_cast<size_t>(tokens))
    if (StatusOr<const detail::Program *> program =
            programFor(tail_, static_cast<int64_t>(readRows_.size()), 0, allShapes);
        program.ok())
      tail = program.value();
  // The blocks every sequence's rows after the run take, all free before any is taken.
  if (blockRows_ > 0) {
    const int64_t needed = blocksToRun(batch);
    if (needed > freeCacheBlocks())
      return Status(StatusCode::ResourceExhausted,
                    fmt::format("the run needs {} cache blocks of {} rows, and {} of the {} are free", needed,
                                blockRows_, freeCacheBlocks(), cacheBlocks()));
    for (size_t entry = 0; entry < batch.size(); ++entry) {
      const auto sequence = static_cast<size_t>(batch[entry].sequence);
      if (Status status = takeBlocks(batch[entry].sequence, positions_[sequence],
                                     positions_[sequence] + static_cast<int64_t>(batch[entry].tokens.size()));
          !status.ok())
        return status;
    }
    for (size_t entry = 0; entry < batch.size(); ++entry) slices[entry].blocks = tables_[static_cast<size_t>(batch[entry].sequence)];
  }
  // A first run writes what it keeps into a kept slot no other sequence shares.
  if (firstRun) ownKeptSlot(batch[0].sequence);
  for (size_t entry = 0; entry < batch.size(); ++entry)
    slices[entry].keptSlot = keptSlotOf_[static_cast<size_t>(batch[entry].sequence)];
  // Entries side by side that share a kept slot (beams of one search) run
  // the steps over kept states once for them all: an encoder's keys and
  // values read once a step rather than once a beam. Their program is at
  // position 0, as such steps read no position; without it they run apart.
  if (rowsOverKeptSteps_)
    for (size_t entry = 0, end = 0; entry < batch.size(); entry = end) {
      for (end = entry + 1; end < batch.size() && slices[end].keptSlot == slices[entry].keptSlot;) ++end;
      if (end - entry < 2) continue;
      const uint64_t groupTokens = slices[end - 1].firstToken + batch[end - 1].tokens.size() - slices[entry].firstToken;
      if (StatusOr<const detail::Program *> program =
              programFor(keptGroups_[slices[entry].keptSlot], static_cast<int64_t>(groupTokens), 0,
                         firstRunShapes_[static_cast<size_t>(batch[entry].sequence)]);
          program.ok()) {
        slices[entry].keptGroup = program.value();
        slices[entry].keptGroupSize = static_cast<uint32_t>(end - entry);
      }
    }
  ids_.clear();
  for (const SequenceTokens &part : batch) ids_.insert(ids_.end(), part.tokens.begin(), part.tokens.end());
  // The ids in the input's type.
  std::vector<int32_t> narrow;
  const std::byte *idsData = reinterpret_cast<const std::byte *>(ids_.data());
  if (ids.dtype == DType::I32) {
    narrow.assign(ids_.begin(), ids_.end());
    idsData = reinterpret_cast<const std::byte *>(narrow.data());
  }
  // The first-run inputs are read at a first run only.
  std::vector<const std::byte *> inputs(model_->inputs().size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (firstRun && model_->inputs()[i].firstRunOnly) inputs[i] = staged_[i].data();
  inputs[idsInput_] = idsData;
  logits_.resize((tail ? readRows_.size() : static_cast<size_t>(tokens)) * static_cast<size_t>(vocabulary_));
  std::byte *outputs[] = {reinterpret_cast<std::byte *>(logits_.data())};
  detail::RowsRead rowsRead;
  if (tail) rowsRead = {tail, rowwiseTail_->firstStep, rowwiseTail_->carried, readRows_};
  if (Status status = executor_->runSequences(*all.value(), slices, inputs, outputs, tail ? &rowsRead : nullptr);
      !status.ok())
    return status;
  if (firstRun) firstRunShapes_[static_cast<size_t>(batch[0].sequence)] = firstRunStaged_;
  for (size_t entry = 0; entry < batch.size(); ++entry) {
    positions_[static_cast<size_t>(batch[entry].sequence)] += static_cast<int64_t>(batch[entry].tokens.size());
    lastRows_.push_back(tail ? entry : static_cast<size_t>(readRows_[entry]));
  }
  return Status();
}

std::span<const float> SequencePool::lastLogits(size_t entry) const {
  if (entry >= lastRows_.size()) return {};
  return {logits_.data() + lastRows_[entry] * static_cast<size_t>(vocabulary_), static_cast<size_t>(vocabulary_)};
}

}  // namespace ein
