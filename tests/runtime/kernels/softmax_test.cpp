// Softmax over the last axis: the reference kernel against a naive loop
// (strided rows, infinities, long rows); the fast kernel against the
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

// --- softmax ----------------------------------------------------------------

// Softmax over the last axis of a [3, 7, 197] view of a tensor stored as
// [197, 3, 7] (so the softmax axis has stride 21), with an all -inf row and a
// row of large values that overflow exp without the max subtraction.
TEST(Softmax, StridedRowsMatchNaiveLoopWithInfAndLargeRows) {
  const int64_t d0 = 3, d1 = 7, len = 197;
  std::vector<float> x = randomFloats(len * d0 * d1, 8, -5.0f, 5.0f);
  auto at = [&](int64_t i, int64_t j, int64_t l) -> float & { return x[(l * d0 + i) * d1 + j]; };
  for (int64_t l = 0; l < len; ++l) at(1, 2, l) = -INFINITY;
  for (int64_t l = 0; l < len; ++l) at(2, 5, l) = 1000.0f + static_cast<float>(l % 3);
  at(0, 0, 17) = -INFINITY;  // one masked entry gives 0 there
  ArtifactBuilder builder;
  uint32_t xId = builder.input("x", fb::DType::F32, {len, d0, d1});
  uint32_t yId = builder.output("y", fb::DType::F32, {d0, d1, len});
  builder.softmax({{d0, d1, len}, {xId, 0, {d1, 1, d0 * d1}}, dense(yId, {d0, d1, len})});
  auto session = loadAndRun(builder.build(), {{"x", bytesOf(x)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> got = valuesOf<float>(session.value()->output("y").value());
  std::vector<double> want(got.size());
  for (int64_t i = 0; i < d0; ++i)
    for (int64_t j = 0; j < d1; ++j) {
      double max = -INFINITY, sum = 0;
      for (int64_t l = 0; l < len; ++l) max = std::max<double>(max, at(i, j, l));
      for (int64_t l = 0; l < len; ++l) sum += std::exp(at(i, j, l) - max);
      for (int64_t l = 0; l < len; ++l) want[(i * d1 + j) * len + l] = std::exp(at(i, j, l) - max) / sum;
    }
  for (int64_t l = 0; l < len; ++l) ASSERT_TRUE(std::isnan(want[(1 * d1 + 2) * len + l]));  // the oracle agrees
  expectClose(got, want, 1e-6, "softmax");
  EXPECT_EQ(got[17], 0.0f);
}

class SoftmaxFastTest : public RowKernelTest {};

TEST_P(SoftmaxFastTest, Softmax) {
  const RowCase &c = GetParam();
  ArtifactBuilder builder;
  ViewSpec xView = x(builder);
  uint32_t y = builder.output("y", fb::DType::F32, {c.rows, c.width});
  builder.softmax({{c.rows, c.width}, xView, dense(y, {c.rows, c.width})});
  expectFastMatchesReference(builder.build(), detail::cpu::softmaxF32Fast, detail::cpu::softmaxF32Reference, 2e-6);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SoftmaxFastTest, ::testing::ValuesIn(rowCases()),
                         [](const auto &info) { return info.param.name; });

}  // namespace
}  // namespace ein::testing
