// libtriton_ein.so: Triton Inference Server's backend "ein". The server loads
// it into its own process; each model instance is a thread of the server
// that calls TRITONBACKEND_ModelInstanceExecute with a batch of requests.
// One ein::Model per served model (its weights and prepacked copies shared)
// and one ein::Runner over it, from which every instance's call borrows an
// execution context of its own.
//
// The model's config.pbtxt (ein.serve writes it) names the artifact in its
// version folder and how requests run, as string parameters: artifact,
// threads (kernel threads per call or step), and:
// - For a model without state, batched (an encoder): pad_dims
//   (comma-separated ranged dims padded with zeros), max_padding. Requests
//   are checked, merged and split by ein/batching.hpp: a malformed request
//   fails alone (INVALID_ARG), the others run. Inputs are read in place where
//   Triton holds them in one CPU buffer; outputs are written into Triton's
//   response buffers.
// - For a decoder (a model with state), decoupled: max_sequences,
//   step_tokens. Each request (prompt, and optionally max_tokens,
//   temperature, top_k, top_p, seed, stop; an encoder-decoder's encoder
//   inputs under the model's names) goes to one ein::Scheduler, which
//   continuously batches every sequence generating; each token is streamed
//   back as a response of its own as the scheduler chooses it, then the
//   final flag. Chosen over Triton's sequence batcher with implicit state:
//   that batcher would carry each sequence's key/value cache through Triton
//   at every step and batch only sequences that happen to step together,
//   where the scheduler keeps the paged caches in place, runs every
//   sequence's next token in one step and takes long prompts in chunks.
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ein/batching.hpp"
#include "ein/model.hpp"
#include "ein/runner.hpp"
#include "ein/scheduler.hpp"
#include "triton/core/tritonbackend.h"

#define EIN_TRITON_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

TRITONSERVER_Error *error(TRITONSERVER_Error_Code code, const std::string &message) {
  return TRITONSERVER_ErrorNew(code, message.c_str());
}

TRITONSERVER_Error *error(const ein::Status &status) {
  const bool callers = status.code() == ein::StatusCode::InvalidArgument || status.code() == ein::StatusCode::OutOfRange;
  return error(callers ? TRITONSERVER_ERROR_INVALID_ARG : TRITONSERVER_ERROR_INTERNAL, status.message());
}

void log(TRITONSERVER_LogLevel level, const std::string &message) {
  if (TRITONSERVER_Error *failed = TRITONSERVER_LogMessage(level, __FILE__, __LINE__, message.c_str()))
    TRITONSERVER_ErrorDelete(failed);
}

// Triton's clock for statistics: steady_clock nanoseconds.
uint64_t now() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// The dtypes a served model takes and gives, as Triton names them (BYTES,
// BF16 and the unsigned types have none; BatchSignature refuses bf16, and i4
// is never an input or output).
constexpr std::pair<TRITONSERVER_DataType, ein::DType> kTritonTypes[] = {
    {TRITONSERVER_TYPE_FP32, ein::DType::F32}, {TRITONSERVER_TYPE_FP16, ein::DType::F16},
    {TRITONSERVER_TYPE_INT32, ein::DType::I32}, {TRITONSERVER_TYPE_INT64, ein::DType::I64},
    {TRITONSERVER_TYPE_BOOL, ein::DType::Bool}, {TRITONSERVER_TYPE_INT8, ein::DType::I8}};

// The ein element type of a Triton datatype, or false.
bool elementTypeOf(TRITONSERVER_DataType type, ein::ElementType &element) {
  for (const auto &[triton, dtype] : kTritonTypes)
    if (triton == type) {
      element = ein::elementType(dtype);
      return true;
    }
  return false;
}

TRITONSERVER_DataType tritonType(ein::DType dtype) {
  for (const auto &[triton, ein] : kTritonTypes)
    if (ein == dtype) return triton;
  return TRITONSERVER_TYPE_INVALID;
}

struct ModelState {
  std::shared_ptr<const ein::Model> model;
  // A model without state: requests batched.
  ein::BatchSignature signature;
  std::unique_ptr<ein::Runner> runner;
  double maxPadding = 1.25;
  // A decoder: requests streamed through the scheduler.
  std::unique_ptr<ein::Scheduler> scheduler;
};

// A config parameter's string_value, or `fallback`.
std::string parameter(const nlohmann::json &config, const char *key, const std::string &fallback) {
  auto parameters = config.find("parameters");
  if (parameters == config.end() || !parameters->is_object()) return fallback;
  auto entry = parameters->find(key);
  if (entry == parameters->end() || !entry->is_object()) return fallback;
  auto value = entry->find("string_value");
  return value != entry->end() && value->is_string() ? value->get<std::string>() : fallback;
}

