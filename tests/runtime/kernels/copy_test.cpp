// Copy: a transpose and a slice of every dtype; f32 rounded into bf16 (rows
// appended to a bf16 key/value cache).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "artifact_builder.hpp"
#include "kernel_test_support.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "ops/scalar_functions.hpp"
#include "step_harness.hpp"

namespace ein::testing {
namespace {

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

// f32 into bf16, contiguous rows and a transposed (strided) source: each
// element rounded to nearest even, ties to even, NaN kept, into the rows of
// a larger bf16 tensor at an offset (a cache at its position).
TEST(Copy, F32IntoBf16RoundsToNearestEven) {
  std::vector<float> x = randomFloats(3 * 5, 12);
  x[0] = 1.0f + 1.0f / 256.0f;               // a tie: rounds down to even 1.0
  x[1] = 1.0f + 3.0f / 256.0f;               // a tie: rounds up to even 1 + 4/256
  x[2] = std::numeric_limits<float>::quiet_NaN();
  x[3] = std::numeric_limits<float>::infinity();
  ArtifactBuilder builder;
  uint32_t xId = builder.input("x", fb::DType::F32, {3, 5});
  uint32_t rows = builder.output("rows", fb::DType::BF16, {4, 5});
  uint32_t columns = builder.output("columns", fb::DType::BF16, {5, 3});
  builder.copy({{3, 5}, dense(xId, {3, 5}), {rows, 5, {5, 1}}});      // rows 1..3
  builder.copy({{5, 3}, {xId, 0, {1, 5}}, dense(columns, {5, 3})});  // x^T
  auto session = loadAndRun(builder.build(), {{"x", bytesOf(x)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<uint16_t> gotRows = valuesOf<uint16_t>(session.value()->output("rows").value());
  std::vector<uint16_t> gotColumns = valuesOf<uint16_t>(session.value()->output("columns").value());
  EXPECT_EQ(gotRows[5], 0x3f80);
  EXPECT_EQ(gotRows[6], 0x3f82);
  EXPECT_TRUE(std::isnan(bfloatToFloat(gotRows[7])));
  EXPECT_EQ(gotRows[8], 0x7f80);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_EQ(gotRows[(1 + i) * 5 + j], floatToBfloat(x[i * 5 + j])) << i << ", " << j;
      EXPECT_EQ(gotColumns[j * 3 + i], floatToBfloat(x[i * 5 + j])) << i << ", " << j;
    }
}

}  // namespace
}  // namespace ein::testing
