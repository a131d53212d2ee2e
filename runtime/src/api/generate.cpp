#include "ein/generate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <random>

#include "api/generation_rules.hpp"
#include "backends/cpu/kernels/isa/isa.hpp"
#include "ein/model.hpp"

namespace ein {
namespace {

Status invalidArgument(std::string message) { return Status(StatusCode::InvalidArgument, std::move(message)); }

// The binding named `wanted`, or `fallback`'s: the only one `fits` accepts.
StatusOr<const TensorInfo *> pick(const std::vector<TensorInfo> &infos, const std::string &wanted,
                                  const std::string &fallback, bool (*fits)(const TensorInfo &), const char *what) {
  const std::string &name = wanted.empty() ? fallback : wanted;
  for (const TensorInfo &info : infos)
    if (info.name == name) return &info;
  if (!wanted.empty()) return invalidArgument(fmt::format("the model has no {} named \"{}\"", what, wanted));
  const TensorInfo *only = nullptr;
  for (const TensorInfo &info : infos)
    if (fits(info)) {
      if (only) return invalidArgument(fmt::format("the model has several {}s: name the one to use", what));
      only = &info;
    }
  if (!only) return invalidArgument(fmt::format("the model has no {} \"{}\"", what, fallback));
  return only;
}

// An encoder's ids (read at the first run only) are not the decoder's.
bool isIds(const TensorInfo &info) {
  return (info.dtype == DType::I32 || info.dtype == DType::I64) && info.shape.size() == 2 && !info.firstRunOnly;
}
bool isLogits(const TensorInfo &info) { return info.dtype == DType::F32 && info.shape.size() == 3; }

}  // namespace

namespace detail {

StatusOr<const TensorInfo *> idsInputOf(const Model &model, const std::string &name) {
  return pick(model.inputs(), name, "ids", isIds, "ids input");
}

StatusOr<const TensorInfo *> logitsOutputOf(const Model &model, const std::string &name) {
  return pick(model.outputs(), name, "logits", isLogits, "logits output");
}

StatusOr<std::span<const float>> runTokens(Session &session, const TensorInfo &ids, const std::string &logitsName,
                                           std::span<const int64_t> tokens) {
  const int64_t count = static_cast<int64_t>(tokens.size());
  const int64_t shape[] = {1, count};
  if (Status status = session.setInput(ids.name, DType::I64, shape, tokens.data(), tokens.size_bytes()); !status.ok())
    return status;
  if (Status status = session.run(); !status.ok()) return status;
  StatusOr<TensorRef> logits = session.output(logitsName);
  if (!logits.ok()) return logits.status();
  const TensorRef &ref = logits.value();
  if (ref.shape.size() != 3 || ref.shape[0] != 1 || ref.shape[1] != count || ref.shape[2] < 1)
    return invalidArgument(fmt::format("logits output \"{}\" has shape [{}], expected [1, {}, vocab]", logitsName,
                                       fmt::join(ref.shape, ", "), count));
  const int64_t vocab = ref.shape[2];
  const float *data = static_cast<const float *>(ref.data);
  return std::span<const float>(data + (count - 1) * vocab, static_cast<size_t>(vocab));
}

StatusOr<DecoderBindings> checkDecoder(const Session &session, std::span<const int64_t> prompt,
                                       const std::string &idsInput, const std::string &logitsOutput, const char *what) {
  const Model &model = session.model();
  if (model.states().empty())
    return invalidArgument(fmt::format("'{}' keeps no state (a key/value cache): {} needs a decoder that appends to one",
                                       model.name(), what));
  if (prompt.empty()) return invalidArgument("the prompt is empty");
  StatusOr<const TensorInfo *> ids = idsInputOf(model, idsInput);
  if (!ids.ok()) return ids.status();
  StatusOr<const TensorInfo *> logits = logitsOutputOf(model, logitsOutput);
  if (!logits.ok()) return logits.status();
  if (Status status = checkPromptIds(prompt, *ids.value(), "prompt"); !status.ok()) return status;
  if (Status status = fitsAt(session, *ids.value(), static_cast<int64_t>(prompt.size())); !status.ok())
    return Status(status.code(), fmt::format("the prompt of {} tokens does not fit from position {}: {}", prompt.size(),
                                             session.position(), status.message()));
  return DecoderBindings{ids.value(), logits.value()->name};
}

Status fitsAt(const Session &session, const TensorInfo &ids, int64_t tokens, std::optional<int64_t> position) {
  const std::vector<TensorInfo> &inputs = session.model().inputs();
  std::vector<std::vector<int64_t>> shapes(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (&inputs[i] == &ids) {
      shapes[i] = {1, tokens};
      continue;
    }
    std::span<const int64_t> shape = session.inputShape(i);
    if (shape.empty()) return Status();  // unset: the run says it
    shapes[i].assign(shape.begin(), shape.end());
  }
  return session.model().outputShapes(shapes, position.value_or(session.position())).status();
}

Status checkGenerationOptions(const GenerationOptions &options) {
  if (options.maxNewTokens < 0) return invalidArgument("maxNewTokens must not be negative");
  if (!(options.topP > 0.0f && options.topP <= 1.0f)) return invalidArgument("topP must lie in (0, 1]");
  if (!(options.temperature >= 0.0f && std::isfinite(options.temperature)))
    return invalidArgument("temperature must be a finite number >= 0");
  return Status();
}

Status checkPromptIds(std::span<const int64_t> prompt, const TensorInfo &ids, const std::string &which) {
  if (const int64_t vocabulary = ids.upperBound; vocabulary > 0)
    for (size_t i = 0; i < prompt.size(); ++i)
      if (prompt[i] < 0 || prompt[i] >= vocabulary)
        return invalidArgument(fmt::format("{} token {} is {}, outside the vocabulary [0, {}) of input \"{}\"", which,
                                           i, prompt[i], vocabulary, ids.name));
  return Status();
}

FinishReason finishAfter(int64_t token, int64_t produced, const GenerationOptions &options) {
  const std::vector<int64_t> &stops = options.stopTokens;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return FinishReason::Stop;
  if (produced == options.maxNewTokens) return FinishReason::Length;
  return FinishReason::None;
}

Status checkLogits(std::span<const float> logits, int64_t produced) {
  // The vector kernels' max is NaN where any logit is.
  const float top = cpu::bestKernels().reduceRow(logits.data(), static_cast<int64_t>(logits.size()), ReduceKind::Max);
  if (std::isnan(top))
    return Status(StatusCode::OutOfRange,
                  fmt::format("the logits for new token {} hold NaN: the model computed no distribution", produced));
  return Status();
}

}  // namespace detail

int64_t chooseToken(std::span<const float> logits, const GenerationOptions &options, uint64_t &state) {
  const auto vocab = static_cast<int64_t>(logits.size());
  const detail::cpu::IsaKernels &isa = detail::cpu::bestKernels();
  if (options.temperature <= 0.0f) {
    // The first of equal maxima: the vector kernels' max, then where it is
    // (a NaN, which they keep, is not found: then the plain search).
    const auto top = std::find(logits.begin(), logits.end(), isa.reduceRow(logits.data(), vocab, detail::ReduceKind::Max));
    return (top != logits.end() ? top : std::max_element(logits.begin(), logits.end())) - logits.begin();
  }
  // Top-k and top-p keep the tokens most likely first, equal logits in id
  // order: `order`, sorted only as far as they reach (not the vocabulary).
  // The draw walks the kept tokens in that order, or, where every token is
  // kept, in id order (any fixed order draws each token as often as its
  // probability).
  const auto before = [&](int64_t a, int64_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  int64_t keep = options.topK > 0 ? std::min(options.topK, vocab) : vocab;
  int64_t sorted = 0;
  // The first sort selects the top n (the top-k, or top-p's first 64) and
  // sorts them; a walk past them sorts the whole vocabulary anew (top-p
  // over a flat distribution: a merge sort from id order, which measured
  // faster than sorting what the selection left).
  const auto sortTo = [&](int64_t n) {
    if (n <= sorted) return;
    if (sorted == 0 && 4 * n < vocab) {
      std::nth_element(order.begin(), order.begin() + n, order.end(), before);
      std::sort(order.begin(), order.begin() + n, before);
      sorted = n;
    } else {
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), before);
      sorted = vocab;
    }
  };
  sortTo(keep < vocab ? keep : options.topP < 1.0f ? 64 : 1);
  if (std::isinf(logits[order[0]])) return order[0];  // +inf is certain (-inf everywhere: the first)
  // exp(logit / temperature - top) for every token, by the CPU's vector
  // kernels; the kept ones summed in double.
  std::vector<float> weights(logits.begin(), logits.end());
  isa.scaleInPlace(weights.data(), vocab, 1.0f / options.temperature);
  isa.expShiftSum(weights.data(), vocab, weights[static_cast<size_t>(order[0])]);
  double sum = 0;
  if (keep == vocab)
    for (float weight : weights) sum += weight;
  else  // (the top-k are sorted already)
    for (int64_t i = 0; i < keep; ++i) sum += weights[static_cast<size_t>(order[i])];
  const auto weightAt = [&](int64_t i) {
    sortTo(i + 1);
    return static_cast<double>(weights[static_cast<size_t>(order[i])]);
  };
  if (options.topP < 1.0f) {
    double mass = 0;
    int64_t within = 0;
    while (within < keep && mass < options.topP * sum) mass += weightAt(within++);
    keep = std::max<int64_t>(within, 1);
    sum = mass > 0 ? mass : weightAt(0);
  }
  std::mt19937_64 generator(state);
  state = generator();
  double draw = std::uniform_real_distribution<double>(0.0, sum)(generator);
  if (keep == vocab) {
    for (int64_t token = 0; token < vocab; ++token) {
      draw -= weights[static_cast<size_t>(token)];
      if (draw < 0) return token;
    }
    return order[0];  // rounding left some of the draw: the most likely
  }
  for (int64_t i = 0; i < keep; ++i) {
    draw -= weightAt(i);
    if (draw < 0) return order[i];
  }
  return order[keep - 1];
}

