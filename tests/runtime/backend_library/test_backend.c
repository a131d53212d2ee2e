/* A backend written in plain C against backends/backend_interface.h, which
   tools_test loads as the CUDA backend library (EIN_CUDA_BACKEND) to check
   how the runtime meets a library that answers through the table but wrongly.
   $EIN_TEST_BACKEND chooses how:
     old         refuses the runtime's layout (a library of another build);
     incomplete  a table without its executor functions;
     no-device   device_count reports none; create_executor reports a failure;
     silent      create_executor fails without reporting why. */
#include <stdlib.h>
#include <string.h>

#include "backends/backend_interface.h"

/* ein::Device::Cuda and ein::StatusCode values (ein/types.hpp, ein/status.hpp). */
enum { kCuda = 1, kUnimplemented = 5, kResourceExhausted = 8 };

static void report(const ein_backend_error *error, int32_t code, const char *message) {
  error->report(error->context, code, message, strlen(message));
}

static int32_t device_count(const ein_backend_error *error) {
  report(error, kUnimplemented, "test backend: no device here");
  return -1;
}

static ein_backend_executor *create_reporting(const ein_backend_program *program,
                                              const ein_backend_executor_options *options,
                                              const ein_backend_error *error) {
  (void)program;
  (void)options;
  report(error, kResourceExhausted, "test backend: no memory for the arena");
  return NULL;
}

static ein_backend_executor *create_silently(const ein_backend_program *program,
                                             const ein_backend_executor_options *options,
                                             const ein_backend_error *error) {
  (void)program;
  (void)options;
  (void)error;
  return NULL;
}

static void destroy_executor(ein_backend_executor *executor) { (void)executor; }

static int32_t prepare(ein_backend_executor *executor, const ein_backend_program *program,
                       const ein_backend_error *error) {
  (void)executor;
  (void)program;
  report(error, kUnimplemented, "test backend: never prepares");
  return -1;
}

static int32_t run(ein_backend_executor *executor, const void *const *inputs, size_t input_count,
                   void *const *outputs, size_t output_count, const ein_backend_error *error) {
  (void)executor;
  (void)inputs;
  (void)input_count;
  (void)outputs;
  (void)output_count;
  report(error, kUnimplemented, "test backend: never runs");
  return -1;
}

static int32_t copy_state(ein_backend_executor *target, ein_backend_executor *source,
                          const ein_backend_error *error) {
  (void)target;
  (void)source;
  report(error, kUnimplemented, "test backend: holds no state");
  return -1;
}

static ein_backend_table table;

__attribute__((visibility("default"))) const ein_backend_table *ein_backend_entry(const ein_backend_layout *runtime) {
  const char *mode = getenv("EIN_TEST_BACKEND");
  if (!mode || strcmp(mode, "old") == 0) return NULL;
  memset(&table, 0, sizeof table);
  table.layout = *runtime; /* this library reads no Program */
  table.device = kCuda;
  if (strcmp(mode, "incomplete") == 0) return &table;
  table.device_count = device_count;
  table.create_executor = strcmp(mode, "silent") == 0 ? create_silently : create_reporting;
  table.destroy_executor = destroy_executor;
  table.prepare = prepare;
  table.run = run;
  table.copy_state = copy_state;
  return &table;
}
