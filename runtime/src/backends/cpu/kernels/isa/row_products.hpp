// Attention's products of rows: the dot products of rows of a with rows of
// b (q.k), and sums of rows of b weighted by p added to o (p.v); b is f32
// or a bf16 key/value cache.
//
// Templates on the SIMD type S (simd_*.hpp), instantiated by each ISA's
// table file (isa_avx512.cpp, isa_avx2.cpp, isa_portable.cpp), which is built
// for that ISA: nothing here may be out-of-line code one ISA's file could
// share with another's.
#pragma once

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/isa.hpp"

namespace ein::detail::cpu::isa {

// An element of b in rowDots and addRowProducts as f32: b is f32, or bf16
// (a bf16 key/value cache, widened exactly; S::load widens a vector).
// Templates on S, so that no ISA's copy is shared with another's.
template <class S>
[[gnu::always_inline]] inline float widenToFloat(float x) {
  return x;
}
template <class S>
[[gnu::always_inline]] inline float widenToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// s[t * lds + j] = sum_d a[t * lda + d] * b[j * ldb + d]: four rows of b at
// a time against each row of a (its rows stay in L1 across the four), each
// dot product in a vector accumulator, the four reduced together.
template <class S, class B>
void rowDots(const float *a, int64_t lda, int64_t rows, const B *b, int64_t ldb, int64_t n, int64_t depth,
             float *s, int64_t lds) {
  using V = typename S::V;
  constexpr int W = S::W;
  const int64_t full = depth / W * W;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const B *b0 = b + j * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
    for (int64_t t = 0; t < rows; ++t) {
      const float *x = a + t * lda;
      V c0 = S::zero(), c1 = S::zero(), c2 = S::zero(), c3 = S::zero();
      for (int64_t d = 0; d < full; d += W) {
        const V xv = S::load(x + d);
        c0 = S::fmadd(xv, S::load(b0 + d), c0);
        c1 = S::fmadd(xv, S::load(b1 + d), c1);
        c2 = S::fmadd(xv, S::load(b2 + d), c2);
        c3 = S::fmadd(xv, S::load(b3 + d), c3);
      }
      float *out = s + t * lds + j;
      S::reduceAdd4(c0, c1, c2, c3, out);
      for (int64_t d = full; d < depth; ++d) {
        out[0] += x[d] * widenToFloat<S>(b0[d]);
        out[1] += x[d] * widenToFloat<S>(b1[d]);
        out[2] += x[d] * widenToFloat<S>(b2[d]);
        out[3] += x[d] * widenToFloat<S>(b3[d]);
      }
    }
  }
  for (; j < n; ++j)
    for (int64_t t = 0; t < rows; ++t) {
      const float *x = a + t * lda;
      const B *y = b + j * ldb;
      V c = S::zero();
      for (int64_t d = 0; d < full; d += W) c = S::fmadd(S::load(x + d), S::load(y + d), c);
      float r = S::reduceAdd(c);
      for (int64_t d = full; d < depth; ++d) r += x[d] * widenToFloat<S>(y[d]);
      s[t * lds + j] = r;
    }
}

