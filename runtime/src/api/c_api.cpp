// The C API: each handle wraps its C++ object; each error becomes an
// ein_status_t the caller frees. No C++ exception crosses this boundary.
#include "ein/ein.h"

#include <fmt/format.h>

#include <algorithm>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "ein/runtime.hpp"

struct ein_status {
  ein_status_code_t code;
  std::string message;
};

struct ein_model {
  std::shared_ptr<const ein::Model> model;
  // Per input and output of a model with dims: each axis's expression as a C
  // string (pointing into the model's TensorInfo::dims), for ein_tensor_info_t.
  std::vector<std::vector<const char *>> inputDims, outputDims;
};

struct ein_session {
  std::unique_ptr<ein::Session> session;
};

struct ein_runner {
  std::unique_ptr<ein::Runner> runner;
};

struct ein_scheduler {
  std::unique_ptr<ein::Scheduler> scheduler;
};

struct ein_request {
  std::shared_ptr<ein::Request> request;
  int64_t maxNewTokens = 0;  // a beam search's: the stride of its hypotheses in ein_request_hypotheses
};

namespace {

// The codes are declared in the same order in both APIs.
static_assert(static_cast<int>(ein::StatusCode::ResourceExhausted) == EIN_STATUS_RESOURCE_EXHAUSTED);
static_assert(static_cast<int>(ein::StatusCode::Busy) == EIN_STATUS_BUSY);
static_assert(static_cast<int>(ein::DType::Bool) == EIN_DTYPE_BOOL);
static_assert(static_cast<int>(ein::Device::Cuda) == EIN_DEVICE_CUDA);

// Returned when not even an error can be allocated; never freed.
ein_status_t outOfMemory{EIN_STATUS_RESOURCE_EXHAUSTED, "out of memory"};

ein_status_t *makeStatus(ein_status_code_t code, std::string message) {
  auto *status = new (std::nothrow) ein_status_t{code, std::move(message)};
  return status ? status : &outOfMemory;
}

ein_status_t *toC(const ein::Status &status) {
  if (status.ok()) return nullptr;
  return makeStatus(static_cast<ein_status_code_t>(status.code()), status.message());
}

ein_status_t *invalidArgument(const char *message) { return makeStatus(EIN_STATUS_INVALID_ARGUMENT, message); }

// OUT_OF_RANGE for an index past the model's `count` inputs, outputs or dims.
ein_status_t *checkIndex(const char *what, size_t index, size_t count) {
  if (index < count) return nullptr;
  return makeStatus(EIN_STATUS_OUT_OF_RANGE, std::string(what) + " " + std::to_string(index) +
                                                 " does not exist (the model has " + std::to_string(count) + ")");
}

// A model's tensors' types and, for inputs, the host types that convert to them.
bool validDType(ein_dtype_t dtype) { return dtype >= EIN_DTYPE_F32 && dtype <= EIN_DTYPE_U64; }

ein_tensor_info_t infoToC(const ein::TensorInfo &info, const std::vector<const char *> &dims) {
  return {info.name.c_str(), static_cast<ein_dtype_t>(info.dtype), info.shape.size(), info.shape.data(),
          info.upperBound, dims.empty() ? nullptr : dims.data()};
}

std::vector<std::vector<const char *>> dimsToC(const std::vector<ein::TensorInfo> &infos) {
  std::vector<std::vector<const char *>> result;
  for (const ein::TensorInfo &info : infos) {
    std::vector<const char *> &axes = result.emplace_back();
    for (const std::string &text : info.dims) axes.push_back(text.c_str());
  }
  return result;
}

ein_model_t *wrap(std::shared_ptr<const ein::Model> model) {
  auto *wrapped = new ein_model_t{std::move(model), {}, {}};
  wrapped->inputDims = dimsToC(wrapped->model->inputs());
  wrapped->outputDims = dimsToC(wrapped->model->outputs());
  return wrapped;
}

// Runs `body`, turning an escaping exception (std::bad_alloc from a string
// or vector) into a status.
template <typename Body>
ein_status_t *guarded(Body &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return makeStatus(EIN_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  } catch (const std::exception &error) {
    return makeStatus(EIN_STATUS_INTERNAL, error.what());
  }
}

ein_status_t *outputToC(const ein::StatusOr<ein::TensorRef> &output, ein_tensor_t *out) {
  if (!output.ok()) return toC(output.status());
  *out = {static_cast<ein_dtype_t>(output->dtype), output->shape.size(), output->shape.data(), output->data,
          output->bytes};
  return nullptr;
}

// Up to this many inputs and outputs convert on the stack, so a runner call
// allocates nothing; more take the heap.
constexpr size_t kInlineTensors = 16;

template <typename T>
class SmallArray {
 public:
  explicit SmallArray(size_t size) : size_(size) {
    if (size > kInlineTensors) heap_.resize(size);
  }
  T *data() { return size_ > kInlineTensors ? heap_.data() : inline_; }
  std::span<const T> span() { return {data(), size_}; }

