/* Embedding the ein runtime from C: load an artifact, set every input to
 * zeros, run it, print each output's shape and first values.
 *
 *   ein-embed-c MODEL.einb */
#include <stdio.h>
#include <stdlib.h>

#include "ein/ein.h"

static int fail(ein_status_t *status) {
  fprintf(stderr, "ein-embed-c: %s\n", ein_status_message(status));
  ein_status_free(status);
  return 1;
}

static size_t element_count(const int64_t *shape, size_t rank) {
  size_t count = 1;
  for (size_t i = 0; i < rank; ++i) count *= (size_t)shape[i];
  return count;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.einb\n", argv[0]);
    return 2;
  }
  ein_model_t *model = NULL;
  ein_status_t *status = ein_model_load(argv[1], &model);
  if (status) return fail(status);
  ein_session_t *session = NULL;
  status = ein_session_create(model, NULL, &session);
  if (status) {
    ein_model_free(model);
    return fail(status);
  }

  for (size_t i = 0; i < ein_model_input_count(model) && !status; ++i) {
    ein_tensor_info_t info;
    status = ein_model_input_info(model, i, &info);
    if (status) break;
    size_t bytes = element_count(info.shape, info.rank) * ein_dtype_size(info.dtype);
    void *zeros = calloc(bytes ? bytes : 1, 1);
    status = ein_session_set_input(session, info.name, info.dtype, info.shape, info.rank, zeros, bytes);
    free(zeros);
  }
  if (!status) status = ein_session_run(session);

  for (size_t i = 0; i < ein_model_output_count(model) && !status; ++i) {
    ein_tensor_info_t info;
    ein_tensor_t output;
    status = ein_model_output_info(model, i, &info);
    if (!status) status = ein_session_output(session, i, &output);
    if (status) break;
    printf("%s: %s[", info.name, ein_dtype_name(output.dtype));
    for (size_t axis = 0; axis < output.rank; ++axis) printf("%s%lld", axis ? ", " : "", (long long)output.shape[axis]);
    printf("]");
    if (output.dtype == EIN_DTYPE_F32) {
      const float *values = (const float *)output.data;
      size_t count = output.bytes / sizeof(float);
      for (size_t j = 0; j < count && j < 4; ++j) printf("%s%g", j ? ", " : " = ", values[j]);
      if (count > 4) printf(", ...");
    }
    printf("\n");
  }
  ein_session_free(session);
  ein_model_free(model);
  return status ? fail(status) : 0;
}
