// Layer norm in each variant (variance, unbiased std, RMS) with residual and
// sum: the reference kernel against a naive loop; the fast kernel against the
// reference on every instruction set this CPU has.
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

class LayerNormFastTest : public RowKernelTest {};

// Each variant with a residual and a sum (rows staged in scratch, y written
// transposed), and plain (contiguous rows read where they are, y dense).
TEST_P(LayerNormFastTest, EveryVariantPlainAndWithResidualAndSum) {
  const RowCase &c = GetParam();
  for (auto variant : {fb::LayerNormVariant::Variance, fb::LayerNormVariant::UnbiasedStd, fb::LayerNormVariant::Rms})
    for (bool plain : {false, true}) {
      ArtifactBuilder builder;
      ViewSpec xView = x(builder);
      LayerNormSpec spec{{c.rows, c.width}, xView};
      if (plain) {
        spec.y = dense(builder.output("y", fb::DType::F32, {c.rows, c.width}), {c.rows, c.width});
      } else {
        uint32_t r = builder.input("r", fb::DType::F32, {c.rows, c.width});
        uint32_t y = builder.output("y", fb::DType::F32, {c.width, c.rows});  // written transposed
        spec.y = ViewSpec{y, 0, {1, c.rows}};
        spec.residual = dense(r, {c.rows, c.width});
        spec.sum = dense(builder.arena(fb::DType::F32, {c.rows, c.width}), {c.rows, c.width});
      }
      spec.gamma = ViewSpec{builder.weightsF32({2 * c.width}, randomFloats(2 * c.width, 61)), 1, {2}};  // strided
      if (variant != fb::LayerNormVariant::Rms)  // RMSNorm has no beta
        spec.beta = dense(builder.weightsF32({c.width}, randomFloats(c.width, 62)), {c.width});
      spec.variant = variant;
      builder.layerNorm(spec);
      expectFastMatchesReference(builder.build(), detail::cpu::layerNormF32Fast, detail::cpu::layerNormF32Reference,
                                 2e-5);
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormFastTest, ::testing::ValuesIn(rowCases()),
                         [](const auto &info) { return info.param.name; });

}  // namespace
}  // namespace ein::testing
