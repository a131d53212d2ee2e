// A paged state's views (program/paged_state.hpp): a view of the state as
// the program lays it out becomes the same elements' view within a block,
// its first row and the axis walking rows; a view that does not walk the
// state's axes one each, inside them, is refused (an artifact is untrusted).
#include <gtest/gtest.h>

#include "program/paged_state.hpp"

namespace ein::detail {
namespace {

// A cache [1, 2 heads, 8 rows, 4], paged in blocks of 4 rows: a block is [1, 2, 4, 4].
class PagedViewTest : public ::testing::Test {
 protected:
  PagedViewTest() {
    state.shape = {1, 2, 8, 4};
    state.numElements = 64;
    state.byteSize = 256;
    state.storage = Storage::State;
    paged.tensor = 3;
    paged.rowsAxis = 2;
  }
  StatusOr<PagedView> page(int64_t offset, Dims strides, Dims extents, int rowsViewAxis) {
    return pageView(state, paged, 4, View{3, offset, strides}, extents, rowsViewAxis);
  }
  Tensor state;
  PagedTensor paged;
};

TEST_F(PagedViewTest, AttentionsKeysWalkTheRowsWithinABlock) {
  auto keys = page(0, {64, 32, 4, 1}, {1, 2, 5, 4}, 2);
  ASSERT_TRUE(keys.ok()) << keys.status().toString();
  EXPECT_EQ(keys->view.strides, (Dims{0, 16, 4, 1}));
  EXPECT_EQ(keys->view.offset, 0);
  EXPECT_EQ(keys->firstRow, 0);
  EXPECT_EQ(keys->rowsAxis, 2);
  EXPECT_EQ(keys->rowCount, 5);
  EXPECT_EQ(keys->rowStride, 4);
  // One key: its axis still takes the rows' stride.
  auto one = page(0, {64, 32, 0, 1}, {1, 2, 1, 4}, 2);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->view.strides, (Dims{0, 16, 4, 1}));
  EXPECT_EQ(one->rowCount, 1);
}

TEST_F(PagedViewTest, AnAppendStartsAtItsRowAndHead) {
  // Rows 3 and 4 of both heads.
  auto append = page(3 * 4, {64, 32, 4, 1}, {1, 2, 2, 4}, -1);
  ASSERT_TRUE(append.ok()) << append.status().toString();
  EXPECT_EQ(append->firstRow, 3);
  EXPECT_EQ(append->rowCount, 2);
  EXPECT_EQ(append->rowsAxis, 2);
  EXPECT_EQ(append->view.offset, 0);
  // Head 1's row 6, one row: the head's place in a block, no axis of rows.
  auto single = page(32 + 6 * 4, {64, 32, 4, 1}, {1, 1, 1, 4}, -1);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->firstRow, 6);
  EXPECT_EQ(single->rowsAxis, -1);
  EXPECT_EQ(single->view.offset, 16);
  // Heads and rows swapped in the view ([t, h, d]) are still one axis each.
  auto swapped = page(0, {4, 32, 1}, {3, 2, 4}, -1);
  ASSERT_TRUE(swapped.ok());
  EXPECT_EQ(swapped->view.strides, (Dims{4, 16, 1}));
  EXPECT_EQ(swapped->rowsAxis, 0);
}

TEST_F(PagedViewTest, ViewsThatDoNotWalkTheAxesOneEachAreRefused) {
  auto refused = [&](int64_t offset, Dims strides, Dims extents, int rowsViewAxis, const std::string &why) {
    auto view = page(offset, strides, extents, rowsViewAxis);
    ASSERT_FALSE(view.ok()) << why;
    EXPECT_EQ(view.status().code(), StatusCode::InvalidArtifact);
    EXPECT_NE(view.status().message().find(why), std::string::npos) << view.status().message();
  };
  refused(0, {4, 4}, {2, 3}, -1, "walks its axis 2 twice");
  refused(6 * 4, {4, 1}, {5, 4}, -1, "leaves its axis 2");
  refused(0, {3, 1}, {2, 4}, -1, "walks none of its axes along axis 0");
  refused(0, {-4, 1}, {2, 4}, -1, "walks none of its axes");
  refused(64, {4, 1}, {1, 4}, -1, "starts outside it");
  refused(-1, {4, 1}, {1, 4}, -1, "starts outside it");
  refused(0, {32, 4, 1}, {2, 5, 4}, 0, "walks its axis 1 along axis 0, which must walk its rows");
  refused(0, {4, 32, 1}, {5, 2, 4}, 1, "walks its rows along axis 0, not 1");
  refused(0, {32, 0, 1}, {2, 5, 4}, 1, "does not walk its rows along axis 1");
  refused(0, {4, 1}, {2, 4}, 2, "has no such axis of rows");
  refused(7 * 4, {32, 4, 1}, {2, 2, 4}, 1, "leaves its axis 2");
  refused(0, {4, 1, 1}, {2, 4}, -1, "is not over that tensor's axes");
}

}  // namespace
}  // namespace ein::detail
