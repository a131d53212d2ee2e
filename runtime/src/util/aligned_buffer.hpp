// A zero-filled heap buffer whose start is 64-byte aligned (a cache line and
// the widest SIMD load), for the arena, inputs, outputs and in-memory artifacts.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "ein/status.hpp"

namespace ein::detail {

inline constexpr size_t kBufferAlignment = 64;

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Zero-filled. The pages of a large buffer are only touched when used, so
  // an arena that is mostly idle costs address space, not memory.
  // `what` names the buffer in the ResourceExhausted message.
  static StatusOr<AlignedBuffer> allocate(size_t bytes, std::string_view what);

  // Makes the buffer hold at least `bytes`: a new zero-filled allocation
  // (the contents are dropped) when it is smaller, nothing otherwise. For
  // buffers that follow a dynamic model's sizes and grow to the largest seen.
  // `name()` names the buffer for the error; it is called only to allocate,
  // so a run that needs no more memory formats nothing.
  template <typename NameFn>
  Status reserve(size_t bytes, NameFn &&name) {
    if (block_ && bytes <= size_) return Status();
    return replaceWith(bytes, name());
  }

  std::byte *data() const { return aligned_; }
  size_t size() const { return size_; }

 private:
  Status replaceWith(size_t bytes, std::string_view what);

  struct Free {
    void operator()(void *block) const;
  };
  std::unique_ptr<void, Free> block_;
  std::byte *aligned_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ein::detail
