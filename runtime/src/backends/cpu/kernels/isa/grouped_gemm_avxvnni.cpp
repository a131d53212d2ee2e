// The group-scaled gemms' register tiles on AVX-VNNI (the VEX vpdpbusd of
// CPUs with AVX2, with or without AVX-512), used by the avx2vnni table. Built
// with -mavxvnni; isa_select.cpp offers the table only on CPUs with the
// feature. Panels of 8 columns (grouped_gemm.hpp).
//
// vpdpbusd adds the 4 products of unsigned bytes (first operand) and signed
// bytes (second) of each 32-bit lane to the lane, exactly: one instruction
// where AVX2 (grouped_gemm_avx2.cpp) takes vpmaddubsw, vpmaddwd and an add.
// - int4: the weights are u = q + 8 (unsigned) against the activations (s8);
//   8 * the group's activation sum comes off, as on AVX2.
// - int8: both signed, so |b| (u8, up to 128) against a with b's sign
//   (vpsignb; a in [-127, 127] negates safely), as AVX2's sign trick.
// The group's scales are applied in f32 exactly as the portable tile applies
// them.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/grouped_gemm.hpp"

namespace ein::detail::cpu {
namespace {

inline __m256i broadcastQuad(const int8_t *from) {
  int32_t quad;
  std::memcpy(&quad, from, 4);
  return _mm256_set1_epi32(quad);
}

// IsaKernels::s4GemmTile's c for MR rows.
template <int MR>
inline void s4Tile(int64_t groups, const int8_t *a, int64_t lda, const float *aScale, const int32_t *aSum,
                   int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  __m256 acc[MR];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t *weights = panel + g * kS4GroupBytes;
    // A group is 2.25 cache lines: pull the lines kGemvPrefetchBytes ahead.
    __builtin_prefetch(weights + kGemvPrefetchBytes, 0, 3);
    __builtin_prefetch(weights + kGemvPrefetchBytes + 64, 0, 3);
    __builtin_prefetch(weights + kGemvPrefetchBytes + 128, 0, 3);
    __m256i sums[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) sums[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int d = 0; d < 4; ++d) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(weights + d * 32));
      const __m256i low = _mm256_and_si256(packed, nibble);
      const __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const int8_t *row = a + r * lda + g * kWeightGroup + 8 * d;
        sums[r] = _mm256_dpbusd_avx_epi32(sums[r], low, broadcastQuad(row));
        sums[r] = _mm256_dpbusd_avx_epi32(sums[r], high, broadcastQuad(row + 4));
      }
    }
    const __m256 scales = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(weights + 128)));
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const __m256i exact = _mm256_sub_epi32(sums[r], _mm256_set1_epi32(8 * aSum[r * lds + g]));
      const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(aScale[r * lds + g]), scales);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(exact), scale, acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) _mm256_storeu_ps(c + r * ldc, acc[r]);
}

// IsaKernels::s8GroupedGemmTile's c for MR rows: as s4Tile over a
// group's eight blocks of 4 k.
template <int MR>
inline void s8GroupedTile(int64_t groups, const int8_t *a, int64_t lda, const float *aScale, int64_t lds,
                          const uint8_t *panel, float *c, int64_t ldc) {
  __m256 acc[MR];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t *weights = panel + g * kS8GroupBytes;
    // A group is 4.25 cache lines: pull the lines kGemvPrefetchBytes ahead.
#pragma GCC unroll 5
    for (int line = 0; line < 5; ++line) __builtin_prefetch(weights + kGemvPrefetchBytes + 64 * line, 0, 3);
    __m256i sums[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) sums[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int d = 0; d < 8; ++d) {
      const __m256i signedWeights = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(weights + d * 32));
      const __m256i magnitude = _mm256_abs_epi8(signedWeights);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const __m256i signedRow =
            _mm256_sign_epi8(broadcastQuad(a + r * lda + g * kWeightGroup + 4 * d), signedWeights);
        sums[r] = _mm256_dpbusd_avx_epi32(sums[r], magnitude, signedRow);
      }
    }
    const __m256 scales = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(weights + 256)));
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(aScale[r * lds + g]), scales);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[r]), scale, acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) _mm256_storeu_ps(c + r * ldc, acc[r]);
}

}  // namespace

// (see IsaKernels::s4GemmTile)
void s4GemmTileAvxvnni(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                       const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  withGemvRows(rows, [&](auto mr) { s4Tile<decltype(mr)::value>(groups, a, lda, aScale, aSum, lds, panel, c, ldc); });
}

// (see IsaKernels::s8GroupedGemmTile)
void s8GroupedGemmTileAvxvnni(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                              const int32_t * /*aSum*/, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  withGemvRows(rows, [&](auto mr) { s8GroupedTile<decltype(mr)::value>(groups, a, lda, aScale, lds, panel, c, ldc); });
}

}  // namespace ein::detail::cpu
