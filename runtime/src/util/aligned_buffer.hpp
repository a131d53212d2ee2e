// A zero-filled heap buffer whose start is 64-byte aligned (a cache line and
// the widest SIMD load), for the arena, inputs, outputs, packed weights and
// in-memory artifacts.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "ein/status.hpp"

namespace ein::detail {

inline constexpr size_t kBufferAlignment = 64;
inline constexpr size_t kHugePageBytes = size_t{2} << 20;
// Whether Pages::Huge buffers get their own mapping: not under
// AddressSanitizer, where calloc's redzones guard them.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kHugePageMappings = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)  // clang's spelling
inline constexpr bool kHugePageMappings = false;
#else
inline constexpr bool kHugePageMappings = true;
#endif
#else
inline constexpr bool kHugePageMappings = true;
#endif

// The pages a buffer asks for.
enum class Pages {
  Small,
  // For data read whole on every run (packed weights: a decode step streams
  // each once, and in 4 KiB pages every 4 KiB of the stream costs a TLB miss
  // and a page walk): from kHugePageBytes on, the buffer is mapped on its own
  // at a huge page boundary and offered transparent huge pages
  // (MADV_HUGEPAGE). Not for buffers touched piecemeal (the arena, a cache):
  // a touched byte would hold a whole huge page.
  Huge,
};

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Zero-filled. The pages of a large buffer are only touched when used, so
  // an arena that is mostly idle costs address space, not memory.
  // `what` names the buffer in the ResourceExhausted message.
  static StatusOr<AlignedBuffer> allocate(size_t bytes, std::string_view what, Pages pages = Pages::Small);

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
    size_t mappedBytes;  // a buffer mapped on its own: its length; 0 (value-initialised): from calloc
    void operator()(void *block) const;
  };
  std::unique_ptr<void, Free> block_;
  std::byte *aligned_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ein::detail
