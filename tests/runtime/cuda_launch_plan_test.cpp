// The CUDA backend's launch arithmetic (runtime/src/backends/cuda/launch_plan.hpp),
// which needs no GPU and no CUDA headers, so it is tested in every build:
// the tiled gemm's grid for any m, cuBLASLt's bias alignment rule, the
// tensor-core attention's key tile for a device's shared-memory limit, and
// where a block of causal queries may stop its key loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "backends/cuda/launch_plan.hpp"

namespace ein::cuda {
namespace {

// Which (batch, row tile) pairs the kernel's loops visit for `grid`, counted.
std::vector<int> visits(const TiledGemmGrid &grid, int64_t batches) {
  std::vector<int> seen(size_t(batches * grid.rowTiles), 0);
  for (int64_t z = 0; z < grid.z; ++z)
    for (int64_t y = 0; y < grid.y; ++y)
      for (int64_t batch = z; batch < batches; batch += grid.z)
        for (int64_t tile = y; tile < grid.rowTiles; tile += grid.y) ++seen[size_t(batch * grid.rowTiles + tile)];
  return seen;
}

TEST(CudaLaunchPlan, TiledGemmGridStaysWithinLimitsForAnyM) {
  // m = 1,048,560 is 65535 row tiles, the most grid.y holds; one more row used to be refused.
  for (int64_t m : {int64_t(1), int64_t(1048560), int64_t(1048561), int64_t(3000000), int64_t(1) << 32}) {
    SCOPED_TRACE(m);
    const TiledGemmGrid grid = tiledGemmGrid(m, 40, 1);
    EXPECT_TRUE(grid.ok);
    EXPECT_EQ(grid.x, 3);
    EXPECT_EQ(grid.rowTiles, (m + 15) / 16);
    EXPECT_GE(grid.y, 1);
    EXPECT_LE(grid.y, kMaxGridYZ);
    EXPECT_EQ(grid.y, std::min<int64_t>(grid.rowTiles, kMaxGridYZ));
    EXPECT_EQ(grid.z, 1);
  }
  const TiledGemmGrid many = tiledGemmGrid(17, 16, 100000);
  EXPECT_EQ(many.y, 2);
  EXPECT_EQ(many.z, kMaxGridYZ);
}

TEST(CudaLaunchPlan, TiledGemmLoopsVisitEveryTileOnce) {
  for (const auto &[m, batches] : {std::pair<int64_t, int64_t>{1048561, 1}, {3000000, 2}, {33, 70000}}) {
    SCOPED_TRACE(::testing::Message() << "m " << m << " batches " << batches);
    const TiledGemmGrid grid = tiledGemmGrid(m, 5, batches);
    const std::vector<int> seen = visits(grid, batches);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), int64_t(seen.size()));
  }
}

TEST(CudaLaunchPlan, BiasEpilogueNeedsSixteenByteAlignment) {
  EXPECT_TRUE(biasEpilogueAligned(0x10000));
  EXPECT_TRUE(biasEpilogueAligned(0x10010));
  EXPECT_FALSE(biasEpilogueAligned(0x10004));  // a bias one float into a packed weight
  EXPECT_FALSE(biasEpilogueAligned(0x10008));
  EXPECT_FALSE(biasEpilogueAligned(0x1000c));
}

// Against the rule itself: the end is one past the last key any query of the
// block sees (0 when none sees any), and no key at or past it is seen.
TEST(CudaLaunchPlan, CausalKeyEndIsThePastTheLastKeyTheBlockSees) {
  for (int64_t positions : {1, 5, 64, 77})
    for (int64_t keys : {0, 1, 3, 64, 77, 130})
      for (int64_t groups : {1, 3})  // queries folding several groups of `positions` (grouped-query heads)
        for (int64_t block : {1, 16, 64})
          for (int64_t first = 0; first < groups * positions; first += block) {
            const int64_t last = std::min(first + block, groups * positions) - 1;
            int64_t want = 0;
            for (int64_t i = first; i <= last; ++i)
              for (int64_t j = 0; j < keys; ++j)
                if (j <= i % positions + keys - positions) want = std::max(want, j + 1);
            SCOPED_TRACE(::testing::Message() << "P " << positions << " keys " << keys << " queries " << first
                                              << ".." << last);
            const int64_t end = causalKeyEnd(positions, first, block, groups * positions, keys);
            if (first / positions == last / positions) {
              EXPECT_EQ(end, want);
            } else {  // a block across groups keeps every key: some row sees the last one
              EXPECT_EQ(end, keys);
              EXPECT_EQ(want, keys);
            }
          }
  EXPECT_EQ(causalKeyEnd(0, 0, 64, 64, 100), 100);  // not causal
}

}  // namespace
}  // namespace ein::cuda