 private:
  size_t size_;
  T inline_[kInlineTensors];
  std::vector<T> heap_;
};

// The C inputs as the C++ API's, into `out` (room for `count`); an error,
// which names `function`, for a NULL name or shape or an unknown dtype.
ein_status_t *inputsFromC(const ein_input_t *inputs, size_t count, const char *function,
                          SmallArray<ein::InputTensor> &out) {
  for (size_t i = 0; i < count; ++i) {
    const ein_input_t &input = inputs[i];
    if (!input.name || (input.rank && !input.shape))
      return invalidArgument((std::string(function) + ": an input's name and shape must not be NULL").c_str());
    if (!validDType(input.dtype)) return invalidArgument((std::string(function) + ": unknown dtype").c_str());
    out.data()[i] = {input.name, static_cast<ein::ElementType>(input.dtype),
                     std::span<const int64_t>(input.shape, input.rank), input.data, input.bytes};
  }
  return nullptr;
}

}  // namespace

extern "C" {

ein_status_code_t ein_status_code(const ein_status_t *status) { return status ? status->code : EIN_STATUS_OK; }

const char *ein_status_message(const ein_status_t *status) { return status ? status->message.c_str() : ""; }

void ein_status_free(ein_status_t *status) {
  if (status != &outOfMemory) delete status;
}

size_t ein_dtype_size(ein_dtype_t dtype) {
  return validDType(dtype) ? ein::elementSize(static_cast<ein::ElementType>(dtype)) : 0;
}

const char *ein_dtype_name(ein_dtype_t dtype) {
  return validDType(dtype) ? ein::elementTypeName(static_cast<ein::ElementType>(dtype)) : "unknown";
}

ein_status_t *ein_model_load(const char *path, ein_model_t **out_model) {
  if (!path || !out_model) return invalidArgument("ein_model_load: path and out_model must not be NULL");
  *out_model = nullptr;
  return guarded([&]() -> ein_status_t * {
    auto model = ein::Model::load(path);
    if (!model.ok()) return toC(model.status());
    *out_model = wrap(std::move(model).value());
    return nullptr;
  });
}

ein_status_t *ein_model_load_from_memory(const void *data, size_t size, ein_model_t **out_model) {
  if (!out_model) return invalidArgument("ein_model_load_from_memory: out_model must not be NULL");
  *out_model = nullptr;
  return guarded([&]() -> ein_status_t * {
    auto model = ein::Model::loadFromMemory(data, size);
    if (!model.ok()) return toC(model.status());
    *out_model = wrap(std::move(model).value());
    return nullptr;
  });
}

void ein_model_free(ein_model_t *model) { delete model; }

size_t ein_model_input_count(const ein_model_t *model) { return model ? model->model->inputs().size() : 0; }

size_t ein_model_output_count(const ein_model_t *model) { return model ? model->model->outputs().size() : 0; }

ein_status_t *ein_model_input_info(const ein_model_t *model, size_t index, ein_tensor_info_t *out_info) {
  if (!model || !out_info) return invalidArgument("ein_model_input_info: model and out_info must not be NULL");
  const auto &inputs = model->model->inputs();
  if (ein_status_t *missing = checkIndex("input", index, inputs.size())) return missing;
  *out_info = infoToC(inputs[index], model->inputDims[index]);
  return nullptr;
}

ein_status_t *ein_model_output_info(const ein_model_t *model, size_t index, ein_tensor_info_t *out_info) {
  if (!model || !out_info) return invalidArgument("ein_model_output_info: model and out_info must not be NULL");
  const auto &outputs = model->model->outputs();
  if (ein_status_t *missing = checkIndex("output", index, outputs.size())) return missing;
  *out_info = infoToC(outputs[index], model->outputDims[index]);
  return nullptr;
}

size_t ein_model_dim_count(const ein_model_t *model) { return model ? model->model->dims().size() : 0; }

ein_status_t *ein_model_dim_info(const ein_model_t *model, size_t index, ein_dim_info_t *out_info) {
  if (!model || !out_info) return invalidArgument("ein_model_dim_info: model and out_info must not be NULL");
  const auto &dims = model->model->dims();
  if (ein_status_t *missing = checkIndex("dim", index, dims.size())) return missing;
  *out_info = {dims[index].name.c_str(), dims[index].min, dims[index].max};
  return nullptr;
}

ein_status_t *ein_model_output_shapes(const ein_model_t *model, const int64_t *const *input_shapes,
                                      const size_t *input_ranks, int64_t *const *out_shapes) {
  if (!model || !out_shapes || (model->model->inputs().size() && (!input_shapes || !input_ranks)))
    return invalidArgument(
        "ein_model_output_shapes: model, the input shapes and ranks and out_shapes must not be NULL");
  return guarded([&]() -> ein_status_t * {
    const ein::Model &m = *model->model;
    std::vector<std::vector<int64_t>> inputs;
    for (size_t i = 0; i < m.inputs().size(); ++i) {
      if (input_ranks[i] && !input_shapes[i])
        return invalidArgument("ein_model_output_shapes: an input's shape must not be NULL");
      inputs.emplace_back(input_shapes[i], input_shapes[i] + input_ranks[i]);
    }
    auto shapes = m.outputShapes(inputs);
    if (!shapes.ok()) return toC(shapes.status());
    for (size_t o = 0; o < shapes->size(); ++o) {
      if (!out_shapes[o] && !(*shapes)[o].empty())
        return invalidArgument("ein_model_output_shapes: an output's shape buffer must not be NULL");
      std::copy((*shapes)[o].begin(), (*shapes)[o].end(), out_shapes[o]);
    }
    return nullptr;
  });
}

void ein_session_options_init(ein_session_options_t *options) {
  if (options) *options = {ein::defaultThreadCount(), EIN_DEVICE_CPU};
}

int ein_default_thread_count(void) { return ein::defaultThreadCount(); }

ein_status_t *ein_session_create(const ein_model_t *model, const ein_session_options_t *options,
                                 ein_session_t **out_session) {
  if (!model || !out_session) return invalidArgument("ein_session_create: model and out_session must not be NULL");
  *out_session = nullptr;
  ein_session_options_t c{};
  ein_session_options_init(&c);
  if (options) c = *options;
  if (c.device != EIN_DEVICE_CPU && c.device != EIN_DEVICE_CUDA) return invalidArgument("unknown device");
  return guarded([&]() -> ein_status_t * {
    auto session = ein::Session::create(model->model, {c.threads, static_cast<ein::Device>(c.device)});
    if (!session.ok()) return toC(session.status());
    *out_session = new ein_session_t{std::move(session).value()};
    return nullptr;
  });
}

void ein_session_free(ein_session_t *session) { delete session; }

ein_status_t *ein_session_set_input(ein_session_t *session, const char *name, ein_dtype_t dtype,
                                    const int64_t *shape, size_t rank, const void *data, size_t bytes) {
  if (!session || !name || (rank && !shape))
    return invalidArgument("ein_session_set_input: session, name and shape must not be NULL");
  if (!validDType(dtype)) return invalidArgument("ein_session_set_input: unknown dtype");
  return guarded([&] {
    return toC(session->session->setInput(name, static_cast<ein::ElementType>(dtype), std::span<const int64_t>(shape, rank),
                                          data, bytes));
  });
}

ein_status_t *ein_session_run(ein_session_t *session) {
  if (!session) return invalidArgument("ein_session_run: session must not be NULL");
  return guarded([&] { return toC(session->session->run()); });
}

int64_t ein_session_position(const ein_session_t *session) { return session ? session->session->position() : 0; }

ein_status_t *ein_session_reset_state(ein_session_t *session) {
  if (!session) return invalidArgument("ein_session_reset_state: session must not be NULL");
  return guarded([&] { return toC(session->session->resetState()); });
}

ein_status_t *ein_session_copy_state(ein_session_t *session, const ein_session_t *source) {
  if (!session || !source) return invalidArgument("ein_session_copy_state: session and source must not be NULL");
  return guarded([&] { return toC(session->session->copyStateFrom(*source->session)); });
}

void ein_generation_options_init(ein_generation_options_t *options) {
  if (!options) return;
  *options = ein_generation_options_t{};
  options->max_new_tokens = 32;
  options->top_p = 1.0f;
}

namespace {

ein::GenerationOptions generationFromC(const ein_generation_options_t &options) {
  ein::GenerationOptions generation;
  generation.maxNewTokens = options.max_new_tokens;
  generation.temperature = options.temperature;
  generation.topK = options.top_k;
  generation.topP = options.top_p;
  generation.seed = options.seed;
  generation.stopTokens.assign(options.stop_tokens, options.stop_tokens + options.stop_token_count);
  return generation;
}

}  // namespace

ein_status_t *ein_generate(ein_session_t *session, const int64_t *prompt, size_t prompt_length,
                           const ein_generation_options_t *options, int64_t *out_tokens, size_t *out_count) {
  if (!session || (!prompt && prompt_length) || !options || !out_count || (!out_tokens && options->max_new_tokens > 0))
    return invalidArgument("ein_generate: session, prompt, options, out_tokens and out_count must not be NULL");
  if (!options->stop_tokens && options->stop_token_count)
    return invalidArgument("ein_generate: stop_tokens is NULL but stop_token_count is not 0");
  return guarded([&] {
    auto tokens = ein::generate(*session->session, std::span<const int64_t>(prompt, prompt_length),
                                generationFromC(*options));
    if (!tokens.ok()) return toC(tokens.status());
    std::copy(tokens.value().begin(), tokens.value().end(), out_tokens);
    *out_count = tokens.value().size();
    return toC(ein::Status());
  });
}

void ein_beam_search_options_init(ein_beam_search_options_t *options) {
  if (options) *options = {4, 32, 1.0f, EIN_EARLY_STOPPING_HEURISTIC, 1, nullptr, 0, 0, nullptr, 0, nullptr, 0};
}

namespace {

// The C options, checked (`what` names the call in the message).
ein_status_t *beamSearchFromC(const ein_beam_search_options_t &options, const char *what,
                              ein::BeamSearchOptions &search) {
  if ((!options.stop_tokens && options.stop_token_count) ||
      (!options.suppress_tokens && options.suppress_token_count) ||
      (!options.begin_suppress_tokens && options.begin_suppress_token_count))
    return invalidArgument(fmt::format("{}: a token list is NULL but its count is not 0", what).c_str());
  if (options.early_stopping < EIN_EARLY_STOPPING_HEURISTIC || options.early_stopping > EIN_EARLY_STOPPING_NEVER)
    return invalidArgument(fmt::format("{}: early_stopping is not an ein_early_stopping_t", what).c_str());
  search.beams = options.beams;
  search.maxNewTokens = options.max_new_tokens;
  search.lengthPenalty = options.length_penalty;
  search.earlyStopping = static_cast<ein::EarlyStopping>(options.early_stopping);
  search.returnSequences = options.return_sequences;
  search.stopTokens.assign(options.stop_tokens, options.stop_tokens + options.stop_token_count);
  search.noRepeatNgramSize = options.no_repeat_ngram_size;
  search.suppressTokens.assign(options.suppress_tokens, options.suppress_tokens + options.suppress_token_count);
  search.beginSuppressTokens.assign(options.begin_suppress_tokens,
                                    options.begin_suppress_tokens + options.begin_suppress_token_count);
  return nullptr;
}

// Hypothesis i's tokens at out_tokens + i * maxNewTokens, its length and score.
void hypothesesToC(const std::vector<ein::Hypothesis> &found, int64_t maxNewTokens, int64_t *out_tokens,
                   size_t *out_lengths, double *out_scores, size_t *out_count) {
  for (size_t i = 0; i < found.size(); ++i) {
    std::copy(found[i].tokens.begin(), found[i].tokens.end(), out_tokens + i * static_cast<size_t>(maxNewTokens));
    out_lengths[i] = found[i].tokens.size();
    out_scores[i] = found[i].score;
  }
  *out_count = found.size();
}

}  // namespace

ein_status_t *ein_beam_search(ein_session_t *session, const int64_t *prompt, size_t prompt_length,
                              const ein_beam_search_options_t *options, int64_t *out_tokens, size_t *out_lengths,
                              double *out_scores, size_t *out_count) {
  if (!session || (!prompt && prompt_length) || !options || !out_tokens || !out_lengths || !out_scores || !out_count)
    return invalidArgument(
        "ein_beam_search: session, prompt, options, out_tokens, out_lengths, out_scores and out_count must not be NULL");
  ein::BeamSearchOptions search;
  if (ein_status_t *wrong = beamSearchFromC(*options, "ein_beam_search", search)) return wrong;
  return guarded([&] {
    auto found = ein::beamSearch(*session->session, std::span<const int64_t>(prompt, prompt_length), search);
    if (!found.ok()) return toC(found.status());
    hypothesesToC(found.value(), search.maxNewTokens, out_tokens, out_lengths, out_scores, out_count);
    return toC(ein::Status());
  });
}

ein_status_t *ein_session_output(const ein_session_t *session, size_t index, ein_tensor_t *out_tensor) {
  if (!session || !out_tensor) return invalidArgument("ein_session_output: session and out_tensor must not be NULL");
  return guarded([&] { return outputToC(session->session->output(index), out_tensor); });
}

ein_status_t *ein_session_output_by_name(const ein_session_t *session, const char *name, ein_tensor_t *out_tensor) {
  if (!session || !name || !out_tensor)
    return invalidArgument("ein_session_output_by_name: session, name and out_tensor must not be NULL");
  return guarded([&] { return outputToC(session->session->output(std::string_view(name)), out_tensor); });
}

void ein_scheduler_options_init(ein_scheduler_options_t *options) {
  if (options) *options = {16, ein::defaultThreadCount(), 0, 1024, 16, 0};
}

ein_status_t *ein_scheduler_create(const ein_model_t *model, const ein_scheduler_options_t *options,
                                   ein_scheduler_t **out_scheduler) {
  if (!model || !out_scheduler)
    return invalidArgument("ein_scheduler_create: model and out_scheduler must not be NULL");
  *out_scheduler = nullptr;
  ein_scheduler_options_t c{};
  ein_scheduler_options_init(&c);
  if (options) c = *options;
  return guarded([&]() -> ein_status_t * {
    ein::SchedulerOptions scheduling;
    scheduling.maxSequences = c.max_sequences;
    scheduling.threads = c.threads;
    scheduling.stepTokens = c.step_tokens;
    scheduling.maxWaiting = c.max_waiting;
    scheduling.cacheBlockRows = c.cache_block_rows;
    scheduling.cacheBlocks = c.cache_blocks;
    auto scheduler = ein::Scheduler::create(model->model, scheduling);
    if (!scheduler.ok()) return toC(scheduler.status());
    *out_scheduler = new ein_scheduler_t{std::move(scheduler).value()};
    return nullptr;
  });
}

void ein_scheduler_cache_blocks(const ein_scheduler_t *scheduler, int64_t *out_blocks, int64_t *out_used) {
  if (out_blocks) *out_blocks = scheduler ? scheduler->scheduler->cacheBlocks() : 0;
  if (out_used) *out_used = scheduler ? scheduler->scheduler->cacheBlocksUsed() : 0;
}

void ein_scheduler_shutdown(ein_scheduler_t *scheduler) {
  if (scheduler) scheduler->scheduler->shutdown();
}

void ein_scheduler_free(ein_scheduler_t *scheduler) { delete scheduler; }

ein_status_t *ein_scheduler_submit(ein_scheduler_t *scheduler, const int64_t *prompt, size_t prompt_length,
                                   const ein_generation_options_t *options, ein_request_t **out_request) {
  return ein_scheduler_submit_with_inputs(scheduler, prompt, prompt_length, options, nullptr, 0, out_request);
}

ein_status_t *ein_scheduler_submit_with_inputs(ein_scheduler_t *scheduler, const int64_t *prompt,
                                               size_t prompt_length, const ein_generation_options_t *options,
                                               const ein_input_t *first_run_inputs, size_t first_run_input_count,
                                               ein_request_t **out_request) {
  if (!scheduler || (!prompt && prompt_length) || !options || !out_request ||
      (first_run_input_count && !first_run_inputs))
    return invalidArgument("ein_scheduler_submit: scheduler, prompt, options, first_run_inputs and out_request must "
                           "not be NULL");
  *out_request = nullptr;
  if (!options->stop_tokens && options->stop_token_count)
    return invalidArgument("ein_scheduler_submit: stop_tokens is NULL but stop_token_count is not 0");
  return guarded([&]() -> ein_status_t * {
    SmallArray<ein::InputTensor> inputs(first_run_input_count);
    if (ein_status_t *wrong = inputsFromC(first_run_inputs, first_run_input_count, "ein_scheduler_submit", inputs))
      return wrong;
    auto request = scheduler->scheduler->submit(std::span<const int64_t>(prompt, prompt_length),
                                                generationFromC(*options), inputs.span());
    if (!request.ok()) return toC(request.status());
    *out_request = new ein_request_t{std::move(request).value()};
    return nullptr;
  });
}

ein_status_t *ein_scheduler_submit_beam_search(ein_scheduler_t *scheduler, const int64_t *prompt,
                                               size_t prompt_length, const ein_beam_search_options_t *options,
                                               const ein_input_t *first_run_inputs, size_t first_run_input_count,
                                               ein_request_t **out_request) {
  if (!scheduler || (!prompt && prompt_length) || !options || !out_request ||
      (first_run_input_count && !first_run_inputs))
    return invalidArgument("ein_scheduler_submit_beam_search: scheduler, prompt, options, first_run_inputs and "
                           "out_request must not be NULL");
  *out_request = nullptr;
  ein::BeamSearchOptions search;
  if (ein_status_t *wrong = beamSearchFromC(*options, "ein_scheduler_submit_beam_search", search)) return wrong;
  return guarded([&]() -> ein_status_t * {
    SmallArray<ein::InputTensor> inputs(first_run_input_count);
    if (ein_status_t *wrong =
            inputsFromC(first_run_inputs, first_run_input_count, "ein_scheduler_submit_beam_search", inputs))
      return wrong;
    auto request = scheduler->scheduler->submitBeamSearch(std::span<const int64_t>(prompt, prompt_length),
                                                          std::move(search), inputs.span());
    if (!request.ok()) return toC(request.status());
    *out_request = new ein_request_t{std::move(request).value(), options->max_new_tokens};
    return nullptr;
  });
}

ein_status_t *ein_request_hypotheses(ein_request_t *request, int64_t *out_tokens, size_t *out_lengths,
                                     double *out_scores, size_t *out_count) {
  if (!request || !out_tokens || !out_lengths || !out_scores || !out_count)
    return invalidArgument(
        "ein_request_hypotheses: request, out_tokens, out_lengths, out_scores and out_count must not be NULL");
  return guarded([&] {
    auto found = request->request->hypotheses();
    if (!found.ok()) return toC(found.status());
    hypothesesToC(found.value(), request->maxNewTokens, out_tokens, out_lengths, out_scores, out_count);
    return toC(ein::Status());
  });
}

ein_status_t *ein_request_next(ein_request_t *request, int64_t *out_token, int *out_has_token) {
  if (!request || !out_token || !out_has_token)
    return invalidArgument("ein_request_next: request, out_token and out_has_token must not be NULL");
  *out_has_token = 0;
  return guarded([&]() -> ein_status_t * {
    auto token = request->request->next();
    if (!token.ok()) return toC(token.status());
    if (token.value()) {
      *out_token = *token.value();
      *out_has_token = 1;
    }
    return nullptr;
  });
}

void ein_request_cancel(ein_request_t *request) {
  if (request) request->request->cancel();
}

int ein_request_done(const ein_request_t *request) { return request && request->request->done() ? 1 : 0; }

const char *ein_request_finish_reason(const ein_request_t *request) {
  return request ? ein::finishReasonName(request->request->finishReason()) : "";
}

void ein_request_free(ein_request_t *request) { delete request; }

void ein_runner_options_init(ein_runner_options_t *options) {
  if (options) *options = {1, EIN_DEVICE_CPU, 0};
}

ein_status_t *ein_runner_create(const ein_model_t *model, const ein_runner_options_t *options,
                                ein_runner_t **out_runner) {
  if (!model || !out_runner) return invalidArgument("ein_runner_create: model and out_runner must not be NULL");
  *out_runner = nullptr;
  ein_runner_options_t c{};
  ein_runner_options_init(&c);
  if (options) c = *options;
  if (c.device != EIN_DEVICE_CPU && c.device != EIN_DEVICE_CUDA) return invalidArgument("unknown device");
  return guarded([&]() -> ein_status_t * {
    auto runner =
        ein::Runner::create(model->model, {.threads = c.threads,
                                           .device = static_cast<ein::Device>(c.device),
                                           .maxConcurrentRuns = c.max_concurrent_runs});
    if (!runner.ok()) return toC(runner.status());
    *out_runner = new ein_runner_t{std::move(runner).value()};
    return nullptr;
  });
}

void ein_runner_free(ein_runner_t *runner) { delete runner; }

ein_status_t *ein_runner_run(ein_runner_t *runner, const ein_input_t *inputs, size_t input_count,
                             const ein_output_buffer_t *outputs, size_t output_count) {
  if (!runner || (input_count && !inputs) || (output_count && !outputs))
    return invalidArgument("ein_runner_run: runner, inputs and outputs must not be NULL");
  return guarded([&]() -> ein_status_t * {
    SmallArray<ein::InputTensor> cppInputs(input_count);
    if (ein_status_t *wrong = inputsFromC(inputs, input_count, "ein_runner_run", cppInputs)) return wrong;
    SmallArray<ein::OutputBuffer> cppOutputs(output_count);
    for (size_t i = 0; i < output_count; ++i) {
      if (!outputs[i].name) return invalidArgument("ein_runner_run: an output's name must not be NULL");
      cppOutputs.data()[i] = {outputs[i].name, outputs[i].data, outputs[i].bytes};
    }
    return toC(runner->runner->run(cppInputs.span(), cppOutputs.span()));
  });
}

size_t ein_runner_context_count(const ein_runner_t *runner) { return runner ? runner->runner->contextCount() : 0; }

}  // extern "C"
