/* The ein runtime's C API: a thin layer over the C++ API (ein/runtime.hpp).
 *
 * Every fallible call returns an ein_status_t*: NULL on success, otherwise an
 * error the caller must release with ein_status_free.
 *
 *   ein_model_t *model = NULL;
 *   ein_status_t *status = ein_model_load("vit.einb", &model);
 *   if (status) { fprintf(stderr, "%s\n", ein_status_message(status)); ein_status_free(status); return 1; }
 *
 * A session or runner keeps its model alive: the model may be freed before
 * them. Strings and shapes returned by the query functions live as long as
 * the model; a session's output data and shape (the actual shape: for a
 * model with dims, the one at the last run's inputs) live until its next
 * run or its end.
 *
 * Threads: ein_runner_run may be called from any number of threads at once on
 * one runner (each call computes in its own pooled context and writes into
 * the caller's buffers). A session is single-threaded: set its inputs, run it
 * and read its outputs on one thread; a call from a second thread while one
 * is inside a call, a run on inputs set by another thread, or reading outputs
 * of another thread's run fails with EIN_STATUS_BUSY. A scheduler takes
 * submissions from any thread, and a request may be read from any thread. */
#ifndef EIN_EIN_H_
#define EIN_EIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ein_status ein_status_t;
typedef struct ein_model ein_model_t;
typedef struct ein_session ein_session_t;
typedef struct ein_runner ein_runner_t;
typedef struct ein_scheduler ein_scheduler_t;
typedef struct ein_request ein_request_t;

typedef enum ein_status_code {
  EIN_STATUS_OK = 0,
  EIN_STATUS_INVALID_ARGUMENT,
  EIN_STATUS_INVALID_ARTIFACT,
  EIN_STATUS_OUT_OF_RANGE,
  EIN_STATUS_NOT_FOUND,
  EIN_STATUS_UNIMPLEMENTED,
  EIN_STATUS_INTERNAL,
  EIN_STATUS_IO_ERROR,
  EIN_STATUS_RESOURCE_EXHAUSTED,
  EIN_STATUS_BUSY, /* a session was called from two threads at once; see ein_runner_t */
} ein_status_code_t;

/* Element types. A model's tensors use F32 to BOOL; an input may also be
 * given in a type the runtime converts to the input's (the conversion policy
 * of ein/types.hpp): integers of any width into an i32 or i64 input when
 * every value fits, F64 into F32 rounded to nearest, F16 and BF16 into F32.
 * A value that does not fit is an error naming the input and the element. */
typedef enum ein_dtype {
  EIN_DTYPE_F32 = 0,
  EIN_DTYPE_F16,
  EIN_DTYPE_BF16,
  EIN_DTYPE_I32,
  EIN_DTYPE_I64,
  EIN_DTYPE_BOOL,
  EIN_DTYPE_I8,
  EIN_DTYPE_F64,
  EIN_DTYPE_I16,
  EIN_DTYPE_U8,
  EIN_DTYPE_U16,
  EIN_DTYPE_U32,
  EIN_DTYPE_U64,
} ein_dtype_t;

typedef enum ein_device { EIN_DEVICE_CPU = 0, EIN_DEVICE_CUDA } ein_device_t;

/* An input, output or parameter of a model. */
typedef struct ein_tensor_info {
  const char *name;
  ein_dtype_t dtype;
  size_t rank;
  const int64_t *shape; /* -1 for an axis whose size depends on the model's dims (see dims) */
  int64_t upper_bound;  /* integer inputs: ids lie in [0, upper_bound); 0 when unknown */
  /* Per axis (rank entries), the size as an expression over the model's
   * dims ("t", "t + 1"), or "" for a fixed axis; NULL for a model without
   * dims (and for parameters). */
  const char *const *dims;
} ein_tensor_info_t;

/* A dim the model leaves open ("dim t = 1..256"): each run reads its value
 * from the input shapes, within [min, max]. */
typedef struct ein_dim_info {
  const char *name;
  int64_t min;
  int64_t max;
} ein_dim_info_t;

/* An output's current value. */
typedef struct ein_tensor {
  ein_dtype_t dtype;
  size_t rank;
  const int64_t *shape;
  const void *data;
  size_t bytes;
} ein_tensor_t;

