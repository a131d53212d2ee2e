/* Embedding the ein runtime from C: load an artifact, set every input to
 * zeros, run it, print each output's shape and first values. It runs through
 * an ein_runner_t, which any number of threads may run at once, writing the
 * outputs into buffers this program allocates.
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
  ein_runner_t *runner = NULL;
  status = ein_runner_create(model, NULL, &runner);
  if (status) {
    ein_model_free(model);
    return fail(status);
  }

  size_t input_count = ein_model_input_count(model), output_count = ein_model_output_count(model);
  ein_input_t *inputs = calloc(input_count ? input_count : 1, sizeof *inputs);
  ein_output_buffer_t *outputs = calloc(output_count ? output_count : 1, sizeof *outputs);
  ein_tensor_info_t *output_infos = calloc(output_count ? output_count : 1, sizeof *output_infos);
  if (!inputs || !outputs || !output_infos) {
    fprintf(stderr, "ein-embed-c: out of memory\n");
    ein_runner_free(runner);
    ein_model_free(model);
    return 1;
  }
  for (size_t i = 0; i < input_count && !status; ++i) {
    ein_tensor_info_t info;
    status = ein_model_input_info(model, i, &info);
    if (status) break;
    size_t bytes = element_count(info.shape, info.rank) * ein_dtype_size(info.dtype);
    inputs[i] = (ein_input_t){info.name, info.dtype, info.shape, info.rank, calloc(bytes ? bytes : 1, 1), bytes};
  }
  for (size_t i = 0; i < output_count && !status; ++i) {
    status = ein_model_output_info(model, i, &output_infos[i]);
    if (status) break;
    size_t bytes = element_count(output_infos[i].shape, output_infos[i].rank) * ein_dtype_size(output_infos[i].dtype);
    outputs[i] = (ein_output_buffer_t){output_infos[i].name, malloc(bytes ? bytes : 1), bytes};
  }
  if (!status) status = ein_runner_run(runner, inputs, input_count, outputs, output_count);

  for (size_t i = 0; i < output_count && !status; ++i) {
    const ein_tensor_info_t *info = &output_infos[i];
    printf("%s: %s[", info->name, ein_dtype_name(info->dtype));
    for (size_t axis = 0; axis < info->rank; ++axis) printf("%s%lld", axis ? ", " : "", (long long)info->shape[axis]);
    printf("]");
    if (info->dtype == EIN_DTYPE_F32) {
      const float *values = (const float *)outputs[i].data;
      size_t count = outputs[i].bytes / sizeof(float);
      for (size_t j = 0; j < count && j < 4; ++j) printf("%s%g", j ? ", " : " = ", values[j]);
      if (count > 4) printf(", ...");
    }
    printf("\n");
  }
  for (size_t i = 0; i < input_count; ++i) free((void *)inputs[i].data);
  for (size_t i = 0; i < output_count; ++i) free(outputs[i].data);
  free(inputs);
  free(outputs);
  free(output_infos);
  ein_runner_free(runner);
  ein_model_free(model);
  return status ? fail(status) : 0;
}
