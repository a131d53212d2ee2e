// The seam between a session and a device. A session validates and holds the
// host-side inputs and outputs; an executor runs the verified program on one
// device. The CPU executor runs the CPU kernels; the CUDA executor owns device
// memory for the arena and weights, uploads the inputs and downloads the
// outputs inside run().
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "ein/session.hpp"
#include "ein/status.hpp"
#include "backends/backend_interface.h"
#include "program/program.hpp"

namespace ein::detail {

// One sequence of a run over many (runSequences; ein_backend_sequence).
struct SequenceSlice {
  const Program *program = nullptr;  // the model's program at the sequence's tokens and position
  uint64_t firstToken = 0;           // its first token's row among the run's tokens
  uint32_t slot = 0;                 // its state: the slot-th of the executor's
  uint32_t keptSlot = 0;             // its kept states (keptStatesOf): the keptSlot-th
  std::span<const uint32_t> blocks;  // its block table, for the paged states
  // With keptGroup: this sequence and the keptGroupSize - 1 (>= 1) right
  // after it share its kept slot, their tokens end to end (beams of one
  // search), and keptGroup is the model's program at their tokens together:
  // the steps marked rowsOverKept run once for them all from it.
  const Program *keptGroup = nullptr;
  uint32_t keptGroupSize = 0;
};

// The rows of a run over many whose outputs are read (ein_backend_rows_read):
// steps from `firstStep` on run from `program` over `rows` only, once the
// `carried` tensors' rows are gathered to their front.
struct RowsRead {
  const Program *program = nullptr;  // the model's program at rows.size() tokens
  size_t firstStep = 0;
  std::span<const uint32_t> carried;
  std::span<const uint64_t> rows;  // ascending, among the run's tokens
};

// The states an executor keeps for runSequences: a slot per sequence; with
// a probe (the model's program at some tokens and position), a kept slot per
// sequence for the states keptStatesOf(*probe) finds (program/paged_state.hpp:
// written at a sequence's first run, shared by the sequences forked from it)
// and, with cacheBlocks > 0, a pool of blocks for those
// pagedStatesOf(*probe, blockRows) finds; neither takes room in the slots.
struct StateSlots {
  int sequences = 1;
  int64_t blockRows = 0;
  uint32_t cacheBlocks = 0;
  const Program *probe = nullptr;  // needed only while the executor is created
};

// One executor of a backend's C table (backend_interface.h), owned.
class Executor {
 public:
  Executor(const ein_backend_table &table, ein_backend_executor *handle) : table_(table), handle_(handle) {}
  ~Executor() { table_.destroy_executor(handle_); }
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  // Makes `program` the one run() runs: the model's program it was created
  // for, or an instantiation of a dynamic model's program (the same tensors
  // in the same arena places, sizes within the planned maxima). `program`
  // must outlive its use. Chooses kernels and plans launches; grows only
  // memory whose need depends on the sizes (kernel scratch, device copies
  // of inputs and outputs), never the arena.
  Status prepare(const Program &program);
  // Runs the prepared program. inputs[i] and outputs[i] are host buffers of
  // its i-th input and output, of the sizes it gives. Errors name the
  // failing step.
  Status run(std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs);
  // The session's state (Program::stateBytes, zeros at first) lives with the
  // executor, in its device's memory. Overwrites it with that of `source`, an
  // executor of the same model (so of the same backend: an artifact targets
  // one device).
  Status copyStateFrom(Executor &source);
  // Runs many sequences' tokens laid end to end in one pass
  // (backend_interface.h's run_sequences): `all` at every token, its steps
  // marked per sequence once per sequence from that sequence's program;
  // with `rowsRead`, the outputs at those rows only.
  // `all` and the sequences' programs must outlive the call.
  Status runSequences(const Program &all, std::span<const SequenceSlice> sequences,
                      std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs,
                      const RowsRead *rowsRead = nullptr);
  // Overwrites state slot `target` with slot `source` (backend_interface.h's
  // copy_slot); kept slots are not copied but shared (SequenceSlice::keptSlot).
  Status copySlot(uint32_t target, uint32_t source);
  // Overwrites block `target` of the paged states with block `source` (copy_block).
  Status copyBlock(uint32_t target, uint32_t source);

 private:
  const ein_backend_table &table_;
  ein_backend_executor *handle_;
};

// An executor for the model whose program is `program` (which must outlive
// the executor) on `options.device`, from that device's backend
// (backend.hpp): allocates the arena and what does not depend on sizes, then
// prepares `program` itself when it has steps (a static model); a dynamic
// model's contexts prepare each instantiation. It keeps the states of
// `slots`, one per sequence runSequences may run at once.
StatusOr<std::unique_ptr<Executor>> createExecutor(const Program &program, const SessionOptions &options,
                                                   const StateSlots &slots = {});

}  // namespace ein::detail
