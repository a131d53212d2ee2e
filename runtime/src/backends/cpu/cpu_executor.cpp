#include "backends/cpu/cpu_executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "backends/cpu/kernels/kernels.hpp"
#include "backends/step_profile.hpp"
#include "program/paged_state.hpp"
#include "util/aligned_buffer.hpp"
#include "util/limits.hpp"
#include "util/status_macros.hpp"
#include "util/thread_pool.hpp"

namespace ein::detail {
namespace {

// The scratch floats per thread the steps of `program` need, rounded to a
// cache line, or an error for a step beyond the limit.
StatusOr<size_t> scratchFloatsFor(const Program &program) {
  size_t scratchFloats = 0;
  for (const Step &step : program.steps) {
    size_t stepFloats = cpu::scratchFloats(step.kernel);
    // Steps that compute something need scratch in proportion to tensors
    // they read, so only a model beyond the limits gets here; it is refused
    // before anything is allocated.
    if (stepFloats > kMaxScratchBytesPerThread / sizeof(float))
      return Status(StatusCode::InvalidArtifact,
                    fmt::format("{} needs {} bytes of scratch memory per thread, beyond the runtime's limit of {}",
                                step.label, std::min<uint64_t>(stepFloats, UINT64_MAX / sizeof(float)) * sizeof(float),
                                kMaxScratchBytesPerThread));
    scratchFloats = std::max(scratchFloats, stepFloats);
  }
  // Each thread's share starts on a cache line.
  return (scratchFloats + 15) / 16 * 16;
}

// Where each state tensor lives: a session's in one slot at the artifact's
// offsets; with a probe (StateSlots), laid out anew for many sequences: the
// paged states in blocks, the kept ones in a kept slot per sequence, the
// others in a slot per sequence.
struct StateLayout {
  uint32_t slots = 1;
  uint64_t slotBytes = 0, keptSlotBytes = 0;  // 64-aligned
  std::vector<uint64_t> offsets;  // per tensor: its place in its slot or kept slot
  std::vector<bool> kept;         // per tensor: a kept state
  bool placed() const { return !offsets.empty(); }
};

class CpuExecutor final : public ExecutorImplementation {
 public:
  // `layout` places each state tensor in a slot of `state`, a kept slot of
  // `keptStates` or the blocks of `blocks` (`cacheBlocks` of them).
  CpuExecutor(const Program &model, AlignedBuffer arena, AlignedBuffer state, AlignedBuffer keptStates,
              StateLayout layout, PagedStates paged, AlignedBuffer blocks, uint32_t cacheBlocks, int threads)
      : model_(model), arena_(std::move(arena)), state_(std::move(state)), keptStates_(std::move(keptStates)),
        layout_(std::move(layout)), paged_(std::move(paged)), blocks_(std::move(blocks)), cacheBlocks_(cacheBlocks),
        threads_(threads),
        pool_(threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr),
        profile_(StepProfile::wanted() ? std::make_unique<StepProfile>() : nullptr) {}

  Status copyStateFrom(ExecutorImplementation &source) override {
    const auto *cpu = dynamic_cast<const CpuExecutor *>(&source);
    if (!cpu || cpu->state_.size() != state_.size() || cpu->keptStates_.size() != keptStates_.size())
      return Status(StatusCode::Internal, "the sessions' states differ in device or size");
    if (state_.size()) std::memcpy(state_.data(), cpu->state_.data(), state_.size());
    if (keptStates_.size()) std::memcpy(keptStates_.data(), cpu->keptStates_.data(), keptStates_.size());
    return Status();
  }

  Status copySlot(uint32_t target, uint32_t source) override {
    if (target >= slotCount() || source >= slotCount())
      return Status(StatusCode::Internal, fmt::format("state slots {} and {} of {}", target, source, slotCount()));
    if (target != source && layout_.slotBytes)
      std::memcpy(state_.data() + target * layout_.slotBytes, state_.data() + source * layout_.slotBytes,
                  layout_.slotBytes);
    return Status();
  }

  Status copyBlock(uint32_t target, uint32_t source) override {
    if (target >= cacheBlocks_ || source >= cacheBlocks_)
      return Status(StatusCode::Internal, fmt::format("cache blocks {} and {} of {}", target, source, cacheBlocks_));
    if (target != source)
      std::memcpy(blocks_.data() + target * paged_.poolBlockBytes, blocks_.data() + source * paged_.poolBlockBytes,
                  paged_.poolBlockBytes);
    return Status();
  }

