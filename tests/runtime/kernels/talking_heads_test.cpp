// Talking-heads attention: the reference kernel against a naive loop (each
// mix and bias, masks); the fast kernel against the reference on every
// instruction set this CPU has, with one and two threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "artifact_builder.hpp"
#include "kernel_test_support.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "kernels/reference/reference_kernels.hpp"
#include "ops/scalar_functions.hpp"
#include "step_harness.hpp"

namespace ein::testing {
namespace {

// --- talking-heads attention ----------------------------------------------------

struct TalkingHeadsCase {
  std::string name;
  bool pre, preBias, post, postBias;
  fb::MaskKind mask;
  int maskedRows;
  bool permuted;
};

void PrintTo(const TalkingHeadsCase &c, std::ostream *out) { *out << c.name; }

class TalkingHeadsTest : public ::testing::TestWithParam<TalkingHeadsCase> {};

TEST_P(TalkingHeadsTest, MatchesNaiveLoop) {
  const TalkingHeadsCase c = GetParam();
  const int64_t B = 2, H = 3, I = 7, J = 9, D = 5, E = 4;
  const std::vector<size_t> perm = c.permuted ? std::vector<size_t>{0, 2, 1, 3} : std::vector<size_t>{};
  Layout qL({B, H, I, D}, perm), kL({B, H, J, D}, perm), vL({B, H, J, E}, perm), oL({B, H, I, E}, perm);
  std::vector<float> q = randomFloats(product(qL.storageShape), 11), k = randomFloats(product(kL.storageShape), 12),
                     v = randomFloats(product(vL.storageShape), 13), pre = randomFloats(H * H, 14),
                     preBias = randomFloats(H, 15), post = randomFloats(H * H, 16), postBias = randomFloats(H, 17);
  std::vector<float> addMask = randomFloats(B * I * J, 18, -3.0f, 1.0f);  // [B, I, J], broadcast over heads
  std::vector<uint8_t> boolMask(B * I * J);
  std::mt19937 generator(19);
  for (auto &flag : boolMask) flag = generator() % 3 != 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < c.maskedRows; ++i)
      for (int64_t j = 0; j < J; ++j) {
        addMask[(b * I + i) * J + j] = -INFINITY;
        boolMask[(b * I + i) * J + j] = c.mask == fb::MaskKind::Keep ? 0 : 1;
      }

