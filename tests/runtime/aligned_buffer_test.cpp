// The runtime's buffers: zero-filled, 64-byte aligned, of the size asked;
// large ones for huge pages on their own huge-page-aligned mapping, returned
// when freed.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "util/aligned_buffer.hpp"

namespace ein::testing {
namespace {

using detail::AlignedBuffer;
using detail::kHugePageBytes;
using detail::Pages;

bool allZero(const AlignedBuffer &buffer) {
  for (size_t i = 0; i < buffer.size(); ++i)
    if (buffer.data()[i] != std::byte{0}) return false;
  return true;
}

// The process's mapped address space in kB (VmSize), or -1 off Linux.
long mappedKilobytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::stol(line.substr(7));
  return -1;
}

TEST(AlignedBuffer, SmallAndLargeBuffersAreZeroedAlignedAndWritableToTheirEnds) {
  for (Pages pages : {Pages::Small, Pages::Huge})
    for (size_t bytes : {size_t{1}, size_t{4096}, kHugePageBytes - 1, kHugePageBytes, 3 * kHugePageBytes + 5}) {
      StatusOr<AlignedBuffer> buffer = AlignedBuffer::allocate(bytes, "test", pages);
      ASSERT_TRUE(buffer.ok()) << buffer.status().message();
      EXPECT_EQ(buffer->size(), bytes);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % detail::kBufferAlignment, 0u) << bytes;
      EXPECT_TRUE(allZero(*buffer)) << bytes;
      buffer->data()[0] = std::byte{1};
      buffer->data()[bytes - 1] = std::byte{2};
    }
}

TEST(AlignedBuffer, LargeBuffersForHugePagesStartOnOne) {
  if (!detail::kHugePageMappings) GTEST_SKIP() << "under AddressSanitizer every buffer comes from calloc";
  StatusOr<AlignedBuffer> buffer = AlignedBuffer::allocate(kHugePageBytes + 1, "test", Pages::Huge);
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % kHugePageBytes, 0u);
}

TEST(AlignedBuffer, FreedLargeBuffersForHugePagesGiveTheirAddressSpaceBack) {
  if (!detail::kHugePageMappings) GTEST_SKIP() << "under AddressSanitizer every buffer comes from calloc";
  const long before = mappedKilobytes();
  if (before < 0) GTEST_SKIP() << "no /proc/self/status";
  for (int i = 0; i < 64; ++i) {
    StatusOr<AlignedBuffer> buffer = AlignedBuffer::allocate(64 * kHugePageBytes + 4096, "test", Pages::Huge);
    ASSERT_TRUE(buffer.ok());
    buffer->data()[buffer->size() - 1] = std::byte{1};
  }
  // 64 buffers of 128 MiB kept would map 8 GiB; one left mapped by the
  // allocator at most.
  EXPECT_LT(mappedKilobytes() - before, 200 * 1024);
}

TEST(AlignedBuffer, ReserveGrowsToANewZeroedBufferAndKeepsALargerOne) {
  AlignedBuffer buffer;
  ASSERT_TRUE(buffer.reserve(100, [] { return "test"; }).ok());
  buffer.data()[0] = std::byte{7};
  std::byte *first = buffer.data();
  ASSERT_TRUE(buffer.reserve(50, [] { return "test"; }).ok());
  EXPECT_EQ(buffer.data(), first);
  ASSERT_TRUE(buffer.reserve(2 * kHugePageBytes, [] { return "test"; }).ok());
  EXPECT_EQ(buffer.size(), 2 * kHugePageBytes);
  EXPECT_TRUE(allZero(buffer));
}

TEST(AlignedBuffer, AnImpossibleSizeIsAClearError) {
  for (Pages pages : {Pages::Small, Pages::Huge}) {
    StatusOr<AlignedBuffer> buffer = AlignedBuffer::allocate(SIZE_MAX - 10, "the test's buffer", pages);
    ASSERT_FALSE(buffer.ok());
    EXPECT_EQ(buffer.status().code(), StatusCode::ResourceExhausted);
    EXPECT_NE(buffer.status().message().find("the test's buffer"), std::string::npos);
  }
}

}  // namespace
}  // namespace ein::testing
