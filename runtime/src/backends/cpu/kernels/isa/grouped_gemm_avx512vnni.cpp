// The group-scaled gemms' register tiles on AVX512_VNNI, 16 columns a panel
// (one 32-bit lane each), used by the avx512vnni table and those built on it.
// Built with -mavx512vnni -mavx512bw; isa_select.cpp offers those tables only
// on CPUs with the features.
//
// vpdpbusd adds the 4 products of unsigned bytes (first operand) and signed
// bytes (second) of each 32-bit lane to the lane, exactly: one instruction
// where AVX2 (grouped_gemm_avx2.cpp) takes vpmaddubsw, vpmaddwd and an add,
// on twice the columns.
// - int4: the weights are u = q + 8 (unsigned) against the activations (s8);
//   8 * the group's activation sum comes off, as on AVX2.
// - int8: both signed, so |b| (u8, up to 128) against a negated where b < 0
//   (a masked subtraction from zero: AVX-512 has no vpsignb; a in
//   [-127, 127] negates safely).
// A group's integer sums run in two chains per row, added before the group's
// scales are applied in f32 exactly as the portable tile applies them.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/grouped_gemm.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int kNr = 16;
constexpr int64_t kS4Group = groupedGroupBytes(4, kNr), kS8Group = groupedGroupBytes(8, kNr);
inline __m512i broadcastQuad(const int8_t *from) {
  int32_t quad;
  std::memcpy(&quad, from, 4);
  return _mm512_set1_epi32(quad);
}

// acc[r] += the group's sums (int32) times aScale of the row and the group's f16 scales.
template <int MR>
[[gnu::always_inline]] inline void addScaledGroup(const __m512i (&sums)[2][MR], const __m512i *offsets,
                                                  const float *aScale, int64_t lds, int64_t g, const uint8_t *scaleBits,
                                                  __m512 (&acc)[MR]) {
  const __m512 scales = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(scaleBits)));
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) {
    __m512i exact = _mm512_add_epi32(sums[0][r], sums[1][r]);
    if (offsets) exact = _mm512_sub_epi32(exact, offsets[r]);
    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(aScale[r * lds + g]), scales);
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), scale, acc[r]);
  }
}

// IsaKernels::s4GemmTile's c for MR rows; Prefetch: pulling the stream
// ahead in software (prefetchGroup), else the hardware's prefetchers alone
// (the RowUnprefetched tiles' one row: more rows, with more arithmetic a
// byte, streamed 0.6-0.8x as fast without it on Zen 4).
template <int MR, bool Prefetch>
void s4Tile(int64_t groups, const int8_t *a, int64_t lda, const float *aScale, const int32_t *aSum, int64_t lds,
            const uint8_t *panel, float *c, int64_t ldc) {
  __m512 acc[MR];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t *weights = panel + g * kS4Group;
    if constexpr (Prefetch) prefetchGroup<kS4Group, 512>(weights);
    __m512i sums[2][MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) sums[0][r] = sums[1][r] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int d = 0; d < 4; ++d) {
      const __m512i packed = _mm512_loadu_si512(weights + d * 4 * kNr);
      const __m512i low = _mm512_and_si512(packed, nibble);
      const __m512i high = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const int8_t *row = a + r * lda + g * kWeightGroup + 8 * d;
        sums[0][r] = _mm512_dpbusd_epi32(sums[0][r], low, broadcastQuad(row));
        sums[1][r] = _mm512_dpbusd_epi32(sums[1][r], high, broadcastQuad(row + 4));
      }
    }
    __m512i offsets[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) offsets[r] = _mm512_set1_epi32(8 * aSum[r * lds + g]);
    addScaledGroup<MR>(sums, offsets, aScale, lds, g, weights + 16 * kNr, acc);
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) _mm512_storeu_ps(c + r * ldc, acc[r]);
}

// IsaKernels::s8GroupedGemmTile's c for MR rows: as s4Tile over a group's
// eight blocks of 4 k.
template <int MR, bool Prefetch>
void s8GroupedTile(int64_t groups, const int8_t *a, int64_t lda, const float *aScale, int64_t lds,
                   const uint8_t *panel, float *c, int64_t ldc) {
  __m512 acc[MR];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t *weights = panel + g * kS8Group;
    if constexpr (Prefetch) prefetchGroup<kS8Group, 512>(weights);
    __m512i sums[2][MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) sums[0][r] = sums[1][r] = zero;
#pragma GCC unroll 8
    for (int d = 0; d < 8; ++d) {
      const __m512i signedWeights = _mm512_loadu_si512(weights + d * 4 * kNr);
      const __m512i magnitude = _mm512_abs_epi8(signedWeights);
      const __mmask64 negative = _mm512_movepi8_mask(signedWeights);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const __m512i row = broadcastQuad(a + r * lda + g * kWeightGroup + 4 * d);
        const __m512i signedRow = _mm512_mask_sub_epi8(row, negative, zero, row);
        sums[d % 2][r] = _mm512_dpbusd_epi32(sums[d % 2][r], magnitude, signedRow);
      }
    }
    addScaledGroup<MR>(sums, nullptr, aScale, lds, g, weights + 32 * kNr, acc);
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) _mm512_storeu_ps(c + r * ldc, acc[r]);
}

}  // namespace

// (see IsaKernels::s4GemmTile)
void s4GemmTileAvx512vnni(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                          const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  withGemvRows(rows, [&](auto mr) {
    s4Tile<decltype(mr)::value, true>(groups, a, lda, aScale, aSum, lds, panel, c, ldc);
  });
}
void s4GemmTileAvx512vnniRowUnprefetched(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                                         const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c,
                                         int64_t ldc) {
  withGemvRows(rows, [&](auto mr) {
    constexpr int kRows = decltype(mr)::value;
    s4Tile<kRows, (kRows > 1)>(groups, a, lda, aScale, aSum, lds, panel, c, ldc);
  });
}

// (see IsaKernels::s8GroupedGemmTile)
void s8GroupedGemmTileAvx512vnni(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                                 const int32_t * /*aSum*/, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  withGemvRows(rows, [&](auto mr) {
    s8GroupedTile<decltype(mr)::value, true>(groups, a, lda, aScale, lds, panel, c, ldc);
  });
}
void s8GroupedGemmTileAvx512vnniRowUnprefetched(int rows, int64_t groups, const int8_t *a, int64_t lda,
                                                const float *aScale, const int32_t * /*aSum*/, int64_t lds,
                                                const uint8_t *panel, float *c, int64_t ldc) {
  withGemvRows(rows, [&](auto mr) {
    constexpr int kRows = decltype(mr)::value;
    s8GroupedTile<kRows, (kRows > 1)>(groups, a, lda, aScale, lds, panel, c, ldc);
  });
}

}  // namespace ein::detail::cpu