typedef struct ein_session_options {
  int threads;
  ein_device_t device;
} ein_session_options_t;

/* Options of a runner: kernel threads per call (the caller plus threads - 1
 * workers; C concurrent calls keep up to C x threads threads busy), device,
 * and the most calls that compute at once (0: no cap; beyond it, calls wait
 * for a free context). */
typedef struct ein_runner_options {
  int threads;
  ein_device_t device;
  int max_concurrent_runs;
} ein_runner_options_t;

/* One input of a runner call: the shape must be the model's (any size its
 * dims allow on a dynamic axis), dtype the input's or one that converts to
 * it (ein_dtype_t), bytes the shape's byte size in dtype. Read during the
 * call only. */
typedef struct ein_input {
  const char *name;
  ein_dtype_t dtype;
  const int64_t *shape;
  size_t rank;
  const void *data;
  size_t bytes;
} ein_input_t;

/* Where a runner call writes output `name`: `bytes` must be the output's byte
 * size at this call's input shapes (ein_model_output_info for a model without
 * dims, else ein_model_output_shapes). Must not overlap an input or another
 * output. */
typedef struct ein_output_buffer {
  const char *name;
  void *data;
  size_t bytes;
} ein_output_buffer_t;

/* Status */
ein_status_code_t ein_status_code(const ein_status_t *status); /* EIN_STATUS_OK for NULL */
const char *ein_status_message(const ein_status_t *status);    /* "" for NULL */
void ein_status_free(ein_status_t *status);

size_t ein_dtype_size(ein_dtype_t dtype);
const char *ein_dtype_name(ein_dtype_t dtype);

/* Models */
ein_status_t *ein_model_load(const char *path, ein_model_t **out_model);
ein_status_t *ein_model_load_from_memory(const void *data, size_t size, ein_model_t **out_model);
void ein_model_free(ein_model_t *model);
size_t ein_model_input_count(const ein_model_t *model);
size_t ein_model_output_count(const ein_model_t *model);
ein_status_t *ein_model_input_info(const ein_model_t *model, size_t index, ein_tensor_info_t *out_info);
ein_status_t *ein_model_output_info(const ein_model_t *model, size_t index, ein_tensor_info_t *out_info);
/* The model's ranged dims (0 for a model whose every size is fixed). */
size_t ein_model_dim_count(const ein_model_t *model);
ein_status_t *ein_model_dim_info(const ein_model_t *model, size_t index, ein_dim_info_t *out_info);
/* Each output's shape for inputs of the given shapes, with the checks a run
 * makes (dims in range, inputs agreeing, the model's run-time checks):
 * input i (in the model's order) has rank input_ranks[i] and sizes
 * input_shapes[i]; out_shapes[o] receives the rank of output o
 * (ein_model_output_info) sizes. For callers that allocate outputs. */
ein_status_t *ein_model_output_shapes(const ein_model_t *model, const int64_t *const *input_shapes,
                                      const size_t *input_ranks, int64_t *const *out_shapes);

/* Sessions */
/* The CPUs this process may use (its affinity mask), at least 1: the thread
 * count a session gets by default, here, in C++, ein-run and Python. */
int ein_default_thread_count(void);
/* ein_default_thread_count() threads, CPU */
void ein_session_options_init(ein_session_options_t *options);
/* `options` may be NULL for the defaults. */
ein_status_t *ein_session_create(const ein_model_t *model, const ein_session_options_t *options,
                                 ein_session_t **out_session);
void ein_session_free(ein_session_t *session);
/* Copies the input; dtype and shape must be the model's (any size its dims
 * allow on a dynamic axis), bytes the shape's byte size. */
ein_status_t *ein_session_set_input(ein_session_t *session, const char *name, ein_dtype_t dtype,
                                    const int64_t *shape, size_t rank, const void *data, size_t bytes);
ein_status_t *ein_session_run(ein_session_t *session);
ein_status_t *ein_session_output(const ein_session_t *session, size_t index, ein_tensor_t *out_tensor);
ein_status_t *ein_session_output_by_name(const ein_session_t *session, const char *name, ein_tensor_t *out_tensor);

/* Session state (a key/value cache): the rows appended since the session
 * began or was reset; start over; make `session`'s state and position
 * `source`'s (same model), to fork a prefix. */
