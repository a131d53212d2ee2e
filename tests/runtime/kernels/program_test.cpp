// Whole programs of every kernel, run through a session: the values against
// a hand computation, and the fused kernels feeding one another.
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
#include "ops/scalar_functions.hpp"
#include "step_harness.hpp"

namespace ein::testing {
namespace {

// --- a whole program ----------------------------------------------------------

TEST(Program, EveryKernelModelMatchesHandComputation) {
  std::vector<int32_t> ids = {0, 4, 2, 1, 3, 4};
  std::vector<uint8_t> mask(24, 1);
  mask[5] = 0;
  auto session = loadAndRun(everyKernelArtifact(), {{"ids", bytesOf(ids)}, {"mask", mask}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> probs = valuesOf<float>(session.value()->output("probs").value());
  std::vector<float> total = valuesOf<float>(session.value()->output("total").value());
  std::vector<float> probsT = valuesOf<float>(session.value()->output("probsT").value());
  // Each softmax row sums to 1, so each total is the 3 rows of its batch.
  EXPECT_NEAR(total[0], 3.0f, 1e-5);
  EXPECT_NEAR(total[1], 3.0f, 1e-5);
  EXPECT_EQ(probs[5], 0.0f);  // masked to -inf
  // The first row by hand: embedding row 0, then gelu(row @ w^T + bias).
  std::vector<double> row(4);
  for (int j = 0; j < 4; ++j) {
    double sum = 0.01 * j;
    for (int p = 0; p < 4; ++p) sum += (0.1 * p - 0.7) * (0.05 * ((j * 4 + p) % 7) - 0.1);
    row[j] = activate(fb::Activation::Gelu, sum);
  }
  double max = *std::max_element(row.begin(), row.end()), norm = 0;
  for (double v : row) norm += std::exp(v - max);
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(probs[j], std::exp(row[j] - max) / norm, 1e-6) << j;
  for (int w = 0; w < 4; ++w)
    for (int b = 0; b < 2; ++b)
      for (int s = 0; s < 3; ++s) EXPECT_EQ(probsT[(w * 2 + b) * 3 + s], probs[(b * 3 + s) * 4 + w]);
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
