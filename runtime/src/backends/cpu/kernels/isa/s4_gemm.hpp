// The int4 gemm's register tile (IsaKernels::s4GemmTile) per ISA
// (s4_gemm_avx2.cpp, s4_gemm_portable.cpp, each built for its ISA), the
// packed panel it reads, and how a table takes it.
//
// A panel holds kS4PanelColumns columns of b; per group g of 32 along k,
// kS4GroupBytes bytes: 128 bytes of weights, then the columns' f16 scales:
//   byte g * kS4GroupBytes + d * 32 + j * 4 + t, for d < 4, j < 8, t < 4, is
//     u(b[32g + 8d + t][j]) | u(b[32g + 8d + 4 + t][j]) << 4
//   with u(q) = q + 8 in [0, 15] (q in [-8, 7]; 8 past k or n), and
//   bytes g * kS4GroupBytes + 128 + 2j the f16 scale of column j (0 past n).
// One 32-byte load then gives, masked and shifted, two blocks of 4 k by 8
// columns in the int8 tile's order (4 consecutive k of a column in a 32-bit
// lane), and a group's weights and scales lie on one stream.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels/isa/isa.hpp"

namespace ein::detail::cpu {

inline constexpr int kS4PanelColumns = 8;
inline constexpr int64_t kS4Group = 32;
inline constexpr int64_t kS4GroupBytes = 128 + 2 * kS4PanelColumns;

#define EIN_S4_GEMM_FUNCTIONS(Isa)                                                                            \
  void s4GemmTile##Isa(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,           \
                       const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc);            \
  void s4QuantizeRow##Isa(const float *x, int64_t k, int64_t groups, int8_t *q, float *scale, int32_t *sum);
EIN_S4_GEMM_FUNCTIONS(Avx2)
EIN_S4_GEMM_FUNCTIONS(Portable)
#undef EIN_S4_GEMM_FUNCTIONS

#define EIN_USE_S4_GEMM(table, Isa)        \
  do {                                     \
    (table).s4GemmTile = &s4GemmTile##Isa; \
    (table).s4QuantizeRow = &s4QuantizeRow##Isa; \
  } while (false)

}  // namespace ein::detail::cpu