TRITONSERVER_Error *loadModelState(TRITONBACKEND_Model *model, std::unique_ptr<ModelState> &state) {
  TRITONSERVER_Message *message = nullptr;
  if (TRITONSERVER_Error *failed = TRITONBACKEND_ModelConfig(model, 1, &message)) return failed;
  const char *json = nullptr;
  size_t jsonBytes = 0;
  TRITONSERVER_Error *failed = TRITONSERVER_MessageSerializeToJson(message, &json, &jsonBytes);
  nlohmann::json config = failed ? nlohmann::json() : nlohmann::json::parse(json, json + jsonBytes, nullptr, false);
  TRITONSERVER_MessageDelete(message);
  if (failed) return failed;
  if (config.is_discarded()) return error(TRITONSERVER_ERROR_INVALID_ARG, "ein: the model config is not JSON");

  const std::string artifact = parameter(config, "artifact", "model.einb");
  if (artifact.empty() || artifact.find('/') != std::string::npos || artifact == "." || artifact == "..")
    return error(TRITONSERVER_ERROR_INVALID_ARG,
                 "ein: parameter artifact must name a file in the model's version folder, got \"" + artifact + "\"");
  int threads = 1, maxSequences = 16;
  int64_t stepTokens = 0;
  double maxPadding = 1.25;
  try {
    threads = std::stoi(parameter(config, "threads", "1"));
    maxPadding = std::stod(parameter(config, "max_padding", "1.25"));
    maxSequences = std::stoi(parameter(config, "max_sequences", "16"));
    stepTokens = std::stoll(parameter(config, "step_tokens", "0"));
  } catch (const std::exception &) {
    return error(TRITONSERVER_ERROR_INVALID_ARG,
                 "ein: parameters threads, max_padding, max_sequences and step_tokens must be numbers");
  }
  if (threads < 1 || threads > 1024 || !(maxPadding >= 1) || maxSequences < 1 || stepTokens < 0)
    return error(TRITONSERVER_ERROR_INVALID_ARG,
                 "ein: threads must lie in 1..1024, max_padding be at least 1, max_sequences at least 1 and "
                 "step_tokens at least 0");
  std::vector<std::string> padDims;
  const std::string padText = parameter(config, "pad_dims", "");
  for (size_t start = 0; start < padText.size();) {
    size_t comma = padText.find(',', start);
    if (comma == std::string::npos) comma = padText.size();
    if (comma > start) padDims.push_back(padText.substr(start, comma - start));
    start = comma + 1;
  }

  TRITONBACKEND_ArtifactType type;
  const char *location = nullptr;
  uint64_t version = 0;
  if (TRITONSERVER_Error *failed = TRITONBACKEND_ModelRepository(model, &type, &location)) return failed;
  if (TRITONSERVER_Error *failed = TRITONBACKEND_ModelVersion(model, &version)) return failed;
  if (type != TRITONBACKEND_ARTIFACT_FILESYSTEM)
    return error(TRITONSERVER_ERROR_UNSUPPORTED, "ein: models are read from the file system only");
  const std::string path = std::string(location) + "/" + std::to_string(version) + "/" + artifact;

  state = std::make_unique<ModelState>();
  state->maxPadding = maxPadding;
  auto loaded = ein::Model::load(path);  // verifies the artifact, as every load does
  if (!loaded.ok()) return error(TRITONSERVER_ERROR_INVALID_ARG, "ein: " + path + ": " + loaded.status().toString());
  state->model = std::move(loaded).value();
  if (!state->model->states().empty()) {
    // Its tokens stream as responses of their own: Triton must expect many per request.
    auto policy = config.find("model_transaction_policy");
    bool decoupled = policy != config.end() && policy->is_object() && policy->value("decoupled", false);
    if (!decoupled)
      return error(TRITONSERVER_ERROR_INVALID_ARG, "ein: " + path + " is a decoder (a model with state), which streams "
                                                   "its tokens: its config needs model_transaction_policy { decoupled: true }");
    auto scheduler = ein::Scheduler::create(
        state->model, {.maxSequences = maxSequences, .threads = threads, .stepTokens = stepTokens});
    if (!scheduler.ok()) return error(TRITONSERVER_ERROR_INVALID_ARG, "ein: " + path + ": " + scheduler.status().toString());
    state->scheduler = std::move(scheduler).value();
    log(TRITONSERVER_LOG_INFO, "ein: loaded decoder " + path + " (" + std::to_string(maxSequences) +
                                   " sequences at once, " + std::to_string(threads) + " kernel threads)");
    return nullptr;
  }
  auto signature = ein::BatchSignature::create(*state->model, padDims);
  if (!signature.ok()) return error(TRITONSERVER_ERROR_INVALID_ARG, "ein: " + path + ": " + signature.status().message());
  state->signature = std::move(signature).value();
  auto runner = ein::Runner::create(state->model, {.threads = threads});
  if (!runner.ok()) return error(TRITONSERVER_ERROR_INTERNAL, "ein: " + runner.status().toString());
  state->runner = std::move(runner).value();
  log(TRITONSERVER_LOG_INFO, "ein: loaded " + path + " (" + std::to_string(threads) + " kernel threads per call)");
  return nullptr;
}

