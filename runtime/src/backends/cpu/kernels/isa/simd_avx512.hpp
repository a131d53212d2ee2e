// AVX-512F vectors of 16 floats, for the micro-kernel templates (isa_kernels.hpp). Only
// isa_avx512.cpp (built with -mavx512f) includes this.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/kernels/isa/gelu_table.hpp"

namespace ein::detail::cpu::isa {

struct Avx512 {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int W = 16;
  static constexpr int Registers = 32;  // vector registers (zmm)
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float *p) { return _mm512_loadu_ps(p); }
  // W bf16 values (a bf16 key/value cache), widened exactly to f32.
  static V load(const uint16_t *p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  // W bf16 pairs, widened exactly: the low halves (even k) and the high halves (odd k).
  static void loadPairs(const uint32_t *p, V &even, V &odd) {
    const __m512i pairs = _mm512_loadu_si512(p);
    even = _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(pairs, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  static void store(float *p, V v) { _mm512_storeu_ps(p, v); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V abs(V a) { return _mm512_abs_ps(a); }
  static V copySign(V magnitude, V sign) {
    const __m512i mask = _mm512_set1_epi32(0x80000000);
    __m512i m = _mm512_andnot_si512(mask, _mm512_castps_si512(magnitude));
    __m512i s = _mm512_and_si512(mask, _mm512_castps_si512(sign));
    return _mm512_castsi512_ps(_mm512_or_si512(m, s));
  }
  static Mask less(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static Mask greater(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static Mask isNan(V a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static Mask lessEqual(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
  static Mask equal(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static Mask notEqual(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ); }  // true with NaN
  static V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static V select(Mask m, V ifTrue, V ifFalse) { return _mm512_mask_blend_ps(m, ifFalse, ifTrue); }
  // Lanes whose byte in p[0..W) is not zero (bool tensors).
  static Mask flagsSet(const uint8_t *p) {
    const __m512i wide = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return _mm512_test_epi32_mask(wide, wide);
  }
  static V round(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V pow2(V n) {
    __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_castsi512_ps(bits);
  }
  // p * 2^n for integral n in [-127, 128] (one instruction, no overflow in between).
  static V scaleByPow2(V p, V n) { return _mm512_scalef_ps(p, n); }
  static float reduceAdd(V v) { return _mm512_reduce_add_ps(v); }
  // out[i] = the sum of vector i's lanes, four at once: pairs interleaved
  // and added, then the four 128-bit lanes added.
  static void reduceAdd4(V a, V b, V c, V d, float *out) {
    const V ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));  // a0 b0 a1 b1 per lane
    const V cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    const V abcd = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xEE));  // a b c d per lane
    const __m256 half = _mm256_add_ps(_mm512_castps512_ps256(abcd),
                                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(abcd), 1)));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1)));
  }
  static float reduceMax(V v) { return _mm512_reduce_max_ps(v); }
  // Exact GELU (ops::gelu) from gelu_table.hpp: x S rounded to the nearest
  // integer k picks piece k (vpermt2ps from the table's two halves), a quintic
  // in t = x S - k. Where |x| >= 15.5 / S GELU rounds to x or 0 in f32: there
  // 0.5 x + 0.5 |x| (NaN at -inf, as the formula gives). A third of the
  // rational erf's instructions and no division: the bf16 GEMM's GELU epilogue
  // was FMA-bound on it.
  static V gelu(V x) {
    const V scale = set1(kGeluPiecesPerUnit);
    const V shift = set1(12582912.0f + 16.0f);  // 1.5 * 2^23 + 16: the sum's low bits hold k + 16
    const V shifted = _mm512_fmadd_ps(x, scale, shift);
    const V t = _mm512_fmsub_ps(x, scale, _mm512_sub_ps(shifted, shift));
    const __m512i piece = _mm512_castps_si512(shifted);  // vpermt2ps reads the low 5 bits
    const auto coefficient = [piece](int d) {
      return _mm512_permutex2var_ps(_mm512_load_ps(kGeluPieces[d]), piece, _mm512_load_ps(kGeluPieces[d] + 16));
    };
    V p = coefficient(0);
#pragma GCC unroll 5
    for (int d = 1; d < 6; ++d) p = _mm512_fmadd_ps(p, t, coefficient(d));
    const V half = set1(0.5f), magnitude = abs(x);
    const Mask beyond = _mm512_cmp_ps_mask(magnitude, set1(15.5f / kGeluPiecesPerUnit), _CMP_GE_OQ);
    return _mm512_mask_blend_ps(beyond, p, _mm512_fmadd_ps(half, x, _mm512_mul_ps(half, magnitude)));
  }
};

}  // namespace ein::detail::cpu::isa
