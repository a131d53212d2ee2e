#include "ein/describe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "backends/cpu/kernels/isa/isa.hpp"

namespace ein {
namespace {

std::string tensorLines(const std::vector<TensorInfo> &tensors) {
  std::string text;
  for (const TensorInfo &tensor : tensors) {
    text += fmt::format("  {}: {}", tensor.name, typeText(tensor));
    if (tensor.upperBound > 0) text += fmt::format(" (ids in [0, {}))", tensor.upperBound);
    if (tensor.firstRunOnly) text += " (read at a sequence's first run only)";
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

// " (with 28:9, 29:13)": the other source locations fused into a step, by
// line and column where they are in the step's own file.
std::string fusedSources(const StepInfo &step) {
  if (step.sources.size() < 2) return "";
  const size_t fileEnd = step.location.find(':');
  const std::string file = fileEnd == std::string::npos ? "" : step.location.substr(0, fileEnd + 1);
  std::string text;
  for (size_t i = 1; i < step.sources.size(); ++i) {
    const std::string &source = step.sources[i];
    const bool sameFile = !file.empty() && source.compare(0, file.size(), file) == 0;
    text += (i == 1 ? " (with " : ", ") + (sameFile ? source.substr(file.size()) : source);
  }
  return text + ")";
}

nlohmann::json tensorJson(const TensorInfo &info) {
  nlohmann::json out{{"name", info.name}, {"dtype", dtypeName(info.dtype)}, {"shape", info.shape}};
  if (!info.dims.empty()) out["dims"] = info.dims;
  return out;
}

nlohmann::json stepJson(const StepInfo &step) {
  nlohmann::json item{{"op", step.op}, {"location", step.location}};
  for (const auto &[key, value] : step.shapes) item[key] = value;
  for (const auto &[key, value] : step.sizes) item[key] = value;
  for (const auto &[key, value] : step.attributes) item[key] = value;
  item["sources"] = step.sources;
  item["namespace"] = step.scope;
  item["fused_by"] = step.fusedBy;
  if (step.firstRun) item["first_run"] = true;
  if (step.rowsOverKept) item["rows_over_kept"] = true;
  item["operands"] = nlohmann::json::array();
  for (const StepOperand &operand : step.operands)
    item["operands"].push_back({{"role", operand.role}, {"tensor", operand.tensor}, {"written", operand.written}});
  return item;
}

}  // namespace

const char *cpuKernelsName() { return detail::cpu::bestKernels().name; }

std::string describeModelJson(const Model &model) {
  nlohmann::json out;
  out["format_version"] = model.formatVersion();
  out["target"] = deviceName(model.target());
  // The kernels a CPU model's steps run here (the table CPUID picks; the artifact is the same on every CPU).
  if (model.target() == Device::Cpu) out["cpu_kernels"] = cpuKernelsName();
  out["precision"] = precisionName(model.precision());
  out["producer"] = model.producer();
  out["source"] = model.source();
  out["dims"] = nlohmann::json::array();
  for (const DimInfo &dim : model.dims()) out["dims"].push_back({{"name", dim.name}, {"min", dim.min}, {"max", dim.max}});
  out["fixed_dims"] = nlohmann::json::array();
  for (const FixedDimInfo &dim : model.fixedDims())
    out["fixed_dims"].push_back({{"name", dim.name}, {"value", dim.value}, {"declared_at", dim.declaredAt}});
  out["inputs"] = nlohmann::json::array();
  for (const TensorInfo &input : model.inputs()) {
    nlohmann::json item = tensorJson(input);
    if (input.upperBound > 0) item["upper_bound"] = input.upperBound;
    if (input.firstRunOnly) item["first_run"] = true;
    out["inputs"].push_back(item);
  }
  out["outputs"] = nlohmann::json::array();
  for (const TensorInfo &output : model.outputs()) out["outputs"].push_back(tensorJson(output));
  nlohmann::json params = nlohmann::json::array();
  for (size_t i = 0; i < model.params().size(); ++i) {
    nlohmann::json item = tensorJson(model.params()[i]);
    const ParamStorage &stored = model.paramStorage()[i];
    item["stored"] = {{"dtype", dtypeName(stored.dtype)}, {"shape", stored.shape}, {"folded", stored.folded},
                      {"offset", stored.offset}, {"bytes", stored.bytes}};
    params.push_back(std::move(item));
  }
  out["params"] = {{"count", model.params().size()}, {"bytes", paramsByteSize(model)}, {"tensors", params}};
  nlohmann::json states = nlohmann::json::array();
  for (const TensorInfo &state : model.states()) states.push_back(tensorJson(state));
  out["states"] = states;
  if (model.positionDim() >= 0) out["position"] = model.dims()[static_cast<size_t>(model.positionDim())].name;
  if (model.sequenceTokensDim() >= 0)
    out["sequence_tokens"] = model.dims()[static_cast<size_t>(model.sequenceTokensDim())].name;
  else if (!model.oneSequenceReason().empty())
    out["one_sequence"] = model.oneSequenceReason();
  out["arena_bytes"] = model.arenaBytes();
  // With dims, the arena (and the steps' and tensors' sizes) are those at the dims' maxima.
  out["sizes_at"] = model.dims().empty() ? "fixed" : "dims' maxima";
  out["weights_bytes"] = model.weightsBytes();
  out["tensors"] = nlohmann::json::array();
  for (const TensorPlacement &tensor : model.tensors()) {
    nlohmann::json item{{"dtype", dtypeName(tensor.dtype)}, {"shape", tensor.shape}, {"storage", tensor.storage},
                        {"offset", tensor.offset}, {"bytes", tensor.bytes}};
    if (!tensor.dims.empty()) item["dims"] = tensor.dims;
    if (tensor.storage == "input" || tensor.storage == "output" || tensor.storage == "state") item["index"] = tensor.index;
    out["tensors"].push_back(std::move(item));
  }
  out["steps"] = nlohmann::json::array();
  for (const StepInfo &step : model.steps()) out["steps"].push_back(stepJson(step));
  // Artifacts are untrusted: a name that is not UTF-8 is shown with U+FFFD, not an exception.
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

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
    text += fmt::format("  {:4} {:<12}{}{}{}{}{}{}\n", i, step.op, stepDetails(step),
                        step.firstRun ? " first_run" : "", step.rowsOverKept ? " rows_over_kept" : "",
                        step.location.empty() ? "" : "  at ", step.location, fusedSources(step));
  }
  return text;
}

}  // namespace ein