// One request of a batch: its inputs (read in place, or gathered where Triton
// holds one in several buffers), its dims once checked, its response.
struct Pending {
  TRITONBACKEND_Request *request = nullptr;
  TRITONBACKEND_Response *response = nullptr;
  std::vector<ein::InputTensor> inputs;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::vector<std::byte>> gathered;
  std::vector<int64_t> dims;
  bool answered = false;
  bool succeeded = false;
};

TRITONSERVER_Error *readInputs(Pending &pending) {
  uint32_t count = 0;
  if (TRITONSERVER_Error *failed = TRITONBACKEND_RequestInputCount(pending.request, &count)) return failed;
  pending.shapes.resize(count);
  pending.gathered.resize(count);
  for (uint32_t index = 0; index < count; ++index) {
    TRITONBACKEND_Input *input = nullptr;
    if (TRITONSERVER_Error *failed = TRITONBACKEND_RequestInputByIndex(pending.request, index, &input)) return failed;
    const char *name = nullptr;
    TRITONSERVER_DataType datatype;
    const int64_t *shape = nullptr;
    uint32_t rank = 0, buffers = 0;
    uint64_t bytes = 0;
    if (TRITONSERVER_Error *failed =
            TRITONBACKEND_InputProperties(input, &name, &datatype, &shape, &rank, &bytes, &buffers))
      return failed;
    ein::ElementType element;
    if (!elementTypeOf(datatype, element))
      return error(TRITONSERVER_ERROR_INVALID_ARG, std::string("input \"") + name + "\" has datatype " +
                                                       TRITONSERVER_DataTypeString(datatype) + ", which ein models do not take");
    pending.shapes[index].assign(shape, shape + rank);
    const void *data = nullptr;
    uint64_t held = 0;  // the bytes Triton holds, which checkRequest compares with the shape's
    for (uint32_t buffer = 0; buffer < buffers; ++buffer) {
      const void *part = nullptr;
      uint64_t partBytes = 0;
      TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
      int64_t memoryId = 0;
      if (TRITONSERVER_Error *failed = TRITONBACKEND_InputBuffer(input, buffer, &part, &partBytes, &memory, &memoryId))
        return failed;
      if (memory == TRITONSERVER_MEMORY_GPU)
        return error(TRITONSERVER_ERROR_INVALID_ARG, std::string("input \"") + name + "\" is in GPU memory; the ein "
                                                                                        "backend reads CPU memory");
      if (buffers == 1) {
        data = part;
        held = partBytes;
        break;
      }
      auto &copy = pending.gathered[index];
      if (copy.size() + partBytes > bytes)
        return error(TRITONSERVER_ERROR_INVALID_ARG, std::string("input \"") + name + "\" has more bytes than it says");
      copy.insert(copy.end(), static_cast<const std::byte *>(part), static_cast<const std::byte *>(part) + partBytes);
    }
    if (buffers != 1) {
      data = pending.gathered[index].data();
      held = pending.gathered[index].size();
    }
    pending.inputs.emplace_back(name, element, pending.shapes[index], data, static_cast<size_t>(held));
  }
  return nullptr;
}

// Sends a final response, with `failure` (taken) or the outputs it holds.
void sendFinal(TRITONBACKEND_Response *response, TRITONSERVER_Error *failure) {
  if (TRITONSERVER_Error *failed = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, failure)) {
    log(TRITONSERVER_LOG_ERROR, std::string("ein: a response could not be sent: ") + TRITONSERVER_ErrorMessage(failed));
    TRITONSERVER_ErrorDelete(failed);
  }
  if (failure) TRITONSERVER_ErrorDelete(failure);
}

// Answers a request once: with `failure` (taken), or the outputs written.
void answer(Pending &pending, TRITONSERVER_Error *failure) {
  if (pending.answered) {
    if (failure) TRITONSERVER_ErrorDelete(failure);
    return;
  }
  pending.answered = true;
  pending.succeeded = failure == nullptr;
  sendFinal(pending.response, failure);
}