  Status prepare(const Program &program) override {
    program_ = nullptr;  // until this succeeds
    EIN_ASSIGN_OR_RETURN(size_t scratchFloats, scratchFloatsFor(program));
    EIN_RETURN_IF_ERROR(growScratch(scratchFloats));
    kernels_.clear();
    for (const Step &step : program.steps) kernels_.push_back(cpu::selectKernel(step.kernel));
    // Arena and weight tensors never move within a program: resolve them
    // once. Weights are only read (the verifier allows writes to the arena
    // and outputs only), so the cast away from const never leads to a write.
    bases_ = basesOf(program, 0);
    program_ = &program;
    return Status();
  }

  Status run(std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs) override {
    if (!program_) return Status(StatusCode::Internal, "executor run before a program was prepared");
    const Program &program = *program_;
    if (inputs.size() != program.inputs.size() || outputs.size() != program.outputs.size())
      return Status(StatusCode::Internal, "executor called with the wrong number of buffers");
    cpu::beginKernelEpoch();  // the calling thread may have run other libraries since our last run
    for (size_t i = 0; i < inputs.size(); ++i) bases_[program.inputTensors[i]] = const_cast<std::byte *>(inputs[i]);
    for (size_t i = 0; i < outputs.size(); ++i) bases_[program.outputTensors[i]] = outputs[i];
    // Pre-packed weights belong to the model's program, which an
    // instantiation's gemms index.
    cpu::KernelContext context{program.tensors, bases_.data(), reinterpret_cast<float *>(scratch_.data()),
                               scratchStride_,  pool_.get(),   &cpu::bestKernels(),
                               &model_.packed};
    const bool laterRun = program.positionDim >= 0 &&
                          static_cast<size_t>(program.positionDim) < program.dimValues.size() &&
                          program.dimValues[static_cast<size_t>(program.positionDim)] > 0;
    for (size_t s = 0; s < program.steps.size(); ++s) {
      const Step &step = program.steps[s];
      if (step.firstRun && laterRun) continue;  // its rows are in the state since the first run
      const auto start = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      Status status = kernels_[s](step.kernel, context);
      if (profile_)
        profile_->add(s, program.stepInfos[s],
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (!status.ok()) return Status(status.code(), step.label + ": " + status.message());
    }
    return Status();
  }

  Status runSequences(const Program &all, std::span<const SequenceSlice> sequences,
                      std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs,
                      const RowsRead *rowsRead) override {
    if (all.sequenceTokensDim < 0 || static_cast<size_t>(all.sequenceTokensDim) >= all.dimValues.size())
      return Status(StatusCode::InvalidArgument, "the model serves one sequence per run");
    if (inputs.size() != all.inputs.size() || outputs.size() != all.outputs.size())
      return Status(StatusCode::Internal, "executor called with the wrong number of buffers");
    if (layout_.placed() && layout_.offsets.size() != all.tensors.size())
      return Status(StatusCode::Internal, "the run's program is not the one the states were laid out for");
    const auto tokens = static_cast<uint64_t>(all.dimValues[static_cast<size_t>(all.sequenceTokensDim)]);
    // Each sequence's per-token rows must lie inside all the tokens' rows:
    // checked here, where the offsets are made, for every tensor it shifts.
    std::vector<uint64_t> rowBytes(all.tensors.size(), 0);
    for (size_t id = 0; id < all.tensors.size(); ++id)
      if (all.tensors[id].perToken) {
        if (tokens == 0 || all.tensors[id].byteSize % tokens != 0)
          return Status(StatusCode::InvalidArtifact,
                        fmt::format("tensor {} is marked per token but its {} bytes are not a row for each of {} tokens",
                                    id, all.tensors[id].byteSize, tokens));
        rowBytes[id] = all.tensors[id].byteSize / tokens;
      }
    EIN_ASSIGN_OR_RETURN(size_t scratchFloats, scratchFloatsFor(all));
    // A sequence's first run, alone, runs the steps that keep its encoder's
    // rows in its state; every other run skips them.
    bool firstRun = sequences.size() == 1;
    for (const SequenceSlice &sequence : sequences) {
      const Program &own = *sequence.program;
      if (!sameModel(all, own)) return Status(StatusCode::Internal, "a sequence's program is not the model's");
      if (sequence.slot >= slotCount() || sequence.keptSlot >= slotCount())
        return Status(StatusCode::Internal, fmt::format("sequence slot {} (kept slot {}) of {}", sequence.slot,
                                                        sequence.keptSlot, slotCount()));
      firstRun = firstRun && own.positionDim >= 0 && static_cast<size_t>(own.positionDim) < own.dimValues.size() &&
                 own.dimValues[static_cast<size_t>(own.positionDim)] == 0;
      for (uint32_t block : sequence.blocks)
        if (block >= cacheBlocks_)
          return Status(StatusCode::Internal, fmt::format("cache block {} of {}", block, cacheBlocks_));
      const auto count = static_cast<uint64_t>(own.dimValues[static_cast<size_t>(all.sequenceTokensDim)]);
      if (sequence.firstToken > tokens || count > tokens - sequence.firstToken)
        return Status(StatusCode::Internal, "a sequence's tokens lie outside the run's");
      EIN_RETURN_IF_ERROR(checkTokenRows(all, own, count, rowBytes));
      EIN_ASSIGN_OR_RETURN(size_t ownFloats, scratchFloatsFor(own));
      scratchFloats = std::max(scratchFloats, ownFloats);
    }
    // What a stretch of steps over kept states runs: each kept group as one
    // sequence of its tokens together, every other sequence alone.
    std::span<const SequenceSlice> keptUnits = sequences;
    std::vector<SequenceSlice> grouped;
    if (std::any_of(sequences.begin(), sequences.end(), [](const SequenceSlice &s) { return s.keptGroup; })) {
      for (size_t i = 0; i < sequences.size();) {
        const SequenceSlice &lead = sequences[i];
        if (!lead.keptGroup) {
          grouped.push_back(lead);
          ++i;
          continue;
        }
        EIN_ASSIGN_OR_RETURN(size_t groupFloats, checkKeptGroup(all, sequences, i, rowBytes));
        scratchFloats = std::max(scratchFloats, groupFloats);
        grouped.push_back({lead.keptGroup, lead.firstToken, lead.slot, lead.keptSlot, lead.blocks});
        i += lead.keptGroupSize;
      }
      keptUnits = grouped;
    }
    const size_t tailStep = rowsRead ? rowsRead->firstStep : all.steps.size();
    if (rowsRead) {
      EIN_RETURN_IF_ERROR(checkRowsRead(all, *rowsRead, tokens, rowBytes));
      EIN_ASSIGN_OR_RETURN(size_t tailFloats, scratchFloatsFor(*rowsRead->program));
      scratchFloats = std::max(scratchFloats, tailFloats);
    }
    EIN_RETURN_IF_ERROR(growScratch(scratchFloats));
    cpu::beginKernelEpoch();
    std::vector<std::byte *> bases = basesOf(all, 0);
    for (size_t i = 0; i < inputs.size(); ++i) bases[all.inputTensors[i]] = const_cast<std::byte *>(inputs[i]);
    for (size_t i = 0; i < outputs.size(); ++i) bases[all.outputTensors[i]] = outputs[i];
    std::vector<std::byte *> sequenceBases(bases.size());
    std::vector<std::vector<std::byte *>> threadBases;  // each thread's sequenceBases, when sequences run side by side
    for (size_t s = 0; s < tailStep;) {
      if (all.steps[s].firstRun && !firstRun) {
        ++s;
        continue;
      }
      if (!all.steps[s].perSequence) {
        EIN_RETURN_IF_ERROR(runStep(all, s, bases.data()));
        ++s;
        continue;
      }
      // A stretch of per-sequence steps runs sequence by sequence: what a
      // sequence keeps to itself (scores, a rotated q) lives only within it.
      // One of steps over kept states runs kept group by kept group.
      size_t end = s;
      while (end < tailStep && all.steps[end].perSequence && all.steps[end].rowsOverKept == all.steps[s].rowsOverKept)
        ++end;
      const std::span<const SequenceSlice> units = all.steps[s].rowsOverKept ? keptUnits : sequences;
      // Sequences of a few tokens (decoding), at least two a thread, run
      // side by side, each on one thread: one dispatch for them all instead
      // of one per step and sequence, each of which would split a few rows
      // of work over the threads. The rest run one after another on all
      // threads (keys split among them).
      const std::optional<SideTensors> local =
          pool_ && !profile_ && units.size() >= 2 * static_cast<size_t>(threads_)
              ? sideTensorsOf(all, units, s, end)
              : std::nullopt;
      // The stretch for one sequence, its tensors at `own`; on the pool's
      // thread `alone` only, with its own copy of the stretch's
      // sequence-local tensors, or (-1) on all threads step by step.
      auto runSequence = [&](const SequenceSlice &sequence, std::vector<std::byte *> &own, int alone) -> Status {
        for (size_t id = 0; id < bases.size(); ++id) {
          const Tensor &tensor = all.tensors[id];
          own[id] = tensor.perToken ? bases[id] + sequence.firstToken * rowBytes[id]
                    : tensor.storage == Storage::State
                        ? stateBase(tensor, static_cast<uint32_t>(id), sequence.slot, sequence.keptSlot)
                        : bases[id];
        }
        if (alone >= 0)
          for (size_t i = 0; i < local->tensors.size(); ++i)
            own[local->tensors[i]] = sideArenas_.data() + static_cast<size_t>(alone) * local->bytes + local->offsets[i];
        for (size_t step = s; step < end; ++step) {
          if (all.steps[step].firstRun && !firstRun) continue;
          EIN_RETURN_IF_ERROR(paged_.any() ? runPagedStep(*sequence.program, step, own, sequence.blocks, alone)
                                           : runStep(*sequence.program, step, own.data(), alone));
        }
        return Status();
      };
      auto fewTokens = [&](const SequenceSlice &sequence) {
        return sequence.program->dimValues[static_cast<size_t>(all.sequenceTokensDim)] <= kSideBySideTokens;
      };
      std::vector<const SequenceSlice *> sideBySide;
      if (local)
        for (const SequenceSlice &sequence : units)
          if (fewTokens(sequence)) sideBySide.push_back(&sequence);
      // Fewer than two a thread would leave threads idle behind a long one.
      if (sideBySide.size() < 2 * static_cast<size_t>(threads_) || !growSideArenas(local->bytes)) sideBySide.clear();
      if (!sideBySide.empty()) {
        threadBases.resize(static_cast<size_t>(threads_), std::vector<std::byte *>(bases.size()));
        std::vector<Status> statuses(sideBySide.size());
        pool_->run(static_cast<int64_t>(sideBySide.size()), [&](int64_t item, int thread) {
          const auto at = static_cast<size_t>(item);
          statuses[at] = runSequence(*sideBySide[at], threadBases[static_cast<size_t>(thread)], thread);
        });
        for (const Status &status : statuses) EIN_RETURN_IF_ERROR(status);
      }
      for (const SequenceSlice &sequence : units)
        if (sideBySide.empty() || !fewTokens(sequence)) EIN_RETURN_IF_ERROR(runSequence(sequence, sequenceBases, -1));
      s = end;
    }
    if (!rowsRead) return Status();
    // The rows read, gathered to the front of what the tail reads from
    // before it: ascending, so no row is overwritten before it is moved.
    for (uint32_t id : rowsRead->carried)
      for (size_t i = 0; i < rowsRead->rows.size(); ++i)
        if (rowsRead->rows[i] != i)
          std::memmove(bases[id] + i * rowBytes[id], bases[id] + rowsRead->rows[i] * rowBytes[id], rowBytes[id]);
    for (size_t s = tailStep; s < all.steps.size(); ++s) EIN_RETURN_IF_ERROR(runStep(*rowsRead->program, s, bases.data()));
    return Status();
  }

 private:
  uint32_t slotCount() const { return layout_.slots; }

  // Tokens a sequence may have to run its per-sequence steps side by side
  // with others, each on one thread (a decode step's one, a few drafted).
  static constexpr int64_t kSideBySideTokens = 8;

  // The arena tensors a stretch of per-sequence steps writes besides each
  // sequence's own rows and states (a rotated q, scores): each sequence's
  // for the stretch alone, so sequences run side by side each need a copy
  // (packed one after another: in the arena they may lie far apart).
  struct SideTensors {
    std::vector<uint32_t> tensors;
    std::vector<uint64_t> offsets;  // each one's place in a thread's copy, one after another
    uint64_t bytes = 0;             // a thread's copy
  };
  static constexpr uint64_t kMostSideArenaBytes = 16u << 20;  // a thread's copy at most

  // Those of steps [first, end) of `all`, each as large as any of
  // `sequences` makes it; none (no side by side) when one is an output or
  // other storage shared by the sequences, or their copies would be large.
  static std::optional<SideTensors> sideTensorsOf(const Program &all, std::span<const SequenceSlice> sequences,
                                                  size_t first, size_t end) {
    if (all.stepInfos.size() != all.steps.size()) return std::nullopt;
    SideTensors side;
    for (size_t s = first; s < end; ++s)
      for (const StepOperand &operand : all.stepInfos[s].operands) {
        if (!operand.written) continue;
        if (operand.tensor >= all.tensors.size()) return std::nullopt;
        const Tensor &tensor = all.tensors[operand.tensor];
        if (tensor.perToken || tensor.storage == Storage::State) continue;
        if (tensor.storage != Storage::Arena) return std::nullopt;
        if (std::find(side.tensors.begin(), side.tensors.end(), operand.tensor) != side.tensors.end()) continue;
        uint64_t bytes = tensor.byteSize;
        for (const SequenceSlice &sequence : sequences)
          bytes = std::max(bytes, sequence.program->tensors[operand.tensor].byteSize);
        side.tensors.push_back(operand.tensor);
        side.offsets.push_back(side.bytes);
        side.bytes += (bytes + 63) / 64 * 64;
        if (side.bytes > kMostSideArenaBytes) return std::nullopt;
      }
    // A copy holds only what the stretch writes: a tensor any other step
    // touches (written in part before, read after) stays where it is, and
    // the sequences run one after another.
    for (size_t s = 0; s < all.steps.size() && !side.tensors.empty(); ++s) {
      if (s == first) s = end;
      if (s == all.steps.size()) break;
      for (const StepOperand &operand : all.stepInfos[s].operands)
        if (std::find(side.tensors.begin(), side.tensors.end(), operand.tensor) != side.tensors.end())
          return std::nullopt;
    }
    return side;
  }

  // Room for each thread's copy of `bytes`; false (run one after another)
  // when it cannot be had.
  bool growSideArenas(uint64_t bytes) {
    const size_t wanted = static_cast<size_t>(bytes) * static_cast<size_t>(threads_);
    if (sideArenas_.size() >= wanted) return true;
    StatusOr<AlignedBuffer> buffer = AlignedBuffer::allocate(wanted, "the sequences' side-by-side tensors");
    if (!buffer.ok()) return false;
    sideArenas_ = std::move(buffer).value();
    return true;
  }

  // The kept group sequences[lead] leads: its members right after it, their
  // tokens end to end, all in its kept slot, none leading a group; its
  // program the model's at their tokens together, each per-token tensor a
  // row of `rowBytes` a token. The floats of scratch the program takes.
  static StatusOr<size_t> checkKeptGroup(const Program &all, std::span<const SequenceSlice> sequences, size_t lead,
                                         const std::vector<uint64_t> &rowBytes) {
    const SequenceSlice &first = sequences[lead];
    auto internal = [&](std::string message) {
      return Status(StatusCode::Internal, fmt::format("the kept group at sequence {}: {}", lead, message));
    };
    if (first.keptGroupSize < 2 || first.keptGroupSize > sequences.size() - lead)
      return internal(fmt::format("{} sequences from there, of {}", first.keptGroupSize, sequences.size()));
    const auto tokensOf = [&](const SequenceSlice &sequence) {
      return static_cast<uint64_t>(sequence.program->dimValues[static_cast<size_t>(all.sequenceTokensDim)]);
    };
    uint64_t next = first.firstToken + tokensOf(first);
    for (size_t member = lead + 1; member < lead + first.keptGroupSize; ++member) {
      const SequenceSlice &sequence = sequences[member];
      if (sequence.keptSlot != first.keptSlot || sequence.firstToken != next || sequence.keptGroup)
        return internal(fmt::format("sequence {} does not follow in its kept slot", member));
      next += tokensOf(sequence);
    }
    const Program &group = *first.keptGroup;
    if (!sameModel(all, group)) return internal("its program is not the model's");
    const auto count = static_cast<uint64_t>(group.dimValues[static_cast<size_t>(all.sequenceTokensDim)]);
    if (count != next - first.firstToken)
      return internal(fmt::format("a program at {} tokens for {}", count, next - first.firstToken));
    EIN_RETURN_IF_ERROR(checkTokenRows(all, group, count, rowBytes));
    return scratchFloatsFor(group);
  }

  // Whether `part` (an instantiation: a sequence's, a kept group's, the
  // rows read's) has the steps, tensors and dims of the run's program `all`.
  static bool sameModel(const Program &all, const Program &part) {
    return part.steps.size() == all.steps.size() && part.tensors.size() == all.tensors.size() &&
           part.dimValues.size() == all.dimValues.size();
  }

  // Each per-token tensor of `part`, the model's program at `count` tokens,
  // holds a row of `rowBytes` for each of them, as in the run's program.
  static Status checkTokenRows(const Program &all, const Program &part, uint64_t count,
                               const std::vector<uint64_t> &rowBytes) {
    for (size_t id = 0; id < all.tensors.size(); ++id)
      if (all.tensors[id].perToken && part.tensors[id].byteSize != count * rowBytes[id])
        return Status(StatusCode::InvalidArtifact,
                      fmt::format("tensor {} is marked per token but holds {} bytes for {} tokens, not {} a token", id,
                                  part.tensors[id].byteSize, count, rowBytes[id]));
    return Status();
  }

  // `read` of a run of `all` over `tokens` tokens: its program the model's
  // at as many tokens as rows, ascending among the run's, its steps those
  // run once for all tokens (none per sequence or of a first run), its
  // carried tensors per-token arena ones of `rowBytes` a row in both programs.
  static Status checkRowsRead(const Program &all, const RowsRead &read, uint64_t tokens,
                              const std::vector<uint64_t> &rowBytes) {
    auto internal = [](std::string message) { return Status(StatusCode::Internal, "rows read: " + message); };
    if (!read.program) return internal("no program");
    const Program &tail = *read.program;
    if (!sameModel(all, tail) || read.firstStep > all.steps.size()) return internal("the program is not the model's");
    if (read.rows.empty() ||
        static_cast<uint64_t>(tail.dimValues[static_cast<size_t>(all.sequenceTokensDim)]) != read.rows.size())
      return internal(fmt::format("{} rows for a program at {} tokens", read.rows.size(),
                                  tail.dimValues[static_cast<size_t>(all.sequenceTokensDim)]));
    for (size_t i = 0; i < read.rows.size(); ++i)
      if (read.rows[i] >= tokens || (i > 0 && read.rows[i] <= read.rows[i - 1]))
        return internal(fmt::format("row {} is {}, not ascending inside the run's {} tokens", i, read.rows[i], tokens));
    for (size_t s = read.firstStep; s < all.steps.size(); ++s)
      if (all.steps[s].perSequence || all.steps[s].firstRun) return internal(all.steps[s].label + " runs per sequence");
    for (uint32_t id : read.carried)
      if (id >= all.tensors.size() || !all.tensors[id].perToken || all.tensors[id].storage != Storage::Arena ||
          tail.tensors[id].byteSize != read.rows.size() * rowBytes[id])
        return internal(fmt::format("tensor {} is not a per-token arena tensor", id));
    return Status();
  }

  // Where state tensor `id` of slot `slot` (kept slot `keptSlot`) starts: in
  // the slot, the kept slot, or for a paged state, its part of block 0
  // (RowPages says where its rows are).
  std::byte *stateBase(const Tensor &tensor, uint32_t id, uint32_t slot, uint32_t keptSlot) const {
    if (const PagedTensor *paged = paged_.find(id)) return blocks_.data() + paged->poolOffset;
    if (!layout_.placed()) return state_.data() + slot * layout_.slotBytes + tensor.offset;
    if (layout_.kept[id]) return keptStates_.data() + keptSlot * layout_.keptSlotBytes + layout_.offsets[id];
    return state_.data() + slot * layout_.slotBytes + layout_.offsets[id];
  }

  // Each tensor's address when its state is slot `slot`'s; inputs and outputs unbound.
  std::vector<std::byte *> basesOf(const Program &program, uint32_t slot) {
    std::vector<std::byte *> bases(program.tensors.size(), nullptr);
    for (size_t id = 0; id < program.tensors.size(); ++id) {
      const Tensor &tensor = program.tensors[id];
      if (tensor.storage == Storage::Arena) bases[id] = arena_.data() + tensor.offset;
      if (tensor.storage == Storage::Weights) bases[id] = const_cast<std::byte *>(program.weights) + tensor.offset;
      if (tensor.storage == Storage::State) bases[id] = stateBase(tensor, static_cast<uint32_t>(id), slot, slot);
    }
    return bases;
  }

  // Step `s` of one sequence's `program`, whose paged states' rows are in
  // `blocks`: attention reads its keys and values a block at a time, and an
  // append writes each block's run of rows as a copy of its own.
  Status runPagedStep(const Program &program, size_t s, std::vector<std::byte *> &bases,
                      std::span<const uint32_t> blocks, int alone) {
    const Kernel &kernel = program.steps[s].kernel;
    const int64_t blockRows = paged_.blockRows;
    const auto rowsHeld = static_cast<int64_t>(blocks.size()) * blockRows;
    auto paging = [&](const PagedTensor &state, const View &view, const Dims &extents,
                      int rowsViewAxis) -> StatusOr<PagedView> {
      StatusOr<PagedView> paged = pageView(program.tensors[state.tensor], state, blockRows, view, extents, rowsViewAxis);
      if (!paged.ok()) return Status(paged.status().code(), program.steps[s].label + ": " + paged.status().message());
      if (paged->firstRow + paged->rowCount > rowsHeld)
        return Status(StatusCode::Internal, fmt::format("{}: rows {} to {} of a sequence holding blocks for {}",
                                                        program.steps[s].label, paged->firstRow,
                                                        paged->firstRow + paged->rowCount, rowsHeld));
      return paged;
    };
    auto elementsApart = [&](const PagedTensor &state) {
      return static_cast<int64_t>(paged_.poolBlockBytes / dtypeBytes(program.tensors[state.tensor].dtype, 1));
    };
    if (const auto *attention = std::get_if<Attention>(&kernel)) {
      const PagedTensor *keys = paged_.find(attention->k.tensor), *values = paged_.find(attention->v.tensor);
      if (!keys && !values) return runStep(program, s, bases.data(), alone);
      Attention op = *attention;
      const int keysAxis = static_cast<int>(op.batch.size());
      if (keys) {
        EIN_ASSIGN_OR_RETURN(PagedView view, paging(*keys, op.k, op.batch.concat({op.keys, op.headDim}), keysAxis));
        op.k = view.view;
        op.kPages = {blocks.data(), blockRows, elementsApart(*keys), view.firstRow};
      }
      if (values) {
        EIN_ASSIGN_OR_RETURN(PagedView view, paging(*values, op.v, op.batch.concat({op.keys, op.valueDim}), keysAxis));
        op.v = view.view;
        op.vPages = {blocks.data(), blockRows, elementsApart(*values), view.firstRow};
      }
      return runKernel(program, s, Kernel(op), bases.data(), alone);
    }
    const auto *copy = std::get_if<Copy>(&kernel);
    const PagedTensor *target = copy ? paged_.find(copy->y.tensor) : nullptr;
    if (!target) return runStep(program, s, bases.data(), alone);
    EIN_ASSIGN_OR_RETURN(PagedView view, paging(*target, copy->y, copy->shape, -1));
    std::byte *const base = bases[target->tensor];
    Copy piece = *copy;
    Status status;
    for (int64_t at = 0; at < view.rowCount && status.ok();) {
      const int64_t row = view.firstRow + at, rows = std::min(view.rowCount - at, blockRows - row % blockRows);
      piece.y = view.view;
      piece.y.offset += row % blockRows * view.rowStride;
      if (view.rowsAxis >= 0) {
        const auto axis = static_cast<size_t>(view.rowsAxis);
        piece.shape[axis] = rows;
        piece.x.offset = copy->x.offset + at * copy->x.strides[axis];
      }
      bases[target->tensor] = base + blocks[static_cast<size_t>(row / blockRows)] * paged_.poolBlockBytes;
      status = runKernel(program, s, Kernel(piece), bases.data(), alone);
      at += rows;
    }
    bases[target->tensor] = base;
    return status;
  }

  // Step `s` of `program` over the tensors at `bases`.
  // With `alone` >= 0, on the calling thread only, as the pool's thread
  // `alone` (its scratch): another sequence's steps run on the others.
  Status runStep(const Program &program, size_t s, std::byte *const *bases, int alone = -1) {
    return runKernel(program, s, program.steps[s].kernel, bases, alone);
  }
  // Step `s` of `program`, as `kernel` (the step's own, or paged), over the tensors at `bases`.
  Status runKernel(const Program &program, size_t s, const Kernel &kernel, std::byte *const *bases, int alone = -1) {
    float *scratch = reinterpret_cast<float *>(scratch_.data());
    if (alone >= 0) scratch += static_cast<size_t>(alone) * scratchStride_;
    cpu::KernelContext context{program.tensors, bases,          scratch,
                               scratchStride_,  alone >= 0 ? nullptr : pool_.get(), &cpu::bestKernels(),
                               &model_.packed};
    const Step &step = program.steps[s];
    const auto start = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    Status status = cpu::selectKernel(kernel)(kernel, context);
    if (profile_)
      profile_->add(s, program.stepInfos[s],
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!status.ok()) return Status(status.code(), step.label + ": " + status.message());
    return Status();
  }

  // Scratch sized for the largest need prepared so far: a dynamic model's
  // contexts allocate only when a run needs more than any before, and then
  // half as much again, so a need that creeps up (attention over a cache
  // growing by a row per decode step) allocates a logarithmic number of times.
  Status growScratch(size_t floatsPerThread) {
    if (scratchAllocated_ && floatsPerThread <= scratchStride_) return Status();
    if (scratchAllocated_) floatsPerThread = std::max(floatsPerThread, (scratchStride_ + scratchStride_ / 2 + 15) / 16 * 16);
    // The product is checked so a hostile size fails the allocation instead of wrapping.
    const auto threads = static_cast<size_t>(threads_);
    if (floatsPerThread > SIZE_MAX / sizeof(float) / threads)
      return Status(StatusCode::ResourceExhausted, "the kernels' scratch memory is too large");
    StatusOr<AlignedBuffer> scratch =
        AlignedBuffer::allocate(floatsPerThread * threads * sizeof(float), "kernel scratch memory");
    if (!scratch.ok()) return scratch.status();
    scratch_ = std::move(scratch).value();
    scratchStride_ = floatsPerThread;
    scratchAllocated_ = true;
    return Status();
  }

  const Program &model_;           // the model's program: arena size, packed weights
  const Program *program_ = nullptr;  // the prepared one (the model's, or an instantiation)
  AlignedBuffer arena_;
  AlignedBuffer state_;  // the session's state (Storage::State), kept from run to run: a slot per sequence
  AlignedBuffer keptStates_;  // a kept slot per sequence (layout_.kept)
  StateLayout layout_;
  PagedStates paged_;      // the states kept in blocks instead (none for a session)
  AlignedBuffer blocks_;   // cacheBlocks_ blocks of paged_.poolBlockBytes
  uint32_t cacheBlocks_ = 0;
  int threads_;
  AlignedBuffer scratch_;  // per-step working memory, sized for the largest need, per thread
  AlignedBuffer sideArenas_;  // each thread's copy of a stretch's sequence-local tensors (SideTensors)
  size_t scratchStride_ = 0;  // floats of scratch per thread
  bool scratchAllocated_ = false;
  std::vector<cpu::KernelFn> kernels_;  // one per step
  std::vector<std::byte *> bases_;    // base address of each tensor
  std::unique_ptr<ThreadPool> pool_;  // null with one thread
  std::unique_ptr<StepProfile> profile_;  // EIN_PROFILE
};

}  // namespace

StatusOr<std::unique_ptr<ExecutorImplementation>> createCpuExecutor(const Program &program, const SessionOptions &options,
                                                                    const StateSlots &slots) {
  StatusOr<AlignedBuffer> arena = AlignedBuffer::allocate(program.arenaBytes, "the arena");
  if (!arena.ok()) return arena.status();
  if (slots.sequences < 1 || slots.sequences > kMaxSequenceSlots)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("{} sequences at once; the runtime takes 1 to {}", slots.sequences, kMaxSequenceSlots));
  if (slots.cacheBlocks > 0 && !slots.probe)
    return Status(StatusCode::Internal, "a paged cache needs the model's program to page");
  // Each state in a slot where the artifact puts it (sessions copy states
  // whole); with a probe, those not paged each in a 64-aligned place of
  // their own in a slot or a kept slot (the probe's tensors: a dynamic
  // model's own program has none).
  PagedStates paged;
  StateLayout layout;
  layout.slots = static_cast<uint32_t>(slots.sequences);
  layout.slotBytes = program.stateBytes;
  if (slots.probe) {
    const Program &probe = *slots.probe;
    if (slots.cacheBlocks > 0) paged = pagedStatesOf(probe, slots.blockRows);
    layout.kept = keptStatesOf(probe);
    layout.offsets.assign(probe.tensors.size(), 0);
    layout.slotBytes = 0;
    for (uint32_t id : probe.stateTensors) {
      if (id >= probe.tensors.size() || paged.find(id)) continue;
      uint64_t &end = layout.kept[id] ? layout.keptSlotBytes : layout.slotBytes;
      layout.offsets[id] = end;
      end = (end + probe.tensors[id].byteSize + 63) / 64 * 64;
    }
  }
  // stateBytes is bounded by the loader (2^43), so a slot count up to the
  // limit cannot overflow.
  layout.slotBytes = (layout.slotBytes + 63) / 64 * 64;
  StatusOr<AlignedBuffer> state =
      AlignedBuffer::allocate(layout.slotBytes * layout.slots, "the sequences' state");
  if (!state.ok()) return state.status();
  StatusOr<AlignedBuffer> keptStates =
      AlignedBuffer::allocate(layout.keptSlotBytes * layout.slots, "the sequences' kept state");
  if (!keptStates.ok()) return keptStates.status();
  const uint32_t cacheBlocks = paged.any() ? slots.cacheBlocks : 0;
  if (cacheBlocks > 0 && paged.poolBlockBytes > SIZE_MAX / cacheBlocks)
    return Status(StatusCode::ResourceExhausted, fmt::format("{} cache blocks of {} bytes are too many", cacheBlocks,
                                                             paged.poolBlockBytes));
  StatusOr<AlignedBuffer> blocks =
      AlignedBuffer::allocate(paged.poolBlockBytes * cacheBlocks, "the key/value cache's blocks");
  if (!blocks.ok()) return blocks.status();
  return std::unique_ptr<ExecutorImplementation>(
      new CpuExecutor(program, std::move(arena).value(), std::move(state).value(), std::move(keptStates).value(),
                      std::move(layout), std::move(paged), std::move(blocks).value(), cacheBlocks, options.threads));
}

}  // namespace ein::detail
