// ein-inspect: shows what an ein artifact holds.
//
//   ein-inspect MODEL.einb [--json]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "ein/runtime.hpp"

namespace {

nlohmann::json tensorJson(const ein::TensorInfo &info) {
  return {{"name", info.name}, {"dtype", ein::dtypeName(info.dtype)}, {"shape", info.shape}};
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"ein-inspect: shows what an ein artifact holds"};
  std::string path;
  bool json = false;
  app.add_option("model", path, "the artifact (.einb)")->required();
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  auto loaded = ein::Model::load(path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "ein-inspect: %s\n", loaded.status().message().c_str());
    return 1;
  }
  const ein::Model &model = *loaded.value();
  uint64_t paramBytes = 0;
  for (const auto &param : model.params()) paramBytes += param.byteSize();

  if (json) {
    nlohmann::json out;
    out["format_version"] = model.formatVersion();
    out["target"] = model.target();
    out["producer"] = model.producer();
    out["source"] = model.source();
    out["inputs"] = nlohmann::json::array();
    for (const auto &input : model.inputs()) out["inputs"].push_back(tensorJson(input));
    out["outputs"] = nlohmann::json::array();
    for (const auto &output : model.outputs()) out["outputs"].push_back(tensorJson(output));
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto &param : model.params()) tensors.push_back(tensorJson(param));
    out["params"] = {{"count", model.params().size()}, {"bytes", paramBytes}, {"tensors", tensors}};
    out["arena_bytes"] = model.arenaBytes();
    out["weights_bytes"] = model.weightsBytes();
    out["steps"] = nlohmann::json::array();
    for (const auto &step : model.steps()) {
      nlohmann::json item{{"op", step.op}, {"location", step.location}};
      for (const auto &[key, values] : step.sizes) item[key] = values.size() == 1 && key != "batch" && key != "shape" && key != "ids" ? nlohmann::json(values[0]) : nlohmann::json(values);
      out["steps"].push_back(item);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }

  std::printf("%s: ein artifact v%u for %s, by %s from %s\n", path.c_str(), model.formatVersion(), model.target().c_str(),
              model.producer().c_str(), model.source().c_str());
  for (const auto &input : model.inputs())
    std::printf("  input  %s: %s%s\n", input.name.c_str(), ein::dtypeName(input.dtype), shapeText(input.shape).c_str());
  for (const auto &output : model.outputs())
    std::printf("  output %s: %s%s\n", output.name.c_str(), ein::dtypeName(output.dtype), shapeText(output.shape).c_str());
  std::printf("  params: %zu tensors, %llu bytes; arena: %llu bytes\n", model.params().size(),
              static_cast<unsigned long long>(paramBytes), static_cast<unsigned long long>(model.arenaBytes()));
  std::printf("  steps: %zu\n", model.steps().size());
  for (size_t i = 0; i < model.steps().size(); ++i) {
    const auto &step = model.steps()[i];
    std::string sizes;
    for (const auto &[key, values] : step.sizes) sizes += " " + key + "=" + (values.size() == 1 && key != "shape" && key != "batch" ? std::to_string(values[0]) : shapeText(values));
    std::printf("  %3zu %-12s%s  (%s)\n", i, step.op.c_str(), sizes.c_str(), step.location.c_str());
  }
  return 0;
}
