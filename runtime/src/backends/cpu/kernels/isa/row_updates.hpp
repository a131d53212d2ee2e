// Rows written in place or from other rows: scaling, y += a x, masking by
// flags, a weighted sum of rows (talking heads' mixing), layernorm's
// normalisation.
//
// Templates on the SIMD type S (simd_*.hpp), instantiated by each ISA's
// table file (isa_avx512.cpp, isa_avx2.cpp, isa_portable.cpp), which is built
// for that ISA: nothing here may be out-of-line code one ISA's file could
// share with another's.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels/isa/isa.hpp"

namespace ein::detail::cpu::isa {

template <class S>
void scaleInPlace(float *x, int64_t n, float factor) {
  const typename S::V f = S::set1(factor);
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) S::store(x + i, S::mul(S::load(x + i), f));
  for (; i < n; ++i) x[i] *= factor;
}

template <class S>
void addScaled(float *y, const float *x, int64_t n, float a) {
  const typename S::V f = S::set1(a);
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) S::store(y + i, S::fmadd(f, S::load(x + i), S::load(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

template <class S>
void maskRow(float *row, const uint8_t *flags, int64_t n, bool keepWhereSet, float fill) {
  using V = typename S::V;
  const V f = S::set1(fill);
  int64_t j = 0;
  for (; j + S::W <= n; j += S::W) {
    const auto set = S::flagsSet(flags + j);
    const V x = S::load(row + j);
    S::store(row + j, keepWhereSet ? S::select(set, x, f) : S::select(set, f, x));
  }
  for (; j < n; ++j)
    if ((flags[j] != 0) != keepWhereSet) row[j] = fill;
}

template <class S>
void weightedSum(float *y, const float *x, int64_t xStride, int64_t rows, const float *w, int64_t wStride, float bias,
                 int64_t n) {
  using V = typename S::V;
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) {
    V acc = S::set1(bias);
    for (int64_t h = 0; h < rows; ++h) acc = S::fmadd(S::set1(w[h * wStride]), S::load(x + h * xStride + i), acc);
    S::store(y + i, acc);
  }
  for (; i < n; ++i) {
    float acc = bias;
    for (int64_t h = 0; h < rows; ++h) acc += w[h * wStride] * x[h * xStride + i];
    y[i] = acc;
  }
}

template <class S>
void normalizeRow(const float *x, int64_t n, float mean, float scale, const float *gamma, const float *beta,
                  float *y) {
  using V = typename S::V;
  const V m = S::set1(mean), sc = S::set1(scale);
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) {
    V v = S::mul(S::sub(S::load(x + i), m), sc);
    if (gamma && beta) v = S::fmadd(v, S::load(gamma + i), S::load(beta + i));
    else if (gamma) v = S::mul(v, S::load(gamma + i));
    else if (beta) v = S::add(v, S::load(beta + i));
    S::store(y + i, v);
  }
  for (; i < n; ++i) {
    float v = (x[i] - mean) * scale;
    if (gamma) v *= gamma[i];
    if (beta) v += beta[i];
    y[i] = v;
  }
}

}  // namespace ein::detail::cpu::isa
