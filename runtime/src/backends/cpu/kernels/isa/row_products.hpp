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

// rowDots over R rows of a and four rows of b: R x 4 dot products, each in a
// vector accumulator while the depth streams past, four rows of b loaded
// once a vector for the R rows of a, each row's four reduced together.
template <class S, int R, class B>
[[gnu::always_inline]] inline void rowDotsTile(const float *a, int64_t lda, const B *b, int64_t ldb, int64_t depth,
                                               float *s, int64_t lds) {
  using V = typename S::V;
  constexpr int W = S::W;
  const int64_t full = depth / W * W;
  V acc[R][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) acc[r][c] = S::zero();
  for (int64_t d = 0; d < full; d += W) {
    V column[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) column[c] = S::load(b + c * ldb + d);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const V x = S::load(a + r * lda + d);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) acc[r][c] = S::fmadd(x, column[c], acc[r][c]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float *out = s + r * lds;
    S::reduceAdd4(acc[r][0], acc[r][1], acc[r][2], acc[r][3], out);
    const float *x = a + r * lda;
    for (int64_t d = full; d < depth; ++d)
      for (int c = 0; c < 4; ++c) out[c] += x[d] * widenToFloat<S>(b[c * ldb + d]);
  }
}

// s[t * lds + j] = sum_d a[t * lda + d] * b[j * ldb + d]: register tiles of
// R rows of a by four rows of b (8 vector sums on AVX2's 16 registers, 16 on
// AVX-512's 32: enough independent chains to keep both FMA units busy, where
// one row of a at a time gave four), then the last rows of b one by one.
template <class S, class B>
void rowDots(const float *a, int64_t lda, int64_t rows, const B *b, int64_t ldb, int64_t n, int64_t depth,
             float *s, int64_t lds) {
  using V = typename S::V;
  constexpr int W = S::W;
  constexpr int R = S::Registers >= 32 ? 4 : 2;
  const int64_t full = depth / W * W;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const B *block = b + j * ldb;
    int64_t t = 0;
    for (; t + R <= rows; t += R) rowDotsTile<S, R>(a + t * lda, lda, block, ldb, depth, s + t * lds + j, lds);
    for (; t < rows; ++t) rowDotsTile<S, 1>(a + t * lda, lda, block, ldb, depth, s + t * lds + j, lds);
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
  // Unrolled by force: GCC at -O2 left the row loop rolled, the sums in
  // memory, a store and a load around every multiply-add.
  V acc[R][NV];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = S::load(o + r * ldo + v * W);
  for (int64_t j = 0; j < n; ++j) {
    V row[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) row[v] = S::load(b + j * ldb + v * W);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const V weight = S::set1(p[r * ldp + j]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = S::fmadd(weight, row[v], acc[r][v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) S::store(o + r * ldo + v * W, acc[r][v]);
}

template <class S, int R, int NV, class B>
void addRowProductsColumns(const float *p, int64_t ldp, int64_t rows, const B *b, int64_t ldb, int64_t n, float *o,
                           int64_t ldo) {
  int64_t t = 0;
  for (; t + R <= rows; t += R) addRowProductsTile<S, R, NV>(p + t * ldp, ldp, b, ldb, n, o + t * ldo, ldo);
  if constexpr (R > 2) {
    if (rows - t == 3) return addRowProductsTile<S, 3, NV>(p + t * ldp, ldp, b, ldb, n, o + t * ldo, ldo);
    if (rows - t == 2) return addRowProductsTile<S, 2, NV>(p + t * ldp, ldp, b, ldb, n, o + t * ldo, ldo);
  }
  if (rows - t == 1) addRowProductsTile<S, 1, NV>(p + t * ldp, ldp, b, ldb, n, o + t * ldo, ldo);
}

// o[t * ldo + e] += sum_j p[t * ldp + j] * b[j * ldb + e]: register tiles of
// R rows by NV vectors, then single vectors, then the last columns.
template <class S, class B>
void addRowProducts(const float *p, int64_t ldp, int64_t rows, const B *b, int64_t ldb, int64_t n, int64_t width,
                    float *o, int64_t ldo) {
  constexpr int W = S::W;
  // R x NV sums, NV vectors of b's row and a weight in registers: 4 x 4 on
  // AVX-512's 32; 8 sums on AVX2's 16, where an f32 b takes 2 rows x 4
  // vectors (each pass over b's rows reads a wider run of each) and a bf16 b
  // 4 x 2 (each vector's widening serves more rows). Decode attention, 8
  // query heads a key head, 1024 keys, 2 threads: f32 2 x 4 0.87x the time of
  // 4 x 2; bf16 4 x 2 0.95x the time of 2 x 4.
  constexpr bool widens = sizeof(B) < sizeof(float);
  constexpr int R = S::Registers >= 32 || widens ? 4 : 2;
  constexpr int NV = S::Registers >= 32 || !widens ? 4 : 2;
  int64_t e = 0;
  for (; e + NV * W <= width; e += NV * W) addRowProductsColumns<S, R, NV>(p, ldp, rows, b + e, ldb, n, o + e, ldo);
  for (; e + W <= width; e += W) addRowProductsColumns<S, 4, 1>(p, ldp, rows, b + e, ldb, n, o + e, ldo);
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
