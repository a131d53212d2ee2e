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

// A block of `rows` rows as register tiles of mr rows, the last one short
// where mr does not divide rows (computed without padded rows:
// IsaKernels::gemmTileRowsUpTo). A last tile of under kMinTileRows rows has
// too few chains of sums to keep the multiply-add units busy and costs as
// much as one of kMinTileRows, so it shares the rows of the tile before:
// 8 rows at mr 6 as 4 + 4, not 6 + 2 (bf16 weights on AVX2, 8 rows: 1.07-1.21x
// faster).
struct RowTiles {
  static constexpr int64_t kMinTileRows = 4;
  int64_t count, mr, last, beforeLast;  // the tiles; the rows of the full ones, the last and the one before it
  RowTiles(int64_t rows, int64_t mr) : count(ceilDiv(rows, mr)), mr(mr), last(rows - (count - 1) * mr), beforeLast(mr) {
    if (count > 1 && last < kMinTileRows) {
      beforeLast = (mr + last + 1) / 2;
      last = mr + last - beforeLast;
    }
  }
  int64_t begin(int64_t tile) const { return tile * mr - (tile == count - 1 ? mr - beforeLast : 0); }
  int64_t rows(int64_t tile) const { return tile == count - 1 ? last : tile == count - 2 ? beforeLast : mr; }
};

}  // namespace ein::detail::cpu
