// Integer helpers for cutting a kernel's work into blocks and register tiles.
#pragma once

#include <cstdint>

namespace ein::detail::cpu {

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

// Splits `size` into equal blocks of at most `limit`, each a multiple of
// `unit` (197 queries at 64 with mr 6: 3 blocks of 66, not 3 of 66 and one of 6).
inline int64_t blockSize(int64_t size, int64_t limit, int64_t unit) {
  return roundUp(ceilDiv(size, ceilDiv(size, limit)), unit);
}

}  // namespace ein::detail::cpu