// addRowProducts over R rows and NV vectors of columns from e: the R x NV
// accumulators stay in registers while the n rows of b stream past.
template <class S, int R, int NV, class B>
[[gnu::always_inline]] inline void addRowProductsTile(const float *p, int64_t ldp, const B *b, int64_t ldb,
                                                      int64_t n, float *o, int64_t ldo) {
  using V = typename S::V;
  constexpr int W = S::W;
  V acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = S::load(o + r * ldo + v * W);
  for (int64_t j = 0; j < n; ++j) {
    V row[NV];
    for (int v = 0; v < NV; ++v) row[v] = S::load(b + j * ldb + v * W);
    for (int r = 0; r < R; ++r) {
      const V weight = S::set1(p[r * ldp + j]);
      for (int v = 0; v < NV; ++v) acc[r][v] = S::fmadd(weight, row[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) S::store(o + r * ldo + v * W, acc[r][v]);
}

template <class S, int NV, class B>
void addRowProductsColumns(const float *p, int64_t ldp, int64_t rows, const B *b, int64_t ldb, int64_t n, float *o,
                           int64_t ldo) {
  int64_t t = 0;
  for (; t + 4 <= rows; t += 4) addRowProductsTile<S, 4, NV>(p + t * ldp, ldp, b, ldb, n, o + t * ldo, ldo);
  switch (rows - t) {
    case 3: addRowProductsTile<S, 3, NV>(p + t * ldp, ldp, b, ldb, n, o + t * ldo, ldo); break;
    case 2: addRowProductsTile<S, 2, NV>(p + t * ldp, ldp, b, ldb, n, o + t * ldo, ldo); break;
    case 1: addRowProductsTile<S, 1, NV>(p + t * ldp, ldp, b, ldb, n, o + t * ldo, ldo); break;
    default: break;
  }
}

// o[t * ldo + e] += sum_j p[t * ldp + j] * b[j * ldb + e]: register tiles of
// up to 4 rows by NV vectors, then single vectors, then the last columns.
template <class S, class B>
void addRowProducts(const float *p, int64_t ldp, int64_t rows, const B *b, int64_t ldb, int64_t n, int64_t width,
                    float *o, int64_t ldo) {
  constexpr int W = S::W;
  // 4 rows x NV vectors of sums, NV vectors of b's row and a weight held in
  // registers: 4 x 4 fits AVX-512's 32, and spilled from AVX2's 16 (decode
  // attention, 8 query heads a key head, 2048 keys, 2 threads: 0.82x the time
  // with 4 x 2 over a bf16 cache, 0.88x over an f32 one).
  constexpr int NV = S::Registers >= 32 ? 4 : 2;
  int64_t e = 0;
  for (; e + NV * W <= width; e += NV * W) addRowProductsColumns<S, NV>(p, ldp, rows, b + e, ldb, n, o + e, ldo);
  for (; e + W <= width; e += W) addRowProductsColumns<S, 1>(p, ldp, rows, b + e, ldb, n, o + e, ldo);
  for (; e < width; ++e)
    for (int64_t t = 0; t < rows; ++t) {
      float acc = o[t * ldo + e];
      for (int64_t j = 0; j < n; ++j) acc += p[t * ldp + j] * widenToFloat<S>(b[j * ldb + e]);
      o[t * ldo + e] = acc;
    }
}

// columnSums over NV vectors of outputs, their sums in registers over the
// depth.
template <class S, int NV>
[[gnu::always_inline]] inline void columnSumsTile(const float *a, int64_t lda, int64_t depth, const float *column,
                                                  float *o) {
  using V = typename S::V;
  constexpr int W = S::W;
  V acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = S::zero();
  for (int64_t p = 0; p < depth; ++p) {
    const V weight = S::set1(column[p]);
    for (int v = 0; v < NV; ++v) acc[v] = S::fmadd(weight, S::load(a + p * lda + v * W), acc[v]);
  }
  for (int v = 0; v < NV; ++v) S::store(o + v * W, acc[v]);
}

// o[e] = sum_p column[p] * a[p * lda + e]: four vectors of outputs at a
// time, then single vectors, then the last outputs one by one.
template <class S>
void columnSums(const float *a, int64_t lda, int64_t depth, const float *column, int64_t width, float *o) {
  constexpr int W = S::W;
  int64_t e = 0;
  for (; e + 4 * W <= width; e += 4 * W) columnSumsTile<S, 4>(a + e, lda, depth, column, o + e);
  for (; e + W <= width; e += W) columnSumsTile<S, 1>(a + e, lda, depth, column, o + e);
  for (; e < width; ++e) {
    float sum = 0.0f;
    for (int64_t p = 0; p < depth; ++p) sum += column[p] * a[p * lda + e];
    o[e] = sum;
  }
}

}  // namespace ein::detail::cpu::isa
