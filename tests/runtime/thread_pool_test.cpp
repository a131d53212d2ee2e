// The thread pool the kernels split their work with: every item runs once,
// over many runs, and the kernels' parallel chunks cover the items evenly.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "backends/cpu/kernels/kernels.hpp"
#include "util/thread_pool.hpp"

namespace ein::testing {
namespace {

using detail::cpu::KernelContext;

TEST(ThreadPool, RunsEveryItemOnceAcrossManyRuns) {
  detail::ThreadPool pool(3);
  EXPECT_EQ(pool.threads(), 3);
  std::vector<std::atomic<int>> hits(1000);
  std::atomic<int> maxThread{0};
  for (int run = 0; run < 200; ++run) {
    int64_t count = run % 7 == 0 ? 1 : 1 + run * 5;
    pool.run(count, [&](int64_t item, int thread) {
      hits[item].fetch_add(1);
      int seen = maxThread.load();
      while (thread > seen && !maxThread.compare_exchange_weak(seen, thread)) {
      }
    });
  }
  int64_t total = 0;
  for (auto &hit : hits) total += hit.load();
  int64_t want = 0;
  for (int run = 0; run < 200; ++run) want += run % 7 == 0 ? 1 : 1 + run * 5;
  EXPECT_EQ(total, want);
  EXPECT_EQ(hits[0].load(), 200);
  EXPECT_LT(maxThread.load(), 3);
}

TEST(ParallelChunks, CoverEveryItemOnceInChunksTheThreadsShareEvenly) {
  detail::ThreadPool pool(2);
  const std::vector<detail::Tensor> tensors;
  const KernelContext context{tensors, nullptr, nullptr, 0, &pool, &detail::cpu::portableKernels(), nullptr};
  struct Case {
    int64_t total, grain, wantChunks;
  };
  // 197 rows of 384 at the layernorm's grain: 4 chunks, two per thread.
  for (const Case &c : {Case{197, 85, 4}, Case{1, 1, 1}, Case{5, 100, 1}, Case{1000, 1, 8}, Case{3, 1, 3}}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(c.total));
    std::atomic<int> chunks{0};
    context.parallelChunks(c.total, c.grain, [&](int64_t begin, int64_t end, int) {
      chunks.fetch_add(1);
      for (int64_t item = begin; item < end; ++item) hits[static_cast<size_t>(item)].fetch_add(1);
    });
    for (const auto &hit : hits) ASSERT_EQ(hit.load(), 1) << "total " << c.total;
    EXPECT_EQ(chunks.load(), c.wantChunks) << "total " << c.total << " grain " << c.grain;
  }
}

}  // namespace
}  // namespace ein::testing
