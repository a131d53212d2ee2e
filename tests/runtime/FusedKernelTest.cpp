// The fused kernels (attention, talking-heads attention, layernorm, the gemm
// residual) against naive loops written here from the schema's comments, on
// random data: odd sizes, permuted storage, broadcast masks, fully masked
// rows, cross-attention and single queries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "artifact_builder.hpp"

namespace ein::testing {
namespace {

size_t product(const std::vector<int64_t> &shape) {
  return std::accumulate(shape.begin(), shape.end(), size_t{1}, [](size_t a, int64_t b) { return a * b; });
}

// A tensor stored with its logical axes in the order `perm` (storage axis s
// holds logical axis perm[s]); `view` reads it in logical order.
struct Layout {
  std::vector<int64_t> storageShape;
  std::vector<int64_t> strides;  // per logical axis

  Layout(const std::vector<int64_t> &shape, std::vector<size_t> perm) {
    if (perm.empty()) {
      perm.resize(shape.size());
      std::iota(perm.begin(), perm.end(), 0);
    }
    for (size_t axis : perm) storageShape.push_back(shape[axis]);
    std::vector<int64_t> dense = denseStrides(storageShape);
    strides.assign(shape.size(), 0);
    for (size_t s = 0; s < perm.size(); ++s) strides[perm[s]] = dense[s];
  }
  ViewSpec view(uint32_t tensor) const { return {tensor, 0, strides}; }
  // The flat storage position of a logical index.
  size_t at(const std::vector<int64_t> &index) const {
    int64_t flat = 0;
    for (size_t axis = 0; axis < index.size(); ++axis) flat += index[axis] * strides[axis];
    return static_cast<size_t>(flat);
  }
};

// softmax in place; an all -inf row gives NaN like PyTorch.
void naiveSoftmax(std::vector<double> &row) {
  double max = -INFINITY;
  for (double value : row) max = std::max(max, value);
  if (std::any_of(row.begin(), row.end(), [](double v) { return std::isnan(v); })) max = NAN;
  double sum = 0;
  for (double &value : row) sum += value = std::exp(value - max);
  for (double &value : row) value /= sum;
}

double applyMask(fb::MaskKind kind, double score, double mask, float fill) {
  switch (kind) {
    case fb::MaskKind::None: return score;
    case fb::MaskKind::Add: return score + mask;
    case fb::MaskKind::Keep: return mask != 0 ? score : fill;
    case fb::MaskKind::Drop: return mask != 0 ? fill : score;
  }
  return score;
}

// --- attention ----------------------------------------------------------------

struct AttentionCase {
  std::string name;
  int64_t batch, heads, queries, keys, headDim, valueDim;
  fb::MaskKind mask;
  bool maskPerBatch;   // else broadcast over batch and heads (zero strides)
  bool permuted;       // operands stored [i, h, b, d] instead of [b, h, i, d]
  int maskedRows;      // query rows whose mask removes every key
  float fill = -INFINITY;
};

void PrintTo(const AttentionCase &c, std::ostream *out) { *out << c.name; }

class AttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionTest, MatchesNaiveLoop) {
  const AttentionCase c = GetParam();
  const int64_t B = c.batch, H = c.heads, I = c.queries, J = c.keys, D = c.headDim, E = c.valueDim;
  const std::vector<size_t> perm = c.permuted ? std::vector<size_t>{2, 1, 0, 3} : std::vector<size_t>{};
  Layout qL({B, H, I, D}, perm), kL({B, H, J, D}, perm), vL({B, H, J, E}, perm), oL({B, H, I, E}, perm);
  std::vector<float> q = randomFloats(product(qL.storageShape), 1), k = randomFloats(product(kL.storageShape), 2),
                     v = randomFloats(product(vL.storageShape), 3);
  // Mask: [B, I, J] per batch (broadcast over heads) or [I, J] broadcast over both.
  const int64_t maskBatches = c.maskPerBatch ? B : 1;
  std::vector<float> addMask = randomFloats(maskBatches * I * J, 4, -3.0f, 1.0f);
  std::vector<uint8_t> boolMask(maskBatches * I * J);
  std::mt19937 generator(5);
  for (auto &flag : boolMask) flag = generator() % 4 != 0;
  // Rows 0..maskedRows-1 of every mask batch lose every key.
  for (int64_t mb = 0; mb < maskBatches; ++mb)
    for (int64_t i = 0; i < std::min<int64_t>(c.maskedRows, I); ++i)
      for (int64_t j = 0; j < J; ++j) {
        addMask[(mb * I + i) * J + j] = -INFINITY;
        boolMask[(mb * I + i) * J + j] = c.mask == fb::MaskKind::Keep ? 0 : 1;
      }
  const float scale = 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(D, 1)));

  ArtifactBuilder builder;
  uint32_t qId = builder.input("q", fb::DType::F32, qL.storageShape);
  uint32_t kId = builder.input("k", fb::DType::F32, kL.storageShape);
  uint32_t vId = builder.input("v", fb::DType::F32, vL.storageShape);
  uint32_t oId = builder.output("out", fb::DType::F32, oL.storageShape);
  std::optional<ViewSpec> maskView;
  if (c.mask != fb::MaskKind::None) {
    uint32_t maskId = c.mask == fb::MaskKind::Add ? builder.weightsF32({maskBatches, I, J}, addMask)
                                                  : builder.weights(fb::DType::Bool, {maskBatches, I, J}, boolMask);
    maskView = ViewSpec{maskId, 0, {c.maskPerBatch ? I * J : 0, 0, J, 1}};
  }
  builder.attention({{B, H}, I, J, D, E, scale, qL.view(qId), kL.view(kId), vL.view(vId), oL.view(oId), c.mask,
                     maskView, c.fill});
  auto session = loadAndRun(builder.build(), {{"q", bytesOf(q)}, {"k", bytesOf(k)}, {"v", bytesOf(v)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> got = valuesOf<float>(session.value()->output("out").value());

  std::vector<double> want(got.size(), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < I; ++i) {
        std::vector<double> row(J);
        for (int64_t j = 0; j < J; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += double(q[qL.at({b, h, i, d})]) * k[kL.at({b, h, j, d})];
          size_t m = ((c.maskPerBatch ? b : 0) * I + i) * J + j;
          row[j] = applyMask(c.mask, double(scale) * dot, c.mask == fb::MaskKind::Add ? addMask[m] : boolMask[m],
                             c.fill);
        }
        naiveSoftmax(row);
        for (int64_t e = 0; e < E; ++e) {
          double sum = 0;
          for (int64_t j = 0; j < J; ++j) sum += row[j] * v[vL.at({b, h, j, e})];
          want[oL.at({b, h, i, e})] = sum;
        }
      }
  if (c.maskedRows > 0 && c.fill == -INFINITY && J > 0) {
    ASSERT_TRUE(std::isnan(want[oL.at({0, 0, 0, 0})])) << "a fully masked row gives NaN";
  }
  expectClose(got, want, 1e-5, c.name);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Values(AttentionCase{"tiny_no_mask", 1, 1, 1, 1, 1, 1, fb::MaskKind::None, false, false, 0},
                      AttentionCase{"odd_no_mask_permuted", 2, 3, 7, 7, 5, 3, fb::MaskKind::None, false, true, 0},
                      AttentionCase{"vit_197_add_broadcast", 1, 2, 197, 197, 64, 64, fb::MaskKind::Add, false, false, 0},
                      AttentionCase{"cross_keep_fully_masked", 2, 2, 13, 9, 8, 6, fb::MaskKind::Keep, true, true, 2},
                      AttentionCase{"single_query_keep", 2, 4, 1, 197, 16, 16, fb::MaskKind::Keep, true, false, 0},
                      AttentionCase{"single_key_drop", 1, 3, 7, 1, 7, 7, fb::MaskKind::Drop, true, false, 0},
                      AttentionCase{"drop_fully_masked", 2, 1, 7, 11, 4, 5, fb::MaskKind::Drop, true, false, 3},
                      AttentionCase{"drop_finite_fill", 2, 1, 7, 11, 4, 5, fb::MaskKind::Drop, true, true, 3, -1e9f},
                      AttentionCase{"add_fully_masked", 1, 2, 9, 17, 3, 2, fb::MaskKind::Add, true, true, 1},
                      AttentionCase{"no_keys", 1, 2, 3, 0, 4, 5, fb::MaskKind::None, false, false, 0}),
    [](const auto &info) { return info.param.name; });

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

// --- layernorm ----------------------------------------------------------------

struct LayerNormCase {
  std::string name;
  std::vector<int64_t> shape;
  fb::LayerNormVariant variant;
  bool residual, sum, gamma, beta, transposed;  // transposed: x stored with its last two axes swapped
};

void PrintTo(const LayerNormCase &c, std::ostream *out) { *out << c.name; }

class LayerNormTest : public ::testing::TestWithParam<LayerNormCase> {};

TEST_P(LayerNormTest, MatchesNaiveLoop) {
  const LayerNormCase c = GetParam();
  const int64_t n = c.shape.back();
  const size_t rank = c.shape.size();
  std::vector<size_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  if (c.transposed && rank >= 2) std::swap(perm[rank - 1], perm[rank - 2]);
  Layout xL(c.shape, perm), dL(c.shape, {});
  std::vector<float> x = randomFloats(product(c.shape), 21, -3.0f, 5.0f), residual = randomFloats(product(c.shape), 22),
                     gamma = randomFloats(n, 23), beta = randomFloats(n, 24);
  ArtifactBuilder builder;
  uint32_t xId = builder.input("x", fb::DType::F32, xL.storageShape);
  uint32_t rId = builder.input("r", fb::DType::F32, c.shape);
  uint32_t yId = builder.output("y", fb::DType::F32, c.shape);
  uint32_t sId = builder.output("sum", fb::DType::F32, c.shape);
  LayerNormSpec spec{c.shape, xL.view(xId)};
  spec.y = dL.view(yId);
  spec.variant = c.variant;
  spec.epsilon = 1e-3f;
  if (c.residual) spec.residual = dL.view(rId);
  if (c.sum) spec.sum = dL.view(sId);
  if (c.gamma) spec.gamma = dense(builder.weightsF32({n}, gamma), {n});
  if (c.beta) spec.beta = ViewSpec{builder.weightsF32({n}, beta), 0, {1}};
  builder.layerNorm(spec);
  auto session = loadAndRun(builder.build(), {{"x", bytesOf(x)}, {"r", bytesOf(residual)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> got = valuesOf<float>(session.value()->output("y").value());
  std::vector<float> gotSum = valuesOf<float>(session.value()->output("sum").value());

  std::vector<double> want(got.size()), wantSum(got.size(), 0.0);
  const size_t rows = product(c.shape) / n;
  for (size_t r = 0; r < rows; ++r) {
    // The logical index of row r, element 0.
    std::vector<int64_t> index(rank, 0);
    for (size_t rest = r, axis = rank - 1; axis-- > 0;) index[axis] = rest % c.shape[axis], rest /= c.shape[axis];
    std::vector<double> row(n);
    for (int64_t col = 0; col < n; ++col) {
      index[rank - 1] = col;
      float value = x[xL.at(index)];
      if (c.residual) value += residual[r * n + col];
      row[col] = value;
      if (c.sum) wantSum[r * n + col] = value;
    }
    // RMSNorm does not centre: x / sqrt(mean(x^2) + eps).
    bool rms = c.variant == fb::LayerNormVariant::Rms;
    double mean = rms ? 0.0 : std::accumulate(row.begin(), row.end(), 0.0) / n, squares = 0;
    for (double value : row) squares += (value - mean) * (value - mean);
    for (int64_t col = 0; col < n; ++col) {
      double norm = c.variant == fb::LayerNormVariant::UnbiasedStd
                        ? (row[col] - mean) / (std::sqrt(squares / (n - 1)) + 1e-3f)
                        : (row[col] - mean) / std::sqrt(squares / n + 1e-3f);
      want[r * n + col] = norm * (c.gamma ? gamma[col] : 1.0) + (c.beta ? beta[col] : 0.0);
    }
  }
  expectClose(got, want, 1e-5, c.name);
  expectClose(gotSum, wantSum, 0, c.name + " sum");
}

INSTANTIATE_TEST_SUITE_P(
    Variants, LayerNormTest,
    ::testing::Values(
        LayerNormCase{"variance_384", {3, 384}, fb::LayerNormVariant::Variance, false, false, true, true, false},
        LayerNormCase{"variance_residual_sum_197", {2, 3, 197}, fb::LayerNormVariant::Variance, true, true, true, true,
                      true},
        LayerNormCase{"unbiased_residual_7", {5, 7}, fb::LayerNormVariant::UnbiasedStd, true, false, true, false, true},
        LayerNormCase{"unbiased_plain_197", {197}, fb::LayerNormVariant::UnbiasedStd, false, false, false, false, false},
        LayerNormCase{"variance_no_affine_1", {4, 1}, fb::LayerNormVariant::Variance, true, true, false, true, false},
        LayerNormCase{"unbiased_width_1_is_nan", {3, 1}, fb::LayerNormVariant::UnbiasedStd, false, false, false, false,
                      false},
        LayerNormCase{"rms_residual_sum_4096", {2, 4096}, fb::LayerNormVariant::Rms, true, true, true, false, false},
        LayerNormCase{"rms_transposed_197", {3, 5, 197}, fb::LayerNormVariant::Rms, false, false, true, false, true},
        LayerNormCase{"rms_plain_7", {6, 7}, fb::LayerNormVariant::Rms, true, false, false, false, false},
        LayerNormCase{"rms_width_1", {4, 1}, fb::LayerNormVariant::Rms, false, false, true, false, false}),
    [](const auto &info) { return info.param.name; });

// --- gemm residual -----------------------------------------------------------------

// c = gelu(a . b + bias) + residual, with the residual broadcast over the
// batch (stride 0) and stored transposed; the activation applies before the
// residual is added.
TEST(GemmResidual, AddedAfterTheActivation) {
  const int64_t batch = 3, m = 7, n = 197, k = 13;
  std::vector<float> a = randomFloats(batch * m * k, 31), b = randomFloats(k * n, 32), bias = randomFloats(n, 33),
                     residual = randomFloats(n * m, 34);
  ArtifactBuilder builder;
  uint32_t aId = builder.input("a", fb::DType::F32, {batch, m, k});
  uint32_t bId = builder.weightsF32({k, n}, b);
  uint32_t biasId = builder.weightsF32({n}, bias);
  uint32_t rId = builder.input("r", fb::DType::F32, {n, m});
  uint32_t cId = builder.output("c", fb::DType::F32, {batch, m, n});
  builder.gemm({{batch}, m, n, k, dense(aId, {batch, m, k}), {bId, 0, {0, n, 1}}, dense(cId, {batch, m, n}),
                ViewSpec{biasId, 0, {0, 0, 1}}, 1.0f, fb::Activation::Gelu, ViewSpec{rId, 0, {0, 1, m}}});
  auto session = loadAndRun(builder.build(), {{"a", bytesOf(a)}, {"r", bytesOf(residual)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> got = valuesOf<float>(session.value()->output("c").value());
  std::vector<double> want(got.size());
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = bias[j];
        for (int64_t l = 0; l < k; ++l) sum += double(a[(p * m + i) * k + l]) * b[l * n + j];
        want[(p * m + i) * n + j] = 0.5 * sum * (1 + std::erf(sum / std::sqrt(2.0))) + residual[j * m + i];
      }
  expectClose(got, want, 1e-5, "gemm residual");
}

// The combined model runs, and its layernorm's sum output feeds the gemm.
TEST(FusedProgram, RunsEndToEnd) {
  std::vector<float> x = randomFloats(2 * 5 * 8, 41);
  std::vector<uint8_t> keep(2 * 5 * 5, 1);
  keep[3] = 0;
  auto session = loadAndRun(fusedKernelArtifact(), {{"x", bytesOf(x)}, {"keep", keep}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  for (const char *name : {"y", "th", "h"})
    for (float value : valuesOf<float>(session.value()->output(name).value()))
      ASSERT_TRUE(std::isfinite(value)) << name;
}

}  // namespace
}  // namespace ein::testing
