// The vector math every fast kernel is built from, per instruction set this
// CPU has: exp, the activations and each element-wise opcode against the
// scalar definitions (schemas/ops/scalar_functions.hpp), weighted row sums.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "artifact_builder.hpp"
#include "ein/half_float.hpp"
#include "kernel_test_support.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "ops/scalar_functions.hpp"
#include "step_harness.hpp"

namespace ein::testing {
namespace {

// --- vector math -------------------------------------------------------------

class VectorMathTest : public ::testing::TestWithParam<const IsaKernels *> {};

TEST_P(VectorMathTest, ExpIsAccurateAndKeepsIeeeSpecials) {
  std::vector<float> x;
  for (float v = -100.0f; v <= 100.0f; v += 0.0137f) x.push_back(v);
  for (float v : {-INFINITY, INFINITY, NAN, 0.0f, -0.0f, 88.7f, 88.8f, -87.3f, -87.4f, 1e-8f}) x.push_back(v);
  std::vector<float> y = x;
  GetParam()->expInPlace(y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    double want = std::exp(double(x[i]));
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i]));
    } else if (want > 3.4028234e38) {
      EXPECT_EQ(y[i], INFINITY) << x[i];
    } else if (x[i] < -87.33f) {
      EXPECT_EQ(y[i], 0.0f) << x[i];  // below exp(-87.33) = 1.183e-38: flushed, never subnormal
    } else if (want < 1.1754944e-38) {
      ADD_FAILURE() << "exp(" << x[i] << ") is subnormal above -87.33";
    } else {
      EXPECT_NEAR(y[i], want, 3e-7 * want) << x[i];
    }
  }
  EXPECT_EQ(y[x.size() - 10], 0.0f);  // exp(-inf) is exactly 0
}

TEST_P(VectorMathTest, ActivationsMatchTheScalarDefinitions) {
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.00731f) x.push_back(v);
  x.push_back(NAN);
  using detail::Activation;
  for (Activation activation : {Activation::Relu, Activation::Gelu, Activation::GeluTanh, Activation::Silu}) {
    std::vector<float> y = x;
    GetParam()->activateInPlace(y.data(), static_cast<int64_t>(y.size()), activation);
    for (size_t i = 0; i + 1 < x.size(); ++i) {
      const double v = x[i], want = ops::activate(activation, v);
      ASSERT_NEAR(y[i], want, 5e-7 * std::max(1.0, std::fabs(want))) << "activation " << int(activation) << " at " << v;
    }
    // NaN stays NaN, as in PyTorch (relu too).
    EXPECT_TRUE(std::isnan(y.back())) << "activation " << int(activation);
    EXPECT_TRUE(std::isnan(ops::activate(activation, double(NAN)))) << "activation " << int(activation);
  }
}

// GELU to f32 rounding everywhere (AVX-512 evaluates it from a table of
// pieces, the others through a rational erf): across every piece boundary
// of the table (k / 2.75 +- 1/5.5), relatively exact near 0 and in the small
// negative tail where the exact formula cancels, and its limits.
TEST_P(VectorMathTest, GeluIsExactToF32RoundingAndKeepsItsLimits) {
  std::vector<float> x;
  for (int k = -20; k <= 20; ++k)
    for (float e : {-1e-6f, 0.0f, 1e-6f}) {
      x.push_back((static_cast<float>(k) + 0.5f) / 2.75f + e);
      x.push_back(static_cast<float>(k) / 2.75f + e);
    }
  for (float v = 1e-30f; v < 1.0f; v *= 3.7f) {
    x.push_back(v);
    x.push_back(-v);
  }
  for (float v = -5.5f; v < -0.5f; v += 0.0173f) x.push_back(v);
  const size_t checked = x.size();
  for (float v : {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1e30f, -1e30f, 3e38f, -3e38f}) x.push_back(v);
  std::vector<float> y = x;
  GetParam()->activateInPlace(y.data(), static_cast<int64_t>(y.size()), detail::Activation::Gelu);
  for (size_t i = 0; i < checked; ++i) {
    const double v = x[i], want = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    // Relative near 0, else the f32 rounding of the result's scale (at least 1).
    const double tolerance = std::fabs(v) < 0.5 ? 1e-6 * std::fabs(want) : 6e-7 * std::max(1.0, std::fabs(want));
    EXPECT_NEAR(y[i], want, tolerance) << "gelu(" << v << ")";
  }
  const float *special = y.data() + checked;
  EXPECT_EQ(special[0], INFINITY);
  EXPECT_TRUE(std::isnan(special[1])) << "-inf * 0, as the formula gives";
  EXPECT_TRUE(std::isnan(special[2]));
  EXPECT_EQ(special[3], 0.0f);
  EXPECT_EQ(special[4], 0.0f);
  EXPECT_EQ(special[5], 1e30f);
  EXPECT_EQ(special[6], 0.0f);
  EXPECT_EQ(special[7], 3e38f);
  EXPECT_EQ(special[8], 0.0f);
}