int64_t ein_session_position(const ein_session_t *session);
ein_status_t *ein_session_reset_state(ein_session_t *session);
ein_status_t *ein_session_copy_state(ein_session_t *session, const ein_session_t *source);

/* Generation with a decoder whose key/value cache is session state (see
 * ein/generate.hpp): runs the prompt, then up to max_new_tokens decode steps.
 * temperature 0 is greedy; otherwise top_k (0: all) and top_p (1: all) cut
 * the distribution and `seed` makes the draw reproducible. Generation stops
 * after any of the stop tokens. The new tokens go to out_tokens (room for
 * max_new_tokens), their count to *out_count. An encoder-decoder's encoder
 * inputs (read at a sequence's first run only) are set on the session with
 * ein_session_set_input before. */
typedef struct ein_generation_options {
  int64_t max_new_tokens;
  float temperature;
  int64_t top_k;
  float top_p;
  uint64_t seed;
  const int64_t *stop_tokens;
  size_t stop_token_count;
} ein_generation_options_t;
void ein_generation_options_init(ein_generation_options_t *options); /* 32 tokens, greedy */
ein_status_t *ein_generate(ein_session_t *session, const int64_t *prompt, size_t prompt_length,
                           const ein_generation_options_t *options, int64_t *out_tokens, size_t *out_count);

/* Beam search (see ein/beam_search.hpp), as transformers' generate(num_beams=
 * ...): the best return_sequences hypotheses, best first. Hypothesis i's
 * tokens go to out_tokens + i * max_new_tokens (room for return_sequences *
 * max_new_tokens), its length to out_lengths[i], its score (summed
 * log-probabilities / length ** length_penalty) to out_scores[i]; their
 * count to *out_count. stop_tokens end a hypothesis (kept in it). */
typedef enum ein_early_stopping {
  EIN_EARLY_STOPPING_HEURISTIC = 0, /* transformers' early_stopping=False */
  EIN_EARLY_STOPPING_WHEN_FULL,     /* True: once `beams` hypotheses have ended */
  EIN_EARLY_STOPPING_NEVER,         /* "never" */
} ein_early_stopping_t;
typedef struct ein_beam_search_options {
  int32_t beams;
  int64_t max_new_tokens;
  float length_penalty;
  ein_early_stopping_t early_stopping;
  int32_t return_sequences;
  const int64_t *stop_tokens;
  size_t stop_token_count;
  int64_t no_repeat_ngram_size; /* 0: any n-gram may repeat */
  const int64_t *suppress_tokens; /* never chosen */
  size_t suppress_token_count;
  const int64_t *begin_suppress_tokens; /* not chosen as the first new token */
  size_t begin_suppress_token_count;
} ein_beam_search_options_t;
void ein_beam_search_options_init(ein_beam_search_options_t *options); /* 4 beams, 32 tokens, as transformers */
ein_status_t *ein_beam_search(ein_session_t *session, const int64_t *prompt, size_t prompt_length,
                              const ein_beam_search_options_t *options, int64_t *out_tokens, size_t *out_lengths,
                              double *out_scores, size_t *out_count);

/* Schedulers (see ein/scheduler.hpp): many generations of one decoder at
 * once, continuously batched. Requests are submitted from any thread; each
 * streams its tokens to whichever thread reads it. A decoder compiled for one
 * sequence serves many (the model's ein-inspect says whether it does). */
typedef struct ein_scheduler_options {
  int32_t max_sequences; /* generating at once */
  int32_t threads;       /* kernel threads */
  int64_t step_tokens;   /* tokens per step, decode and prompt chunks; 0: 256 or the model's most */
  size_t max_waiting;    /* requests waiting at most; beyond: EIN_STATUS_RESOURCE_EXHAUSTED */
  int64_t cache_block_rows; /* the paged key/value cache's rows a block; 0: not paged */
  int64_t cache_blocks;     /* its blocks; 0: as many as every sequence's whole cache takes */
} ein_scheduler_options_t;
/* 16 sequences, ein_default_thread_count() threads, 1024 waiting, blocks of 16 rows */
void ein_scheduler_options_init(ein_scheduler_options_t *options);
/* `options` may be NULL for the defaults. Starts the scheduler's thread. */
ein_status_t *ein_scheduler_create(const ein_model_t *model, const ein_scheduler_options_t *options,
                                   ein_scheduler_t **out_scheduler);
