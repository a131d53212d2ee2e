#include "util/thread_pool.hpp"

#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ein::detail {
namespace {

void pause() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// How long an idle worker spins before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(500);

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int thread = 1; thread < threads; ++thread) workers_.emplace_back([this, thread] { work(thread); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread &worker : workers_) worker.join();
}

void ThreadPool::drain(int thread) {
  for (int64_t item = next_.fetch_add(1); item < count_; item = next_.fetch_add(1)) trampoline_(context_, item, thread);
}

void ThreadPool::runErased(int64_t count, Trampoline trampoline, void *context) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    count_ = count;
    trampoline_ = trampoline;
    context_ = context;
    next_.store(0);
    open_.store(true);  // after the fields above: a worker that sees it open sees them
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  drain(0);
  // Every item is claimed. Close the run, then wait only for workers that
  // joined it (they may still be running an item); one that arrives later
  // sees it closed and touches nothing.
  open_.store(false);
  // Spin briefly, then yield: on a machine with more runnable threads than
  // cores, the worker we wait for may need this very core.
  for (int spins = 0; busy_.load() != 0; ++spins)
    if (spins < 256) pause();
    else std::this_thread::yield();
}

void ThreadPool::work(int thread) {
  uint64_t seen = 0;
  while (true) {
    auto spinUntil = std::chrono::steady_clock::now() + kSpin;
    while (generation_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < spinUntil) {
      for (int i = 0; i < 16; ++i) pause();
      std::this_thread::yield();  // returns at once unless another thread wants this core
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    busy_.fetch_add(1);
    if (open_.load()) drain(thread);
    busy_.fetch_sub(1);
  }
}

}  // namespace ein::detail