// Every opcode of the vector interpreter (its vector form, or the per-lane
// path for those without one) against its scalar definition in double, on
// values that cross zero, ties between operands, and NaN.
TEST_P(VectorMathTest, ElementwiseOpcodesMatchTheScalarDefinitions) {
  constexpr int64_t kBlock = static_cast<int64_t>(detail::cpu::kElementwiseBlock), count = kBlock - 3;
  std::vector<float> registers(4 * kBlock, 0.0f);
  float *a = registers.data(), *b = a + kBlock, *c = b + kBlock, *out = c + kBlock;
  for (int64_t e = 0; e < count; ++e) {
    a[e] = -12.0f + 24.0f * static_cast<float>(e) / static_cast<float>(count);
    b[e] = e % 5 == 0 ? a[e] : 0.25f + 1.75f * static_cast<float>(e % 11) / 10.0f;
    c[e] = static_cast<float>(e % 7) - 3.0f;
  }
  a[count - 1] = NAN;
  const float imm = 0.75f;
  for (int value = 0; value < ops::kValueCount<ops::Opcode>; ++value) {
    const auto opcode = static_cast<ops::Opcode>(value);
    const detail::Instruction instruction{opcode, 0, 1, 2, imm};
    const float *inputs[] = {a, b, c};
    GetParam()->elementwiseBlock(&instruction, 1, inputs, 3, registers.data(), out, count);
    for (int64_t e = 0; e < count; ++e) {
      const double want = ops::evaluate<double>(opcode, a[e], b[e], c[e], imm);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(out[e])) << ops::info(opcode).name << " at " << a[e] << ", " << b[e];
        continue;
      }
      ASSERT_NEAR(out[e], want, 2e-6 * std::max(1.0, std::fabs(want)))
          << ops::info(opcode).name << " at " << a[e] << ", " << b[e] << ", " << c[e];
    }
  }
}

TEST_P(VectorMathTest, WeightedSumOfRowsWithATail) {
  // y[i] = bias + sum_h w[h * 2] * x[h * 40 + i] for 3 rows and 37 columns
  // (whole vectors and a scalar tail).
  const std::vector<float> x = randomFloats(3 * 40, 11), w = randomFloats(6, 12);
  std::vector<float> y(37);
  GetParam()->weightedSum(y.data(), x.data(), 40, 3, w.data(), 2, 0.25f, 37);
  for (int64_t i = 0; i < 37; ++i) {
    double want = 0.25;
    for (int64_t h = 0; h < 3; ++h) want += double(w[h * 2]) * x[h * 40 + i];
    EXPECT_NEAR(y[i], want, 1e-6) << i;
  }
}

