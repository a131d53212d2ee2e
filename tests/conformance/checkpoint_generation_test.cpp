// Decoders of ein's model library (models/huggingface) on Hugging Face
// checkpoint folders written by transformers (cases/hf_*, written by
// make_checkpoint_cases.py): compiled with einc --hf, greedy generation
// gives the tokens transformers' generate gives on the same folder, and beam
// search its hypotheses where the case has them (encoder-decoders).
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

class CheckpointGeneration : public ::testing::TestWithParam<std::string> {
 protected:
  // The case's artifact, compiled with einc --hf.
  std::shared_ptr<const ein::Model> compile() {
    const fs::path work = fs::path(::testing::TempDir()) / ("checkpoint_generation_" + GetParam());
    fs::create_directories(work);
    const fs::path artifact = work / "model.einb";
    const std::string command = std::string(EIN_BIN_DIR) + "/einc " + caseSource(caseDir()) + " -o " +
                                artifact.string() + " > " + (work / "einc.log").string() + " 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command << "\n" << slurp(work / "einc.log");
    auto model = ein::Model::load(artifact.string());
    EXPECT_TRUE(model.ok()) << model.status().toString();
    return model.ok() ? *model : nullptr;
  }
  fs::path caseDir() const { return fs::path(EIN_CONFORMANCE_CASES_DIR) / GetParam(); }
  nlohmann::json spec() const { return nlohmann::json::parse(slurp(caseDir() / "generation.json")); }
  // A session with an encoder-decoder's encoder inputs set (Whisper's
  // input_features, T5's input_ids and attention_mask), read at the
  // sequence's first run.
  std::unique_ptr<ein::Session> session(const std::shared_ptr<const ein::Model> &model, int threads) {
    auto created = ein::Session::create(model, ein::SessionOptions{threads});
    EXPECT_TRUE(created.ok()) << created.status().toString();
    if (!created.ok()) return nullptr;
    for (const std::string &name : spec().value("encoder_inputs", std::vector<std::string>{})) {
      auto input = ein::npy::read((caseDir() / (name + ".npy")).string());
      EXPECT_TRUE(input.ok()) << input.status().message();
      if (!input.ok()) return nullptr;
      ein::Status set = (*created)->setInput(name, input->type, input->shape, input->data.data(), input->data.size());
      EXPECT_TRUE(set.ok()) << name << ": " << set.message();
    }
    return std::move(created).value();
  }
};

TEST_P(CheckpointGeneration, GreedyTokensAreTransformers) {
  auto model = compile();
  ASSERT_TRUE(model);
  const nlohmann::json spec = this->spec();
  const auto prompt = spec["prompt"].get<std::vector<int64_t>>();
  const auto greedy = spec["greedy"].get<std::vector<int64_t>>();
  for (int threads : {1, 2}) {
    auto session = this->session(model, threads);
    ASSERT_TRUE(session);
    ein::GenerationOptions options;
    options.maxNewTokens = static_cast<int64_t>(greedy.size());
    auto tokens = ein::generate(*session, prompt, options);
    ASSERT_TRUE(tokens.ok()) << tokens.status().toString();
    EXPECT_EQ(tokens.value(), greedy) << threads << " threads";
  }
}

// transformers' generate(num_beams=4, ...): the same hypotheses in the same
// order, with their scores (summed log-probabilities over length).
TEST_P(CheckpointGeneration, BeamSearchIsTransformers) {
  const nlohmann::json spec = this->spec();
  if (!spec.contains("beam_search")) GTEST_SKIP() << "the case has no beam search";
  const nlohmann::json &beams = spec["beam_search"];
  auto model = compile();
  ASSERT_TRUE(model);
  ein::BeamSearchOptions options;
  options.beams = beams["num_beams"].get<int>();
  options.returnSequences = options.beams;
  options.maxNewTokens = beams["max_new_tokens"].get<int64_t>();
  options.lengthPenalty = beams["length_penalty"].get<float>();
  options.earlyStopping = beams["early_stopping"].get<bool>() ? ein::EarlyStopping::WhenFull
                                                              : ein::EarlyStopping::Heuristic;
  options.stopTokens = {beams["eos_token_id"].get<int64_t>()};
  auto session = this->session(model, 2);
  ASSERT_TRUE(session);
  auto found = ein::beamSearch(*session, spec["prompt"].get<std::vector<int64_t>>(), options);
  ASSERT_TRUE(found.ok()) << found.status().toString();
  const auto expected = beams["sequences"].get<std::vector<std::vector<int64_t>>>();
  const auto scores = beams["sequences_scores"].get<std::vector<double>>();
  ASSERT_EQ(found->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    // transformers pads a hypothesis that ended early with its end token.
    std::vector<int64_t> tokens = (*found)[i].tokens;
    tokens.resize(expected[i].size(), options.stopTokens[0]);
    EXPECT_EQ(tokens, expected[i]) << "hypothesis " << i;
    EXPECT_NEAR((*found)[i].score, scores[i], 2e-4) << "hypothesis " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CheckpointGeneration, ::testing::ValuesIn(checkpointDecoders()),
                         [](const auto &info) { return info.param; });

}  // namespace
