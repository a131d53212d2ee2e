// The int8 gemm's register tile and row quantization for AVX512_VNNI
// (vpdpbusd). Built with -mavx512vnni and used only through the avx512vnni
// and avx512bf16 tables (isa_avx512.cpp), which isa_select.cpp offers only on
// CPUs with the feature.
//
// vpdpbusd multiplies the 4 unsigned bytes of each 32-bit lane of its first
// operand with the 4 signed bytes of the second and adds the 4 products to the
// int32 lane: 64 multiply-adds per instruction, exact (no intermediate
// saturation). Activations are symmetric s8 (quantize_s8.hpp) stored as
// q + 128 (u8); the driver subtracts 128 * the column sums of the weights.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/s8_gemm.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int kMr = 6, kNv = 4;  // 6 x 64 int32 accumulators: 24 registers

// c[r * ldc + j] (+)= sum_p a[r * lda + p] (u8) * b[p][j] (s8) for r < MR;
// the gemv (Prefetch) also pulls the panel's lines ahead (GemvPrefetch).
template <int MR, bool Prefetch>
[[gnu::always_inline]] inline void s8Tile(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c,
                                          int64_t ldc, bool accumulate, SpreadPrefetch ahead) {
  __m512i acc[MR][kNv];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v)
      acc[r][v] = accumulate ? _mm512_loadu_si512(c + r * ldc + v * 16) : _mm512_setzero_si512();
  for (int64_t q = 0; q < quads; ++q) {
    ahead.step();
    __m512i bv[kNv];
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) {
      if constexpr (Prefetch) GemvPrefetch<512>::line(b + (q * kNv * 16 + v * 16) * 4);
      bv[v] = _mm512_loadu_si512(b + (q * kNv * 16 + v * 16) * 4);
    }
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      int32_t quad;
      std::memcpy(&quad, a + r * lda + 4 * q, 4);
      const __m512i ar = _mm512_set1_epi32(quad);
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], ar, bv[v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) _mm512_storeu_si512(c + r * ldc + v * 16, acc[r][v]);
}

}  // namespace

// (see IsaKernels::s8GemmTile)
void s8GemmTileAvx512vnni(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                          bool accumulate, const char *prefetch, int64_t prefetchBytes) {
  s8Tile<kMr, false>(quads, a, lda, b, c, ldc, accumulate, SpreadPrefetch(prefetch, prefetchBytes, quads));
}

// (see IsaKernels::s8GemvPanel)
void s8GemvPanelAvx512vnni(int rows, int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c,
                           int64_t ldc, const char *prefetch, int64_t prefetchBytes) {
  withGemvRows(rows, [&](auto mr) {
    s8Tile<decltype(mr)::value, true>(quads, a, lda, b, c, ldc, false, SpreadPrefetch(prefetch, prefetchBytes, quads));
  });
}

void s8DequantizeRowAvx512vnni(const int32_t *acc, const int32_t *columnSums, int32_t offset, float rowScale,
                               const float *columnScale, int64_t n, float *out) {
  const __m512 row = _mm512_set1_ps(rowScale);
  const __m512i off = _mm512_set1_epi32(offset);
  for (int64_t j = 0; j < n; j += 16) {
    const auto lanes = static_cast<__mmask16>(n - j >= 16 ? 0xffff : (1u << (n - j)) - 1);
    const __m512i exact = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(lanes, acc + j),
                                           _mm512_mullo_epi32(off, _mm512_maskz_loadu_epi32(lanes, columnSums + j)));
    const __m512 scale = _mm512_mul_ps(row, _mm512_maskz_loadu_ps(lanes, columnScale + j));
    _mm512_mask_storeu_ps(out + j, lanes, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(exact)));
  }
}

// quantizeRowS8 with offset 128 on a contiguous row, 16 floats at a time:
// |x| max (and whether all are finite), then x * inverse clamped to +-127,
// converted with the default rounding (nearest even), narrowed (vpmovsdb)
// and xor-ed with 0x80 (+ 128 mod 256).
float s8QuantizeRowAvx512vnni(const float *x, int64_t k, int64_t kPadded, uint8_t *q) {
  const __m512 largest = _mm512_set1_ps(std::numeric_limits<float>::max());
  __m512 maxv = _mm512_setzero_ps();
  __mmask16 notFinite = 0;
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    const __m512 v = _mm512_abs_ps(_mm512_loadu_ps(x + p));
    notFinite |= _mm512_cmp_ps_mask(v, largest, _CMP_NLE_UQ);
    maxv = _mm512_max_ps(maxv, v);
  }
  if (p < k) {
    const auto tail = static_cast<__mmask16>((1u << (k - p)) - 1);
    const __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(tail, x + p));
    notFinite |= _mm512_cmp_ps_mask(v, largest, _CMP_NLE_UQ);
    maxv = _mm512_max_ps(maxv, v);
  }
  const RowQuantization row = rowQuantization(_mm512_reduce_max_ps(maxv), notFinite == 0);
  if (row.inverse == 0.0f) {
    std::memset(q, 0x80, static_cast<size_t>(kPadded));
    return row.scale;
  }
  const __m512 inverse = _mm512_set1_ps(row.inverse), hi = _mm512_set1_ps(127.0f), lo = _mm512_set1_ps(-127.0f);
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  for (p = 0; p < kPadded; p += 16) {
    const int64_t left = k - p;
    const auto valid = static_cast<__mmask16>(left >= 16 ? 0xffff : (left > 0 ? (1u << left) - 1 : 0));
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, x + p), inverse);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    const __m128i bytes = _mm_xor_si128(_mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v)), flip);
    const int64_t store = kPadded - p < 16 ? kPadded - p : 16;
    _mm_mask_storeu_epi8(q + p, static_cast<__mmask16>((1u << store) - 1), bytes);
  }
  return row.scale;
}

}  // namespace ein::detail::cpu
