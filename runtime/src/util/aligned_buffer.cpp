#include "util/aligned_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace ein::detail {
namespace {

// `bytes` rounded up to whole small pages, mapped at a huge page boundary
// (an anonymous mapping is zero-filled), or null. The huge pages are only
// offered: where transparent huge pages are off, the buffer has small ones,
// and so has its tail past the last whole huge page (no memory is held for
// bytes past the end).
void *mapHugePageAligned(size_t bytes, size_t &mapped) {
  if (bytes > SIZE_MAX - 2 * kHugePageBytes) return nullptr;
  const long pageSize = ::sysconf(_SC_PAGESIZE);
  const size_t page = pageSize > 0 ? static_cast<size_t>(pageSize) : 4096;
  mapped = (bytes + page - 1) / page * page;
  const size_t reserved = mapped + kHugePageBytes;
  void *address = ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED) return nullptr;
  // Keep the aligned `mapped` bytes, hand the rest back.
  const auto start = reinterpret_cast<uintptr_t>(address);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) ::munmap(address, aligned - start);
  if (const uintptr_t end = start + reserved, used = aligned + mapped; end > used)
    ::munmap(reinterpret_cast<void *>(used), end - used);
#ifdef MADV_HUGEPAGE
  ::madvise(reinterpret_cast<void *>(aligned), mapped, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<void *>(aligned);
}

}  // namespace

void AlignedBuffer::Free::operator()(void *block) const {
  if (mappedBytes) ::munmap(block, mappedBytes);
  else std::free(block);
}

StatusOr<AlignedBuffer> AlignedBuffer::allocate(size_t bytes, std::string_view what, Pages pages) {
  // Zeroed pages straight from the kernel, untouched until used (calloc's
  // large blocks are mappings too), not operator new + memset.
  size_t mapped = 0;
  void *block = nullptr;
  if (pages == Pages::Huge && bytes >= kHugePageBytes && kHugePageMappings)
    block = mapHugePageAligned(bytes, mapped);
  else if (bytes <= SIZE_MAX - kBufferAlignment)
    block = std::calloc(bytes + kBufferAlignment, 1);
  if (!block)
    return Status(StatusCode::ResourceExhausted,
                  "cannot allocate " + std::to_string(bytes) + " bytes for " + std::string(what));
  AlignedBuffer buffer;
  auto address = reinterpret_cast<uintptr_t>(block);
  buffer.aligned_ = static_cast<std::byte *>(block) + (kBufferAlignment - address % kBufferAlignment) % kBufferAlignment;
  buffer.block_ = std::unique_ptr<void, Free>(block, Free{mapped});
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
