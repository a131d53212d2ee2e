/* The plain C interface between the runtime and a backend, as ggml-backend's
   ggml_backend_i and IREE's HAL vtables: one table of function pointers over
   opaque handles. The built-in CPU backend and the CUDA backend library
   (libein_cuda.so, which exports only ein_backend_entry) both answer through
   it, so no C++ object, exception, vtable or allocation crosses from one
   side to the other, and the runtime never depends on the C++ types a
   library was built with beyond the program it describes.

   The program crosses as a pointer to the runtime's Program
   (program/program.hpp), which both sides compile from the same headers: the
   layout record, compared when a library is loaded, refuses a library built
   from other headers instead of letting it misread them. */
#ifndef EIN_BACKENDS_BACKEND_INTERFACE_H_
#define EIN_BACKENDS_BACKEND_INTERFACE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when this table, the Program structs or their meaning change.
   3: the backends answer through this C table (2: a C++ class).
   4: many sequences in one run (run_sequences, sequence_slots).
   6: paged key/value caches (cache_blocks, blocks, copy_block).
   7: kept states shared by forked sequences (probe, kept_slot), first-run steps.
   8: outputs at the rows read only (run_sequences' rows_read).
   9: steps over kept states run once for the sequences sharing them (kept_group). */
#define EIN_BACKEND_INTERFACE_VERSION 9u

/* The runtime's verified Program (a model's, or an instantiation of it). */
typedef struct ein_backend_program ein_backend_program;
/* One executor of a backend: its device memory, kernels and state. */
typedef struct ein_backend_executor ein_backend_executor;

/* What both sides must agree on before a library is used. */
typedef struct ein_backend_layout {
  uint32_t interface_version; /* EIN_BACKEND_INTERFACE_VERSION */
  uint32_t table_bytes;       /* sizeof(ein_backend_table) */
  uint32_t program_bytes, step_bytes, tensor_bytes, kernel_bytes, packed_matrix_bytes;
} ein_backend_layout;

/* Where a failing call says why, before it returns its failure: `code` is
   one of ein::StatusCode's values (never 0, Ok), `message` need not end in
   a zero byte and is copied before report returns. */
typedef struct ein_backend_error {
  void *context;
  void (*report)(void *context, int32_t code, const char *message, size_t length);
} ein_backend_error;

/* The session's choices an executor needs. */
typedef struct ein_backend_executor_options {
  int32_t threads;        /* >= 1 */
  int32_t device_index;   /* -1: the backend's default device */
  int32_t sequence_slots; /* >= 1: the states it keeps, one per sequence run at once */
  /* probe, when not NULL, is the model's program at some tokens and
     position (it may go after the call). The states program/paged_state.hpp's
     keptStatesOf(probe) finds live in a kept slot per sequence instead of in
     each slot; with cache_blocks > 0, those pagedStatesOf(probe,
     cache_block_rows) finds live in a pool of cache_blocks blocks. */
  uint32_t cache_block_rows;
  uint32_t cache_blocks;
  const ein_backend_program *probe;
} ein_backend_executor_options;

/* One sequence of a run over many (run_sequences). */
typedef struct ein_backend_sequence {
  /* The model's program at this sequence's tokens and position. */
  const ein_backend_program *program;
  uint64_t first_token; /* its first token's row among the run's tokens */
  uint32_t slot;        /* its state: the slot-th of the executor's */
  uint32_t kept_slot;   /* its kept states: the kept_slot-th (shared by forks) */
  /* Its block table (paged states): block_count blocks, the n-th holding
     its rows [n * cache_block_rows, (n + 1) * cache_block_rows). */
  const uint32_t *blocks;
  uint32_t block_count;
  /* With kept_group not NULL: this sequence and the kept_group_size - 1
     (>= 1) right after it share kept_slot, their tokens end to end (beams
     of one search), and kept_group is the model's program at their tokens
     together. Steps marked rows_over_kept (Step::rowsOverKept) may run once
     for them all from it; a backend may also run them per sequence. */
  const ein_backend_program *kept_group;
  uint32_t kept_group_size;
} ein_backend_sequence;

/* The rows of a run over many whose outputs are read (program/rowwise_tail.hpp):
   the steps from `first_step` on compute the outputs row by row, from the
   per-token arena tensors `carried` (written before them); they run over
   `row_count` rows only, `rows` of the run's tokens in ascending order,
   from `program` (the model's program at row_count tokens), once each
   carried tensor's rows are gathered to its front. The outputs then hold
   those rows, in order. */
typedef struct ein_backend_rows_read {
  const ein_backend_program *program;
  size_t first_step;
  const uint32_t *carried;
  size_t carried_count;
  const uint64_t *rows;
  size_t row_count;
} ein_backend_rows_read;

typedef struct ein_backend_table {
  ein_backend_layout layout;
  int32_t device; /* ein::Device's value */

  /* The devices of this kind a session can use (>= 1), or -1 after
     reporting why there is none. */
  int32_t (*device_count)(const ein_backend_error *error);

  /* Once per model at load, after verification; may be NULL (nothing to
     prepare). Rewrites only what the backend owns in the program (the CPU's
     packed gemm weights). `eligible` holds `step_count` flags, or is NULL
     for every step: the steps whose weights no dim changes. */
  void (*prepare_weights)(ein_backend_program *program, const bool *eligible, size_t step_count);

  /* An executor for `program` (the model's, which outlives the executor),
     with its arena and state allocated; NULL after reporting why. */
  ein_backend_executor *(*create_executor)(const ein_backend_program *program,
                                           const ein_backend_executor_options *options,
                                           const ein_backend_error *error);
  void (*destroy_executor)(ein_backend_executor *executor);

  /* The calls below return 0, or after reporting, -1. */

  /* Makes `program` (the model's program or an instantiation of it, which
     outlives its use) the one run() runs: chooses kernels, plans launches,
     grows memory whose need depends on sizes (never the arena). */
  int32_t (*prepare)(ein_backend_executor *executor, const ein_backend_program *program,
                     const ein_backend_error *error);
  /* Runs the prepared program on host buffers: inputs[i] and outputs[i]
     hold the program's i-th input and output. */
  int32_t (*run)(ein_backend_executor *executor, const void *const *inputs, size_t input_count,
                 void *const *outputs, size_t output_count, const ein_backend_error *error);
  /* Overwrites `target`'s state with `source`'s, an executor of the same
     table and model. */
  int32_t (*copy_state)(ein_backend_executor *target, ein_backend_executor *source,
                        const ein_backend_error *error);

  /* Runs many sequences' tokens, laid end to end, in one pass: `all` (the
     model's program at all the tokens) runs its steps once, but for those
     marked per sequence (Step::perSequence), which run once per sequence
     from that sequence's program, its per-token tensors (Tensor::perToken)
     starting at its first token's row and its state in its slot. Steps of
     a sequence's first run (Step::firstRun) run only when the run is one
     sequence at position 0. The inputs are all the tokens'; so are the
     outputs, or with `rows_read` (may be NULL), those rows' only.
     May be NULL: the backend runs one sequence per run. */
  int32_t (*run_sequences)(ein_backend_executor *executor, const ein_backend_program *all,
                           const ein_backend_sequence *sequences, size_t sequence_count,
                           const void *const *inputs, size_t input_count, void *const *outputs,
                           size_t output_count, const ein_backend_rows_read *rows_read,
                           const ein_backend_error *error);
  /* Overwrites slot `target`'s state with slot `source`'s (a sequence
     forked, or its prefix reused). May be NULL where run_sequences is. */
  int32_t (*copy_slot)(ein_backend_executor *executor, uint32_t target, uint32_t source,
                       const ein_backend_error *error);
  /* Overwrites block `target` of the paged states with block `source` (a
     block shared by sequences, copied before one writes into it). May be
     NULL where run_sequences is. */
  int32_t (*copy_block)(ein_backend_executor *executor, uint32_t target, uint32_t source,
                        const ein_backend_error *error);
} ein_backend_table;

/* What a backend library exports as EIN_BACKEND_ENTRY_NAME: its table, or
   NULL when `runtime` (the loading runtime's layout) differs from the layout
   the library was built with. */
typedef const ein_backend_table *ein_backend_entry_fn(const ein_backend_layout *runtime);
#define EIN_BACKEND_ENTRY_NAME "ein_backend_entry"

#ifdef __cplusplus
}
#endif

#endif /* EIN_BACKENDS_BACKEND_INTERFACE_H_ */
