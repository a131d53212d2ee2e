// Decoders of ein's model library (models/huggingface) on Hugging Face
// checkpoint folders written by transformers (cases/hf_*, written by
// make_checkpoint_cases.py): compiled with einc --hf, greedy generation
// gives the tokens transformers' generate gives on the same folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "case_source.hpp"
#include "ein/npy.hpp"
#include "ein/runtime.hpp"
#include "text_file.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> checkpointDecoders() {
  std::vector<std::string> names;
  for (const fs::directory_entry &entry : fs::directory_iterator(EIN_CONFORMANCE_CASES_DIR))
    if (fs::exists(entry.path() / "checkpoint" / "config.json") && fs::exists(entry.path() / "generation.json"))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class CheckpointGeneration : public ::testing::TestWithParam<std::string> {};

TEST_P(CheckpointGeneration, GreedyTokensAreTransformers) {
  const fs::path caseDir = fs::path(EIN_CONFORMANCE_CASES_DIR) / GetParam();
  const fs::path work = fs::path(::testing::TempDir()) / ("checkpoint_generation_" + GetParam());
  fs::create_directories(work);
  const fs::path artifact = work / "model.einb";
  const std::string compile = std::string(EIN_BIN_DIR) + "/einc " + caseSource(caseDir) + " -o " +
                              artifact.string() + " > " + (work / "einc.log").string() + " 2>&1";
  ASSERT_EQ(std::system(compile.c_str()), 0) << compile << "\n" << slurp(work / "einc.log");
  auto model = ein::Model::load(artifact.string());
  ASSERT_TRUE(model.ok()) << model.status().toString();
  const nlohmann::json spec = nlohmann::json::parse(slurp(caseDir / "generation.json"));
  const auto prompt = spec["prompt"].get<std::vector<int64_t>>();
  const auto greedy = spec["greedy"].get<std::vector<int64_t>>();
  for (int threads : {1, 2}) {
    auto session = ein::Session::create(*model, ein::SessionOptions{threads});
    ASSERT_TRUE(session.ok()) << session.status().toString();
    // An encoder-decoder's encoder inputs (Whisper's input_features, T5's input_ids and attention_mask), read
    // at the sequence's first run.
    for (const std::string &name : spec.value("encoder_inputs", std::vector<std::string>{})) {
      auto input = ein::npy::read((caseDir / (name + ".npy")).string());
      ASSERT_TRUE(input.ok()) << input.status().message();
      ein::Status set = (*session)->setInput(name, input->type, input->shape, input->data.data(), input->data.size());
      ASSERT_TRUE(set.ok()) << name << ": " << set.message();
    }
    ein::GenerationOptions options;
    options.maxNewTokens = static_cast<int64_t>(greedy.size());
    auto tokens = ein::generate(**session, prompt, options);
    ASSERT_TRUE(tokens.ok()) << tokens.status().toString();
    EXPECT_EQ(tokens.value(), greedy) << threads << " threads";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CheckpointGeneration, ::testing::ValuesIn(checkpointDecoders()),
                         [](const auto &info) { return info.param; });

}  // namespace
