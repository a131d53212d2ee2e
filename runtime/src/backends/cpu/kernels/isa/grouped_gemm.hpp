// The group-scaled gemms' register tiles (IsaKernels::s4GemmTile,
// s8GroupedGemmTile) per ISA (grouped_gemm_avx512vnni.cpp,
// grouped_gemm_avxvnni.cpp, grouped_gemm_avx2.cpp, grouped_gemm_portable.cpp,
// each built for its ISA), the packed panels they read, and how a table takes
// them. Both weights hold a scale per group of 32 along k and column (int4:
// q4_0's format; int8 with b_group_scale: q8_0's), and a panel's group carries
// its weights and scales on one stream.
//
// A panel holds NR columns of b (the table's groupedNr: 8, or 16 where a
// register holds 16 int32 lanes); per group g of 32 along k,
// groupedGroupBytes(bits, NR) bytes:
// - int4, 16 * NR bytes of weights, then the f16 scales:
//     byte d * 4NR + j * 4 + t of the group, for d < 4, j < NR, t < 4, is
//       u(b[32g + 8d + t][j]) | u(b[32g + 8d + 4 + t][j]) << 4
//     with u(q) = q + 8 in [0, 15] (q in [-8, 7]; 8 past k or n), so one
//     4NR-byte load gives, masked and shifted, two blocks of 4 k by NR columns;
// - int8, 32 * NR bytes of weights, then the f16 scales:
//     byte d * 4NR + j * 4 + t of the group, for d < 8, j < NR, t < 4, is
//       b[32g + 4d + t][j] as s8 (0 past k or n);
// then bytes 2j past the weights: the f16 scale of column j (0 past n). A
// block holds 4 consecutive k of a column in a 32-bit lane, the int8 tile's
// order.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels/isa/isa.hpp"

namespace ein::detail::cpu {

inline constexpr int64_t kWeightGroup = 32;
inline constexpr int64_t groupedGroupBytes(int bits, int nr) { return kWeightGroup / 8 * bits * nr + 2 * nr; }
// The 8-column panels' groups.
inline constexpr int64_t kS4GroupBytes = groupedGroupBytes(4, 8);
inline constexpr int64_t kS8GroupBytes = groupedGroupBytes(8, 8);

// Pulls a group of `Bytes` bytes ahead of `group` (the tiles' stream of
// groups) a line at a time, as a gemv of VectorBits registers does, twice
// as far ahead on 512-bit (8 KiB): these tiles spend more arithmetic on a
// byte than the int8 gemv (weights in L2, 1 thread: int4 40 GB/s, int8 in
// groups 46, int8 65). On AMD's cores the 512-bit tiles take one row without
// it (isa_avx512.cpp); docs/benchmarks.md.
template <int64_t Bytes, int VectorBits>
[[gnu::always_inline]] inline void prefetchGroup(const uint8_t *group) {
  using Prefetch = GemvPrefetch<VectorBits, VectorBits == 512 ? 2 : 1>;
#pragma GCC unroll 9
  for (int64_t line = 0; line < Bytes; line += 64) Prefetch::line(group + line);
}

// One panel of `cols` <= nr columns in the layout above, from b's elements at
// offset + p * bK + j * bN (i4: two a byte, low nibble first; i8: a byte) and
// their f16 scales at g * sG + j * sN.
void packGroupedPanel(int bits, int nr, const uint8_t *b, int64_t offset, int64_t bK, int64_t bN,
                      const uint16_t *scales, int64_t sG, int64_t sN, int64_t k, int64_t cols, uint8_t *dst);

#define EIN_GROUPED_GEMM_TILES(Isa)                                                                           \
  void s4GemmTile##Isa(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,           \
                       const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc);            \
  void s8GroupedGemmTile##Isa(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,    \
                              const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc);
EIN_GROUPED_GEMM_TILES(Avx512vnni)
EIN_GROUPED_GEMM_TILES(Avx512vnniRowUnprefetched)  // the same, one row on the hardware's prefetchers alone
EIN_GROUPED_GEMM_TILES(Avxvnni)
EIN_GROUPED_GEMM_TILES(Avx2)
EIN_GROUPED_GEMM_TILES(Portable)
#undef EIN_GROUPED_GEMM_TILES
void s8QuantizeGroupsAvx2(const float *x, int64_t k, int64_t groups, int8_t *q, float *scale, int32_t *sum);
void s8QuantizeGroupsPortable(const float *x, int64_t k, int64_t groups, int8_t *q, float *scale, int32_t *sum);

// The table's group-scaled gemm: TileIsa's tiles over panels of nr
// columns, QuantizeIsa's row quantization.
#define EIN_USE_GROUPED_GEMM(table, TileIsa, nr, QuantizeIsa)    \
  do {                                                     \
    (table).groupedNr = (nr);                              \
    (table).s4GemmTile = &s4GemmTile##TileIsa;             \
    (table).s8GroupedGemmTile = &s8GroupedGemmTile##TileIsa; \
    (table).s8QuantizeGroups = &s8QuantizeGroups##QuantizeIsa; \
  } while (false)

}  // namespace ein::detail::cpu
