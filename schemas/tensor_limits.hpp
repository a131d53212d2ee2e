// The tensor limits of the artifact contract: einc refuses a model beyond
// them with a located error, and the runtime, which trusts no artifact,
// checks every tensor of one against the same bounds (compiler/limits.hpp and
// runtime/src/util/limits.hpp add each side's own limits). Plain C++17.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace ein::limits {

// Axes of any tensor or iteration space.
inline constexpr int64_t kMaxRank = 16;
// Elements of any tensor: the product of its sizes, and of its nonzero sizes
// (an empty tensor may not hide sizes whose product overflows). Any single
// size is bounded by it too.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;
// Bytes of any tensor (8-byte elements at the element limit: 8 TiB).
inline constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 43;

// The number of elements of `shape`, or nullopt when a size is negative or
// the product of the nonzero sizes exceeds kMaxTensorElements; products
// never overflow.
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

}  // namespace ein::limits
