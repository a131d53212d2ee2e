// Element-wise programs: the reference interpreter against naive loops for
// every opcode, NaN, integer and bool inputs and a rank-0 shape; the fast
// interpreter against the reference on every instruction set this CPU has.
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
      {fb::Opcode::Floor, [](D a, D, D) { return std::floor(a); }},
      {fb::Opcode::Ceil, [](D a, D, D) { return std::ceil(a); }},
      {fb::Opcode::Trunc, [](D a, D, D) { return std::trunc(a); }},
      {fb::Opcode::Round, [](D a, D, D) { return std::nearbyint(a); }},  // halves to even
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

class ElementwiseFastTest : public RowKernelTest {};

TEST_P(ElementwiseFastTest, ElementwiseGeluOfScaledSum) {
  const RowCase &c = GetParam();
  ArtifactBuilder builder;
  ViewSpec xView = x(builder);
  uint32_t b = builder.input("b", fb::DType::F32, {c.width});
  uint32_t y = builder.output("y", fb::DType::F32, {c.rows, c.width});
  // y = gelu(x * 0.5 + b) - tanh(x), b broadcast over rows.
  std::vector<fb::Instruction> program = {
      instruction(fb::Opcode::Const, 0, 0, 0, 0.5f), instruction(fb::Opcode::Mul, 0, 2, 0),
      instruction(fb::Opcode::Add, 3, 1, 0), instruction(fb::Opcode::Gelu, 4, 0, 0),
      instruction(fb::Opcode::Tanh, 0, 0, 0), instruction(fb::Opcode::Sub, 5, 6, 0)};
  builder.elementwise({{c.rows, c.width}, {xView, ViewSpec{b, 0, {0, 1}}}, dense(y, {c.rows, c.width}), program});
  expectFastMatchesReference(builder.build(), detail::cpu::elementwiseF32Fast, detail::cpu::elementwiseF32Reference,
                             2e-6);
}

// A rotary half as a decode step runs it: rows of `half` lanes over (heads,
// tokens), x read from a fused projection's rows, cos and sin shared by the
// heads, the output's rows every 2 * half. Rows of whole vectors are read and
// written where they lie, the others copied; rows of 24 lanes are whole on
// AVX2 and cut on AVX-512, so both ways and the step from row to row across
// the outer axes are checked on every table.
TEST(Elementwise, FastRowsOfAFewVectorsOverSeveralAxes) {
  for (const int64_t half : {32, 24, 5}) {
    SCOPED_TRACE(half);
    const int64_t heads = 3, tokens = 5, width = heads * 2 * half + 7;
    ArtifactBuilder builder;
    uint32_t x = builder.input("x", fb::DType::F32, {tokens, width});
    uint32_t cos = builder.input("cos", fb::DType::F32, {tokens, half});
    uint32_t sin = builder.input("sin", fb::DType::F32, {tokens, half});
    uint32_t out = builder.output("out", fb::DType::F32, {heads, tokens, 2 * half});
    builder.elementwise({{heads, tokens, half},
                         {{x, 0, {2 * half, width, 1}}, {cos, 0, {0, half, 1}}, {x, half, {2 * half, width, 1}},
                          {sin, 0, {0, half, 1}}},
                         {out, half, {tokens * 2 * half, 2 * half, 1}},
                         {instruction(fb::Opcode::Mul, 0, 1, 0), instruction(fb::Opcode::Mul, 2, 3, 0),
                          instruction(fb::Opcode::Sub, 4, 5, 0)}});
    expectFastMatchesReference(builder.build(), detail::cpu::elementwiseF32Fast,
                               detail::cpu::elementwiseF32Reference, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ElementwiseFastTest, ::testing::ValuesIn(rowCases()),
                         [](const auto &info) { return info.param.name; });

}  // namespace
}  // namespace ein::testing
