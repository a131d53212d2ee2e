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
    busy_.store(static_cast<int>(workers_.size()));
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  drain(0);
  while (busy_.load(std::memory_order_acquire) != 0) pause();
}

void ThreadPool::work(int thread) {
  uint64_t seen = 0;
  while (true) {
    auto spinUntil = std::chrono::steady_clock::now() + kSpin;
    while (generation_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < spinUntil)
      for (int i = 0; i < 64; ++i) pause();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    drain(thread);
    busy_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace ein::detail
