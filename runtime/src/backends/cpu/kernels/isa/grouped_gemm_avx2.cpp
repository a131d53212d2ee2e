// The group-scaled gemms' register tiles for AVX2 (with F16C), used by every
// x86 table but the portable one. Built with -mavx2 -mfma -mf16c.
//
// int4: per group of 32 along k and row, vpmaddubsw multiplies the weights
// as u8 (q + 8 in [0, 15]) by the activations as s8 ([-127, 127]) and adds
// pairs: each 16-bit lane of a group's four 32-byte blocks, low and high
// nibbles, sums 16 products, at most 16 * 15 * 127 = 30480 < 32767, so the
// group's int16 sums are exact without widening per block. vpmaddwd by ones
// widens them once per group into int32 (one lane per column), 8 * the
// group's sum of activations comes off, and the group's two scales are
// applied in f32.
//
// int8: the sign trick of the int8 tile (s8_gemm_avx2.cpp) with the roles
// turned: |b| (u8, up to 128: a stored -128 stays exact) times a with b's
// sign (vpsignb; a in [-127, 127] negates safely), a pair at most
// 2 * 128 * 127 = 32512 < 32767; vpmaddwd by ones widens each block into
// int32, and the group's scales are applied in f32 as int4's.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/grouped_gemm_tiles_256.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"

namespace ein::detail::cpu {
namespace {

// int4: a block's u4 x s8 pairs added in int16 (16 products a lane over the
// group, exact), widened once per group.
struct NibbleProducts {
  using Sums = __m256i;
  static __m256i zero() { return _mm256_setzero_si256(); }
  static __m256i add(__m256i sums, __m256i u, __m256i s) { return _mm256_add_epi16(sums, _mm256_maddubs_epi16(u, s)); }
  static __m256i total(__m256i sums) { return _mm256_madd_epi16(sums, _mm256_set1_epi16(1)); }
};

// int8: each block's pairs (up to 32512) widened into int32 at once.
struct ByteProducts {
  using Sums = __m256i;
  static __m256i zero() { return _mm256_setzero_si256(); }
  static __m256i add(__m256i sums, __m256i u, __m256i s) {
    return _mm256_add_epi32(sums, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  static __m256i total(__m256i sums) { return sums; }
};

}  // namespace

// (see IsaKernels::s4GemmTile)
void s4GemmTileAvx2(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                    const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  s4GemmTile256<NibbleProducts>(rows, groups, a, lda, aScale, aSum, lds, panel, c, ldc);
}

// (see IsaKernels::s8GroupedGemmTile)
void s8GroupedGemmTileAvx2(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                           const int32_t * /*aSum*/, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  s8GroupedGemmTile256<ByteProducts>(rows, groups, a, lda, aScale, lds, panel, c, ldc);
}

// quantizeGroupsS8 on a contiguous row, a whole group of 32 at a time in four
// vectors (the int32 results narrowed as s8QuantizeRowAvx2 narrows them); a
// partial last group by the definition.
void s8QuantizeGroupsAvx2(const float *x, int64_t k, int64_t groups, int8_t *q, float *scale, int32_t *sum) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 largest = _mm256_set1_ps(std::numeric_limits<float>::max());
  const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t g = 0; g < groups; ++g) {
    const float *from = x + g * kWeightGroup;
    int8_t *to = q + g * kWeightGroup;
    if (k - g * kWeightGroup < kWeightGroup) {
      quantizeGroupsS8(from, 1, k - g * kWeightGroup, 1, to, scale + g, sum + g);
      continue;
    }
    __m256 v[4], maxv = _mm256_setzero_ps(), notFinite = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(from + 8 * i);
      const __m256 magnitude = _mm256_and_ps(v[i], absMask);
      notFinite = _mm256_or_ps(notFinite, _mm256_cmp_ps(magnitude, largest, _CMP_NLE_UQ));
      maxv = _mm256_max_ps(maxv, magnitude);
    }
    __m128 half = _mm_max_ps(_mm256_castps256_ps128(maxv), _mm256_extractf128_ps(maxv, 1));
    half = _mm_max_ps(half, _mm_movehl_ps(half, half));
    half = _mm_max_ss(half, _mm_shuffle_ps(half, half, 1));
    const RowQuantization group = rowQuantization(_mm_cvtss_f32(half), _mm256_movemask_ps(notFinite) == 0);
    scale[g] = group.scale;
    if (group.inverse == 0.0f) {
      std::memset(to, 0, kWeightGroup);
      sum[g] = 0;
      continue;
    }
    const __m256 inverse = _mm256_set1_ps(group.inverse);
    __m256i words[4];
    for (int i = 0; i < 4; ++i)
      words[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[i], inverse), lo), hi));
    const __m256i total = _mm256_add_epi32(_mm256_add_epi32(words[0], words[1]), _mm256_add_epi32(words[2], words[3]));
    __m128i lanes = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
    lanes = _mm_add_epi32(lanes, _mm_shuffle_epi32(lanes, 0x4e));
    lanes = _mm_add_epi32(lanes, _mm_shuffle_epi32(lanes, 0xb1));
    sum[g] = _mm_cvtsi128_si32(lanes);
    const __m256i bytes = _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(words[0], words[1]), _mm256_packs_epi32(words[2], words[3])), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(to), bytes);
  }
}

}  // namespace ein::detail::cpu
