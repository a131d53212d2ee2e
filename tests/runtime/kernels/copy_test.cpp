// Copy: a transpose and a slice of every dtype; f32 rounded into bf16 (rows
// appended to a bf16 key/value cache).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <cstring>
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

// The threaded copy against the reference: ViT's patches (64-byte rows),
// rows with a tail past 16 bytes, rows long enough for a library copy, a
// transpose (element by element), bf16 rows, a broadcast, convolutions'
// windows (short rows, axes of size 1) and a copy whose axes all merge; one
// to three threads, so chunks start and end inside a group of rows.
TEST(Copy, FastMatchesReferenceOnPatchesRowsAndTransposes) {
  struct Case {
    const char *name;
    fb::DType dtype;
    std::vector<int64_t> xShape, shape;
    ViewSpec (*x)(uint32_t);
  };
  const std::vector<Case> cases = {
      // x [2, 3, 32, 48] -> [b, h, w, c, p1, p2] with 16 x 16 patches
      {"patches", fb::DType::F32, {2, 3, 32, 48}, {2, 2, 3, 3, 16, 16},
       [](uint32_t x) { return ViewSpec{x, 0, {4608, 768, 16, 1536, 48, 1}}; }},
      {"rows of 5", fb::DType::F32, {9, 41, 5}, {41, 9, 5},
       [](uint32_t x) { return ViewSpec{x, 0, {5, 205, 1}}; }},
      {"long rows", fb::DType::F32, {3, 7, 100}, {7, 3, 100},
       [](uint32_t x) { return ViewSpec{x, 0, {100, 700, 1}}; }},
      {"transpose", fb::DType::F32, {7, 197}, {197, 7}, [](uint32_t x) { return ViewSpec{x, 0, {1, 197}}; }},
      {"bf16 rows", fb::DType::BF16, {6, 5, 38}, {5, 6, 38},
       [](uint32_t x) { return ViewSpec{x, 0, {38, 190, 1}}; }},
      {"broadcast", fb::DType::F32, {1, 33}, {40, 33}, [](uint32_t x) { return ViewSpec{x, 0, {0, 1}}; }},
      // A conv2d's windows (im2col): x [2, 3, 10, 12] padded, 5 x 5 windows
      // over 6 x 8 positions: rows of 5 (20 bytes) from overlapping windows.
      {"windows 5x5", fb::DType::F32, {2, 3, 10, 12}, {2, 3, 6, 8, 5, 5},
       [](uint32_t x) { return ViewSpec{x, 0, {360, 120, 12, 1, 12, 1}}; }},
      // A conv1d's windows of 3 (12 bytes) with axes of size 1 between.
      {"windows of 3", fb::DType::F32, {4, 9}, {1, 4, 7, 1, 3},
       [](uint32_t x) { return ViewSpec{x, 0, {0, 9, 1, 0, 1}}; }},
      // Contiguous in both: the three axes merge into one run.
      {"contiguous", fb::DType::F32, {5, 6, 7}, {5, 6, 7}, [](uint32_t x) { return ViewSpec{x, 0, {42, 7, 1}}; }},
      // Rows of 1 to 3 bf16 elements (2 to 6 bytes: below every piece).
      {"bf16 windows", fb::DType::BF16, {3, 8}, {3, 6, 3}, [](uint32_t x) { return ViewSpec{x, 0, {8, 1, 1}}; }},
  };
  for (const Case &c : cases) {
    ArtifactBuilder builder;
    uint32_t x = builder.input("x", c.dtype, c.xShape);
    uint32_t y = builder.output("y", c.dtype, c.shape);
    builder.copy({c.shape, c.x(x), dense(y, c.shape)});
    StepHarness harness(builder.build());
    const std::vector<float> want = harness.run(detail::cpu::copyReference, detail::cpu::portableKernels(), 1);
    for (int threads : {1, 2, 3}) {
      const std::vector<float> got = harness.run(detail::cpu::copyFast, detail::cpu::portableKernels(), threads);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * want.size()), 0)
          << c.name << ", threads " << threads;
    }
  }
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
