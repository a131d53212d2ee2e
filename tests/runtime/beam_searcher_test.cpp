// detail::bestLogProbs, the beams' choice of next tokens: the best `count`
// by log-probability against a full sort of the vocabulary, with ties,
// banned tokens (also more of them than the tokens left), -inf logits and
// vocabularies shorter than its blocks of 8.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "api/beam_searcher.hpp"
#include "api/generation_rules.hpp"

namespace {

using ein::detail::TokenLogProb;

// Every token ranked: logit - shift in f32 (-inf if banned), the higher
// first, on a tie the lower token; the first `count`.
std::vector<TokenLogProb> sortedBest(const std::vector<float> &logits, float shift, const std::vector<int64_t> &banned,
                                     size_t count) {
  std::vector<TokenLogProb> all;
  for (size_t t = 0; t < logits.size(); ++t) {
    const bool isBanned = std::binary_search(banned.begin(), banned.end(), static_cast<int64_t>(t));
    all.push_back({isBanned ? -std::numeric_limits<float>::infinity() : logits[t] - shift, static_cast<int64_t>(t)});
  }
  std::stable_sort(all.begin(), all.end(), [](const TokenLogProb &a, const TokenLogProb &b) { return a.logProb > b.logProb; });
  all.resize(std::min(count, all.size()));
  return all;
}

void expectSame(const std::vector<TokenLogProb> &got, const std::vector<TokenLogProb> &want, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].token, want[i].token) << what << ", place " << i;
    EXPECT_EQ(got[i].logProb, want[i].logProb) << what << ", place " << i;
  }
}

TEST(BestLogProbs, EqualAFullSortOfTheVocabulary) {
  std::mt19937 random(11);
  for (size_t vocab : {1u, 3u, 7u, 8u, 9u, 31u, 1000u, 32003u})
    for (size_t count : {1u, 2u, 8u, 16u})
      for (int pattern = 0; pattern < 4; ++pattern) {
        // 0: spread logits; 1: few distinct values (ties); 2: rising logits
        // (each block beats the kept ones); 3: -inf logits among them.
        std::vector<float> logits(vocab);
        std::normal_distribution<float> spread(0.0f, 3.0f);
        std::uniform_int_distribution<int> few(0, 4);
        for (size_t t = 0; t < vocab; ++t)
          logits[t] = pattern == 1   ? static_cast<float>(few(random))
                      : pattern == 2 ? static_cast<float>(t) * 1e-3f
                                     : spread(random);
        if (pattern == 3)
          for (size_t t = 0; t < vocab; t += 3) logits[t] = -std::numeric_limits<float>::infinity();
        // Bans: none, some of the best, and all but 2 tokens (so that banned
        // ones, at -inf, are among the kept).
        std::vector<int64_t> order(vocab);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
        const std::vector<std::vector<int64_t>> bans = {
            {},
            std::vector<int64_t>(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(vocab, 3))),
            std::vector<int64_t>(order.begin(), order.end() - static_cast<std::ptrdiff_t>(std::min<size_t>(vocab, 2)))};
        for (std::vector<int64_t> banned : bans) {
          std::sort(banned.begin(), banned.end());
          const float shift = 2.75f;
          const std::string what = "vocabulary " + std::to_string(vocab) + ", count " + std::to_string(count) +
                                   ", pattern " + std::to_string(pattern) + ", " + std::to_string(banned.size()) +
                                   " banned";
          expectSame(ein::detail::bestLogProbs(logits, shift, banned, count), sortedBest(logits, shift, banned, count),
                     what);
        }
      }
}

// Logits a shift apart by less than f32 resolves: equal log-probabilities,
// which rank by token, though their logits differ.
TEST(BestLogProbs, TiesByRoundingRankTheLowerTokenFirst) {
  const float shift = 1.0e8f;
  std::vector<float> logits(20, 0.0f);
  logits[13] = 2.0f;  // 2 - 1e8 rounds to -1e8, as 0 - 1e8 does
  const auto best = ein::detail::bestLogProbs(logits, shift, {}, 4);
  expectSame(best, sortedBest(logits, shift, {}, 4), "rounded ties");
  EXPECT_EQ(best[0].token, 0);
}

// Logits holding a NaN anywhere (in a vector block or in the tail) are
// refused, by a search as by the generation's check; -inf and +inf pass.
TEST(CheckLogits, RefusesANaNAnywhere) {
  for (size_t size : {1u, 7u, 33u, 32000u})
    for (size_t at : {size_t{0}, size / 2, size - 1}) {
      std::vector<float> logits(size, 0.5f);
      EXPECT_TRUE(ein::detail::checkLogits(logits, 3).ok());
      logits[at] = std::numeric_limits<float>::infinity();
      logits[size - 1 - at] = -std::numeric_limits<float>::infinity();
      EXPECT_TRUE(ein::detail::checkLogits(logits, 3).ok());
      logits[at] = std::numeric_limits<float>::quiet_NaN();
      const ein::Status refused = ein::detail::checkLogits(logits, 3);
      ASSERT_FALSE(refused.ok()) << "a NaN at " << at << " of " << size;
      EXPECT_NE(refused.message().find("the logits for new token 3 hold NaN"), std::string::npos) << refused.message();
      ein::detail::BeamSearcher searcher({.beams = 2, .maxNewTokens = 4}, {1}, 4);
      EXPECT_FALSE(searcher.start(logits).ok());
    }
}

}  // namespace
