// ein-inspect: what an ein artifact holds, for people (default) or scripts
// (--json). The artifact is verified first: a bad one is an error, never a
// partial listing.
//
//   ein-inspect MODEL.einb [--json]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "ein/describe.hpp"
#include "ein/runtime.hpp"
#include "tool_support.hpp"

namespace {

nlohmann::json tensorJson(const ein::TensorInfo &info) {
  nlohmann::json out{{"name", info.name}, {"dtype", ein::dtypeName(info.dtype)}, {"shape", info.shape}};
  if (!info.dims.empty()) out["dims"] = info.dims;
  return out;
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
  out["fixed_dims"] = nlohmann::json::array();
  for (const ein::FixedDimInfo &dim : model.fixedDims())
    out["fixed_dims"].push_back({{"name", dim.name}, {"value", dim.value}, {"declared_at", dim.declaredAt}});
  out["inputs"] = nlohmann::json::array();
  for (const ein::TensorInfo &input : model.inputs()) {
    nlohmann::json item = tensorJson(input);
    if (input.upperBound > 0) item["upper_bound"] = input.upperBound;
    out["inputs"].push_back(item);
  }
  out["outputs"] = nlohmann::json::array();
  for (const ein::TensorInfo &output : model.outputs()) out["outputs"].push_back(tensorJson(output));
  nlohmann::json params = nlohmann::json::array();
  for (size_t i = 0; i < model.params().size(); ++i) {
    nlohmann::json item = tensorJson(model.params()[i]);
    const ein::ParamStorage &stored = model.paramStorage()[i];
    item["stored"] = {{"dtype", ein::dtypeName(stored.dtype)}, {"shape", stored.shape}, {"folded", stored.folded},
                      {"offset", stored.offset}, {"bytes", stored.bytes}};
    params.push_back(std::move(item));
  }
  out["params"] = {{"count", model.params().size()}, {"bytes", ein::paramsByteSize(model)}, {"tensors", params}};
  nlohmann::json states = nlohmann::json::array();
  for (const ein::TensorInfo &state : model.states()) states.push_back(tensorJson(state));
  out["states"] = states;
  if (model.positionDim() >= 0) out["position"] = model.dims()[static_cast<size_t>(model.positionDim())].name;
  if (model.sequenceTokensDim() >= 0)
    out["sequence_tokens"] = model.dims()[static_cast<size_t>(model.sequenceTokensDim())].name;
  else if (!model.oneSequenceReason().empty())
    out["one_sequence"] = model.oneSequenceReason();
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
  else std::fputs(ein::describeModel(*model.value()).c_str(), stdout);
  return 0;
}
