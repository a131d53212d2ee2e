// Gather (embedding lookup): i32 and i64 ids, strided ids and table, and an
// id out of range as an error naming the step.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <numeric>
#include <cstring>
#include <random>

#include "artifact_builder.hpp"
#include "kernel_test_support.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "kernels/reference/reference_kernels.hpp"
#include "ops/scalar_functions.hpp"
#include "step_harness.hpp"

namespace ein::testing {
namespace {

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

// The threaded kernel against the reference: many ids (several chunks on
// every thread count), rows copied whole, and into a transposed y (element by
// element).
TEST(Gather, FastMatchesReferenceOnEveryThreadCount) {
  const int64_t rows = 50, width = 300, count = 3 * 70;
  for (bool transposedY : {false, true}) {
    ArtifactBuilder builder;
    uint32_t ids = builder.input("ids", fb::DType::I32, {3, 70}, rows);
    uint32_t table = builder.weightsF32({rows, width}, randomFloats(rows * width, 13));
    uint32_t y = builder.output("y", fb::DType::F32, transposedY ? std::vector<int64_t>{width, 3, 70}
                                                                  : std::vector<int64_t>{3, 70, width});
    const ViewSpec yView = transposedY ? ViewSpec{y, 0, {70, 1, count}} : dense(y, {3, 70, width});
    builder.gather({{3, 70}, rows, width, dense(ids, {3, 70}), dense(table, {rows, width}), yView});
    StepHarness harness(builder.build());
    std::vector<float> idBits(count);
    for (int64_t i = 0; i < count; ++i) {
      const int32_t id = static_cast<int32_t>((i * 37 + 11) % rows);
      std::memcpy(&idBits[i], &id, sizeof id);
    }
    harness.setBits(ids, idBits);
    const std::vector<float> want = harness.run(detail::cpu::gatherF32Reference, detail::cpu::portableKernels(), 1);
    for (int threads : {1, 2, 3})
      EXPECT_EQ(harness.run(detail::cpu::gatherF32Fast, detail::cpu::portableKernels(), threads), want)
          << "threads " << threads << (transposedY ? ", transposed y" : "");
  }
}

// The kernel's own check, the backstop behind the inputs' (an input with an
// upper bound is checked where it enters: InputConversionTest): ids without
// a bound the model knows, such as a table of ranged rows.
TEST(Gather, OutOfRangeIdIsAnErrorNamingStepIdAndRows) {
  for (int32_t bad : {10, -1}) {
    ArtifactBuilder builder;
    uint32_t ids = builder.input("ids", fb::DType::I32, {3});
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

}  // namespace
}  // namespace ein::testing
