// One row to one number: a reduction (sum, max, min, product), softmax's
// exp(x - shift) in place and its sum, layernorm's sum of squared
// deviations.
//
// Templates on the SIMD type S (simd_*.hpp), instantiated by each ISA's
// table file (isa_avx512.cpp, isa_avx2.cpp, isa_portable.cpp), which is built
// for that ISA: nothing here may be out-of-line code one ISA's file could
// share with another's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cpu/kernels/isa/isa.hpp"
#include "backends/cpu/kernels/isa/vector_math.hpp"

namespace ein::detail::cpu::isa {

// Four vector accumulators hide the add latency; the tail is scalar. The
// kind is a template argument, so the loops carry no test of it, and a sum
// or max ends in a tree across the lanes, not a chain of W dependent adds
// (a 384-wide layernorm row's mean spent most of its time there).
template <class S, ReduceKind Kind>
float reduceRowOf(const float *x, int64_t n) {
  using V = typename S::V;
  constexpr int W = S::W;
  constexpr bool isMax = Kind == ReduceKind::Max, isMin = Kind == ReduceKind::Min, isProd = Kind == ReduceKind::Prod;
  constexpr float init = isMax ? -std::numeric_limits<float>::infinity()
                         : isMin ? std::numeric_limits<float>::infinity()
                         : isProd ? 1.0f
                                  : 0.0f;
  const auto combine = [](V acc, V v) {
    if constexpr (isMax) return S::max(acc, v);
    else if constexpr (isMin) return S::min(acc, v);
    else if constexpr (isProd) return S::mul(acc, v);
    else return S::add(acc, v);
  };
  const auto scalar = [](float a, float b) {
    if constexpr (isMax) return std::max(a, b);
    else if constexpr (isMin) return std::min(a, b);
    else if constexpr (isProd) return a * b;
    else return a + b;
  };
  V acc[4] = {S::set1(init), S::set1(init), S::set1(init), S::set1(init)};
  V nan = S::zero();  // becomes NaN where a NaN was seen (x86 max/min drop it)
  int64_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W)
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const V v = S::load(x + i + u * W);
      if constexpr (isMax || isMin) nan = S::select(S::isNan(v), v, nan);
      acc[u] = combine(acc[u], v);
    }
  for (; i + W <= n; i += W) {
    const V v = S::load(x + i);
    if constexpr (isMax || isMin) nan = S::select(S::isNan(v), v, nan);
    acc[0] = combine(acc[0], v);
  }
  const V all = combine(combine(acc[0], acc[1]), combine(acc[2], acc[3]));
  float result;
  if constexpr (isMax) {
    result = S::reduceMax(all);
  } else if constexpr (!isMin && !isProd) {
    result = S::reduceAdd(all);
  } else {
    float lanes[W];
    S::store(lanes, all);
    result = lanes[0];
    for (int lane = 1; lane < W; ++lane) result = scalar(result, lanes[lane]);
  }
  bool sawNan = false;
  if constexpr (isMax || isMin) sawNan = std::isnan(S::reduceAdd(nan));
  for (; i < n; ++i) {
    sawNan |= std::isnan(x[i]);
    result = scalar(result, x[i]);
  }
  if ((isMax || isMin) && sawNan) return std::numeric_limits<float>::quiet_NaN();
  return result;
}

template <class S>
float reduceRow(const float *x, int64_t n, ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Max: return reduceRowOf<S, ReduceKind::Max>(x, n);
    case ReduceKind::Min: return reduceRowOf<S, ReduceKind::Min>(x, n);
    case ReduceKind::Prod: return reduceRowOf<S, ReduceKind::Prod>(x, n);
    default: return reduceRowOf<S, ReduceKind::Sum>(x, n);  // a mean divides the sum afterwards
  }
}

template <class S>
float expShiftSum(float *x, int64_t n, float shift) {
  using V = typename S::V;
  constexpr int W = S::W;
  const V s = S::set1(shift);
  V sum0 = S::zero(), sum1 = S::zero();
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const V e0 = vexp<S>(S::sub(S::load(x + i), s)), e1 = vexp<S>(S::sub(S::load(x + i + W), s));
    S::store(x + i, e0);
    S::store(x + i + W, e1);
    sum0 = S::add(sum0, e0);
    sum1 = S::add(sum1, e1);
  }
  if (i + W <= n) {
    const V e = vexp<S>(S::sub(S::load(x + i), s));
    S::store(x + i, e);
    sum0 = S::add(sum0, e);
    i += W;
  }
  float sum = S::reduceAdd(S::add(sum0, sum1));
  if (i < n) {
    // The tail through a padded vector: the same exp as the body.
    float tail[W];
    const int64_t rest = n - i;
    for (int lane = 0; lane < W; ++lane) tail[lane] = lane < rest ? x[i + lane] : shift;
    S::store(tail, vexp<S>(S::sub(S::load(tail), s)));
    for (int64_t lane = 0; lane < rest; ++lane) sum += x[i + lane] = tail[lane];
  }
  return sum;
}

template <class S>
float squaredDeviation(const float *x, int64_t n, float mean) {
  using V = typename S::V;
  const V m = S::set1(mean);
  // Four accumulators hide the fma latency.
  V acc[4] = {S::zero(), S::zero(), S::zero(), S::zero()};
  int64_t i = 0;
  for (; i + 4 * S::W <= n; i += 4 * S::W)
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const V d = S::sub(S::load(x + i + u * S::W), m);
      acc[u] = S::fmadd(d, d, acc[u]);
    }
  for (; i + S::W <= n; i += S::W) {
    const V d = S::sub(S::load(x + i), m);
    acc[0] = S::fmadd(d, d, acc[0]);
  }
  float sum = S::reduceAdd(S::add(S::add(acc[0], acc[1]), S::add(acc[2], acc[3])));
  for (; i < n; ++i) sum += (x[i] - mean) * (x[i] - mean);
  return sum;
}

}  // namespace ein::detail::cpu::isa
