// Reductions of trailing axes: the reference kernel against a naive loop for
// every kind, to a scalar and with NaN; the fast kernel against the reference
// on every instruction set this CPU has; variance (var, std) the same way,
// with torch's edge cases.
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

// --- reduce -----------------------------------------------------------------

class ReduceTest : public ::testing::TestWithParam<fb::ReduceKind> {};

// Reduces the trailing two axes of a [5, 7, 3] view over a tensor stored as
// [3, 7, 5], into a strided output; values near 1 keep Prod finite.
TEST_P(ReduceTest, TrailingAxesMatchNaiveLoop) {
  const fb::ReduceKind kind = GetParam();
  const int64_t d0 = 5, d1 = 7, d2 = 3;
  std::vector<float> x = randomFloats(d0 * d1 * d2, 9, 0.5f, 1.5f);
  ArtifactBuilder builder;
  uint32_t xId = builder.input("x", fb::DType::F32, {d2, d1, d0});
  uint32_t yId = builder.output("y", fb::DType::F32, {2 * d0});
  builder.reduce({{d0, d1, d2}, 2, kind, {xId, 0, {1, d0, d1 * d0}}, {yId, 1, {2}}});
  auto session = loadAndRun(builder.build(), {{"x", bytesOf(x)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> got = valuesOf<float>(session.value()->output("y").value());
  std::vector<double> want(got.size(), 0.0);
  for (int64_t i = 0; i < d0; ++i) {
    double sum = 0, prod = 1, max = -INFINITY, min = INFINITY;
    for (int64_t j = 0; j < d1; ++j)
      for (int64_t l = 0; l < d2; ++l) {
        double v = x[(l * d1 + j) * d0 + i];
        sum += v;
        prod *= v;
        max = std::max(max, v);
        min = std::min(min, v);
      }
    double value = kind == fb::ReduceKind::Sum    ? sum
                   : kind == fb::ReduceKind::Mean ? sum / (d1 * d2)
                   : kind == fb::ReduceKind::Prod ? prod
                   : kind == fb::ReduceKind::Max  ? max
                                                  : min;
    want[1 + 2 * i] = value;
  }
  expectClose(got, want, 1e-5, "reduce");
}

INSTANTIATE_TEST_SUITE_P(Kinds, ReduceTest,
                         ::testing::Values(fb::ReduceKind::Sum, fb::ReduceKind::Mean, fb::ReduceKind::Max,
                                           fb::ReduceKind::Min, fb::ReduceKind::Prod),
                         [](const auto &info) { return std::string(fb::EnumNameReduceKind(info.param)); });

TEST(Reduce, WholeTensorToScalarAndNanPropagation) {
  ArtifactBuilder builder;
  uint32_t x = builder.input("x", fb::DType::F32, {2, 197});
  uint32_t total = builder.output("total", fb::DType::F32, {});
  uint32_t rowMax = builder.output("row_max", fb::DType::F32, {2});
  builder.reduce({{2, 197}, 2, fb::ReduceKind::Sum, dense(x, {2, 197}), {total, 0, {}}});
  builder.reduce({{2, 197}, 1, fb::ReduceKind::Max, dense(x, {2, 197}), dense(rowMax, {2})});
  std::vector<float> xs(2 * 197, 1.0f);
  xs[197 + 50] = NAN;
  auto session = loadAndRun(builder.build(), {{"x", bytesOf(xs)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  EXPECT_TRUE(std::isnan(valuesOf<float>(session.value()->output("total").value())[0]));
  std::vector<float> maxima = valuesOf<float>(session.value()->output("row_max").value());
  EXPECT_EQ(maxima[0], 1.0f);
  EXPECT_TRUE(std::isnan(maxima[1]));
}

class ReduceFastTest : public RowKernelTest {};

TEST_P(ReduceFastTest, ReduceEveryKind) {
  const RowCase &c = GetParam();
  for (auto kind : {fb::ReduceKind::Sum, fb::ReduceKind::Mean, fb::ReduceKind::Max, fb::ReduceKind::Min}) {
    ArtifactBuilder builder;
    ViewSpec xView = x(builder);
    uint32_t y = builder.output("y", fb::DType::F32, {c.rows});
    builder.reduce({{c.rows, c.width}, 1, kind, xView, dense(y, {c.rows})});
    expectFastMatchesReference(builder.build(), detail::cpu::reduceF32Fast, detail::cpu::reduceF32Reference, 2e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReduceFastTest, ::testing::ValuesIn(rowCases()),
                         [](const auto &info) { return info.param.name; });

// --- variance ---------------------------------------------------------------

// var and std of the trailing two axes of a [5, 7, 3] view over a tensor
// stored as [3, 7, 5], against a naive float64 loop, unbiased and not.
TEST(Variance, TrailingAxesMatchNaiveLoop) {
  const int64_t d0 = 5, d1 = 7, d2 = 3;
  std::vector<float> x = randomFloats(d0 * d1 * d2, 11, -3.0f, 5.0f);
  for (auto [correction, root] : {std::pair<int64_t, bool>{0, false}, {1, true}, {1, false}}) {
    ArtifactBuilder builder;
    uint32_t xId = builder.input("x", fb::DType::F32, {d2, d1, d0});
    uint32_t yId = builder.output("y", fb::DType::F32, {2 * d0});
    builder.variance({{d0, d1, d2}, 2, correction, root, {xId, 0, {1, d0, d1 * d0}}, {yId, 1, {2}}});
    auto session = loadAndRun(builder.build(), {{"x", bytesOf(x)}});
    ASSERT_TRUE(session.ok()) << session.status().toString();
    std::vector<float> got = valuesOf<float>(session.value()->output("y").value());
    std::vector<double> want(got.size(), 0.0);
    for (int64_t i = 0; i < d0; ++i) {
      double sum = 0, squares = 0;
      for (int64_t j = 0; j < d1 * d2; ++j) sum += x[j * d0 + i];
      const double mean = sum / (d1 * d2);
      for (int64_t j = 0; j < d1 * d2; ++j) squares += (x[j * d0 + i] - mean) * (x[j * d0 + i] - mean);
      const double variance = squares / (d1 * d2 - correction);
      want[1 + 2 * i] = root ? std::sqrt(variance) : variance;
    }
    expectClose(got, want, 1e-5, root ? "std" : "var");
  }
}

// torch's edge cases: one element with the unbiased estimate (0 / 0), a
// correction past the count (x / 0), nothing to reduce, NaN.
TEST(Variance, EdgeCasesAsTorch) {
  ArtifactBuilder builder;
  uint32_t x = builder.input("x", fb::DType::F32, {2, 3});
  uint32_t one = builder.output("one", fb::DType::F32, {2});
  uint32_t past = builder.output("past", fb::DType::F32, {2});
  uint32_t none = builder.output("none", fb::DType::F32, {2});
  builder.variance({{2, 1}, 1, 1, false, {x, 0, {3, 1}}, dense(one, {2})});
  builder.variance({{2, 3}, 1, 4, true, dense(x, {2, 3}), dense(past, {2})});
  builder.variance({{2, 0}, 1, 0, false, {x, 0, {3, 1}}, dense(none, {2})});
  std::vector<float> xs{1.0f, 2.0f, 4.0f, 5.0f, NAN, 7.0f};
  auto session = loadAndRun(builder.build(), {{"x", bytesOf(xs)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  for (float value : valuesOf<float>(session.value()->output("one").value())) EXPECT_TRUE(std::isnan(value));
  std::vector<float> pasts = valuesOf<float>(session.value()->output("past").value());
  EXPECT_TRUE(std::isinf(pasts[0]) && pasts[0] > 0);
  EXPECT_TRUE(std::isnan(pasts[1]));
  for (float value : valuesOf<float>(session.value()->output("none").value())) EXPECT_TRUE(std::isnan(value));
}

class VarianceFastTest : public RowKernelTest {};

TEST_P(VarianceFastTest, MatchesReference) {
  const RowCase &c = GetParam();
  for (auto [correction, root] : {std::pair<int64_t, bool>{0, false}, {1, true}}) {
    ArtifactBuilder builder;
    ViewSpec xView = x(builder);
    uint32_t y = builder.output("y", fb::DType::F32, {c.rows});
    builder.variance({{c.rows, c.width}, 1, correction, root, xView, dense(y, {c.rows})});
    expectFastMatchesReference(builder.build(),
                               static_cast<Status (*)(const detail::Variance &, const detail::cpu::KernelContext &)>(
                                   detail::cpu::runStep),
                               detail::cpu::varianceF32Reference, 2e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, VarianceFastTest, ::testing::ValuesIn(rowCases()),
                         [](const auto &info) { return info.param.name; });

}  // namespace
}  // namespace ein::testing
