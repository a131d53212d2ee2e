// Each reference kernel against a naive loop written here from the schema's
// comments, on random data with odd sizes, strides, offsets and broadcasts.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "artifact_builder.hpp"

namespace ein::testing {
namespace {

double activate(fb::Activation activation, double x) {
  switch (activation) {
    case fb::Activation::None: return x;
    case fb::Activation::Relu: return x > 0 ? x : 0;
    case fb::Activation::Gelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case fb::Activation::GeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case fb::Activation::Silu: return x / (1 + std::exp(-x));
  }
  return x;
}

// --- gemm -------------------------------------------------------------------

struct GemmCase {
  int64_t m, n, k;
  fb::Activation activation;
};

void PrintTo(const GemmCase &c, std::ostream *out) {
  *out << "m=" << c.m << " n=" << c.n << " k=" << c.k << " " << fb::EnumNameActivation(c.activation);
}

class GemmTest : public ::testing::TestWithParam<GemmCase> {};

// C[b0, b1, m, n] = alpha * A[b0, b1, m, k] . Bt[b1, n, k]^T + bias[n]: B is
// stored transposed and broadcast over b0 (stride 0), the bias broadcast over
// everything but n, and C written with a padded row stride.
TEST_P(GemmTest, MatchesNaiveLoopWithBatchTransposeAndBroadcast) {
  const auto [m, n, k, activation] = GetParam();
  const int64_t b0 = 2, b1 = 3, cRow = n + 3;
  std::vector<float> a = randomFloats(b0 * b1 * m * k, 1), bt = randomFloats(b1 * n * k, 2),
                     bias = randomFloats(n, 3);
  const float alpha = 0.75f;
  ArtifactBuilder builder;
  uint32_t aId = builder.input("a", fb::DType::F32, {b0, b1, m, k});
  uint32_t btId = builder.input("bt", fb::DType::F32, {b1, n, k});
  uint32_t cId = builder.output("c", fb::DType::F32, {b0, b1, m, cRow});
  uint32_t biasId = builder.weightsF32({n}, bias, "bias");
  builder.gemm({{b0, b1}, m, n, k, dense(aId, {b0, b1, m, k}), {btId, 0, {0, n * k, 1, k}},
                {cId, 0, {b1 * m * cRow, m * cRow, cRow, 1}}, ViewSpec{biasId, 0, {0, 0, 0, 1}}, alpha, activation});
  auto session = loadAndRun(builder.build(), {{"a", bytesOf(a)}, {"bt", bytesOf(bt)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> got = valuesOf<float>(session.value()->output("c").value());

  std::vector<double> want(got.size(), 0.0);  // the padding columns stay zero
  for (int64_t i0 = 0; i0 < b0; ++i0)
    for (int64_t i1 = 0; i1 < b1; ++i1)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p)
            sum += double(a[((i0 * b1 + i1) * m + i) * k + p]) * bt[(i1 * n + j) * k + p];
          want[((i0 * b1 + i1) * m + i) * cRow + j] = activate(activation, alpha * sum + bias[j]);
        }
  expectClose(got, want, 1e-5, "gemm");
}

INSTANTIATE_TEST_SUITE_P(Sizes, GemmTest,
                         ::testing::Values(GemmCase{1, 1, 1, fb::Activation::None},
                                           GemmCase{7, 5, 197, fb::Activation::None},
                                           GemmCase{197, 7, 1, fb::Activation::Relu},
                                           GemmCase{7, 197, 7, fb::Activation::Gelu},
                                           GemmCase{5, 7, 13, fb::Activation::GeluTanh},
                                           GemmCase{7, 1, 7, fb::Activation::Silu}),
                         [](const auto &info) {
                           const GemmCase &c = info.param;
                           return "m" + std::to_string(c.m) + "_n" + std::to_string(c.n) + "_k" + std::to_string(c.k) +
                                  "_" + fb::EnumNameActivation(c.activation);
                         });

TEST(Gemm, EmptyReductionGivesBiasOnly) {
  ArtifactBuilder builder;
  uint32_t a = builder.input("a", fb::DType::F32, {3, 0});
  uint32_t b = builder.input("b", fb::DType::F32, {0, 2});
  uint32_t c = builder.output("c", fb::DType::F32, {3, 2});
  uint32_t bias = builder.weightsF32({2}, {1.5f, -2.0f});
  builder.gemm({{}, 3, 2, 0, dense(a, {3, 0}), dense(b, {0, 2}), dense(c, {3, 2}), ViewSpec{bias, 0, {0, 1}}});
  auto session = loadAndRun(builder.build(), {{"a", {}}, {"b", {}}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  EXPECT_EQ(valuesOf<float>(session.value()->output("c").value()),
            (std::vector<float>{1.5f, -2.0f, 1.5f, -2.0f, 1.5f, -2.0f}));
}

// --- elementwise ------------------------------------------------------------

struct OpcodeCase {
  fb::Opcode opcode;
  std::function<double(double, double, double)> reference;
};

std::vector<OpcodeCase> opcodeCases() {
  using D = double;
  return {
      {fb::Opcode::Neg, [](D a, D, D) { return -a; }},
      {fb::Opcode::Exp, [](D a, D, D) { return std::exp(a); }},
      {fb::Opcode::Log, [](D a, D, D) { return std::log(a); }},
      {fb::Opcode::Sqrt, [](D a, D, D) { return std::sqrt(a); }},
      {fb::Opcode::Rsqrt, [](D a, D, D) { return 1 / std::sqrt(a); }},
      {fb::Opcode::Abs, [](D a, D, D) { return std::fabs(a); }},
      {fb::Opcode::Relu, [](D a, D, D) { return a > 0 ? a : 0; }},
      {fb::Opcode::Gelu, [](D a, D, D) { return activate(fb::Activation::Gelu, a); }},
      {fb::Opcode::GeluTanh, [](D a, D, D) { return activate(fb::Activation::GeluTanh, a); }},
      {fb::Opcode::Silu, [](D a, D, D) { return activate(fb::Activation::Silu, a); }},
      {fb::Opcode::Sigmoid, [](D a, D, D) { return 1 / (1 + std::exp(-a)); }},
      {fb::Opcode::Tanh, [](D a, D, D) { return std::tanh(a); }},
      {fb::Opcode::Not, [](D a, D, D) { return a == 0 ? 1.0 : 0.0; }},
      {fb::Opcode::Add, [](D a, D b, D) { return a + b; }},
      {fb::Opcode::Sub, [](D a, D b, D) { return a - b; }},
      {fb::Opcode::Mul, [](D a, D b, D) { return a * b; }},
      {fb::Opcode::Div, [](D a, D b, D) { return a / b; }},
      {fb::Opcode::Pow, [](D a, D b, D) { return std::pow(a, b); }},
      {fb::Opcode::Max, [](D a, D b, D) { return std::max(a, b); }},
      {fb::Opcode::Min, [](D a, D b, D) { return std::min(a, b); }},
      {fb::Opcode::Lt, [](D a, D b, D) { return a < b ? 1.0 : 0.0; }},
      {fb::Opcode::Le, [](D a, D b, D) { return a <= b ? 1.0 : 0.0; }},
      {fb::Opcode::Gt, [](D a, D b, D) { return a > b ? 1.0 : 0.0; }},
      {fb::Opcode::Ge, [](D a, D b, D) { return a >= b ? 1.0 : 0.0; }},
      {fb::Opcode::Eq, [](D a, D b, D) { return a == b ? 1.0 : 0.0; }},
      {fb::Opcode::Ne, [](D a, D b, D) { return a != b ? 1.0 : 0.0; }},
      {fb::Opcode::Select, [](D a, D b, D c) { return a != 0 ? b : c; }},
      {fb::Opcode::Softplus, [](D a, D, D) { return a > 20 ? a : std::log(1 + std::exp(a)); }},
      {fb::Opcode::Sin, [](D a, D, D) { return std::sin(a); }},
      {fb::Opcode::Cos, [](D a, D, D) { return std::cos(a); }},
      // Python's // and %: floor, and the remainder takes the divisor's sign.
      {fb::Opcode::FloorDiv, [](D a, D b, D) { return std::floor(a / b); }},
      {fb::Opcode::Mod, [](D a, D b, D) { return a - b * std::floor(a / b); }},
  };
}

// out[i, j] = op(x[i, j], y[j], z[j, i]) over [7, 600]: y broadcasts over
// rows (stride 0), z is read transposed, the output is written transposed at
// an offset, and 600 spans three 256-lane blocks.
TEST(Elementwise, EveryOpcodeMatchesNaiveLoop) {
  const int64_t rows = 7, cols = 600;
  std::vector<float> x = randomFloats(rows * cols, 4), y = randomFloats(cols, 5, 0.25f, 2.0f),
                     z = randomFloats(cols * rows, 6);
  // Exact ties and zeros, so comparisons, Not and Select see both outcomes.
  for (int64_t j = 0; j < cols; j += 5) x[j] = y[j];
  for (int64_t j = 0; j < cols; j += 7) x[cols + j] = 0.0f;
  for (const OpcodeCase &test : opcodeCases()) {
    SCOPED_TRACE(fb::EnumNameOpcode(test.opcode));
    ArtifactBuilder builder;
    uint32_t xId = builder.input("x", fb::DType::F32, {rows, cols});
    uint32_t yId = builder.input("y", fb::DType::F32, {cols});
    uint32_t zId = builder.input("z", fb::DType::F32, {cols, rows});
    uint32_t outId = builder.output("out", fb::DType::F32, {3 + cols * rows});
    builder.elementwise({{rows, cols},
                         {dense(xId, {rows, cols}), {yId, 0, {0, 1}}, {zId, 0, {1, rows}}},
                         {outId, 3, {1, rows}},
                         {instruction(test.opcode, 0, 1, 2)}});
    auto session = loadAndRun(builder.build(), {{"x", bytesOf(x)}, {"y", bytesOf(y)}, {"z", bytesOf(z)}});
    ASSERT_TRUE(session.ok()) << session.status().toString();
    std::vector<float> got = valuesOf<float>(session.value()->output("out").value());
    std::vector<double> want(got.size(), 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        want[3 + j * rows + i] = test.reference(x[i * cols + j], y[j], z[j * rows + i]);
    expectClose(got, want, 2e-6, "out");
  }
}

// Max and Min propagate NaN like torch.maximum/minimum; Const fills.
TEST(Elementwise, MaxMinPropagateNanAndConstFills) {
  ArtifactBuilder builder;
  uint32_t x = builder.input("x", fb::DType::F32, {3});
  uint32_t out = builder.output("out", fb::DType::F32, {3, 3});
  // out[0] = max(x, 1), out[1] = min(x, 1), out[2] = 1
  builder.elementwise({{3}, {dense(x, {3})}, {out, 0, {1}},
                       {instruction(fb::Opcode::Const, 0, 0, 0, 1.0f), instruction(fb::Opcode::Max, 0, 1)}});
  builder.elementwise({{3}, {dense(x, {3})}, {out, 3, {1}},
                       {instruction(fb::Opcode::Const, 0, 0, 0, 1.0f), instruction(fb::Opcode::Min, 0, 1)}});
  builder.elementwise({{3}, {}, {out, 6, {1}}, {instruction(fb::Opcode::Const, 0, 0, 0, 1.0f)}});
  std::vector<float> xs = {NAN, 0.5f, 2.0f};
  auto session = loadAndRun(builder.build(), {{"x", bytesOf(xs)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> got = valuesOf<float>(session.value()->output("out").value());
  expectClose(got, {NAN, 1.0, 2.0, NAN, 0.5, 1.0, 1.0, 1.0, 1.0}, 0, "out");
}

// A longer program over bool, i32 and i64 inputs (converted to f32) with a
// bool output: out = (mask && a + 2 * b > 3) stored as 0/1 bytes, and
// value = select(mask, a * b, -1).
TEST(Elementwise, IntegerAndBoolInputsAndBoolOutput) {
  const int64_t n = 197;
  std::mt19937 generator(7);
  std::vector<uint8_t> mask(n);
  std::vector<int32_t> a(n);
  std::vector<int64_t> b(n);
  for (int64_t i = 0; i < n; ++i) {
    mask[i] = static_cast<uint8_t>(generator() % 2);
    a[i] = static_cast<int32_t>(generator() % 9) - 4;
    b[i] = static_cast<int64_t>(generator() % 5);
  }
  ArtifactBuilder builder;
  uint32_t maskId = builder.input("mask", fb::DType::Bool, {n});
  uint32_t aId = builder.input("a", fb::DType::I32, {n});
  uint32_t bId = builder.input("b", fb::DType::I64, {n});
  uint32_t outId = builder.output("out", fb::DType::Bool, {n});
  uint32_t valueId = builder.output("value", fb::DType::F32, {n});
  std::vector<ViewSpec> inputs = {dense(maskId, {n}), dense(aId, {n}), dense(bId, {n})};
  builder.elementwise({{n}, inputs, dense(outId, {n}),
                       {instruction(fb::Opcode::Const, 0, 0, 0, 2.0f),  // r3 = 2
                        instruction(fb::Opcode::Mul, 3, 2),              // r4 = 2 * b
                        instruction(fb::Opcode::Add, 1, 4),              // r5 = a + 2b
                        instruction(fb::Opcode::Const, 0, 0, 0, 3.0f),  // r6 = 3
                        instruction(fb::Opcode::Gt, 5, 6),               // r7 = r5 > 3
                        instruction(fb::Opcode::Mul, 0, 7)}});           // r8 = mask * r7
  builder.elementwise({{n}, inputs, dense(valueId, {n}),
                       {instruction(fb::Opcode::Mul, 1, 2), instruction(fb::Opcode::Const, 0, 0, 0, -1.0f),
                        instruction(fb::Opcode::Select, 0, 3, 4)}});
  auto session = loadAndRun(builder.build(), {{"mask", mask}, {"a", bytesOf(a)}, {"b", bytesOf(b)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<uint8_t> out = valuesOf<uint8_t>(session.value()->output("out").value());
  std::vector<float> value = valuesOf<float>(session.value()->output("value").value());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[i], mask[i] && a[i] + 2 * b[i] > 3 ? 1 : 0) << i;
    EXPECT_EQ(value[i], mask[i] ? static_cast<float>(a[i] * b[i]) : -1.0f) << i;
  }
}

TEST(Elementwise, RankZeroShape) {
  ArtifactBuilder builder;
  uint32_t x = builder.input("x", fb::DType::F32, {});
  uint32_t out = builder.output("out", fb::DType::F32, {});
  builder.elementwise({{}, {{x, 0, {}}}, {out, 0, {}}, {instruction(fb::Opcode::Exp, 0)}});
  std::vector<float> xs = {1.0f};
  auto session = loadAndRun(builder.build(), {{"x", bytesOf(xs)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  EXPECT_FLOAT_EQ(valuesOf<float>(session.value()->output("out").value())[0], std::exp(1.0f));
}

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

// --- gather -----------------------------------------------------------------

template <typename Id>
void checkGather(fb::DType idType) {
  const int64_t rows = 10, width = 197;
  std::vector<float> table = randomFloats(rows * width, 10);
  std::vector<Id> ids = {0, 9, 3, 3, 7, 1, 2, 8, 5, 4, 6, 0, 9, 2};  // [2, 7]
  ArtifactBuilder builder;
  uint32_t idsId = builder.input("ids", idType, {2, 7}, rows);
  uint32_t tableId = builder.weightsF32({rows, width}, table, "embed.weight");
  uint32_t yId = builder.output("y", fb::DType::F32, {2, 7, width});
  builder.gather({{2, 7}, rows, width, dense(idsId, {2, 7}), dense(tableId, {rows, width}), dense(yId, {2, 7, width})});
  auto session = loadAndRun(builder.build(), {{"ids", bytesOf(ids)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> got = valuesOf<float>(session.value()->output("y").value());
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t w = 0; w < width; ++w)
      ASSERT_EQ(got[i * width + w], table[ids[i] * width + w]) << "id " << i << " column " << w;
}

TEST(Gather, Int32IdsMatchNaiveLoop) { checkGather<int32_t>(fb::DType::I32); }
TEST(Gather, Int64IdsMatchNaiveLoop) { checkGather<int64_t>(fb::DType::I64); }

// Transposed ids and a column-major table view.
TEST(Gather, StridedIdsAndTable) {
  ArtifactBuilder builder;
  uint32_t ids = builder.input("ids", fb::DType::I32, {3, 2}, 3);
  uint32_t table = builder.weightsF32({2, 3}, {0, 1, 2, 10, 11, 12});  // stored [width, rows]
  uint32_t y = builder.output("y", fb::DType::F32, {2, 3, 2});
  builder.gather({{2, 3}, 3, 2, {ids, 0, {1, 2}}, {table, 0, {1, 3}}, dense(y, {2, 3, 2})});
  std::vector<int32_t> idValues = {2, 1, 0, 0, 1, 2};  // ids[i][j] = idValues[j * 2 + i]
  auto session = loadAndRun(builder.build(), {{"ids", bytesOf(idValues)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  EXPECT_EQ(valuesOf<float>(session.value()->output("y").value()),
            (std::vector<float>{2, 12, 0, 10, 1, 11, 1, 11, 0, 10, 2, 12}));
}

TEST(Gather, OutOfRangeIdIsAnErrorNamingStepIdAndRows) {
  for (int32_t bad : {10, -1}) {
    ArtifactBuilder builder;
    uint32_t ids = builder.input("ids", fb::DType::I32, {3}, 10);
    uint32_t table = builder.weightsF32({10, 2}, std::vector<float>(20, 1.0f));
    uint32_t y = builder.output("y", fb::DType::F32, {3, 2});
    builder.gather({{3}, 10, 2, dense(ids, {3}), dense(table, {10, 2}), dense(y, {3, 2})}, "embed.ein:4:9");
    std::vector<int32_t> idValues = {1, bad, 2};
    auto session = loadAndRun(builder.build(), {{"ids", bytesOf(idValues)}});
    ASSERT_FALSE(session.ok());
    EXPECT_EQ(session.status().code(), StatusCode::OutOfRange);
    EXPECT_EQ(session.status().message(), "step 0 (gather at embed.ein:4:9): id " + std::to_string(bad) +
                                              " (ids element 1) is outside [0, 10)");
  }
}

// --- copy -------------------------------------------------------------------

TEST(Copy, TransposeSliceAndEveryDtype) {
  // f32: y = x^T for x [7, 197]; i64: a strided slice; bool: a broadcast row.
  std::vector<float> x = randomFloats(7 * 197, 11);
  std::vector<int64_t> longs(20);
  for (int64_t i = 0; i < 20; ++i) longs[i] = i * 1000000007LL;
  std::vector<uint8_t> flags = {1, 0, 1};
  ArtifactBuilder builder;
  uint32_t xId = builder.input("x", fb::DType::F32, {7, 197});
  uint32_t longId = builder.input("longs", fb::DType::I64, {20});
  uint32_t flagId = builder.input("flags", fb::DType::Bool, {3});
  uint32_t xt = builder.output("xt", fb::DType::F32, {197, 7});
  uint32_t slice = builder.output("slice", fb::DType::I64, {6});
  uint32_t rows = builder.output("rows", fb::DType::Bool, {2, 3});
  builder.copy({{197, 7}, {xId, 0, {1, 197}}, dense(xt, {197, 7})});
  builder.copy({{6}, {longId, 1, {3}}, dense(slice, {6})});  // elements 1, 4, ..., 16
  builder.copy({{2, 3}, {flagId, 0, {0, 1}}, dense(rows, {2, 3})});
  auto session = loadAndRun(builder.build(), {{"x", bytesOf(x)}, {"longs", bytesOf(longs)}, {"flags", flags}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> gotT = valuesOf<float>(session.value()->output("xt").value());
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t j = 0; j < 197; ++j) ASSERT_EQ(gotT[j * 7 + i], x[i * 197 + j]);
  std::vector<int64_t> gotSlice = valuesOf<int64_t>(session.value()->output("slice").value());
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(gotSlice[i], longs[1 + 3 * i]);
  EXPECT_EQ(valuesOf<uint8_t>(session.value()->output("rows").value()), (std::vector<uint8_t>{1, 0, 1, 1, 0, 1}));
}

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

}  // namespace
}  // namespace ein::testing
