// Writing a backend in C++ behind the plain C table of backend_interface.h:
// a backend is a class of static functions and an ExecutorImplementation,
// and backendTable<ItsClass>() is its table. The table's functions turn
// Status into reports through ein_backend_error and keep exceptions (a
// failed allocation) on the backend's side.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <span>
#include <vector>

#include "ein/session.hpp"
#include "ein/status.hpp"
#include "backends/backend_interface.h"
#include "backends/executor.hpp"
#include "program/program.hpp"

namespace ein::detail {

// The layout this build of the runtime and its backends agree on.
inline ein_backend_layout thisBuildLayout() {
  return {EIN_BACKEND_INTERFACE_VERSION, sizeof(ein_backend_table), sizeof(Program), sizeof(Step), sizeof(Tensor),
          sizeof(Kernel),                sizeof(PackedMatrix)};
}

inline bool sameLayout(const ein_backend_layout &a, const ein_backend_layout &b) {
  return a.interface_version == b.interface_version && a.table_bytes == b.table_bytes &&
         a.program_bytes == b.program_bytes && a.step_bytes == b.step_bytes && a.tensor_bytes == b.tensor_bytes &&
         a.kernel_bytes == b.kernel_bytes && a.packed_matrix_bytes == b.packed_matrix_bytes;
}

// What the table's executor handles point to.
class ExecutorImplementation {
 public:
  virtual ~ExecutorImplementation() = default;
  virtual Status prepare(const Program &program) = 0;
  virtual Status run(std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs) = 0;
  // `source` is an executor of the same backend and model.
  virtual Status copyStateFrom(ExecutorImplementation &source) = 0;
  // backend_interface.h's run_sequences.
  virtual Status runSequences(const Program &all, std::span<const SequenceSlice> sequences,
                              std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs,
                              const RowsRead *rowsRead) {
    (void)all, (void)sequences, (void)inputs, (void)outputs, (void)rowsRead;
    return Status(StatusCode::Unimplemented, "this device runs one sequence per run");
  }
  // backend_interface.h's copy_slot.
  virtual Status copySlot(uint32_t target, uint32_t source) {
    (void)target, (void)source;
    return Status(StatusCode::Unimplemented, "this device runs one sequence per run");
  }
  // backend_interface.h's copy_block.
  virtual Status copyBlock(uint32_t target, uint32_t source) {
    (void)target, (void)source;
    return Status(StatusCode::Unimplemented, "this device keeps no paged cache");
  }
};

namespace backend_table {

inline int32_t report(const ein_backend_error *error, const Status &status) {
  error->report(error->context, static_cast<int32_t>(status.code()), status.message().data(), status.message().size());
  return -1;
}

// Runs `call` (returning Status), reporting its failure or an exception.
template <typename Call>
int32_t guarded(const ein_backend_error *error, Call &&call) {
  try {
    Status status = call();
    return status.ok() ? 0 : report(error, status);
  } catch (const std::bad_alloc &) {
    return report(error, Status(StatusCode::ResourceExhausted, "out of host memory"));
  } catch (...) {
    return report(error, Status(StatusCode::Internal, "the backend threw an exception"));
  }
}

inline ExecutorImplementation &implementation(ein_backend_executor *executor) {
  return *reinterpret_cast<ExecutorImplementation *>(executor);
}
inline const Program &program(const ein_backend_program *program) {
  return *reinterpret_cast<const Program *>(program);
}

}  // namespace backend_table

// The table of `Backend`, which provides:
//   static constexpr Device kDevice;
//   static StatusOr<int> deviceCount();
//   static void prepareWeights(Program &, const bool *eligible);  // eligible: one flag per step, or null
//   static StatusOr<std::unique_ptr<ExecutorImplementation>> createExecutor(const Program &, const SessionOptions &,
//                                                                          const StateSlots &);
template <typename Backend>
const ein_backend_table &backendTable() {
  using namespace backend_table;
  static const ein_backend_table table = {
      thisBuildLayout(),
      static_cast<int32_t>(Backend::kDevice),
      [](const ein_backend_error *error) -> int32_t {
        StatusOr<int> count(0);
        if (guarded(error, [&] {
              count = Backend::deviceCount();
              return count.status();
            }) != 0)
          return -1;
        return count.value();
      },
      [](ein_backend_program *program, const bool *eligible, size_t) {
        Backend::prepareWeights(*reinterpret_cast<Program *>(program), eligible);
      },
      [](const ein_backend_program *model, const ein_backend_executor_options *options,
         const ein_backend_error *error) -> ein_backend_executor * {
        std::unique_ptr<ExecutorImplementation> executor;
        guarded(error, [&] {
          SessionOptions session;
          session.device = Backend::kDevice;
          session.threads = options->threads;
          session.deviceIndex = options->device_index;
          StateSlots slots;
          slots.sequences = std::max(options->sequence_slots, 1);
          slots.blockRows = options->cache_block_rows;
          slots.cacheBlocks = options->cache_blocks;
          slots.probe = options->probe ? &program(options->probe) : nullptr;
          StatusOr<std::unique_ptr<ExecutorImplementation>> created =
              Backend::createExecutor(program(model), session, slots);
          if (created.ok()) executor = std::move(created).value();
          return created.status();
        });
        return reinterpret_cast<ein_backend_executor *>(executor.release());
      },
      [](ein_backend_executor *executor) { delete &implementation(executor); },
      [](ein_backend_executor *executor, const ein_backend_program *prepared, const ein_backend_error *error) {
        return guarded(error, [&] { return implementation(executor).prepare(program(prepared)); });
      },
      [](ein_backend_executor *executor, const void *const *inputs, size_t inputCount, void *const *outputs,
         size_t outputCount, const ein_backend_error *error) {
        return guarded(error, [&] {
          return implementation(executor).run({reinterpret_cast<const std::byte *const *>(inputs), inputCount},
                                              {reinterpret_cast<std::byte *const *>(outputs), outputCount});
        });
      },
      [](ein_backend_executor *target, ein_backend_executor *source, const ein_backend_error *error) {
        return guarded(error, [&] { return implementation(target).copyStateFrom(implementation(source)); });
      },
      [](ein_backend_executor *executor, const ein_backend_program *all, const ein_backend_sequence *sequences,
         size_t sequenceCount, const void *const *inputs, size_t inputCount, void *const *outputs,
         size_t outputCount, const ein_backend_rows_read *rowsRead, const ein_backend_error *error) {
        return guarded(error, [&] {
          std::vector<SequenceSlice> slices(sequenceCount);
          for (size_t i = 0; i < sequenceCount; ++i)
            slices[i] = {&program(sequences[i].program), sequences[i].first_token, sequences[i].slot,
                         sequences[i].kept_slot,
                         {sequences[i].blocks, sequences[i].blocks ? sequences[i].block_count : 0u},
                         sequences[i].kept_group ? &program(sequences[i].kept_group) : nullptr,
                         sequences[i].kept_group ? sequences[i].kept_group_size : 0u};
          RowsRead read;
          if (rowsRead)
            read = {rowsRead->program ? &program(rowsRead->program) : nullptr, rowsRead->first_step,
                    {rowsRead->carried, rowsRead->carried ? rowsRead->carried_count : 0u},
                    {rowsRead->rows, rowsRead->rows ? rowsRead->row_count : 0u}};
          return implementation(executor).runSequences(
              program(all), slices, {reinterpret_cast<const std::byte *const *>(inputs), inputCount},
              {reinterpret_cast<std::byte *const *>(outputs), outputCount}, rowsRead ? &read : nullptr);
        });
      },
      [](ein_backend_executor *executor, uint32_t target, uint32_t source, const ein_backend_error *error) {
        return guarded(error, [&] { return implementation(executor).copySlot(target, source); });
      },
      [](ein_backend_executor *executor, uint32_t target, uint32_t source, const ein_backend_error *error) {
        return guarded(error, [&] { return implementation(executor).copyBlock(target, source); });
      },
  };
  return table;
}

}  // namespace ein::detail