// One requested output of a response: where Triton wants it, at the
// request's own shape.
struct ResponseBuffer {
  const ein::BatchedTensor *tensor = nullptr;
  std::vector<int64_t> shape;
  void *data = nullptr;
  uint64_t bytes = 0;
};

// The response's requested outputs, created at the request's shapes, with
// the buffers Triton gives them (CPU memory).
TRITONSERVER_Error *responseBuffers(const ModelState &state, Pending &pending, std::vector<ResponseBuffer> &buffers) {
  uint32_t requested = 0;
  if (TRITONSERVER_Error *failed = TRITONBACKEND_RequestOutputCount(pending.request, &requested)) return failed;
  for (uint32_t index = 0; index < requested; ++index) {
    const char *name = nullptr;
    if (TRITONSERVER_Error *failed = TRITONBACKEND_RequestOutputName(pending.request, index, &name)) return failed;
    ResponseBuffer buffer;
    for (const ein::BatchedTensor &tensor : state.signature.outputs)
      if (tensor.name == name) buffer.tensor = &tensor;
    if (buffer.tensor == nullptr) return error(TRITONSERVER_ERROR_INVALID_ARG, std::string("unknown output \"") + name + "\"");
    buffer.shape = ein::batchedShape(*buffer.tensor, pending.dims, pending.dims[state.signature.batchDim]);
    TRITONBACKEND_Output *output = nullptr;
    if (TRITONSERVER_Error *failed =
            TRITONBACKEND_ResponseOutput(pending.response, &output, name, tritonType(buffer.tensor->dtype),
                                         buffer.shape.data(), static_cast<uint32_t>(buffer.shape.size())))
      return failed;
    int64_t elements = 1;
    for (int64_t size : buffer.shape) elements *= size;
    buffer.bytes = ein::dtypeBytes(buffer.tensor->dtype, static_cast<uint64_t>(elements));
    TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
    int64_t memoryId = 0;
    if (TRITONSERVER_Error *failed = TRITONBACKEND_OutputBuffer(output, &buffer.data, buffer.bytes, &memory, &memoryId))
      return failed;
    if (memory == TRITONSERVER_MEMORY_GPU)
      return error(TRITONSERVER_ERROR_UNSUPPORTED, "Triton offered GPU memory for output \"" + buffer.tensor->name + "\"");
    buffers.push_back(std::move(buffer));
  }
  return nullptr;
}

// Runs one request alone, its outputs written straight into its response's
// buffers, and answers it.
void runAlone(ModelState &state, Pending &pending) {
  std::vector<ResponseBuffer> buffers;
  if (TRITONSERVER_Error *failed = responseBuffers(state, pending, buffers)) return answer(pending, failed);
  std::vector<ein::OutputBuffer> outputs;
  for (const ResponseBuffer &buffer : buffers)
    outputs.push_back({buffer.tensor->name, buffer.data, static_cast<size_t>(buffer.bytes)});
  ein::Status status = state.runner->run(pending.inputs, outputs);
  if (!status.ok()) {  // the error goes in a fresh response, without the outputs half written
    if (TRITONSERVER_Error *failed = TRITONBACKEND_ResponseDelete(pending.response)) TRITONSERVER_ErrorDelete(failed);
    pending.response = nullptr;
    if (TRITONSERVER_Error *failed = TRITONBACKEND_ResponseNew(&pending.response, pending.request)) {
      TRITONSERVER_ErrorDelete(failed);
      pending.answered = true;  // nothing left to answer with
      return;
    }
  }
  answer(pending, status.ok() ? nullptr : error(status));
}

// Copies a member's rows, from `row` of the run's outputs, into its response.
TRITONSERVER_Error *writeRows(const ModelState &state, Pending &pending, const std::vector<ein::OutputTensor> &outputs,
                              int64_t row) {
  std::vector<ResponseBuffer> buffers;
  if (TRITONSERVER_Error *failed = responseBuffers(state, pending, buffers)) return failed;
  for (const ResponseBuffer &buffer : buffers) {
    const ein::OutputTensor *source = nullptr;
    for (const ein::OutputTensor &output : outputs)
      if (output.name == buffer.tensor->name) source = &output;
    // The block copied out must lie within the run's output (a bug guard: the dims say it does).
    const std::vector<int64_t> &shape = buffer.shape;
    bool within = source != nullptr && source->shape.size() == shape.size() && !shape.empty() &&
                  row + shape[0] <= source->shape[0];
    for (size_t axis = 1; within && axis < shape.size(); ++axis) within = shape[axis] <= source->shape[axis];
    if (!within)
      return error(TRITONSERVER_ERROR_INTERNAL, "the run's output \"" + buffer.tensor->name + "\" does not hold the request's rows");
    if (buffer.bytes > 0)
      ein::copyBlock(source->data.data(), source->shape, row, static_cast<std::byte *>(buffer.data), shape, 0, shape,
                     ein::dtypeSize(buffer.tensor->dtype));
  }
  return nullptr;
}

