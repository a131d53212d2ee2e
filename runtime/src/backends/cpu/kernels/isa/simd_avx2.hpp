// AVX2 + FMA vectors of 8 floats, for the micro-kernel templates (isa_kernels.hpp). Only
// isa_avx2.cpp (built with -mavx2 -mfma) includes this.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace ein::detail::cpu::isa {

struct Avx2 {
  using V = __m256;
  using Mask = __m256;
  static constexpr int W = 8;
  static constexpr int Registers = 16;  // vector registers (ymm)
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float *p) { return _mm256_loadu_ps(p); }
  // W bf16 values (a bf16 key/value cache), widened exactly to f32.
  static V load(const uint16_t *p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  // W bf16 pairs (a bf16 weight panel's row of pairs), widened exactly: the
  // low halves (even k) and the high halves (odd k).
  static void loadPairs(const uint32_t *p, V &even, V &odd) {
    const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
    odd = _mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  static void store(float *p, V v) { _mm256_storeu_ps(p, v); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  // min/max return the second operand when either is NaN (x86 semantics).
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static V copySign(V magnitude, V sign) {
    const V mask = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(mask, magnitude), _mm256_and_ps(mask, sign));
  }
  static Mask less(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static Mask greater(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static Mask isNan(V a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
  static Mask lessEqual(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
  static Mask equal(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  static Mask notEqual(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_NEQ_UQ); }  // true with NaN
  static V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static V select(Mask m, V ifTrue, V ifFalse) { return _mm256_blendv_ps(ifFalse, ifTrue, m); }
  // Lanes whose byte in p[0..W) is not zero (bool tensors).
  static Mask flagsSet(const uint8_t *p) {
    const __m256i wide = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)));
    const __m256i clear = _mm256_cmpeq_epi32(wide, _mm256_setzero_si256());
    return _mm256_castsi256_ps(_mm256_xor_si256(clear, _mm256_set1_epi32(-1)));
  }
  static V round(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // 2^n for integral n in [-126, 127].
  static V pow2(V n) {
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_castsi256_ps(bits);
  }
  // p * 2^n for integral n in [-127, 128]: 2^128 overflows the exponent, so in two steps.
  static V scaleByPow2(V p, V n) {
    const V half = round(mul(n, set1(0.5f)));
    return mul(mul(p, pow2(half)), pow2(sub(n, half)));
  }
  static float reduceAdd(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // out[i] = the sum of vector i's lanes, four at once (as Avx512's).
  static void reduceAdd4(V a, V b, V c, V d, float *out) {
    const V ab = _mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
    const V cd = _mm256_add_ps(_mm256_unpacklo_ps(c, d), _mm256_unpackhi_ps(c, d));
    const V abcd = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x44), _mm256_shuffle_ps(ab, cd, 0xEE));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
  static float reduceMax(V v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

}  // namespace ein::detail::cpu::isa
