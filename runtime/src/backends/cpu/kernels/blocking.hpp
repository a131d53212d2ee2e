// Integer helpers for cutting a kernel's work into blocks and register tiles.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ein::detail::cpu {

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

// Splits `size` into equal blocks of at most `limit`, each a multiple of
// `unit` (197 queries at 64 with mr 6: 3 blocks of 66, not 3 of 66 and one of 6).
inline int64_t blockSize(int64_t size, int64_t limit, int64_t unit) {
  return roundUp(ceilDiv(size, ceilDiv(size, limit)), unit);
}

// A block of `rows` rows as the fewest register tiles of at most mr rows,
// their rows as even as can be (the first ones one row longer), each computed
// without padded rows (IsaKernels::gemmTileRowsUpTo). A short tile has fewer
// chains of sums to keep the multiply-add units busy: 16 rows at mr 6 run as
// 6 + 5 + 5, not 6 + 6 + 4, and 8 rows as 4 + 4, not 6 + 2.
struct RowTiles {
  // The tiles; each has rowsEach rows, the first `longer` of them one more.
  int64_t count, rowsEach, longer;
  RowTiles(int64_t rows, int64_t mr)
      : count(ceilDiv(rows, mr)), rowsEach(count ? rows / count : 0), longer(count ? rows % count : 0) {}
  int64_t begin(int64_t tile) const { return tile * rowsEach + std::min(tile, longer); }
  int64_t rows(int64_t tile) const { return rowsEach + (tile < longer ? 1 : 0); }
};

}  // namespace ein::detail::cpu
