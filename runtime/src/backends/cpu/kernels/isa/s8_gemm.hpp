// The int8 gemm's per-ISA pieces (s8_gemm_avx512vnni.cpp, s8_gemm_avxvnni.cpp,
// s8_gemm_avx2.cpp, s8_gemm_portable.cpp, each built for its ISA) and how a table takes them
// (see IsaKernels::s8GemmTile).
#pragma once

#include <cstdint>

#include "backends/cpu/kernels/isa/isa.hpp"

namespace ein::detail::cpu {

#define EIN_S8_GEMM_FUNCTIONS(Isa)                                                                              \
  void s8GemmTile##Isa(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc, \
                       bool accumulate, const char *prefetch, int64_t prefetchBytes);                           \
  void s8GemvPanel##Isa(int rows, int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c,  \
                        int64_t ldc, const char *prefetch, int64_t prefetchBytes);                              \
  float s8QuantizeRow##Isa(const float *x, int64_t k, int64_t kPadded, uint8_t *q);                             \
  void s8DequantizeRow##Isa(const int32_t *acc, const int32_t *columnSums, int32_t offset, float rowScale,     \
                            const float *columnScale, int64_t n, float *out);
EIN_S8_GEMM_FUNCTIONS(Avx512vnni)
EIN_S8_GEMM_FUNCTIONS(Avx2)
EIN_S8_GEMM_FUNCTIONS(Avxvnni)
EIN_S8_GEMM_FUNCTIONS(Portable)
#undef EIN_S8_GEMM_FUNCTIONS

// The table's int8 gemm: an mr x nr tile reading activations with `offset`
// (128: u8 = q + 128; 0: s8).
#define EIN_USE_S8_GEMM(table, Isa, mr, nr, offset) \
  do {                                              \
    (table).s8GemmMr = (mr);                        \
    (table).s8GemmNr = (nr);                        \
    (table).s8ActivationOffset = (offset);          \
    (table).s8GemmTile = &s8GemmTile##Isa;          \
    (table).s8GemvPanel = &s8GemvPanel##Isa;        \
    (table).s8QuantizeRow = &s8QuantizeRow##Isa;    \
    (table).s8DequantizeRow = &s8DequantizeRow##Isa; \
  } while (false)

}  // namespace ein::detail::cpu
