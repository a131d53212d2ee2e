// The runtime's limits, in one place (README.md, "Limits"). The loader
// refuses an artifact beyond them with InvalidArtifact, the .npy reader a
// file, and a session a model whose kernels would need more scratch memory.
// The compiler has its own copy of the tensor limits (compiler/limits.hpp):
// the two share only the artifact schema, and the runtime trusts no artifact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace ein::detail {

// Axes of a tensor or an iteration space.
inline constexpr size_t kMaxRank = 16;
// Elements of a tensor: the product of its sizes, and of its nonzero sizes
// (an empty tensor may not hide sizes whose product overflows).
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;
// Bytes of a tensor, and of the arena.
inline constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 43;
inline constexpr uint64_t kMaxArenaBytes = kMaxTensorBytes;
// The arena may exceed the end of its last tensor by at most this rounding
// (einc aligns it to 64 bytes): an arena its tensors do not justify is
// refused rather than allocated.
inline constexpr uint64_t kArenaRounding = 4096;
// Working memory one thread's kernels may need (the largest step's), after
// steps that compute nothing (an empty output) are counted as needing none.
inline constexpr uint64_t kMaxScratchBytesPerThread = uint64_t{1} << 32;

// The number of elements of `shape`, or nullopt when a size is negative or
// the product of the nonzero sizes exceeds kMaxTensorElements.
inline std::optional<int64_t> checkedElementCount(std::span<const int64_t> shape) {
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t size : shape) {
    if (size < 0) return std::nullopt;
    if (size == 0) {
      empty = true;
      continue;
    }
    if (size > kMaxTensorElements / nonzero) return std::nullopt;
    nonzero *= size;
  }
  return empty ? 0 : nonzero;
}

}  // namespace ein::detail