// Runs requests merged (each zero-padded to the run's dims) and answers each
// with its own rows; should the merged run fail (a model's own run-time
// check), they run one by one, so only the offending one fails.
void runMerged(ModelState &state, std::vector<Pending *> &members) {
  const ein::BatchSignature &signature = state.signature;
  std::vector<std::vector<int64_t>> memberDims;
  for (Pending *member : members) memberDims.push_back(member->dims);
  const std::vector<int64_t> dims = ein::mergedDims(signature, memberDims);
  const int64_t rows = dims[signature.batchDim];
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::vector<std::byte>> merged;
  std::vector<ein::InputTensor> inputs;
  shapes.reserve(signature.inputs.size());
  merged.reserve(signature.inputs.size());
  for (const ein::BatchedTensor &tensor : signature.inputs) {
    shapes.push_back(ein::batchedShape(tensor, dims, rows));
    int64_t elements = 1;
    for (int64_t size : shapes.back()) elements *= size;
    merged.emplace_back(ein::dtypeBytes(tensor.dtype, static_cast<uint64_t>(elements)));  // zeros: the padding
    int64_t row = 0;
    for (Pending *member : members) {
      for (const ein::InputTensor &input : member->inputs)
        if (input.name == tensor.name)
          ein::copyBlock(static_cast<const std::byte *>(input.data), input.shape, 0, merged.back().data(), shapes.back(),
                         row, input.shape, ein::dtypeSize(tensor.dtype));
      row += member->dims[signature.batchDim];
    }
    inputs.emplace_back(tensor.name, tensor.dtype, shapes.back(), merged.back().data(), merged.back().size());
  }
  auto outputs = state.runner->run(inputs);
  if (!outputs.ok()) {
    for (Pending *member : members) runAlone(state, *member);
    return;
  }
  int64_t row = 0;
  for (Pending *member : members) {
    answer(*member, writeRows(state, *member, *outputs, row));
    row += member->dims[signature.batchDim];
  }
}

void execute(ModelState &state, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
             uint32_t count) {
  const uint64_t execStart = now();
  std::vector<Pending> pending(count);
  std::vector<size_t> good;
  std::vector<std::vector<int64_t>> goodDims;
  for (uint32_t index = 0; index < count; ++index) {
    Pending &one = pending[index];
    one.request = requests[index];
    if (TRITONSERVER_Error *failed = TRITONBACKEND_ResponseNew(&one.response, one.request)) {
      log(TRITONSERVER_LOG_ERROR, std::string("ein: no response for a request: ") + TRITONSERVER_ErrorMessage(failed));
      TRITONSERVER_ErrorDelete(failed);
      one.response = nullptr;
      one.answered = true;
      continue;
    }
    try {
      if (TRITONSERVER_Error *failed = readInputs(one)) {
        answer(one, failed);
        continue;
      }
      auto dims = ein::checkRequest(state.signature, one.inputs);
      if (!dims.ok()) {
        answer(one, error(dims.status()));
        continue;
      }
      one.dims = std::move(dims).value();
      good.push_back(index);
      goodDims.push_back(one.dims);
    } catch (const std::exception &caught) {  // out of memory: this request fails, the others go on
      answer(one, error(TRITONSERVER_ERROR_INTERNAL, std::string("ein: ") + caught.what()));
    }
  }
  const uint64_t computeStart = now();
  int64_t rows = 0;
  for (const std::vector<size_t> &run : ein::planRuns(state.signature, goodDims, state.maxPadding)) {
    std::vector<Pending *> members;
    for (size_t member : run) {
      members.push_back(&pending[good[member]]);
      rows += members.back()->dims[state.signature.batchDim];
    }
    try {
      if (members.size() == 1)
        runAlone(state, *members[0]);
      else
        runMerged(state, members);
    } catch (const std::exception &caught) {  // out of memory: this run's requests fail, the others go on
      for (Pending *member : members) answer(*member, error(TRITONSERVER_ERROR_INTERNAL, std::string("ein: ") + caught.what()));
    }
  }
  const uint64_t computeEnd = now();
  for (Pending &one : pending) {
    answer(one, error(TRITONSERVER_ERROR_INTERNAL, "the request was not run"));  // none is left unanswered
    if (TRITONSERVER_Error *failed = TRITONBACKEND_ModelInstanceReportStatistics(
            instance, one.request, one.succeeded, execStart, computeStart, computeEnd, now()))
      TRITONSERVER_ErrorDelete(failed);
  }
  if (rows > 0)
    if (TRITONSERVER_Error *failed = TRITONBACKEND_ModelInstanceReportBatchStatistics(
            instance, static_cast<uint64_t>(rows), execStart, computeStart, computeEnd, now()))
      TRITONSERVER_ErrorDelete(failed);
}

