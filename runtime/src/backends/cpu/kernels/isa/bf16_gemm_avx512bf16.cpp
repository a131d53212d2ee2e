// The bf16 gemm's register tile and activation packing for AVX512_BF16
// (vdpbf16ps, vcvtne2ps2bf16). Built with -mavx512bf16 and used only through
// the avx512bf16 table (isa_avx512.cpp), which isa_select.cpp offers only on
// CPUs with the feature.
//
// Why bf16 pairs: vdpbf16ps multiplies the 2 bf16 of each 32-bit lane of a
// and b and adds both products to the f32 lane of the accumulator, so one
// instruction does 32 multiply-adds where an f32 FMA does 16, and the weights
// stream at half the bytes. The products of two bf16 are exact in f32; the
// sums round as f32 sums do.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/isa.hpp"
#include "ein/half_float.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int kMr = 6, kNv = 4;  // the avx512 table's 6 x 64 tile, so packed panels are shared

inline __m512bh asBf16(__m512i v) { return reinterpret_cast<__m512bh &>(v); }

// c[r * ldc + j] (+)= sum_q a[r * lda + q] . b[q * 64 + j] for r < MR: MR x 4
// accumulators, 4 weight vectors loaded and MR activation pairs broadcast
// per pair of k. The tile (NextPanel) pulls one line of the next weight
// panel every few steps, as the f32 tile does; the gemv pulls its own
// panel's lines kGemvPrefetchBytes ahead.
template <int MR, bool NextPanel>
[[gnu::always_inline]] inline void bf16Tile(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                                            int64_t ldc, bool accumulate, const char *prefetch,
                                            int64_t prefetchBytes) {
  __m512 acc[MR][kNv];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + v * 16) : _mm512_setzero_ps();
  const int64_t lines = prefetchBytes / 64;
  const int64_t every = lines > 0 ? (pairs / lines > 1 ? pairs / lines : 1) : pairs + 1;
  int64_t line = 0, countdown = every;
  for (int64_t q = 0; q < pairs; ++q) {
    if constexpr (NextPanel) {
      if (--countdown == 0) {
        countdown = every;
        if (line < lines) __builtin_prefetch(prefetch + 64 * line++, 0, 2);
      }
    }
    __m512bh bv[kNv];
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) {
      if constexpr (!NextPanel) __builtin_prefetch(b + q * kNv * 16 + v * 16 + kGemvPrefetchBytes / 4, 0, 3);
      bv[v] = asBf16(_mm512_loadu_si512(b + q * kNv * 16 + v * 16));
    }
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m512bh ar = asBf16(_mm512_set1_epi32(static_cast<int>(a[r * lda + q])));
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, bv[v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) _mm512_storeu_ps(c + r * ldc + v * 16, acc[r][v]);
}

}  // namespace

// (see IsaKernels::bf16GemmTile)
void bf16GemmTileAvx512bf16(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc,
                            bool accumulate, const char *prefetch, int64_t prefetchBytes) {
  bf16Tile<kMr, true>(pairs, a, lda, b, c, ldc, accumulate, prefetch, prefetchBytes);
}

// (see IsaKernels::bf16GemvPanel)
void bf16GemvPanelAvx512bf16(int rows, int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                             int64_t ldc) {
  withGemvRows(rows,
               [&](auto mr) { bf16Tile<decltype(mr)::value, false>(pairs, a, lda, b, c, ldc, false, nullptr, 0); });
}

// dst[r * ldd + q] = bf16 pair (a[r][2q], a[r][2q + 1]) (see IsaKernels::bf16PackRows).
// Contiguous rows convert 32 floats per vcvtne2ps2bf16 (round to nearest
// even; like all AVX512_BF16 conversions it reads subnormals as zero) into
// 16 pairs stored as one vector, the tail through masked loads and a masked
// store (the missing partner loads as 0).
void bf16PackRowsAvx512bf16(const float *a, int64_t sM, int64_t sK, int64_t rows, int64_t kc, int mr, uint32_t *dst,
                            int64_t ldd) {
  const int64_t pairs = (kc + 1) / 2;
  for (int r = 0; r < mr; ++r) {
    uint32_t *out = dst + r * ldd;
    if (r >= rows) {
      std::memset(out, 0, sizeof(uint32_t) * static_cast<size_t>(pairs));
      continue;
    }
    const float *src = a + r * sM;
    if (sK == 1) {
      int64_t q = 0;
      for (; 2 * q + 32 <= kc; q += 16) {
        const __m512bh packed = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 2 * q + 16), _mm512_loadu_ps(src + 2 * q));
        _mm512_storeu_si512(out + q, reinterpret_cast<const __m512i &>(packed));
      }
      if (const int64_t left = kc - 2 * q; left > 0) {
        const auto low = static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1);
        const auto high = static_cast<__mmask16>(left > 16 ? (1u << (left - 16)) - 1 : 0);
        const __m512bh packed = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(high, src + 2 * q + 16),
                                                    _mm512_maskz_loadu_ps(low, src + 2 * q));
        _mm512_mask_storeu_epi32(out + q, static_cast<__mmask16>((1u << ((left + 1) / 2)) - 1),
                                 reinterpret_cast<const __m512i &>(packed));
      }
      continue;
    }
    for (int64_t q = 0; q < pairs; ++q) {
      const uint32_t low = floatToBfloat(src[2 * q * sK]);
      const uint32_t high = 2 * q + 1 < kc ? floatToBfloat(src[(2 * q + 1) * sK]) : 0;
      out[q] = low | high << 16;
    }
  }
}

}  // namespace ein::detail::cpu
