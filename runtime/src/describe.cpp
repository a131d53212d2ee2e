#include "ein/describe.hpp"

#include <fmt/format.h>

namespace ein {
namespace {

std::string tensorLines(const std::vector<TensorInfo> &tensors) {
  std::string text;
  for (const TensorInfo &tensor : tensors) {
    text += fmt::format("  {}: {}", tensor.name, typeText(tensor.dtype, tensor.shape));
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
  for (const auto &[key, value] : step.attributes) details += " " + key + "=" + value;
  return details;
}

}  // namespace

std::string shapeText(std::span<const int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape.begin(), shape.end(), ", "));
}

std::string typeText(DType dtype, std::span<const int64_t> shape) { return dtypeName(dtype) + shapeText(shape); }

uint64_t paramsByteSize(const Model &model) {
  uint64_t bytes = 0;
  for (const TensorInfo &param : model.params()) bytes += param.byteSize();
  return bytes;
}

std::string describeModel(const Model &model) {
  std::string text = fmt::format("{}: ein artifact v{} for {} (precision {})\n", model.name(), model.formatVersion(),
                                 deviceName(model.target()), precisionName(model.precision()));
  text += fmt::format("  producer: {}\n  source:   {}\n", model.producer(), model.source());
  text += "inputs:\n" + tensorLines(model.inputs());
  text += "outputs:\n" + tensorLines(model.outputs());
  text += fmt::format("params: {} tensors, {} bytes\n", model.params().size(), paramsByteSize(model));
  text += tensorLines(model.params());
  text += fmt::format("memory: arena {} bytes, weight segment {} bytes\n", model.arenaBytes(), model.weightsBytes());
  text += fmt::format("steps: {}\n", model.steps().size());
  for (size_t i = 0; i < model.steps().size(); ++i) {
    const StepInfo &step = model.steps()[i];
    text += fmt::format("  {:4} {:<12}{}{}{}\n", i, step.op, stepDetails(step), step.location.empty() ? "" : "  at ",
                        step.location);
  }
  return text;
}

}  // namespace ein