/* The paged key/value cache's blocks (0: not paged) and those the requests
 * generating hold, as of the last step. */
void ein_scheduler_cache_blocks(const ein_scheduler_t *scheduler, int64_t *out_blocks, int64_t *out_used);
/* Cancels every request not ended and stops; a later submit fails. */
void ein_scheduler_shutdown(ein_scheduler_t *scheduler);
/* Shuts down and frees; its requests stay valid until they are freed. */
void ein_scheduler_free(ein_scheduler_t *scheduler);
/* Queues a generation of the prompt with its own options; checks the prompt
 * (not empty, ids inside the vocabulary, fitting the cache) first. */
ein_status_t *ein_scheduler_submit(ein_scheduler_t *scheduler, const int64_t *prompt, size_t prompt_length,
                                   const ein_generation_options_t *options, ein_request_t **out_request);
/* The same for an encoder-decoder: with the inputs its sequence's first run
 * reads (the encoder's: Whisper's input_features, T5's input_ids and
 * attention_mask), checked, and copied before it returns. */
ein_status_t *ein_scheduler_submit_with_inputs(ein_scheduler_t *scheduler, const int64_t *prompt,
                                               size_t prompt_length, const ein_generation_options_t *options,
                                               const ein_input_t *first_run_inputs, size_t first_run_input_count,
                                               ein_request_t **out_request);
/* A beam search (see ein_beam_search) among the scheduler's requests, its
 * beams a sequence each; the first-run inputs as
 * ein_scheduler_submit_with_inputs takes them (NULL and 0 for a decoder).
 * Refused when the beams exceed max_sequences or, with a bounded paged
 * cache, its first step's blocks (the prompt's, shared, and one a beam)
 * exceed it. Its hypotheses come from ein_request_hypotheses;
 * ein_request_next returns the best's tokens once it has ended. */
ein_status_t *ein_scheduler_submit_beam_search(ein_scheduler_t *scheduler, const int64_t *prompt,
                                               size_t prompt_length, const ein_beam_search_options_t *options,
                                               const ein_input_t *first_run_inputs, size_t first_run_input_count,
                                               ein_request_t **out_request);
/* Waits for a beam search's request to end and writes its hypotheses as
 * ein_beam_search does (room for return_sequences * max_new_tokens tokens,
 * as submitted). A generation's request: EIN_STATUS_INVALID_ARGUMENT. */
ein_status_t *ein_request_hypotheses(ein_request_t *request, int64_t *out_tokens, size_t *out_lengths,
                                     double *out_scores, size_t *out_count);
/* Waits for the request's next token: *out_has_token is 1 and *out_token the
 * token, or *out_has_token is 0 once every token has been read and the
 * request has ended (ein_request_finish_reason says why). */
ein_status_t *ein_request_next(ein_request_t *request, int64_t *out_token, int *out_has_token);
/* Ends the request before the next step; its tokens so far stand. */
void ein_request_cancel(ein_request_t *request);
int ein_request_done(const ein_request_t *request);
/* "length", "stop", "cancelled", or "" while it goes on. */
const char *ein_request_finish_reason(const ein_request_t *request);
void ein_request_free(ein_request_t *request); /* does not cancel it */

/* Runners: thread-safe; see the top of this file. */
void ein_runner_options_init(ein_runner_options_t *options); /* one thread, CPU, no cap */
/* `options` may be NULL for the defaults. Creates the first context at once. */
ein_status_t *ein_runner_create(const ein_model_t *model, const ein_runner_options_t *options,
                                ein_runner_t **out_runner);
void ein_runner_free(ein_runner_t *runner); /* no call may still be running */
/* Runs the model on every input (each once) and writes the outputs named in
 * `outputs` into the caller's buffers; outputs not named are dropped. */
ein_status_t *ein_runner_run(ein_runner_t *runner, const ein_input_t *inputs, size_t input_count,
                             const ein_output_buffer_t *outputs, size_t output_count);
/* How many contexts the runner's pool holds. */
size_t ein_runner_context_count(const ein_runner_t *runner);

#ifdef __cplusplus
}
#endif

#endif /* EIN_EIN_H_ */
