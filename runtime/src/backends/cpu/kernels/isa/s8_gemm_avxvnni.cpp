// The int8 gemm's register tile for AVX-VNNI (the VEX-encoded, 256-bit
// vpdpbusd of CPUs with AVX2 but without AVX-512, and of some with it), used
// by the avx2vnni table. Built with -mavxvnni -mavx2; isa_select.cpp offers
// the table only on CPUs with the feature.
//
// As on AVX512_VNNI (s8_gemm_avx512vnni.cpp): activations stored as u8 =
// q + 128, 4 products per 32-bit lane added exactly, and the driver subtracts
// 128 * the weights' column sums. Row quantization and scaling are AVX2's.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/s8_gemm.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int kMr = 6, kNv = 2;  // 6 x 16 int32 accumulators: 12 registers, 2 of b, 1 broadcast

// c[r * ldc + j] (+)= sum_p a[r * lda + p] * b[p][j] for r < MR; the gemv
// (Prefetch) also pulls the panel's lines ahead (GemvPrefetch).
template <int MR, bool Prefetch>
inline void s8Tile(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                   bool accumulate, SpreadPrefetch ahead) {
  __m256i acc[MR][kNv];
#pragma GCC unroll 6
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
    for (int v = 0; v < kNv; ++v)
      bv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b + (q * kNv * 8 + v * 8) * 4));
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      int32_t quad;
      std::memcpy(&quad, a + r * lda + 4 * q, 4);
      const __m256i ar = _mm256_set1_epi32(quad);
#pragma GCC unroll 2
      for (int v = 0; v < kNv; ++v) acc[r][v] = _mm256_dpbusd_avx_epi32(acc[r][v], ar, bv[v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < kNv; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i *>(c + r * ldc + v * 8), acc[r][v]);
}

}  // namespace

// (see IsaKernels::s8GemmTile)
void s8GemmTileAvxvnni(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                       bool accumulate, const char *prefetch, int64_t prefetchBytes) {
  s8Tile<kMr, false>(quads, a, lda, b, c, ldc, accumulate, SpreadPrefetch(prefetch, prefetchBytes, quads));
}

// (see IsaKernels::s8GemvPanel)
void s8GemvPanelAvxvnni(int rows, int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c,
                        int64_t ldc, const char *prefetch, int64_t prefetchBytes) {
  withGemvRows(rows, [&](auto mr) {
    s8Tile<decltype(mr)::value, true>(quads, a, lda, b, c, ldc, false, SpreadPrefetch(prefetch, prefetchBytes, quads));
  });
}

// AVX2's quantization (s8_gemm_avx2.cpp), then + 128 (mod 256) on every byte.
float s8QuantizeRowAvxvnni(const float *x, int64_t k, int64_t kPadded, uint8_t *q) {
  const float scale = s8QuantizeRowAvx2(x, k, kPadded, q);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  int64_t p = 0;
  for (; p + 32 <= kPadded; p += 32) {
    __m256i *at = reinterpret_cast<__m256i *>(q + p);
    _mm256_storeu_si256(at, _mm256_xor_si256(_mm256_loadu_si256(at), flip));
  }
  for (; p < kPadded; ++p) q[p] ^= 0x80;
  return scale;
}

void s8DequantizeRowAvxvnni(const int32_t *acc, const int32_t *columnSums, int32_t offset, float rowScale,
                            const float *columnScale, int64_t n, float *out) {
  s8DequantizeRowAvx2(acc, columnSums, offset, rowScale, columnScale, n, out);
}

}  // namespace ein::detail::cpu
