// ein-inspect: what an ein artifact holds, for people (default) or scripts
// (--json). The artifact is verified first: a bad one is an error, never a
// partial listing.
//
//   ein-inspect MODEL.einb [--json]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "ein/runtime.hpp"
#include "tool_support.hpp"

namespace {

using ein::tools::describeTensor;
using ein::tools::shapeText;

uint64_t paramBytes(const ein::Model &model) {
  uint64_t bytes = 0;
  for (const ein::TensorInfo &param : model.params()) bytes += param.byteSize();
  return bytes;
}

// A dynamic axis has shape -1 and its expression in "dims" ("" for a fixed axis).
nlohmann::json tensorJson(const ein::TensorInfo &info) {
  nlohmann::json out{{"name", info.name}, {"dtype", ein::dtypeName(info.dtype)}, {"shape", info.shape}};
  if (!info.dims.empty()) out["dims"] = info.dims;
  return out;
}

// "b = 1..16, t = 1..256"
std::string rangesText(const std::vector<ein::DimInfo> &dims) {
  std::string text;
  for (const ein::DimInfo &dim : dims)
    text += (text.empty() ? "" : ", ") + dim.name + " = " + std::to_string(dim.min) + ".." + std::to_string(dim.max);
  return text;
}

nlohmann::json modelJson(const ein::Model &model) {
  nlohmann::json out;
  out["format_version"] = model.formatVersion();
  out["target"] = ein::deviceName(model.target());
  out["precision"] = ein::precisionName(model.precision());
  out["producer"] = model.producer();
  out["source"] = model.source();
  out["dims"] = nlohmann::json::array();
  for (const ein::DimInfo &dim : model.dims())
    out["dims"].push_back({{"name", dim.name}, {"min", dim.min}, {"max", dim.max}});
  out["inputs"] = nlohmann::json::array();
  for (const ein::TensorInfo &input : model.inputs()) {
    nlohmann::json item = tensorJson(input);
    if (input.upperBound > 0) item["upper_bound"] = input.upperBound;
    out["inputs"].push_back(item);
  }
  out["outputs"] = nlohmann::json::array();
  for (const ein::TensorInfo &output : model.outputs()) out["outputs"].push_back(tensorJson(output));
  nlohmann::json params = nlohmann::json::array();
  for (const ein::TensorInfo &param : model.params()) params.push_back(tensorJson(param));
  out["params"] = {{"count", model.params().size()}, {"bytes", paramBytes(model)}, {"tensors", params}};
  out["arena_bytes"] = model.arenaBytes();
  // With dims, the arena (and the steps' sizes) are those at the dims' maxima.
  out["sizes_at"] = model.dims().empty() ? "fixed" : "dims' maxima";
  out["weights_bytes"] = model.weightsBytes();
  out["steps"] = nlohmann::json::array();
  for (const ein::StepInfo &step : model.steps()) {
    nlohmann::json item{{"op", step.op}, {"location", step.location}};
    for (const auto &[key, value] : step.shapes) item[key] = value;
    for (const auto &[key, value] : step.sizes) item[key] = value;
    for (const auto &[key, value] : step.attributes) item[key] = value;
    out["steps"].push_back(item);
  }
  return out;
}

void printSummary(const ein::Model &model) {
  std::printf("%s: ein artifact v%u for %s (precision %s)\n", model.name().c_str(), model.formatVersion(),
              ein::deviceName(model.target()), ein::precisionName(model.precision()));
  std::printf("  producer: %s\n  source:   %s\n", model.producer().c_str(), model.source().c_str());
  const bool dynamic = !model.dims().empty();
  if (dynamic) std::printf("dims: %s\n", rangesText(model.dims()).c_str());
  std::printf("inputs:\n");
  for (const ein::TensorInfo &input : model.inputs()) {
    std::printf("  %s: %s", input.name.c_str(), describeTensor(input).c_str());
    if (input.upperBound > 0) std::printf(" (ids in [0, %lld))", static_cast<long long>(input.upperBound));
    std::printf("\n");
  }
  std::printf("outputs:\n");
  for (const ein::TensorInfo &output : model.outputs())
    std::printf("  %s: %s\n", output.name.c_str(), describeTensor(output).c_str());
  std::printf("params: %zu tensors, %llu bytes\n", model.params().size(),
              static_cast<unsigned long long>(paramBytes(model)));
  for (const ein::TensorInfo &param : model.params())
    std::printf("  %s: %s\n", param.name.c_str(), describeTensor(param.dtype, param.shape).c_str());
  std::printf("memory: arena %llu bytes%s, weight segment %llu bytes\n",
              static_cast<unsigned long long>(model.arenaBytes()), dynamic ? " at the dims' maxima" : "",
              static_cast<unsigned long long>(model.weightsBytes()));
  if (dynamic && model.steps().empty())
    std::printf("steps: not shown (they do not verify at the dims' maxima, which a check excludes)\n");
  else
    std::printf("steps: %zu%s\n", model.steps().size(), dynamic ? " (sizes at the dims' maxima)" : "");
  for (size_t i = 0; i < model.steps().size(); ++i) {
    const ein::StepInfo &step = model.steps()[i];
    std::string details;
    for (const auto &[key, value] : step.shapes) details += " " + key + "=" + shapeText(value);
    for (const auto &[key, value] : step.sizes) details += " " + key + "=" + std::to_string(value);
    for (const auto &[key, value] : step.attributes) details += " " + key + "=" + value;
    std::printf("  %4zu %-12s%s%s%s\n", i, step.op.c_str(), details.c_str(), step.location.empty() ? "" : "  at ",
                step.location.c_str());
  }
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"ein-inspect: shows what an ein artifact (.einb) holds", "ein-inspect"};
  std::string path;
  bool json = false;
  app.add_option("model", path, "the artifact (.einb)")->required();
  app.add_flag("--json", json, "print one JSON object instead of a summary");
  CLI11_PARSE(app, argc, argv);

  auto model = ein::Model::load(path);
  if (!model.ok()) return ein::tools::fail("ein-inspect", model.status().message());
  if (json) std::printf("%s\n", modelJson(*model.value()).dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  else printSummary(*model.value());
  return 0;
}
