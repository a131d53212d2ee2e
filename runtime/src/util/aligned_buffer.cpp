#include "util/aligned_buffer.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

namespace ein::detail {

void AlignedBuffer::Free::operator()(void *block) const { std::free(block); }

StatusOr<AlignedBuffer> AlignedBuffer::allocate(size_t bytes, std::string_view what) {
  // calloc, not operator new + memset: large zeroed blocks come straight
  // from the kernel as untouched pages.
  void *block = bytes <= SIZE_MAX - kBufferAlignment ? std::calloc(bytes + kBufferAlignment, 1) : nullptr;
  if (!block)
    return Status(StatusCode::ResourceExhausted,
                  "cannot allocate " + std::to_string(bytes) + " bytes for " + std::string(what));
  AlignedBuffer buffer;
  auto address = reinterpret_cast<uintptr_t>(block);
  buffer.aligned_ = static_cast<std::byte *>(block) + (kBufferAlignment - address % kBufferAlignment) % kBufferAlignment;
  buffer.block_.reset(block);
  buffer.size_ = bytes;
  return buffer;
}

Status AlignedBuffer::replaceWith(size_t bytes, std::string_view what) {
  StatusOr<AlignedBuffer> grown = allocate(bytes, what);
  if (!grown.ok()) return grown.status();
  *this = std::move(grown).value();
  return Status();
}

}  // namespace ein::detail
