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

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/isa.hpp"
#include "backends/cpu/kernels/isa/vector_math.hpp"
#include "ein/half_float.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int kMr = 6, kNv = 4;  // the avx512 table's 6 x 64 tile, so packed panels are shared

inline __m512bh asBf16(__m512i v) { return reinterpret_cast<__m512bh &>(v); }

// exp(d) for d <= 0, to the accuracy a bf16 probability needs: 2^t with
// t = d log2(e) split as n + f (n = round(t), |f| <= 1/2), 2^f by a degree 4
// fit of ours (relative error 3.7e-6 in f32, exact at f = 0) and vscalefps
// for 2^n: about half the operations of isa::vexp's ~1 ulp Cephes form. No
// lane computes a subnormal (see isa::vexp): t is clamped at -126, where the
// lanes kept (d >= isa::kExpUnderflow, t >= -125.993) have 2^n p >= 2^-126,
// and the others (-inf too) are zeroed by vscalefps's mask. NaN passes the
// clamp (vmaxps returns its second operand) and stays NaN.
inline __m512 expNonPositive(__m512 d) {
  const __m512 t = _mm512_max_ps(_mm512_set1_ps(-126.0f), _mm512_mul_ps(d, _mm512_set1_ps(1.44269504088896341f)));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(0.00957009382545948f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.05591786280274391f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.240247443318367f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6931217908859253f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  const __mmask16 kept = _mm512_cmp_ps_mask(d, _mm512_set1_ps(isa::kExpUnderflow), _CMP_NLT_UQ);  // NaN kept
  return _mm512_maskz_scalef_ps(kept, p, n);
}

// c[r * ldc + j] (+)= sum_q a[r * lda + q] . b[q * 64 + j] for r < MR: MR x 4
// accumulators, 4 weight vectors loaded and MR activation pairs broadcast
// per pair of k. The tile (NextPanel) pulls one line of the next weight
// panel every few steps, as the f32 tile does; the gemv pulls its own
// panel's lines ahead (GemvPrefetch).
// c (+)= the products of MR rows of a and a panel; the gemv (Prefetch) also
// pulls the panel's own lines ahead (GemvPrefetch), and both pull
// `ahead`'s lines (the next panel) into L2 meanwhile.
template <int MR, bool Prefetch>
[[gnu::always_inline]] inline void bf16Tile(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                                            int64_t ldc, bool accumulate, SpreadPrefetch ahead) {
  __m512 acc[MR][kNv];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + v * 16) : _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q) {
    ahead.step();
    __m512bh bv[kNv];
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) {
      if constexpr (Prefetch) GemvPrefetch<512>::line(b + q * kNv * 16 + v * 16);
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
  bf16Tile<kMr, false>(pairs, a, lda, b, c, ldc, accumulate, SpreadPrefetch(prefetch, prefetchBytes, pairs));
}

// (see IsaKernels::bf16GemvPanel)
void bf16GemvPanelAvx512bf16(int rows, int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                             int64_t ldc, bool accumulate, const char *prefetch, int64_t prefetchBytes) {
  withGemvRows(rows, [&](auto mr) {
    bf16Tile<decltype(mr)::value, true>(pairs, a, lda, b, c, ldc, accumulate,
                                        SpreadPrefetch(prefetch, prefetchBytes, pairs));
  });
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

// dst[q] = bf16 pair (exp(x[2q] - shift), exp(x[2q + 1] - shift)), returning
// the sum (see IsaKernels::bf16ExpShiftSumPairs): 32 scores at a time, two
// vectors of exponentials added to two sums and rounded into 16 pairs by one
// vcvtne2ps2bf16; the tail through masked loads, lanes past n zeroed.
float bf16ExpShiftSumPairsAvx512bf16(const float *x, int64_t n, float shift, uint32_t *dst) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
  // The 32 scores from x[j] (lanes past n masked: loaded as 0, their
  // exponentials zeroed, their pairs not stored).
  auto step = [&](int64_t j, __mmask16 low, __mmask16 high, __mmask16 pairs) {
    const __m512 e0 = _mm512_maskz_mov_ps(low, expNonPositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(low, x + j), s)));
    const __m512 e1 =
        _mm512_maskz_mov_ps(high, expNonPositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(high, x + j + 16), s)));
    sum0 = _mm512_add_ps(sum0, e0);
    sum1 = _mm512_add_ps(sum1, e1);
    const __m512bh packed = _mm512_cvtne2ps_pbh(e1, e0);
    _mm512_mask_storeu_epi32(dst + j / 2, pairs, reinterpret_cast<const __m512i &>(packed));
  };
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) step(j, 0xffff, 0xffff, 0xffff);
  if (const int64_t left = n - j; left > 0)
    step(j, static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1),
         static_cast<__mmask16>(left > 16 ? (1u << (left - 16)) - 1 : 0),
         static_cast<__mmask16>((1u << ((left + 1) / 2)) - 1));
  return _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1));
}