// The bf16 tables' softmax step (attention's probabilities as bf16 pairs):
// within 2^-9 (bf16's rounding) of exp(x - shift) and the returned sum within
// 4e-6 of the exact one; 1 exactly at the shift, 0 (never subnormal) below
// -87.33 and for -inf, NaN for NaN; an odd n's last partner zero and nothing
// past ceil(n / 2) pairs written.
TEST_P(VectorMathTest, Bf16ExpShiftSumPairsRoundsExpToPairs) {
  const IsaKernels &isa = *GetParam();
  if (!isa.bf16ExpShiftSumPairs) GTEST_SKIP() << isa.name << " has no bf16 gemm";
  const float shift = 3.5f;
  for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 197, 224}) {
    std::vector<float> x = randomFloats(n, 31 + n, -20.0f, shift);
    if (n > 3) x[3] = shift;
    if (n > 5) x[5] = -INFINITY;
    if (n > 7) x[7] = shift - 87.4f;  // below the underflow bound: 0
    if (n > 9) x[9] = shift - 87.2f;  // above it: tiny but normal
    const std::vector<float> before = x;
    const int64_t pairs = (n + 1) / 2;
    std::vector<uint32_t> dst(static_cast<size_t>(pairs + 2), 0xdeadbeefu);
    const float sum = isa.bf16ExpShiftSumPairs(x.data(), n, shift, dst.data());
    EXPECT_EQ(x, before) << "the scores are only read";
    EXPECT_EQ(dst[pairs], 0xdeadbeefu) << "nothing past ceil(n / 2) pairs is written";
    double wantSum = 0.0;
    for (int64_t j = 0; j < 2 * pairs; ++j) {
      const uint16_t bits = static_cast<uint16_t>(dst[j / 2] >> (j % 2 * 16));
      const float got = bfloatToFloat(bits);
      if (j >= n) {
        EXPECT_EQ(bits, 0u) << "n " << n << ": the odd last partner is zero";
        continue;
      }
      const double want = x[j] - shift < -87.33 ? 0.0 : std::exp(double(x[j]) - shift);
      wantSum += want;
      if (x[j] == shift) {
        EXPECT_EQ(got, 1.0f) << "n " << n;
      }
      if (want == 0.0) {
        EXPECT_EQ(bits, 0u) << "n " << n << " x " << x[j];
      } else {
        EXPECT_NEAR(got, want, want * 0x1p-8) << "n " << n << " x " << x[j];
      }
      EXPECT_TRUE(got == 0.0f || std::fabs(got) >= 1.1754944e-38f) << "subnormal at x " << x[j];
    }
    EXPECT_NEAR(sum, wantSum, 4e-6 * wantSum) << "n " << n;
  }
  float nan[2] = {NAN, 0.0f};
  uint32_t pair = 0;
  isa.bf16ExpShiftSumPairs(nan, 2, 0.0f, &pair);
  EXPECT_TRUE(std::isnan(bfloatToFloat(static_cast<uint16_t>(pair))));
  EXPECT_EQ(bfloatToFloat(static_cast<uint16_t>(pair >> 16)), 1.0f);
}

// dst[j] = (bf16(a[j]), bf16(b[j])), b null: zero partners, for lengths
// around the vector of 16 pairs; nothing past n written.
TEST_P(VectorMathTest, Bf16InterleaveRowsPairsTwoRows) {
  const IsaKernels &isa = *GetParam();
  if (!isa.bf16InterleaveRows) GTEST_SKIP() << isa.name << " has no bf16 gemm";
  for (int64_t n : {1, 7, 16, 17, 33, 64}) {
    const std::vector<float> a = randomFloats(n, 51), b = randomFloats(n, 52);
    for (bool withB : {true, false}) {
      std::vector<uint32_t> dst(static_cast<size_t>(n + 1), 0xdeadbeefu);
      isa.bf16InterleaveRows(a.data(), withB ? b.data() : nullptr, n, dst.data());
      for (int64_t j = 0; j < n; ++j)
        EXPECT_EQ(dst[j], floatToBfloat(a[j]) | (withB ? uint32_t(floatToBfloat(b[j])) << 16 : 0u)) << n << " " << j;
      EXPECT_EQ(dst[n], 0xdeadbeefu);
    }
  }
}

// Rows of pairs into columns, for whole and partial 16 x 16 blocks: every
// element moved, and nothing written past the rows and columns asked for.
TEST_P(VectorMathTest, Bf16TransposePairsTurnsRowsIntoColumns) {
  const IsaKernels &isa = *GetParam();
  if (!isa.bf16TransposePairs) GTEST_SKIP() << isa.name << " has no bf16 gemm";
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {16, 16}, {64, 32}, {64, 33}, {5, 40}, {37, 3}}) {
    const int64_t lds = cols + 3, ldd = rows + 5;
    std::vector<uint32_t> src(static_cast<size_t>(rows * lds));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint32_t>(i * 2654435761u);
    std::vector<uint32_t> dst(static_cast<size_t>(cols * ldd + 1), 0xdeadbeefu);
    isa.bf16TransposePairs(src.data(), lds, rows, cols, dst.data(), ldd);
    for (int64_t q = 0; q < cols; ++q)
      for (int64_t r = 0; r < ldd; ++r)
        ASSERT_EQ(dst[q * ldd + r], r < rows ? src[r * lds + q] : 0xdeadbeefu)
            << rows << " x " << cols << " at " << q << ", " << r;
    EXPECT_EQ(dst.back(), 0xdeadbeefu);
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, VectorMathTest, ::testing::ValuesIn(detail::cpu::supportedKernels()),
                         [](const auto &info) { return isaName(info.param); });

}  // namespace
}  // namespace ein::testing
