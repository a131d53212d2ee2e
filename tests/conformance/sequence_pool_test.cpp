// Many sequences of the Llama-style decoders (decoder_models.hpp) in one
// SequencePool: each sequence's logits, run with others whose prompts and
// positions differ, joining and leaving at different runs, equal that
// sequence's logits run alone in a Session (the same model, the same
// tokens). On the CPU at fp32, bf16 and int8.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "decoder_models.hpp"

namespace many_sequences {
namespace {

using Sequences = DecoderModels;

// N sequences with prompts of 1 to 60 tokens, each joining at its own run and
// generating greedily for its own number of steps: every logits row equals
// the sequence's own run alone.
TEST_P(Sequences, EachSequenceEqualsItsRunAlone) {
  for (const auto &[name, of] : {std::pair("llama_hf_tiny", model), std::pair("wider", wider)}) {
    for (int count : {1, 3, 8}) {
      SCOPED_TRACE(std::string(name) + ", sequences: " + std::to_string(count));
      auto pool = ein::SequencePool::create(of, {count, 2});
      ASSERT_TRUE(pool.ok()) << pool.status().toString();
      std::mt19937 random(count);
      struct Plan {
        std::vector<int64_t> prompt, fed;
        int joins = 0, steps = 0;
        std::vector<std::vector<float>> rows;
      };
      std::vector<Plan> plans(count);
      for (int i = 0; i < count; ++i) {
        plans[i].prompt.resize(1 + random() % 60);
        for (int64_t &token : plans[i].prompt) token = random() % 128;
        plans[i].joins = i % 3;
        plans[i].steps = 2 + i % 4;
      }
      for (int run = 0;; ++run) {
        std::vector<ein::SequenceTokens> batch;
        std::vector<int64_t> next(count);
        std::vector<int> entries;
        for (int i = 0; i < count; ++i) {
          Plan &plan = plans[i];
          if (run < plan.joins || static_cast<int>(plan.rows.size()) > plan.steps) continue;
          if (plan.rows.empty()) {
            batch.push_back({i, plan.prompt});
          } else {
            next[i] = argmax(plan.rows.back());
            plan.fed.push_back(next[i]);
            batch.push_back({i, std::span<const int64_t>(&next[i], 1)});
          }
          entries.push_back(i);
        }
        if (batch.empty()) break;
        ein::Status status = pool.value()->run(batch);
        ASSERT_TRUE(status.ok()) << status.toString();
        for (size_t entry = 0; entry < entries.size(); ++entry) {
          std::span<const float> logits = pool.value()->lastLogits(entry);
          plans[entries[entry]].rows.emplace_back(logits.begin(), logits.end());
        }
      }
      for (int i = 0; i < count; ++i) {
        const Plan &plan = plans[i];
        EXPECT_EQ(pool.value()->position(i), static_cast<int64_t>(plan.prompt.size() + plan.fed.size()));
        std::vector<std::vector<float>> expected = alone(plan.prompt, plan.fed, of);
        ASSERT_EQ(expected.size(), plan.rows.size());
        for (size_t row = 0; row < expected.size(); ++row)
          EXPECT_LE(relativeDifference(plan.rows[row], expected[row]), tolerance)
              << "sequence " << i << " (prompt of " << plan.prompt.size() << "), row " << row;
      }
    }
  }
}

// A sequence reset runs as a new one; the others go on unchanged.
TEST_P(Sequences, AResetSequenceStartsAgain) {
  auto pool = ein::SequencePool::create(model, {2, 2});
  ASSERT_TRUE(pool.ok());
  const std::vector<int64_t> first = {5, 9, 13}, second = {7, 1};
  ASSERT_TRUE(pool.value()->run(std::vector<ein::SequenceTokens>{{0, first}, {1, second}}).ok());
  const std::vector<float> before(pool.value()->lastLogits(0).begin(), pool.value()->lastLogits(0).end());
  ASSERT_TRUE(pool.value()->reset(0).ok());
  EXPECT_EQ(pool.value()->position(0), 0);
  const int64_t token = 3;
  ASSERT_TRUE(pool.value()->run(std::vector<ein::SequenceTokens>{{0, first}, {1, {&token, 1}}}).ok());
  EXPECT_LE(relativeDifference(pool.value()->lastLogits(0), before), tolerance);
  EXPECT_LE(relativeDifference(pool.value()->lastLogits(1), alone(second, {token}, model).back()), tolerance);
}

// Each mistake is an error naming it, and no sequence moves.
TEST_P(Sequences, BadRunsAreClearErrorsAndChangeNothing) {
  auto pool = ein::SequencePool::create(model, {3, 1});
  ASSERT_TRUE(pool.ok());
  const std::vector<int64_t> tokens = {1, 2, 3}, outside = {1, 128}, none;
  const std::vector<int64_t> longPrompt(250, 4);
  ASSERT_TRUE(pool.value()->run(std::vector<ein::SequenceTokens>{{1, longPrompt}}).ok());
  auto expectError = [&](std::vector<ein::SequenceTokens> batch, const std::string &message) {
    ein::Status status = pool.value()->run(batch);
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.message().find(message), std::string::npos) << status.message();
    EXPECT_EQ(pool.value()->position(0), 0);
    EXPECT_EQ(pool.value()->position(1), 250);
    EXPECT_EQ(pool.value()->position(2), 0);
  };
  expectError({}, "the run has no sequences");
  expectError({{3, tokens}}, "entry 0: sequence 3 is not one of the pool's 0..2");
  expectError({{0, tokens}, {0, tokens}}, "entry 1: sequence 0 is in the run twice");
  expectError({{0, none}}, "entry 0: sequence 0 has no tokens");
  expectError({{0, outside}}, "entry 0: token 1 is 128, outside the vocabulary [0, 128) of input \"ids\"");
  expectError({{0, tokens}, {1, std::vector<int64_t>(7, 1)}}, "entry 1: sequence 1 at position 250: ");
  // Each fits its cache, but not the model's 256 tokens a run together.
  expectError({{0, std::vector<int64_t>(200, 1)}, {2, std::vector<int64_t>(100, 1)}},
              "the run's 300 tokens together: ");
  // A model that keeps no state serves one sequence per run.
  const fs::path work = workDirectory("sequence_pool_stateless");
  const std::string compile = std::string(EIN_BIN_DIR) + "/einc " + EIN_EXAMPLES_DIR +
                              "/mhsa.ein --random-weights 1 -o " + (work / "mhsa.einb").string() + " > " +
                              (work / "einc.log").string() + " 2>&1";
  ASSERT_EQ(std::system(compile.c_str()), 0) << slurp(work / "einc.log");
  auto stateless = ein::Model::load((work / "mhsa.einb").string());
  ASSERT_TRUE(stateless.ok());
  auto refused = ein::SequencePool::create(*stateless, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("serves one sequence per run"), std::string::npos)
      << refused.status().message();
}

// A copied sequence goes on as the original; a truncated one as if only its
// first tokens had run.
TEST_P(Sequences, ACopyGoesOnAsTheOriginalAndATruncatedOneFromItsPrefix) {
  auto pool = ein::SequencePool::create(model, {3, 2});
  ASSERT_TRUE(pool.ok());
  const std::vector<int64_t> prompt = {5, 9, 13, 2, 7, 1}, next = {3};
  ASSERT_TRUE(pool.value()->run(std::vector<ein::SequenceTokens>{{0, prompt}}).ok());
  ASSERT_TRUE(pool.value()->copy(2, 0).ok());
  EXPECT_EQ(pool.value()->position(2), 6);
  ASSERT_TRUE(pool.value()->run(std::vector<ein::SequenceTokens>{{0, next}, {2, next}}).ok());
  const std::vector<std::vector<float>> expected = alone(prompt, next, model);
  EXPECT_LE(relativeDifference(pool.value()->lastLogits(0), expected.back()), tolerance);
  EXPECT_LE(relativeDifference(pool.value()->lastLogits(1), expected.back()), tolerance);
  // Keep the prompt's first 4 rows, run its last 2 again: as the prompt alone.
  ASSERT_TRUE(pool.value()->truncate(2, 4).ok());
  ASSERT_TRUE(pool.value()->run(std::vector<ein::SequenceTokens>{{2, std::span(prompt).subspan(4)}}).ok());
  EXPECT_LE(relativeDifference(pool.value()->lastLogits(0), expected.front()), tolerance);
  ein::Status status = pool.value()->truncate(1, 1);
  EXPECT_NE(status.message().find("sequence 1 holds 0 rows; it cannot keep 1"), std::string::npos) << status.message();
  status = pool.value()->copy(3, 0);
  EXPECT_NE(status.message().find("sequence 3 is not one of the pool's 0..2"), std::string::npos) << status.message();
}

INSTANTIATE_TEST_SUITE_P(Cpu, Sequences, ::testing::Values("fp32", "bf16", "int8"));

}  // namespace
}  // namespace many_sequences
