// A small fork-join pool: run(count, body) calls body(item, thread) for every
// item in [0, count) on the caller plus threads - 1 workers, handing items out
// through an atomic counter, and returns when all are done. Workers spin
// briefly between runs (steps follow each other within microseconds), then
// sleep. A worker that the OS has not scheduled in time simply misses the
// run: the caller takes its items and does not wait for it (on a busy
// machine, waiting for a descheduled worker costs milliseconds). Nothing is
// allocated per run.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ein::detail {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  template <typename Body>
  void run(int64_t count, Body &&body) {
    if (count <= 0) return;
    if (workers_.empty() || count == 1) {
      for (int64_t item = 0; item < count; ++item) body(item, 0);
      return;
    }
    runErased(count, [](void *context, int64_t item, int thread) { (*static_cast<std::remove_reference_t<Body> *>(context))(item, thread); },
              const_cast<void *>(static_cast<const void *>(&body)));
  }

 private:
  using Trampoline = void (*)(void *context, int64_t item, int thread);
  void runErased(int64_t count, Trampoline trampoline, void *context);
  void work(int thread);
  void drain(int thread);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};  // bumped by each run; odd while the pool shuts down
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> next_{0};
  std::atomic<bool> open_{false};  // whether workers may still join the current run
  std::atomic<int> busy_{0};       // workers inside a run
  int64_t count_ = 0;
  Trampoline trampoline_ = nullptr;
  void *context_ = nullptr;
};

}  // namespace ein::detail
