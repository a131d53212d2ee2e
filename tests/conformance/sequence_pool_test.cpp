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
// the sequence's own run alone. With the cache paged in blocks of 16 rows
// (the default), of 5 (prompts and attention's key panels across blocks)
// and of 1, and unpaged (0 rows a block).
TEST_P(Sequences, EachSequenceEqualsItsRunAlone) {
  struct Case {
    int count;
    int64_t blockRows;
  };
  for (const auto &[name, of] : {std::pair("llama_hf_tiny", model), std::pair("wider", wider)}) {
    for (const Case &each : std::vector<Case>{{1, 16}, {3, 16}, {8, 16}, {8, 5}, {3, 1}, {8, 0}}) {
      const int count = each.count;
      SCOPED_TRACE(std::string(name) + ", sequences: " + std::to_string(count) +
                   ", rows a block: " + std::to_string(each.blockRows));
      auto pool = ein::SequencePool::create(of, {count, 2, each.blockRows});
      ASSERT_TRUE(pool.ok()) << pool.status().toString();
      EXPECT_EQ(pool.value()->cacheBlockRows(), each.blockRows);
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

// The paged cache: a sequence takes a block as its rows reach it and gives
// its blocks back when reset; a copy shares the original's blocks, and
// whichever writes into a shared block first writes into a copy of it.
// Each goes on as alone, and the blocks are the pool's again at the end.
TEST_P(Sequences, ACopySharesTheBlocksUntilItWritesIntoThem) {
  auto pool = ein::SequencePool::create(model, {3, 2});
  ASSERT_TRUE(pool.ok());
  ein::SequencePool &sequences = *pool.value();
  ASSERT_EQ(sequences.cacheBlockRows(), 16);
  ASSERT_EQ(sequences.cacheBlocks(), 3 * 16);  // 256 rows each
  std::vector<int64_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int64_t>(i * 7 % 128);
  EXPECT_EQ(sequences.blocksToRun(0, 40), 3);
  ASSERT_TRUE(sequences.run(std::vector<ein::SequenceTokens>{{0, prompt}}).ok());
  EXPECT_EQ(sequences.freeCacheBlocks(), 48 - 3);
  ASSERT_TRUE(sequences.copy(1, 0).ok());
  ASSERT_TRUE(sequences.copy(2, 0).ok());
  EXPECT_EQ(sequences.freeCacheBlocks(), 48 - 3);  // shared, not copied
  EXPECT_EQ(sequences.blocksHeld(std::vector<int>{0, 1, 2}), 3);
  // Row 40 lies in the third block, which all three share: each writes into a copy but the last.
  EXPECT_EQ(sequences.blocksToRun(1, 1), 1);
  const std::vector<int64_t> a = {3}, b = {9}, c = {3};
  ASSERT_TRUE(sequences.run(std::vector<ein::SequenceTokens>{{1, b}, {0, a}, {2, c}}).ok());
  EXPECT_EQ(sequences.freeCacheBlocks(), 48 - 5);
  EXPECT_EQ(sequences.blocksHeld(std::vector<int>{0}), 3);
  EXPECT_EQ(sequences.blocksHeld(std::vector<int>{0, 1, 2}), 5);
  const std::vector<std::vector<float>> withA = alone(prompt, a, model), withB = alone(prompt, b, model);
  EXPECT_LE(relativeDifference(sequences.lastLogits(0), withB.back()), tolerance);
  EXPECT_LE(relativeDifference(sequences.lastLogits(1), withA.back()), tolerance);
  EXPECT_LE(relativeDifference(sequences.lastLogits(2), withA.back()), tolerance);
  // Past the shared rows, each grows on its own blocks.
  std::vector<int64_t> more(30, 11);
  ASSERT_TRUE(sequences.run(std::vector<ein::SequenceTokens>{{0, more}, {1, more}}).ok());
  std::vector<int64_t> fedA = a, fedB = b;
  fedA.insert(fedA.end(), more.begin(), more.end());
  fedB.insert(fedB.end(), more.begin(), more.end());
  EXPECT_LE(relativeDifference(sequences.lastLogits(0), alone(prompt, fedA, model).back()), tolerance);
  EXPECT_LE(relativeDifference(sequences.lastLogits(1), alone(prompt, fedB, model).back()), tolerance);
  // A truncated copy keeps the shared blocks it still needs, and runs on as its prefix alone.
  ASSERT_TRUE(sequences.truncate(2, 20).ok());
  EXPECT_EQ(sequences.blocksHeld(std::vector<int>{2}), 2);
  ASSERT_TRUE(sequences.run(std::vector<ein::SequenceTokens>{{2, std::span(prompt).subspan(20)}}).ok());
  EXPECT_LE(relativeDifference(sequences.lastLogits(0), alone(prompt, {}, model).back()), tolerance);
  for (int sequence : {0, 1, 2}) ASSERT_TRUE(sequences.reset(sequence).ok());
  EXPECT_EQ(sequences.freeCacheBlocks(), 48);
}

// Forks that all write into the block they share (beams after a copy) need
// one copy fewer than their count: the last keeps the block.
TEST_P(Sequences, ForksWritingTheirSharedBlockCopyItForAllButOne) {
  auto pool = ein::SequencePool::create(model, {2, 2, 16, 4});
  ASSERT_TRUE(pool.ok());
  ein::SequencePool &sequences = *pool.value();
  const std::vector<int64_t> prompt(40, 5), a = {3}, b = {9};
  ASSERT_TRUE(sequences.run(std::vector<ein::SequenceTokens>{{0, prompt}}).ok());
  ASSERT_TRUE(sequences.copy(1, 0).ok());
  EXPECT_EQ(sequences.freeCacheBlocks(), 1);
  ein::Status status = sequences.run(std::vector<ein::SequenceTokens>{{0, a}, {1, b}});
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_EQ(sequences.freeCacheBlocks(), 0);
  EXPECT_LE(relativeDifference(sequences.lastLogits(0), alone(prompt, a, model).back()), tolerance);
  EXPECT_LE(relativeDifference(sequences.lastLogits(1), alone(prompt, b, model).back()), tolerance);
}

// A pool of fewer blocks than every cache takes: a run needing more blocks
// than are free fails before anything runs, naming them, and every sequence
// is as it was; giving blocks back lets it run.
TEST_P(Sequences, ARunBeyondTheFreeBlocksFailsAndChangesNothing) {
  auto pool = ein::SequencePool::create(model, {2, 2, 16, 4});
  ASSERT_TRUE(pool.ok());
  ein::SequencePool &sequences = *pool.value();
  EXPECT_EQ(sequences.cacheBlocks(), 4);
  const std::vector<int64_t> first(40, 5), second(30, 6);
  ASSERT_TRUE(sequences.run(std::vector<ein::SequenceTokens>{{0, first}}).ok());
  ein::Status status = sequences.run(std::vector<ein::SequenceTokens>{{0, second}, {1, second}});
  EXPECT_EQ(status.code(), ein::StatusCode::ResourceExhausted);
  EXPECT_NE(status.message().find("the run needs 4 cache blocks of 16 rows, and 1 of the 4 are free"),
            std::string::npos)
      << status.message();
  EXPECT_EQ(sequences.position(0), 40);
  EXPECT_EQ(sequences.position(1), 0);
  EXPECT_EQ(sequences.freeCacheBlocks(), 1);
  ASSERT_TRUE(sequences.truncate(0, 16).ok());
  ASSERT_TRUE(sequences.run(std::vector<ein::SequenceTokens>{{1, second}, {0, std::span(first).subspan(16, 1)}}).ok());
  EXPECT_LE(relativeDifference(sequences.lastLogits(0), alone(second, {}, model).back()), tolerance);
  EXPECT_LE(relativeDifference(sequences.lastLogits(1), alone(std::vector<int64_t>(17, 5), {}, model).back()),
            tolerance);
  auto refused = ein::SequencePool::create(model, {2, 2, 16, -1});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("cacheBlocks is -1"), std::string::npos) << refused.status().message();
  refused = ein::SequencePool::create(model, {2, 2, 1 << 20});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("cacheBlockRows is 1048576"), std::string::npos)
      << refused.status().message();
}

INSTANTIATE_TEST_SUITE_P(Cpu, Sequences, ::testing::Values("fp32", "bf16", "int8"));

}  // namespace
}  // namespace many_sequences
