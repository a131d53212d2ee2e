// The int8 gemm's register tile and row quantization for AVX2, used by the
// avx2 table and by avx512 on CPUs without VNNI. Built with -mavx2.
//
// vpmaddubsw multiplies u8 by s8 and adds adjacent pairs into saturating
// int16; with both operands symmetric s8 in [-127, 127] (quantize_s8.hpp) the
// sign trick keeps it exact: |a| (u8) times b with a's sign (vpsignb), so a
// pair sums to at most 2 * 127 * 127 = 32258 < 32767. vpmaddwd by ones then
// adds the two pairs of each 32-bit lane (4 consecutive k of one column) into
// int32. No offset: activations are stored as plain s8.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/s8_gemm.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int kMr = 4, kNv = 2;  // 4 x 16 int32 accumulators: 8 registers, and 2 of b, 4 temporaries

// c[r * ldc + j] (+)= sum_p a[r * lda + p] * b[p][j] for r < MR; the gemv
// (Prefetch) also pulls the panel's lines ahead (GemvPrefetch).
template <int MR, bool Prefetch>
inline void s8Tile(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                   bool accumulate, SpreadPrefetch ahead) {
  __m256i acc[MR][kNv];
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < kNv; ++v)
      acc[r][v] = accumulate ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(c + r * ldc + v * 8))
                             : _mm256_setzero_si256();
  for (int64_t q = 0; q < quads; ++q) {
    ahead.step();
    if constexpr (Prefetch) GemvPrefetch<256>::line(b + q * kNv * 8 * 4);
    __m256i bv[kNv];
#pragma GCC unroll 2
    for (int v = 0; v < kNv; ++v) bv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b + (q * kNv * 8 + v * 8) * 4));
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      int32_t quad;
      std::memcpy(&quad, a + r * lda + 4 * q, 4);
      const __m256i ar = _mm256_set1_epi32(quad), magnitude = _mm256_abs_epi8(ar);
#pragma GCC unroll 2
      for (int v = 0; v < kNv; ++v) {
        const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(bv[v], ar));
        acc[r][v] = _mm256_add_epi32(acc[r][v], _mm256_madd_epi16(pairs, ones));
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < kNv; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i *>(c + r * ldc + v * 8), acc[r][v]);
}

}  // namespace

// (see IsaKernels::s8GemmTile)
void s8GemmTileAvx2(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                    bool accumulate, const char *prefetch, int64_t prefetchBytes) {
  s8Tile<kMr, false>(quads, a, lda, b, c, ldc, accumulate, SpreadPrefetch(prefetch, prefetchBytes, quads));
}

// (see IsaKernels::s8GemvPanel)
void s8GemvPanelAvx2(int rows, int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c,
                     int64_t ldc, const char *prefetch, int64_t prefetchBytes) {
  withGemvRows(rows, [&](auto mr) {
    s8Tile<decltype(mr)::value, true>(quads, a, lda, b, c, ldc, false, SpreadPrefetch(prefetch, prefetchBytes, quads));
  });
}

void s8DequantizeRowAvx2(const int32_t *acc, const int32_t *columnSums, int32_t offset, float rowScale,
                         const float *columnScale, int64_t n, float *out) {
  const __m256 row = _mm256_set1_ps(rowScale);
  const __m256i off = _mm256_set1_epi32(offset);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(columnSums + j));
    const __m256i exact = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(acc + j)),
                                           _mm256_mullo_epi32(off, sums));
    const __m256 scale = _mm256_mul_ps(row, _mm256_loadu_ps(columnScale + j));
    _mm256_storeu_ps(out + j, _mm256_mul_ps(scale, _mm256_cvtepi32_ps(exact)));
  }
  dequantizeRowS8(acc + j, columnSums + j, offset, rowScale, columnScale + j, n - j, out + j);
}

// quantizeRowS8 (offset 0) on a contiguous row, 8 floats at a time; the
// int32 results narrow 32 at a time (vpackssdw, vpacksswb, then vpermd to undo
// their per-lane order), the tail one by one.
float s8QuantizeRowAvx2(const float *x, int64_t k, int64_t kPadded, uint8_t *q) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 largest = _mm256_set1_ps(std::numeric_limits<float>::max());
  __m256 maxv = _mm256_setzero_ps(), notFinite = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    const __m256 v = _mm256_and_ps(_mm256_loadu_ps(x + p), absMask);
    notFinite = _mm256_or_ps(notFinite, _mm256_cmp_ps(v, largest, _CMP_NLE_UQ));
    maxv = _mm256_max_ps(maxv, v);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, maxv);
  float absMax = 0.0f;
  for (float lane : lanes) absMax = lane > absMax ? lane : absMax;
  bool finite = _mm256_movemask_ps(notFinite) == 0;
  for (; p < k; ++p) {
    const float magnitude = std::fabs(x[p]);
    finite &= magnitude <= std::numeric_limits<float>::max();
    absMax = magnitude > absMax ? magnitude : absMax;
  }
  const RowQuantization row = rowQuantization(absMax, finite);
  if (row.inverse == 0.0f) {
    std::memset(q, 0, static_cast<size_t>(kPadded));
    return row.scale;
  }
  const __m256 inverse = _mm256_set1_ps(row.inverse), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  auto convert = [&](const float *from) {
    const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(from), inverse), lo), hi);
    return _mm256_cvtps_epi32(v);
  };
  for (p = 0; p + 32 <= k; p += 32) {
    const __m256i words = _mm256_packs_epi32(convert(x + p), convert(x + p + 8));
    const __m256i words2 = _mm256_packs_epi32(convert(x + p + 16), convert(x + p + 24));
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(words, words2), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(q + p), bytes);
  }
  for (; p < kPadded; ++p) q[p] = p < k ? static_cast<uint8_t>(quantizeS8(x[p], row.inverse)) : 0;
  return row.scale;
}

}  // namespace ein::detail::cpu
