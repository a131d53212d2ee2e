#include "ein/generate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

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

bool isIds(const TensorInfo &info) {
  return (info.dtype == DType::I32 || info.dtype == DType::I64) && info.shape.size() == 2;
}
bool isLogits(const TensorInfo &info) { return info.dtype == DType::F32 && info.shape.size() == 3; }

// One run over `tokens` as the ids [1, n]; the last row of logits.
StatusOr<std::span<const float>> step(Session &session, const TensorInfo &ids, const std::string &logitsName,
                                      std::span<const int64_t> tokens) {
  const int64_t count = static_cast<int64_t>(tokens.size());
  Status status;
  if (ids.dtype == DType::I64) {
    status = session.setInput(ids.name, DType::I64, {1, count}, tokens.data(), tokens.size_bytes());
  } else {
    std::vector<int32_t> narrow(tokens.begin(), tokens.end());
    status = session.setInput(ids.name, DType::I32, {1, count}, narrow.data(), narrow.size() * sizeof(int32_t));
  }
  if (!status.ok()) return status;
  if (status = session.run(); !status.ok()) return status;
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

}  // namespace

int64_t chooseToken(std::span<const float> logits, const GenerationOptions &options, uint64_t &state) {
  const auto vocab = static_cast<int64_t>(logits.size());
  if (options.temperature <= 0.0f)
    return std::max_element(logits.begin(), logits.end()) - logits.begin();  // the first of equal maxima
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  // Most likely first; equal logits in id order, so the draw is reproducible.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  int64_t keep = options.topK > 0 ? std::min(options.topK, vocab) : vocab;
  std::vector<double> probabilities(static_cast<size_t>(keep));
  const double top = logits[order[0]] / options.temperature;
  double sum = 0;
  for (int64_t i = 0; i < keep; ++i) sum += probabilities[i] = std::exp(logits[order[i]] / options.temperature - top);
  if (options.topP < 1.0f) {
    double mass = 0;
    int64_t within = 0;
    while (within < keep && mass < options.topP * sum) mass += probabilities[within++];
    keep = std::max<int64_t>(within, 1);
    sum = mass > 0 ? mass : probabilities[0];
  }
  std::mt19937_64 generator(state);
  state = generator();
  double draw = std::uniform_real_distribution<double>(0.0, sum)(generator);
  for (int64_t i = 0; i < keep; ++i) {
    draw -= probabilities[i];
    if (draw < 0) return order[i];
  }
  return order[keep - 1];
}

StatusOr<std::vector<int64_t>> generate(Session &session, std::span<const int64_t> prompt,
                                        const GenerationOptions &options) {
  const Model &model = session.model();
  if (model.states().empty())
    return invalidArgument(fmt::format("'{}' keeps no state (a key/value cache): generation needs a decoder that "
                                       "appends to one",
                                       model.name()));
  if (prompt.empty()) return invalidArgument("the prompt is empty");
  if (options.maxNewTokens < 0) return invalidArgument("maxNewTokens must not be negative");
  if (!(options.topP > 0.0f && options.topP <= 1.0f)) return invalidArgument("topP must lie in (0, 1]");
  if (!(options.temperature >= 0.0f && std::isfinite(options.temperature)))
    return invalidArgument("temperature must be a finite number >= 0");
  StatusOr<const TensorInfo *> ids = pick(model.inputs(), options.idsInput, "ids", isIds, "ids input");
  if (!ids.ok()) return ids.status();
  StatusOr<const TensorInfo *> logitsInfo = pick(model.outputs(), options.logitsOutput, "logits", isLogits,
                                                 "logits output");
  if (!logitsInfo.ok()) return logitsInfo.status();
  const std::string logitsName = logitsInfo.value()->name;
  if (const int64_t vocabulary = ids.value()->upperBound; vocabulary > 0)
    for (size_t i = 0; i < prompt.size(); ++i)
      if (prompt[i] < 0 || prompt[i] >= vocabulary)
        return invalidArgument(fmt::format("prompt token {} is {}, outside the vocabulary [0, {}) of input \"{}\"", i,
                                           prompt[i], vocabulary, ids.value()->name));

  std::vector<int64_t> produced;
  uint64_t state = options.seed;
  StatusOr<std::span<const float>> logits = step(session, *ids.value(), logitsName, prompt);
  while (logits.ok() && static_cast<int64_t>(produced.size()) < options.maxNewTokens) {
    const std::span<const float> row = logits.value();
    if (std::any_of(row.begin(), row.end(), [](float logit) { return std::isnan(logit); }))
      return Status(StatusCode::OutOfRange,
                    fmt::format("the logits for new token {} hold NaN: the model computed no distribution", produced.size()));
    const int64_t token = chooseToken(row, options, state);
    produced.push_back(token);
    if (options.onToken && !options.onToken(token)) break;
    if (std::find(options.stopTokens.begin(), options.stopTokens.end(), token) != options.stopTokens.end()) break;
    if (static_cast<int64_t>(produced.size()) == options.maxNewTokens) break;
    const int64_t next[1] = {token};
    logits = step(session, *ids.value(), logitsName, next);
  }
  if (!logits.ok()) return logits.status();
  return produced;
}

}  // namespace ein