StatusOr<Generation> Generation::start(Session &session, std::span<const int64_t> prompt,
                                       GenerationOptions options) {
  if (Status status = detail::checkGenerationOptions(options); !status.ok()) return status;
  StatusOr<detail::DecoderBindings> bindings =
      detail::checkDecoder(session, prompt, options.idsInput, options.logitsOutput, "generation");
  if (!bindings.ok()) return bindings.status();
  Generation generation;
  generation.session_ = &session;
  generation.prompt_.assign(prompt.begin(), prompt.end());
  generation.ids_ = bindings.value().ids;
  generation.logits_ = bindings.value().logits;
  generation.samplerState_ = options.seed;
  generation.options_ = std::move(options);
  return generation;
}

StatusOr<std::optional<int64_t>> Generation::next() {
  if (done_) return std::optional<int64_t>();
  const bool first = !started_;
  if (!first && !detail::fitsAt(*session_, *ids_, 1).ok()) {
    done_ = true;
    finish_ = FinishReason::CacheFull;
    return std::optional<int64_t>();
  }
  started_ = true;
  const int64_t previous[1] = {last_};
  StatusOr<std::span<const float>> row = first ? detail::runTokens(*session_, *ids_, logits_, prompt_)
                                               : detail::runTokens(*session_, *ids_, logits_, previous);
  if (!row.ok()) {
    done_ = true;
    return row.status();
  }
  if (options_.maxNewTokens == 0) {  // the prompt ran; no token is wanted
    done_ = true;
    finish_ = FinishReason::Length;
    return std::optional<int64_t>();
  }
  const std::span<const float> values = row.value();
  if (Status status = detail::checkLogits(values, produced_); !status.ok()) {
    done_ = true;
    return status;
  }
  last_ = chooseToken(values, options_, samplerState_);
  ++produced_;
  finish_ = detail::finishAfter(last_, produced_, options_);
  done_ = finish_ != FinishReason::None;
  return std::optional<int64_t>(last_);
}

const char *finishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::None: return "";
    case FinishReason::Length:
    case FinishReason::CacheFull: return "length";
    case FinishReason::Stop: return "stop";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "";
}

StatusOr<std::vector<int64_t>> generate(Session &session, std::span<const int64_t> prompt,
                                        const GenerationOptions &options, FinishReason *finish) {
  StatusOr<Generation> generation = Generation::start(session, prompt, options);
  if (!generation.ok()) return generation.status();
  std::vector<int64_t> produced;
  while (true) {
    StatusOr<std::optional<int64_t>> token = generation.value().next();
    if (!token.ok()) return token.status();
    if (!token.value()) break;
    produced.push_back(*token.value());
    if (options.onToken && !options.onToken(*token.value())) break;
  }
  if (finish) *finish = generation.value().finishReason();
  return produced;
}

}  // namespace ein
