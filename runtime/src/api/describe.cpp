#include "ein/describe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace ein {
namespace {

std::string tensorLines(const std::vector<TensorInfo> &tensors) {
  std::string text;
  for (const TensorInfo &tensor : tensors) {
    text += fmt::format("  {}: {}", tensor.name, typeText(tensor));
    if (tensor.upperBound > 0) text += fmt::format(" (ids in [0, {}))", tensor.upperBound);
    text += "\n";
  }
  return text;
}

// " batch=[2, 3] m=4 activation=gelu": the step's shapes, sizes and attributes.
std::string stepDetails(const StepInfo &step) {
  std::string details;
  for (const auto &[key, value] : step.shapes) details += " " + key + "=" + shapeText(value);
  for (const auto &[key, value] : step.sizes) details += " " + key + "=" + std::to_string(value);
  for (const auto &[key, value] : step.attributes)
    details += " " + key + "=" + (value.find(' ') == std::string::npos ? value : "\"" + value + "\"");
  return details;
}

// ": 14 elementwise, 9 gemm, 2 attention": the steps counted by kind, most first.
std::string stepCounts(const std::vector<StepInfo> &steps) {
  std::map<std::string, size_t> counts;
  for (const StepInfo &step : steps) ++counts[step.op];
  std::vector<std::pair<std::string, size_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) { return a.second > b.second; });
  std::string text;
  for (const auto &[op, count] : sorted) text += fmt::format("{}{} {}", text.empty() ? ": " : ", ", count, op);
  return text;
}

}  // namespace

std::string shapeText(std::span<const int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape.begin(), shape.end(), ", "));
}

std::string typeText(DType dtype, std::span<const int64_t> shape) { return dtypeName(dtype) + shapeText(shape); }

std::string typeText(const TensorInfo &info) {
  std::vector<std::string> axes;
  for (size_t axis = 0; axis < info.shape.size(); ++axis) {
    const bool named = axis < info.dims.size() && !info.dims[axis].empty();
    axes.push_back(named ? info.dims[axis] : std::to_string(info.shape[axis]));
  }
  return fmt::format("{}[{}]", dtypeName(info.dtype), fmt::join(axes, ", "));
}

std::string dimRangesText(const std::vector<DimInfo> &dims) {
  std::vector<std::string> ranges;
  for (const DimInfo &dim : dims) ranges.push_back(fmt::format("{} = {}..{}", dim.name, dim.min, dim.max));
  return fmt::format("{}", fmt::join(ranges, ", "));
}

std::string dimValuesText(const std::vector<DimInfo> &dims, std::span<const int64_t> values) {
  std::vector<std::string> pairs;
  for (size_t d = 0; d < dims.size() && d < values.size(); ++d) pairs.push_back(fmt::format("{} = {}", dims[d].name, values[d]));
  return fmt::format("{}", fmt::join(pairs, ", "));
}

uint64_t paramsByteSize(const Model &model) {
  uint64_t bytes = 0;
  for (const TensorInfo &param : model.params()) bytes += param.byteSize();
  return bytes;
}

std::string describeModel(const Model &model) {
  std::string text = fmt::format("{}: ein artifact v{} for {} (precision {})\n", model.name(), model.formatVersion(),
                                 deviceName(model.target()), precisionName(model.precision()));
  text += fmt::format("  producer: {}\n  source:   {}\n", model.producer(), model.source());
  const bool dynamic = !model.dims().empty();
  if (dynamic) text += "dims: " + dimRangesText(model.dims()) + "\n";
  if (model.positionDim() >= 0)
    text += fmt::format("position: {} (the rows a session's state holds before a run)\n",
                        model.dims()[static_cast<size_t>(model.positionDim())].name);
  if (model.sequenceTokensDim() >= 0)
    text += fmt::format("sequences: many per run, their tokens laid end to end along {} (ein::SequencePool)\n",
                        model.dims()[static_cast<size_t>(model.sequenceTokensDim())].name);
  else if (!model.oneSequenceReason().empty())
    text += fmt::format("sequences: one per run: {}\n", model.oneSequenceReason());
  text += "inputs:\n" + tensorLines(model.inputs());
  text += "outputs:\n" + tensorLines(model.outputs());
  text += fmt::format("params: {} tensors, {} bytes\n", model.params().size(), paramsByteSize(model));
  for (size_t i = 0; i < model.params().size(); ++i) {
    const TensorInfo &param = model.params()[i];
    const ParamStorage &stored = model.paramStorage()[i];
    text += fmt::format("  {}: {}", param.name, typeText(param));
    if (stored.folded)
      text += fmt::format(", folded with others into {}", typeText(stored.dtype, stored.shape));
    else if (stored.dtype != param.dtype || stored.shape != param.shape)
      text += fmt::format(", stored as {}", typeText(stored.dtype, stored.shape));
    text += "\n";
  }
  if (!model.states().empty()) {
    uint64_t stateBytes = 0;
    for (const TensorInfo &state : model.states()) stateBytes += state.byteSize();
    text += fmt::format("state: {} tensors, {} bytes per session\n", model.states().size(), stateBytes);
    text += tensorLines(model.states());
  }
  text += fmt::format("memory: arena {} bytes{}, weight segment {} bytes\n", model.arenaBytes(),
                      dynamic ? " at the dims' maxima" : "", model.weightsBytes());
  if (dynamic && model.steps().empty())
    text += "steps: not shown (they do not verify at the dims' maxima, which a check excludes)\n";
  else
    text += fmt::format("steps: {}{}{}\n", model.steps().size(), dynamic ? " (sizes at the dims' maxima)" : "",
                        stepCounts(model.steps()));
  for (size_t i = 0; i < model.steps().size(); ++i) {
    const StepInfo &step = model.steps()[i];
    text += fmt::format("  {:4} {:<12}{}{}{}\n", i, step.op, stepDetails(step), step.location.empty() ? "" : "  at ",
                        step.location);
  }
  return text;
}

}  // namespace ein