// One decoder request's responses: one per token as the scheduler chooses
// it, then the final flag (or an error). Shared by the request's callbacks;
// the last owner deletes the factory.
class TokenStream {
 public:
  explicit TokenStream(TRITONBACKEND_ResponseFactory *factory) : factory_(factory) {}
  ~TokenStream() {
    if (TRITONSERVER_Error *failed = TRITONBACKEND_ResponseFactoryDelete(factory_)) TRITONSERVER_ErrorDelete(failed);
  }
  TokenStream(const TokenStream &) = delete;
  TokenStream &operator=(const TokenStream &) = delete;

  // Sends `token`; false (stop generating) when the client cancelled or the
  // response could not be sent.
  bool send(int64_t token) {
    bool cancelled = false;
    if (TRITONSERVER_Error *failed = TRITONBACKEND_ResponseFactoryIsCancelled(factory_, &cancelled))
      TRITONSERVER_ErrorDelete(failed);
    if (cancelled) return false;
    TRITONBACKEND_Response *response = nullptr;
    if (TRITONSERVER_Error *failed = TRITONBACKEND_ResponseNewFromFactory(&response, factory_)) {
      TRITONSERVER_ErrorDelete(failed);
      return false;
    }
    const int64_t shape[] = {1};
    const int32_t value = static_cast<int32_t>(token);  // ids fit: the vocabulary is an i32 table's rows
    TRITONBACKEND_Output *output = nullptr;
    void *buffer = nullptr;
    TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
    int64_t memoryId = 0;
    TRITONSERVER_Error *failed = TRITONBACKEND_ResponseOutput(response, &output, "token", TRITONSERVER_TYPE_INT32, shape, 1);
    if (!failed) failed = TRITONBACKEND_OutputBuffer(output, &buffer, sizeof value, &memory, &memoryId);
    if (!failed && memory == TRITONSERVER_MEMORY_GPU)
      failed = error(TRITONSERVER_ERROR_UNSUPPORTED, "Triton offered GPU memory for output \"token\"");
    if (failed) {
      TRITONSERVER_ErrorDelete(failed);
      if (TRITONSERVER_Error *deleted = TRITONBACKEND_ResponseDelete(response)) TRITONSERVER_ErrorDelete(deleted);
      return false;
    }
    std::memcpy(buffer, &value, sizeof value);
    if (TRITONSERVER_Error *unsent = TRITONBACKEND_ResponseSend(response, 0, nullptr)) {
      TRITONSERVER_ErrorDelete(unsent);
      return false;
    }
    return true;
  }

  // Ends the stream: the final flag, or a final response with `status`'s error.
  void finish(const ein::Status &status) {
    if (status.ok()) {
      if (TRITONSERVER_Error *failed = TRITONBACKEND_ResponseFactorySendFlags(factory_, TRITONSERVER_RESPONSE_COMPLETE_FINAL))
        TRITONSERVER_ErrorDelete(failed);
      return;
    }
    fail(error(status));
  }

  // Ends the stream with `failure` (taken).
  void fail(TRITONSERVER_Error *failure) {
    TRITONBACKEND_Response *response = nullptr;
    if (TRITONSERVER_Error *failed = TRITONBACKEND_ResponseNewFromFactory(&response, factory_)) {
      TRITONSERVER_ErrorDelete(failed);
      TRITONSERVER_ErrorDelete(failure);
      return;
    }
    sendFinal(response, failure);
  }

 private:
  TRITONBACKEND_ResponseFactory *factory_;
};

// The input `name` of a decoder request, or nullptr where it is absent.
const ein::InputTensor *findInput(const std::vector<ein::InputTensor> &inputs, std::string_view name) {
  for (const ein::InputTensor &input : inputs)
    if (input.name == name) return &input;
  return nullptr;
}