  ArtifactBuilder builder;
  uint32_t qId = builder.input("q", fb::DType::F32, qL.storageShape);
  uint32_t kId = builder.input("k", fb::DType::F32, kL.storageShape);
  uint32_t vId = builder.input("v", fb::DType::F32, vL.storageShape);
  uint32_t oId = builder.output("out", fb::DType::F32, oL.storageShape);
  TalkingHeadsSpec spec{{B}, H, I, J, D, E, 0.4f, qL.view(qId), kL.view(kId), vL.view(vId), oL.view(oId)};
  // The pre-mix is stored transposed, to exercise its strides.
  if (c.pre) spec.preMix = ViewSpec{builder.weightsF32({H, H}, pre), 0, {1, H}};
  if (c.preBias) spec.preBias = dense(builder.weightsF32({H}, preBias), {H});
  if (c.post) spec.postMix = dense(builder.weightsF32({H, H}, post), {H, H});
  if (c.postBias) spec.postBias = dense(builder.weightsF32({H}, postBias), {H});
  spec.maskKind = c.mask;
  if (c.mask == fb::MaskKind::Add) spec.mask = ViewSpec{builder.weightsF32({B, I, J}, addMask), 0, {I * J, 0, J, 1}};
  if (c.mask == fb::MaskKind::Keep || c.mask == fb::MaskKind::Drop)
    spec.mask = ViewSpec{builder.weights(fb::DType::Bool, {B, I, J}, boolMask), 0, {I * J, 0, J, 1}};
  builder.talkingHeads(spec);
  auto session = loadAndRun(builder.build(), {{"q", bytesOf(q)}, {"k", bytesOf(k)}, {"v", bytesOf(v)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> got = valuesOf<float>(session.value()->output("out").value());

  std::vector<double> want(got.size(), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < I; ++i) {
      std::vector<std::vector<double>> s(H, std::vector<double>(J));
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < J; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += double(q[qL.at({b, h, i, d})]) * k[kL.at({b, h, j, d})];
          s[h][j] = 0.4 * dot;
        }
      if (c.pre) {
        auto mixed = s;
        for (int64_t g = 0; g < H; ++g)
          for (int64_t j = 0; j < J; ++j) {
            double sum = c.preBias ? preBias[g] : 0.0;
            for (int64_t h = 0; h < H; ++h) sum += double(pre[h * H + g]) * s[h][j];  // transposed storage
            mixed[g][j] = sum;
          }
        s = mixed;
      }
      for (int64_t g = 0; g < H; ++g) {
        for (int64_t j = 0; j < J; ++j) {
          size_t m = (b * I + i) * J + j;
          s[g][j] = applyMask(c.mask, s[g][j], c.mask == fb::MaskKind::Add ? addMask[m] : boolMask[m], -INFINITY);
        }
        naiveSoftmax(s[g]);
      }
      if (c.post) {
        auto mixed = s;
        for (int64_t g = 0; g < H; ++g)
          for (int64_t j = 0; j < J; ++j) {
            double sum = c.postBias ? postBias[g] : 0.0;
            for (int64_t h = 0; h < H; ++h) sum += double(post[g * H + h]) * s[h][j];
            mixed[g][j] = sum;
          }
        s = mixed;
      }
      for (int64_t g = 0; g < H; ++g)
        for (int64_t e = 0; e < E; ++e) {
          double sum = 0;
          for (int64_t j = 0; j < J; ++j) sum += s[g][j] * v[vL.at({b, g, j, e})];
          want[oL.at({b, g, i, e})] = sum;
        }
    }
  expectClose(got, want, 1e-5, c.name);
}

INSTANTIATE_TEST_SUITE_P(
    Mixes, TalkingHeadsTest,
    ::testing::Values(TalkingHeadsCase{"no_mixing", false, false, false, false, fb::MaskKind::None, 0, false},
                      TalkingHeadsCase{"pre_only", true, false, false, false, fb::MaskKind::None, 0, true},
                      TalkingHeadsCase{"post_only_with_bias", false, false, true, true, fb::MaskKind::Add, 0, false},
                      TalkingHeadsCase{"both_with_biases_keep", true, true, true, true, fb::MaskKind::Keep, 0, true},
                      TalkingHeadsCase{"pre_bias_drop_masked_rows", true, true, false, false, fb::MaskKind::Drop, 2,
                                       false},
                      TalkingHeadsCase{"both_keep_masked_rows", true, false, true, false, fb::MaskKind::Keep, 1, true}),
    [](const auto &info) { return info.param.name; });

// --- talking heads ----------------------------------------------------------------

struct TalkingCase {
  std::string name;
  int64_t queries, keys;
  bool pre, post;
  fb::MaskKind mask;
};

void PrintTo(const TalkingCase &c, std::ostream *out) { *out << c.name; }

class TalkingHeadsFastTest : public ::testing::TestWithParam<TalkingCase> {};

TEST_P(TalkingHeadsFastTest, MatchesReferenceOnEveryIsaAndThreadCount) {
  const TalkingCase c = GetParam();
  const int64_t B = 2, H = 3, I = c.queries, J = c.keys, D = 8, E = 5;
  ArtifactBuilder builder;
  uint32_t q = builder.input("q", fb::DType::F32, {B, H, I, D});
  // k stored [b, j, h, d]: head and key axes swapped.
  uint32_t k = builder.input("k", fb::DType::F32, {B, J, H, D});
  uint32_t v = builder.input("v", fb::DType::F32, {B, H, J, E});
  uint32_t out = builder.output("out", fb::DType::F32, {B, H, I, E});
  TalkingHeadsSpec spec{{B}, H, I, J, D, E, 0.3f, dense(q, {B, H, I, D}), ViewSpec{k, 0, {J * H * D, D, H * D, 1}},
                        dense(v, {B, H, J, E}), dense(out, {B, H, I, E})};
  if (c.pre) {
    spec.preMix = ViewSpec{builder.weightsF32({H, H}, randomFloats(H * H, 51)), 0, {1, H}};
    spec.preBias = dense(builder.weightsF32({H}, randomFloats(H, 52)), {H});
  }
  if (c.post) spec.postMix = dense(builder.weightsF32({H, H}, randomFloats(H * H, 53)), {H, H});
  spec.maskKind = c.mask;
  if (c.mask == fb::MaskKind::Add) {
    std::vector<float> add = randomFloats(I * J, 54, -3.0f, 1.0f);
    for (int64_t j = 0; j < J; ++j) add[j] = -INFINITY;  // query 0 loses every key
    spec.mask = ViewSpec{builder.weightsF32({I, J}, add), 0, {0, 0, J, 1}};
  }
  if (c.mask == fb::MaskKind::Keep) {
    std::vector<uint8_t> flags(H * I * J);
    std::mt19937 generator(55);
    for (auto &flag : flags) flag = generator() % 3 != 0;
    spec.mask = ViewSpec{builder.weights(fb::DType::Bool, {H, I, J}, flags), 0, {0, I * J, J, 1}};
  }
  builder.talkingHeads(spec);
  expectFastMatchesReference(builder.build(), detail::cpu::talkingHeadsAttentionF32Fast,
                             detail::cpu::talkingHeadsAttentionF32Reference, 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Mixes, TalkingHeadsFastTest,
                         ::testing::Values(TalkingCase{"plain_7", 7, 9, false, false, fb::MaskKind::None},
                                           TalkingCase{"pre_post_keep_tiles", 37, 70, true, true, fb::MaskKind::Keep},
                                           TalkingCase{"post_add_masked_row", 20, 197, false, true, fb::MaskKind::Add},
                                           TalkingCase{"single_query_pre", 1, 33, true, false, fb::MaskKind::None},
                                           TalkingCase{"no_keys", 3, 0, true, true, fb::MaskKind::None}),
                         [](const auto &info) { return info.param.name; });

}  // namespace
}  // namespace ein::testing
