// ein::chooseToken: greedy picks, and sampled draws as often as softmax(logits /
// temperature) restricted to the top-k and top-p tokens says, reproducibly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "ein/generate.hpp"

namespace {

// How often each token is drawn in `draws` draws from one generator state.
std::map<int64_t, int> drawCounts(const std::vector<float> &logits, const ein::GenerationOptions &options, int draws) {
  std::map<int64_t, int> counts;
  uint64_t state = options.seed;
  for (int i = 0; i < draws; ++i) ++counts[ein::chooseToken(logits, options, state)];
  return counts;
}

// Each token's share of the draws within 5 standard deviations of p.
void expectShares(const std::map<int64_t, int> &counts, const std::map<int64_t, double> &probabilities, int draws) {
  for (const auto &[token, count] : counts)
    EXPECT_TRUE(probabilities.count(token)) << "token " << token << " was drawn " << count << " times";
  for (const auto &[token, p] : probabilities) {
    const auto found = counts.find(token);
    const double share = found == counts.end() ? 0.0 : double(found->second) / draws;
    EXPECT_NEAR(share, p, 5 * std::sqrt(p * (1 - p) / draws) + 1e-9) << "token " << token;
  }
}

// softmax(logits / temperature) over `tokens`.
std::map<int64_t, double> softmaxOver(const std::vector<float> &logits, float temperature,
                                      const std::vector<int64_t> &tokens) {
  std::map<int64_t, double> p;
  double sum = 0;
  for (int64_t token : tokens) sum += p[token] = std::exp(double(logits[token]) / temperature);
  for (auto &[token, value] : p) value /= sum;
  return p;
}

TEST(Sampling, GreedyTakesTheFirstOfEqualMaxima) {
  uint64_t state = 0;
  EXPECT_EQ(ein::chooseToken(std::vector<float>{0.5f, 2.0f, -1.0f, 2.0f}, {}, state), 1);
}

TEST(Sampling, DrawsEachTokenAsOftenAsItsProbability) {
  const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 1.4f, 0.0f, -3.0f};
  ein::GenerationOptions options;
  options.temperature = 0.7f;
  options.seed = 11;
  constexpr int kDraws = 40000;
  expectShares(drawCounts(logits, options, kDraws), softmaxOver(logits, 0.7f, {0, 1, 2, 3, 4, 5}), kDraws);
}

TEST(Sampling, TopKDrawsOnlyTheKMostLikely) {
  // A vocabulary larger than the first sorted block, its best tokens spread out.
  std::vector<float> logits(5000);
  std::mt19937 generator(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float &logit : logits) logit = normal(generator);
  logits[4321] = 6.0f, logits[17] = 5.5f, logits[2500] = 5.4f;
  ein::GenerationOptions options;
  options.temperature = 1.3f;
  options.topK = 3;
  options.seed = 2;
  constexpr int kDraws = 20000;
  expectShares(drawCounts(logits, options, kDraws), softmaxOver(logits, 1.3f, {4321, 17, 2500}), kDraws);
}

TEST(Sampling, TopPKeepsTheSmallestSetOfThatMass) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (temperature 1): 0.7 of the mass takes
  // the first two, drawn as 0.5 : 0.3.
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  ein::GenerationOptions options;
  options.temperature = 1.0f;
  options.topP = 0.7f;
  options.seed = 4;
  constexpr int kDraws = 20000;
  expectShares(drawCounts(logits, options, kDraws), {{1, 0.625}, {3, 0.375}}, kDraws);
}

TEST(Sampling, DeepDrawsOverALargeFlatVocabulary) {
  // Every token equally likely: the draws walk far past the first sorted
  // block, and each of the 4 quarters of the vocabulary takes its share.
  const std::vector<float> logits(20000, 0.25f);
  ein::GenerationOptions options;
  options.temperature = 0.9f;
  options.seed = 8;
  constexpr int kDraws = 4000;
  std::map<int64_t, int> quarters;
  for (const auto &[token, count] : drawCounts(logits, options, kDraws)) quarters[token / 5000] += count;
  expectShares(quarters, {{0, 0.25}, {1, 0.25}, {2, 0.25}, {3, 0.25}}, kDraws);
}

TEST(Sampling, EqualLogitsAreTakenInIdOrderAndAnInfiniteOneIsCertain) {
  ein::GenerationOptions options;
  options.temperature = 0.5f;
  options.topK = 1;
  uint64_t state = 1;
  EXPECT_EQ(ein::chooseToken(std::vector<float>{0.0f, 3.0f, 1.0f, 3.0f}, options, state), 1);
  options.topK = 0;
  const float inf = std::numeric_limits<float>::infinity();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(ein::chooseToken(std::vector<float>{0.0f, 3.0f, inf, 2.0f}, options, state), 2);
}

TEST(Sampling, ASeedGivesTheSameDraws) {
  std::vector<float> logits(300);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(float(i)) * 2.0f;
  ein::GenerationOptions options;
  options.temperature = 0.8f;
  options.topK = 40;
  options.topP = 0.9f;
  uint64_t a = 7, b = 7;
  std::vector<int64_t> first, second;
  for (int i = 0; i < 50; ++i) {
    first.push_back(ein::chooseToken(logits, options, a));
    second.push_back(ein::chooseToken(logits, options, b));
  }
  EXPECT_EQ(first, second);
  EXPECT_GT(std::set<int64_t>(first.begin(), first.end()).size(), 1u);
}

}  // namespace