// An integer input's values (i32 or i64), checked against its bytes.
TRITONSERVER_Error *integers(const ein::InputTensor &input, std::vector<int64_t> &values) {
  const size_t width = input.dtype == ein::ElementType::I32 ? 4 : input.dtype == ein::ElementType::I64 ? 8 : 0;
  int64_t elements = 1;
  for (int64_t size : input.shape) elements *= size;
  if (width == 0 || input.shape.size() != 1 || input.bytes != static_cast<size_t>(elements) * width)
    return error(TRITONSERVER_ERROR_INVALID_ARG,
                 "input \"" + std::string(input.name) + "\" takes a list of INT32 or INT64 values");
  values.resize(static_cast<size_t>(elements));
  for (size_t i = 0; i < values.size(); ++i) {
    if (width == 4) {
      int32_t value;
      std::memcpy(&value, static_cast<const std::byte *>(input.data) + i * 4, 4);
      values[i] = value;
    } else {
      std::memcpy(&values[i], static_cast<const std::byte *>(input.data) + i * 8, 8);
    }
  }
  return nullptr;
}

// A scalar input ([1]) as a double, or an error naming it.
TRITONSERVER_Error *scalar(const ein::InputTensor &input, double &value) {
  if (input.dtype == ein::ElementType::F32 && input.bytes == 4) {
    float read;
    std::memcpy(&read, input.data, 4);
    value = read;
    return nullptr;
  }
  std::vector<int64_t> values;
  TRITONSERVER_Error *notIntegers = integers(input, values);
  if (notIntegers == nullptr && values.size() == 1) {
    value = static_cast<double>(values[0]);
    return nullptr;
  }
  if (notIntegers) TRITONSERVER_ErrorDelete(notIntegers);  // the error below says what this input takes
  return error(TRITONSERVER_ERROR_INVALID_ARG, "input \"" + std::string(input.name) + "\" takes one value");
}

// A decoder request's prompt and generation options from its inputs; the
// scheduler checks the values (ids inside the vocabulary, ranges) on submit.
TRITONSERVER_Error *generationRequest(const std::vector<ein::InputTensor> &inputs, std::vector<int64_t> &prompt,
                                      ein::GenerationOptions &options) {
  const ein::InputTensor *ids = findInput(inputs, "prompt");
  if (ids == nullptr) return error(TRITONSERVER_ERROR_INVALID_ARG, "input \"prompt\" is missing");
  if (TRITONSERVER_Error *failed = integers(*ids, prompt)) return failed;
  double value = 0;
  if (const ein::InputTensor *input = findInput(inputs, "max_tokens")) {
    if (TRITONSERVER_Error *failed = scalar(*input, value)) return failed;
    if (!(value >= 0 && value <= 1e9))
      return error(TRITONSERVER_ERROR_INVALID_ARG, "input \"max_tokens\" must lie in 0..1000000000");
    options.maxNewTokens = static_cast<int64_t>(value);
  }
  if (const ein::InputTensor *input = findInput(inputs, "temperature")) {
    if (TRITONSERVER_Error *failed = scalar(*input, value)) return failed;
    options.temperature = static_cast<float>(value);
  }
  if (const ein::InputTensor *input = findInput(inputs, "top_k")) {
    if (TRITONSERVER_Error *failed = scalar(*input, value)) return failed;
    options.topK = static_cast<int64_t>(value);
  }
  if (const ein::InputTensor *input = findInput(inputs, "top_p")) {
    if (TRITONSERVER_Error *failed = scalar(*input, value)) return failed;
    options.topP = static_cast<float>(value);
  }
  if (const ein::InputTensor *input = findInput(inputs, "seed")) {
    std::vector<int64_t> seed;
    if (TRITONSERVER_Error *failed = integers(*input, seed)) return failed;
    if (seed.size() != 1) return error(TRITONSERVER_ERROR_INVALID_ARG, "input \"seed\" takes one value");
    options.seed = static_cast<uint64_t>(seed[0]);
  }
  if (const ein::InputTensor *input = findInput(inputs, "stop"))
    if (TRITONSERVER_Error *failed = integers(*input, options.stopTokens)) return failed;
  return nullptr;
}

