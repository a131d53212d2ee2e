// Many sequences of the Llama-style decoder (cases/llama_hf_tiny, and a wider
// one with random weights whose memory plan reuses buffers inside the
// per-sequence stretches) in one SequencePool: each sequence's logits, run
// with others whose prompts and positions differ, joining and leaving at
// different runs, equal that sequence's logits run alone in a Session (the
// same model, the same tokens). On the CPU at fp32, bf16 and int8.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "ein/runtime.hpp"
#include "text_file.hpp"

namespace {

namespace fs = std::filesystem;

const fs::path kCase = fs::path(EIN_CONFORMANCE_CASES_DIR) / "llama_hf_tiny";


int64_t argmax(std::span<const float> logits) {
  return std::max_element(logits.begin(), logits.end()) - logits.begin();
}

// The largest |a - b| over the largest |b|, at least 1.
double relativeDifference(std::span<const float> a, std::span<const float> b) {
  double difference = 0, scale = 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    difference = std::max(difference, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return a.size() == b.size() ? difference / scale : INFINITY;
}

class Sequences : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    precision = GetParam();
    const fs::path work = fs::path(::testing::TempDir()) / ("sequence_pool_" + precision);
    fs::create_directories(work);
    model = compile(work / "tiny.einb",
                    (kCase / "model.ein").string() + " --weights " + (kCase / "weights.safetensors").string());
    wider = compile(work / "wider.einb", std::string(EIN_EXAMPLES_DIR) +
                                             "/llama_decoder.ein --random-weights 7 --dim hidden=128 --dim heads=8 "
                                             "--dim kv_heads=2 --dim head_dim=16 --dim inter=256 --dim layers=3");
    ASSERT_TRUE(model && wider);
    // fp32: the sums of a gemm over more rows may take another kernel path,
    // in another order; bf16 and int8 round alike, their caches are bf16.
    tolerance = precision == "fp32" ? 1e-5 : 2e-3;
  }

  std::shared_ptr<const ein::Model> compile(const fs::path &artifact, const std::string &arguments) {
    const std::string log = artifact.string() + ".log";
    const std::string command = std::string(EIN_BIN_DIR) + "/einc " + arguments + " -o " + artifact.string() +
                                " --precision " + precision + " > " + log + " 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command << "\n" << slurp(log);
    auto loaded = ein::Model::load(artifact.string());
    EXPECT_TRUE(loaded.ok()) << loaded.status().toString();
    return loaded.ok() ? loaded.value() : nullptr;
  }

  // Sequence `prompt` alone in a session, fed `fed` after it: the logits of
  // the prompt's last token, then of each fed token.
  std::vector<std::vector<float>> alone(const std::vector<int64_t> &prompt, const std::vector<int64_t> &fed,
                                        const std::shared_ptr<const ein::Model> &of) {
    auto session = ein::Session::create(of, {2});
    EXPECT_TRUE(session.ok());
    std::vector<std::vector<float>> rows;
    auto run = [&](std::span<const int64_t> tokens) {
      const int64_t count = static_cast<int64_t>(tokens.size());
      EXPECT_TRUE(
          session.value()->setInput("ids", ein::DType::I64, {1, count}, tokens.data(), tokens.size_bytes()).ok());
      ein::Status status = session.value()->run();
      EXPECT_TRUE(status.ok()) << status.toString();
      auto logits = session.value()->output("logits");
      const float *data = static_cast<const float *>(logits->data);
      const size_t vocabulary = logits->shape[2];
      rows.emplace_back(data + (count - 1) * vocabulary, data + count * vocabulary);
    };
    run(prompt);
    for (int64_t token : fed) run(std::span<const int64_t>(&token, 1));
    return rows;
  }

  std::string precision;
  std::shared_ptr<const ein::Model> model, wider;
  double tolerance = 0;
};

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

// Generation for more prompts than the pool has sequences, continuously
// batched: each prompt's tokens and finish are its generation alone, greedy
// and sampled, up to a stop token, its token count or a full cache.
TEST_P(Sequences, ManyPromptsGenerateAsEachAlone) {
  auto pool = ein::SequencePool::create(model, {4, 2});
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool.value()->maxTokensPerRun(), 256);
  std::mt19937 random(7);
  std::vector<std::vector<int64_t>> prompts;
  for (size_t length : {5, 120, 1, 33, 120, 250, 64, 9, 2, 17}) {
    prompts.emplace_back(length);
    for (int64_t &token : prompts.back()) token = random() % 128;
  }
  ein::GenerationOptions greedy{.maxNewTokens = 12};
  ein::GenerationOptions sampled{.maxNewTokens = 9, .temperature = 0.8f, .topK = 20, .seed = 3};
  ein::GenerationOptions stopping{.maxNewTokens = 12, .stopTokens = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
  for (const ein::GenerationOptions &options : {greedy, sampled, stopping}) {
    auto many = ein::generate(*pool.value(), prompts, options);
    ASSERT_TRUE(many.ok()) << many.status().toString();
    ASSERT_EQ(many.value().size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto session = ein::Session::create(model, {2});
      ein::FinishReason finish = ein::FinishReason::None;
      auto alone = ein::generate(*session.value(), prompts[i], options, &finish);
      ASSERT_TRUE(alone.ok()) << alone.status().toString();
      EXPECT_EQ(many.value()[i].tokens, alone.value()) << "prompt " << i;
      EXPECT_EQ(many.value()[i].finish, finish) << "prompt " << i;
    }
    // The 250-token prompt fills the 256-row cache after 7 tokens.
    if (options.stopTokens.empty()) {
      EXPECT_EQ(many.value()[5].finish, ein::FinishReason::CacheFull);
    }
  }
  const std::vector<std::vector<int64_t>> tooLong = {{1, 2}, std::vector<int64_t>(257, 1)};
  auto refused = ein::generate(*pool.value(), tooLong, greedy);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("prompt 1 has 257 tokens; a run takes at most 256"), std::string::npos)
      << refused.status().message();
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
  const fs::path work = fs::path(::testing::TempDir()) / ("sequence_pool_stateless_" + precision);
  fs::create_directories(work);
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

INSTANTIATE_TEST_SUITE_P(Cpu, Sequences, ::testing::Values("fp32", "bf16", "int8"));

}  // namespace
