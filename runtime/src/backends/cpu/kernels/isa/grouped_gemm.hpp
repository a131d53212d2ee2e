// The group-scaled gemms' register tiles (IsaKernels::s4GemmTile,
// s8GroupedGemmTile) per ISA (grouped_gemm_avx2.cpp,
// grouped_gemm_portable.cpp, each built for its ISA), the packed panels they
// read, and how a table takes them. Both weights hold a scale per group of
// 32 along k and column (int4: q4_0's format; int8 with b_group_scale:
// q8_0's), and a panel's group carries its weights and scales on one stream.
//
// A panel holds kGroupedPanelColumns columns of b; per group g of 32 along k:
// - int4, kS4GroupBytes bytes: 128 bytes of weights, then the f16 scales:
//     byte g * kS4GroupBytes + d * 32 + j * 4 + t, for d < 4, j < 8, t < 4, is
//       u(b[32g + 8d + t][j]) | u(b[32g + 8d + 4 + t][j]) << 4
//     with u(q) = q + 8 in [0, 15] (q in [-8, 7]; 8 past k or n), so one
//     32-byte load gives, masked and shifted, two blocks of 4 k by 8 columns;
// - int8, kS8GroupBytes bytes: 256 bytes of weights, then the f16 scales:
//     byte g * kS8GroupBytes + d * 32 + j * 4 + t, for d < 8, j < 8, t < 4, is
//       b[32g + 4d + t][j] as s8 (0 past k or n);
// then bytes 2j past the weights: the f16 scale of column j (0 past n). A
// block holds 4 consecutive k of a column in a 32-bit lane, the int8 tile's
// order.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels/isa/isa.hpp"

namespace ein::detail::cpu {

inline constexpr int kGroupedPanelColumns = 8;
inline constexpr int64_t kWeightGroup = 32;
inline constexpr int64_t kS4GroupBytes = 128 + 2 * kGroupedPanelColumns;
inline constexpr int64_t kS8GroupBytes = 256 + 2 * kGroupedPanelColumns;

#define EIN_GROUPED_GEMM_FUNCTIONS(Isa)                                                                       \
  void s4GemmTile##Isa(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,           \
                       const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc);            \
  void s8GroupedGemmTile##Isa(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,    \
                              const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc);     \
  void s8QuantizeGroups##Isa(const float *x, int64_t k, int64_t groups, int8_t *q, float *scale, int32_t *sum);
EIN_GROUPED_GEMM_FUNCTIONS(Avx2)
EIN_GROUPED_GEMM_FUNCTIONS(Portable)
#undef EIN_GROUPED_GEMM_FUNCTIONS

#define EIN_USE_GROUPED_GEMM(table, Isa)                   \
  do {                                                     \
    (table).s4GemmTile = &s4GemmTile##Isa;                 \
    (table).s8GroupedGemmTile = &s8GroupedGemmTile##Isa;   \
    (table).s8QuantizeGroups = &s8QuantizeGroups##Isa;     \
  } while (false)

}  // namespace ein::detail::cpu
