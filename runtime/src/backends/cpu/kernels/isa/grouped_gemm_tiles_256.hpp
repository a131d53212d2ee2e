// The group-scaled gemms' register tiles on 256-bit registers, 8 columns a
// panel (grouped_gemm.hpp), over a policy P that adds a block's byte
// products into a row's group sums: AVX2's (grouped_gemm_avx2.cpp) and
// AVX-VNNI's (grouped_gemm_avxvnni.cpp). Only those files, each built for
// its ISA, include this header, so each copy of the tiles (internal linkage)
// holds only its own file's instructions.
//
// P::Sums is a row's running sums over one group; P::zero() starts them,
// P::add(sums, u, s) adds the products of unsigned bytes u and signed bytes
// s (a column's 4 bytes in each 32-bit lane), and P::total(sums) gives the
// group's exact int32 sum a column. int8 weights are signed, so |b| (u8, up to 128) is
// multiplied by a with b's sign (vpsignb; a in [-127, 127] negates safely).
// The group's scales are applied in f32 exactly as the portable tile
// applies them.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/grouped_gemm.hpp"

namespace ein::detail::cpu {
namespace {  // NOLINT: one copy per including file, each built for its ISA

inline __m256i broadcastQuad(const int8_t *from) {
  int32_t quad;
  std::memcpy(&quad, from, 4);
  return _mm256_set1_epi32(quad);
}

// acc[r] += the rows' group totals, less offset[r] (offset may be null),
// times aScale of the row and the group's f16 scales (from scaleBits).
template <class P, int MR>
[[gnu::always_inline]] inline void addScaledGroup(const typename P::Sums (&sums)[MR], const int32_t *offset,
                                                  const float *aScale, int64_t lds, int64_t g, const uint8_t *scaleBits,
                                                  __m256 (&acc)[MR]) {
  const __m256 scales = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(scaleBits)));
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) {
    __m256i exact = P::total(sums[r]);
    if (offset) exact = _mm256_sub_epi32(exact, _mm256_set1_epi32(offset[r]));
    const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(aScale[r * lds + g]), scales);
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(exact), scale, acc[r]);
  }
}

// IsaKernels::s4GemmTile's c for MR rows: a group's four 32-byte blocks,
// low and high nibbles, u = q + 8 against the activations; 8 * the group's
// activation sum comes off.
template <class P, int MR>
inline void s4Tile(int64_t groups, const int8_t *a, int64_t lda, const float *aScale, const int32_t *aSum,
                   int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  __m256 acc[MR];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t *weights = panel + g * kS4GroupBytes;
    prefetchGroup<kS4GroupBytes, 256>(weights);
    typename P::Sums sums[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) sums[r] = P::zero();
#pragma GCC unroll 4
    for (int d = 0; d < 4; ++d) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(weights + d * 32));
      const __m256i low = _mm256_and_si256(packed, nibble);
      const __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const int8_t *row = a + r * lda + g * kWeightGroup + 8 * d;
        sums[r] = P::add(sums[r], low, broadcastQuad(row));
        sums[r] = P::add(sums[r], high, broadcastQuad(row + 4));
      }
    }
    int32_t offset[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) offset[r] = 8 * aSum[r * lds + g];
    addScaledGroup<P, MR>(sums, offset, aScale, lds, g, weights + 128, acc);
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) _mm256_storeu_ps(c + r * ldc, acc[r]);
}

// IsaKernels::s8GroupedGemmTile's c for MR rows: as s4Tile over a group's
// eight blocks of 4 k.
template <class P, int MR>
inline void s8GroupedTile(int64_t groups, const int8_t *a, int64_t lda, const float *aScale, int64_t lds,
                          const uint8_t *panel, float *c, int64_t ldc) {
  __m256 acc[MR];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t *weights = panel + g * kS8GroupBytes;
    prefetchGroup<kS8GroupBytes, 256>(weights);
    typename P::Sums sums[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) sums[r] = P::zero();
#pragma GCC unroll 8
    for (int d = 0; d < 8; ++d) {
      const __m256i signedWeights = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(weights + d * 32));
      const __m256i magnitude = _mm256_abs_epi8(signedWeights);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const __m256i quad = broadcastQuad(a + r * lda + g * kWeightGroup + 4 * d);
        sums[r] = P::add(sums[r], magnitude, _mm256_sign_epi8(quad, signedWeights));
      }
    }
    addScaledGroup<P, MR>(sums, nullptr, aScale, lds, g, weights + 256, acc);
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) _mm256_storeu_ps(c + r * ldc, acc[r]);
}

// IsaKernels::s4GemmTile and s8GroupedGemmTile on P, for 1 to kGemvMaxRows rows.
template <class P>
void s4GemmTile256(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale, const int32_t *aSum,
                   int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  withGemvRows(rows, [&](auto mr) { s4Tile<P, decltype(mr)::value>(groups, a, lda, aScale, aSum, lds, panel, c, ldc); });
}
template <class P>
void s8GroupedGemmTile256(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale, int64_t lds,
                          const uint8_t *panel, float *c, int64_t ldc) {
  withGemvRows(rows, [&](auto mr) { s8GroupedTile<P, decltype(mr)::value>(groups, a, lda, aScale, lds, panel, c, ldc); });
}

}  // namespace
}  // namespace ein::detail::cpu