// dst[q * ldd + r] = src[r * lds + q] (see IsaKernels::bf16TransposePairs):
// 16 x 16 blocks in registers (32-bit unpacks within 128-bit lanes, then
// two rounds of lane shuffles), partial blocks through masked loads and
// stores. The scalar loop it replaces took 7% of a ViT-S attention.
void bf16TransposePairsAvx512bf16(const uint32_t *src, int64_t lds, int64_t rows, int64_t cols, uint32_t *dst,
                                  int64_t ldd) {
  for (int64_t r0 = 0; r0 < rows; r0 += 16)
    for (int64_t q0 = 0; q0 < cols; q0 += 16) {
      const int blockRows = static_cast<int>(std::min<int64_t>(16, rows - r0));
      const int blockCols = static_cast<int>(std::min<int64_t>(16, cols - q0));
      const auto colMask = static_cast<__mmask16>((1u << blockCols) - 1);
      const auto rowMask = static_cast<__mmask16>((1u << blockRows) - 1);
      __m512i r[16], a[16], b[16];
      for (int i = 0; i < 16; ++i)
        r[i] = i < blockRows ? _mm512_maskz_loadu_epi32(colMask, src + (r0 + i) * lds + q0) : _mm512_setzero_si512();
      for (int i = 0; i < 8; ++i) {
        a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
      }
      // b[4i + c], lane L: column 4L + c of rows 4i..4i+3.
      for (int i = 0; i < 4; ++i) {
        b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
        b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
      }
      for (int c = 0; c < 4; ++c) {
        // even/odd: lanes 0 and 2 / 1 and 3 of rows 0-7 (0) and 8-15 (1).
        const __m512i even0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x88);
        const __m512i odd0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xdd);
        const __m512i even1 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x88);
        const __m512i odd1 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xdd);
        const __m512i column[4] = {_mm512_shuffle_i32x4(even0, even1, 0x88), _mm512_shuffle_i32x4(odd0, odd1, 0x88),
                                   _mm512_shuffle_i32x4(even0, even1, 0xdd), _mm512_shuffle_i32x4(odd0, odd1, 0xdd)};
        for (int lane = 0; lane < 4; ++lane)
          if (const int q = 4 * lane + c; q < blockCols)
            _mm512_mask_storeu_epi32(dst + (q0 + q) * ldd + r0, rowMask, column[lane]);
      }
    }
}

// dst[j] = bf16 pair (a[j], b[j]) (see IsaKernels::bf16InterleaveRows):
// vcvtne2ps2bf16 puts 16 of a's bf16 in the low half of a vector and 16 of
// b's in the high half, and one vpermw interleaves them into 16 pairs; the
// tail through masked loads (0 past n) and a masked store.
void bf16InterleaveRowsAvx512bf16(const float *a, const float *b, int64_t n, uint32_t *dst) {
  alignas(64) static constexpr uint16_t kPairOrder[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                          21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                          11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i order = _mm512_load_si512(kPairOrder);
  auto store = [&](int64_t j, __mmask16 lanes) {
    const __m512 low = _mm512_maskz_loadu_ps(lanes, a + j);
    const __m512 high = b ? _mm512_maskz_loadu_ps(lanes, b + j) : _mm512_setzero_ps();
    const __m512bh packed = _mm512_cvtne2ps_pbh(high, low);
    _mm512_mask_storeu_epi32(dst + j, lanes, _mm512_permutexvar_epi16(order, reinterpret_cast<const __m512i &>(packed)));
  };
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) store(j, 0xffff);
  if (j < n) store(j, static_cast<__mmask16>((1u << (n - j)) - 1));
}

}  // namespace ein::detail::cpu
