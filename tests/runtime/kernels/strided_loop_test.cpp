// The row-major walks the kernels use: IndexOffsets from any starting index
// agrees with offsetOfIndex at every later index (carries over every axis).
#include <gtest/gtest.h>

#include <array>

#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::testing {
namespace {

using detail::Dims;
using detail::cpu::IndexOffsets;
using detail::cpu::offsetOfIndex;

TEST(IndexOffsets, MatchesOffsetOfIndexFromEveryStart) {
  const Dims shape = {3, 4, 5};
  const Dims dense = {20, 5, 1}, odd = {7, -11, 3};  // a second view with any strides, one negative
  const int64_t total = shape.product();
  for (int64_t start = 0; start < total; ++start) {
    IndexOffsets<2> at(shape, {&dense, &odd}, {100, 500}, start);
    for (int64_t flat = start; flat < total; ++flat, at.next()) {
      ASSERT_EQ(at[0], offsetOfIndex(shape, dense, 100, flat)) << "start " << start << ", index " << flat;
      ASSERT_EQ(at[1], offsetOfIndex(shape, odd, 500, flat)) << "start " << start << ", index " << flat;
    }
  }
}

TEST(IndexOffsets, RankZeroAndOneShapes) {
  const Dims none = {}, noStrides = {};
  IndexOffsets<1> scalar(none, {&noStrides}, {9}, 0);
  EXPECT_EQ(scalar[0], 9);
  const Dims line = {6}, step = {4};
  IndexOffsets<1> walk(line, {&step}, {2}, 3);
  for (int64_t i = 3; i < 6; ++i, walk.next()) EXPECT_EQ(walk[0], 2 + 4 * i);
}

}  // namespace
}  // namespace ein::testing