// Decoder requests: each read, submitted to the scheduler with callbacks
// that stream its tokens, and released at once (its responses go through
// its factory, which outlives it).
void executeDecoder(ModelState &state, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                    uint32_t count) {
  for (uint32_t index = 0; index < count; ++index) {
    const uint64_t start = now();
    TRITONBACKEND_Request *request = requests[index];
    TRITONBACKEND_ResponseFactory *factory = nullptr;
    if (TRITONSERVER_Error *failed = TRITONBACKEND_ResponseFactoryNew(&factory, request)) {
      log(TRITONSERVER_LOG_ERROR, std::string("ein: no response factory for a request: ") +
                                      TRITONSERVER_ErrorMessage(failed));
      TRITONSERVER_ErrorDelete(failed);
      continue;
    }
    auto stream = std::make_shared<TokenStream>(factory);
    bool submitted = false;
    try {
      Pending pending;
      pending.request = request;
      std::vector<int64_t> prompt;
      ein::GenerationOptions options;
      TRITONSERVER_Error *failed = readInputs(pending);
      if (!failed) failed = generationRequest(pending.inputs, prompt, options);
      if (failed) {
        stream->fail(failed);
      } else {
        options.onToken = [stream](int64_t token) { return stream->send(token); };
        options.onEnd = [stream](ein::FinishReason, const ein::Status &status) { stream->finish(status); };
        // An encoder-decoder's encoder inputs (Whisper's features, T5's
        // source ids) go with the request under the model's names; the
        // scheduler checks them and copies them for the sequence's first run.
        std::vector<ein::InputTensor> encoderInputs;
        for (const ein::TensorInfo &info : state.model->inputs())
          if (const ein::InputTensor *given = findInput(pending.inputs, info.name); given && info.firstRunOnly)
            encoderInputs.push_back(*given);
        auto going = state.scheduler->submit(prompt, std::move(options), encoderInputs);
        submitted = going.ok();
        if (!going.ok()) stream->finish(going.status());
      }
    } catch (const std::exception &caught) {  // out of memory: this request fails, the others go on
      stream->fail(error(TRITONSERVER_ERROR_INTERNAL, std::string("ein: ") + caught.what()));
    }
    const uint64_t end = now();
    if (TRITONSERVER_Error *failed =
            TRITONBACKEND_ModelInstanceReportStatistics(instance, request, submitted, start, start, end, end))
      TRITONSERVER_ErrorDelete(failed);
  }
}

}  // namespace

EIN_TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *) {
  uint32_t major = 0, minor = 0;
  if (TRITONSERVER_Error *failed = TRITONBACKEND_ApiVersion(&major, &minor)) return failed;
  if (major != TRITONBACKEND_API_VERSION_MAJOR)
    return error(TRITONSERVER_ERROR_UNSUPPORTED, "ein: the server's backend API is " + std::to_string(major) + "." +
                                                     std::to_string(minor) + "; this backend was built for " +
                                                     std::to_string(TRITONBACKEND_API_VERSION_MAJOR) + ".x");
  return nullptr;
}

EIN_TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  std::unique_ptr<ModelState> state;
  TRITONSERVER_Error *failed = nullptr;
  try {
    failed = loadModelState(model, state);
  } catch (const std::exception &caught) {
    failed = error(TRITONSERVER_ERROR_INTERNAL, std::string("ein: ") + caught.what());
  }
  if (failed) return failed;
  return TRITONBACKEND_ModelSetState(model, state.release());
}

EIN_TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = nullptr;
  if (TRITONSERVER_Error *failed = TRITONBACKEND_ModelState(model, &state)) return failed;
  delete static_cast<ModelState *>(state);
  return nullptr;
}

EIN_TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *) {
  return nullptr;  // the model's Runner gives each call a context of its own
}

EIN_TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *) {
  return nullptr;
}

EIN_TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                         TRITONBACKEND_Request **requests,
                                                                         const uint32_t count) {
  TRITONBACKEND_Model *model = nullptr;
  void *state = nullptr;
  if (TRITONSERVER_Error *failed = TRITONBACKEND_ModelInstanceModel(instance, &model)) return failed;
  if (TRITONSERVER_Error *failed = TRITONBACKEND_ModelState(model, &state)) return failed;
  try {
    ModelState &model = *static_cast<ModelState *>(state);
    if (model.scheduler)
      executeDecoder(model, instance, requests, count);
    else
      execute(model, instance, requests, count);
  } catch (const std::exception &caught) {  // out of memory before any request was read
    for (uint32_t index = 0; index < count; ++index) {
      TRITONBACKEND_Response *response = nullptr;
      if (TRITONBACKEND_ResponseNew(&response, requests[index]) == nullptr)
        sendFinal(response, error(TRITONSERVER_ERROR_INTERNAL, std::string("ein: ") + caught.what()));
    }
  }
  for (uint32_t index = 0; index < count; ++index)
    if (TRITONSERVER_Error *failed = TRITONBACKEND_RequestRelease(requests[index], TRITONSERVER_REQUEST_RELEASE_ALL))
      TRITONSERVER_ErrorDelete(failed);
  return nullptr;  // the requests are answered and released: Triton must not answer them again
}
