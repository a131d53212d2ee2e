// The ISA-generic kernel templates, instantiated once per SIMD type S (see
// simd_*.hpp) by isa_avx512.cpp, isa_avx2.cpp and isa_portable.cpp. Each of
// those files is built for its ISA, so this header must only be included
// inside their namespaces (no out-of-line code may leak to other ISAs).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/kernels/isa/isa.hpp"

namespace ein::detail::cpu::isa {

// Below this, exp(x) < 1.183e-38 (FLT_MIN is 1.1755e-38) and vexp gives 0.
inline constexpr float kExpUnderflow = -87.33f;

// exp(x) to ~1 ulp (Cephes' range reduction and polynomial). Below
// kExpUnderflow it is exactly 0, above 88.72 +inf, and NaN stays NaN:
// softmax relies on exp(-inf) == 0 exactly. No lane ever computes a
// subnormal, not even one it then discards: the clamp keeps 2^n p normal
// (at -87.33, n = -126 and p = e^0.0065 > 1). A clamp at ln(FLT_MIN) =
// -87.3365 made every masked lane (-inf, or a finfo.min mask) compute
// p * 2^-126 with p just below 1, a subnormal, and Intel cores take a
// microcode assist for each such result even in lanes later selected away.
template <class S>
[[gnu::always_inline]] inline typename S::V vexp(typename S::V x) {
  if constexpr (S::W == 1) {
    return x < kExpUnderflow ? 0.0f : std::exp(x);  // NaN compares false and stays NaN
  } else {
    using V = typename S::V;
    const V hi = S::set1(88.7228317f), lo = S::set1(kExpUnderflow);
    const auto overflow = S::greater(x, hi), underflow = S::less(x, lo);
    V c = S::max(lo, S::min(hi, x));  // NaN passes through (second operand)
    const V n = S::round(S::mul(c, S::set1(1.44269504088896341f)));
    c = S::fmadd(n, S::set1(-0.693359375f), c);
    c = S::fmadd(n, S::set1(2.12194440e-4f), c);
    V p = S::set1(1.9875691500e-4f);
    p = S::fmadd(p, c, S::set1(1.3981999507e-3f));
    p = S::fmadd(p, c, S::set1(8.3334519073e-3f));
    p = S::fmadd(p, c, S::set1(4.1665795894e-2f));
    p = S::fmadd(p, c, S::set1(1.6666665459e-1f));
    p = S::fmadd(p, c, S::set1(5.0000001201e-1f));
    p = S::fmadd(p, S::mul(c, c), S::add(c, S::set1(1.0f)));
    V result = S::scaleByPow2(p, n);  // n is at most 128 here
    result = S::select(underflow, S::zero(), result);
    return S::select(overflow, S::set1(std::numeric_limits<float>::infinity()), result);
  }
}

// erf(x) = x P(x^2) / Q(x^2) for |x| < 3.9192 and exactly +-1 beyond, where
// erf rounds to +-1 in f32 (so GELU of a large negative x is 0, not -7e-7):
// a rational minimax fit of ours on [0, 4], degree 5 over 5 in x^2, absolute
// error below 2.5e-7 in f32 arithmetic. No exp, so GELU costs about half of
// what a formula through exp(-x^2) does. NaN passes through the clamp.
template <class S>
[[gnu::always_inline]] inline typename S::V verf(typename S::V x) {
  if constexpr (S::W == 1) {
    return std::erf(x);
  } else {
    using V = typename S::V;
    const V c = S::max(S::set1(-4.0f), S::min(S::set1(4.0f), x));
    const V t = S::mul(c, c);
    V p = S::set1(1.974554052e-06f);
    p = S::fmadd(p, t, S::set1(2.879646737e-04f));
    p = S::fmadd(p, t, S::set1(4.002103269e-03f));
    p = S::fmadd(p, t, S::set1(5.346281252e-02f));
    p = S::fmadd(p, t, S::set1(1.962188057e-01f));
    p = S::fmadd(p, t, S::set1(1.128378979e+00f));
    V q = S::set1(3.747388826e-05f);
    q = S::fmadd(q, t, S::set1(1.215902001e-03f));
    q = S::fmadd(q, t, S::set1(1.544145485e-02f));
    q = S::fmadd(q, t, S::set1(1.164633124e-01f));
    q = S::fmadd(q, t, S::set1(5.072255729e-01f));
    q = S::fmadd(q, t, S::set1(1.0f));
    const V one = S::set1(1.0f);
    // Within [-1, 1], so 1 + erf(x) never goes negative near the edges.
    const V ratio = S::max(S::sub(S::zero(), one), S::min(one, S::div(S::mul(c, p), q)));
    return S::select(S::lessEqual(S::set1(3.91920584f), S::abs(x)), S::copySign(one, x), ratio);
  }
}

// tanh(x) = sign(x) (1 - 2 / (exp(2|x|) + 1)); exact to a few 1e-7.
template <class S>
[[gnu::always_inline]] inline typename S::V vtanh(typename S::V x) {
  if constexpr (S::W == 1) {
    return std::tanh(x);
  } else {
    using V = typename S::V;
    const V one = S::set1(1.0f);
    const V e = vexp<S>(S::mul(S::set1(2.0f), S::abs(x)));
    return S::copySign(S::sub(one, S::div(S::set1(2.0f), S::add(e, one))), x);
  }
}

// The activations of ops/scalar_functions.hpp, for whole vectors.
template <class S>
[[gnu::always_inline]] inline typename S::V vactivate(typename S::V x, Activation activation) {
  using V = typename S::V;
  const V half = S::set1(0.5f), one = S::set1(1.0f);
  switch (activation) {
    case Activation::None: return x;
    case Activation::Relu: return S::max(S::zero(), x);  // max(a, b) gives b where either is NaN: NaN stays
    case Activation::Gelu:
      if constexpr (requires { S::gelu(x); }) return S::gelu(x);  // a table where the ISA has a 32-lane permute
      else return S::mul(S::mul(half, x), S::add(one, verf<S>(S::mul(x, S::set1(0.70710678118654752f)))));
    case Activation::GeluTanh: {
      V inner = S::mul(S::set1(0.79788456080286535588f), S::fmadd(S::mul(S::set1(0.044715f), S::mul(x, x)), x, x));
      return S::mul(S::mul(half, x), S::add(one, vtanh<S>(inner)));
    }
    case Activation::Silu: return S::div(x, S::add(one, vexp<S>(S::sub(S::zero(), x))));
  }
  return x;
}

// x[i] = f(x[i]) for i < n, whole vectors then a padded tail.
template <class S, typename F>
void mapInPlace(float *x, int64_t n, F f) {
  constexpr int W = S::W;
  int64_t i = 0;
  for (; i + W <= n; i += W) S::store(x + i, f(S::load(x + i)));
  if (i < n) {
    float tail[W] = {};
    std::memcpy(tail, x + i, sizeof(float) * (n - i));
    S::store(tail, f(S::load(tail)));
    std::memcpy(x + i, tail, sizeof(float) * (n - i));
  }
}

template <class S>
void expInPlace(float *x, int64_t n) {
  mapInPlace<S>(x, n, [](typename S::V v) { return vexp<S>(v); });
}

// body(std::integral_constant<Activation, activation>{}): loops over
// vectors get one instantiation per activation, the choice made outside
// them (a switch inside kept a loop from holding its constants, GELU's
// table, in registers).
template <typename Body>
[[gnu::always_inline]] inline void withActivation(Activation activation, Body &&body) {
  static_assert(ops::kValueCount<Activation> == 5, "one case per activation");
  switch (activation) {
    case Activation::None: return body(std::integral_constant<Activation, Activation::None>{});
    case Activation::Relu: return body(std::integral_constant<Activation, Activation::Relu>{});
    case Activation::Gelu: return body(std::integral_constant<Activation, Activation::Gelu>{});
    case Activation::GeluTanh: return body(std::integral_constant<Activation, Activation::GeluTanh>{});
    case Activation::Silu: return body(std::integral_constant<Activation, Activation::Silu>{});
  }
}

template <class S>
void activateInPlace(float *x, int64_t n, Activation activation) {
  if (activation == Activation::None) return;
  withActivation(activation, [x, n](auto kind) {
    mapInPlace<S>(x, n, [](typename S::V v) { return vactivate<S>(v, decltype(kind)::value); });
  });
}

// --- gemm ------------------------------------------------------------------

// The register tile: MR rows x NV vectors of accumulators, one a element
// broadcast per row and NV b-vector loads per step of k. a[r * aRow + p * aStep]
// covers both packed panels (aRow 1, aStep MR) and plain rows (aRow lda, aStep 1);
// b's rows are bStep floats apart. Always inlined, so each caller's constant
// strides become immediate offsets (a few percent of the tile's speed).
template <class S, int MR, int NV>
[[gnu::always_inline]] inline void gemmTileStrided(int64_t kc, const float *a, int64_t aRow, int64_t aStep,
                                                   const float *b, int64_t bStep, float *c, int64_t ldc,
                                                   bool accumulate, const char *prefetch, int64_t prefetchBytes) {
  using V = typename S::V;
  constexpr int W = S::W;
  V acc[MR][NV];
  // One line of the bytes to prefetch every few steps, spread over the tile.
  const int64_t lines = prefetchBytes / 64;
  const int64_t every = lines > 0 ? std::max<int64_t>(1, kc / lines) : kc + 1;
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? S::load(c + r * ldc + v * W) : S::zero();
  int64_t line = 0, countdown = every;
  for (int64_t p = 0; p < kc; ++p) {
    if (--countdown == 0) {
      countdown = every;
      if (line < lines) __builtin_prefetch(prefetch + 64 * line++, 0, 2);
    }
    V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = S::load(b + p * bStep + v * W);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const V ar = S::set1(a[r * aRow + p * aStep]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = S::fmadd(ar, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) S::store(c + r * ldc + v * W, acc[r][v]);
}

template <class S, int MR, int NV>
void gemmTile(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool accumulate,
              const char *prefetch, int64_t prefetchBytes) {
  gemmTileStrided<S, MR, NV>(kc, a, 1, MR, b, NV * S::W, c, ldc, accumulate, prefetch, prefetchBytes);
}

template <class S, int MR, int NV>
void gemmTileRows(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc, bool accumulate,
                  const char *prefetch, int64_t prefetchBytes) {
  gemmTileStrided<S, MR, NV>(kc, a, lda, 1, b, NV * S::W, c, ldc, accumulate, prefetch, prefetchBytes);
}

template <class S, int MR>
void gemmTileRowsVector(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                        bool accumulate) {
  gemmTileStrided<S, MR, 1>(kc, a, lda, 1, b, ldb, c, ldc, accumulate, nullptr, 0);
}

// The gemv's MR rows over one panel of NV vectors (see IsaKernels::gemvPanel).
// One row alone would be a chain of k dependent FMAs per accumulator, so it
// keeps two sets of sums (even and odd steps).
template <class S, int MR, int NV>
[[gnu::always_inline]] inline void gemvPanelRows(int64_t k, const float *a, int64_t lda, const float *b, float *c,
                                                 int64_t ldc) {
  using V = typename S::V;
  constexpr int W = S::W, NR = NV * W, U = MR == 1 ? 2 : 1;
  V acc[U][MR][NV];
#pragma GCC unroll 2
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[u][r][v] = S::zero();
  int64_t p = 0;
  for (; p + U <= k; p += U)
#pragma GCC unroll 2
    for (int u = 0; u < U; ++u) {
      const float *row = b + (p + u) * NR;
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v)
        if ((v * W * 4) % 64 == 0) __builtin_prefetch(row + v * W + kGemvPrefetchBytes / 4, 0, 3);
      V bv[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) bv[v] = S::load(row + v * W);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const V ar = S::set1(a[r * lda + p + u]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[u][r][v] = S::fmadd(ar, bv[v], acc[u][r][v]);
      }
    }
  for (; p < k; ++p)
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const V ar = S::set1(a[r * lda + p]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[0][r][v] = S::fmadd(ar, S::load(b + p * NR + v * W), acc[0][r][v]);
    }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      V sum = acc[0][r][v];
      if constexpr (U == 2) sum = S::add(sum, acc[U - 1][r][v]);
      S::store(c + r * ldc + v * W, sum);
    }
}

template <class S, int NV>
void gemvPanel(int rows, int64_t k, const float *a, int64_t lda, const float *b, float *c, int64_t ldc) {
  withGemvRows(rows, [&](auto mr) { gemvPanelRows<S, decltype(mr)::value, NV>(k, a, lda, b, c, ldc); });
}

// Rows whose out, bias and residual run contiguously along j (or whose bias
// is one value per row) take one pass: each vector of acc gets alpha, the
// bias, the activation and the residual and is stored once (a tile's
// epilogue was three passes over it and a call per row, as much time as a
// BERT fc1 tile's GELU). Other rows: the bias element by element, the
// activation in place, then the strided stores.
template <class S, Activation A>
void gemmEpilogueWith(const GemmEpilogue &e) {
  using V = typename S::V;
  constexpr int W = S::W;
  const int64_t n = e.n;
  const V alpha = S::set1(e.alpha);
  const bool scaled = e.alpha != 1.0f;
  const bool onePass = e.outStride == 1 && (!e.bias || e.biasStride <= 1) && (!e.residual || e.residualStride == 1);
  for (int64_t i = 0; i < e.rows; ++i) {
    float *acc = e.acc + i * e.accRowStride;
    const float *bias = e.bias ? e.bias + i * e.biasRowStride : nullptr;
    const float *residual = e.residual ? e.residual + i * e.residualRowStride : nullptr;
    float *out = e.out + i * e.outRowStride;
    if (onePass) {
      const bool biasPerRow = bias && e.biasStride == 0;
      const V rowBias = biasPerRow ? S::set1(bias[0]) : S::zero();
      // v: acc's vector at j; b, r: bias and residual there (unused where null).
      const auto finish = [&](V v, const float *b, const float *r) {
        if (bias) v = S::fmadd(alpha, v, biasPerRow ? rowBias : S::load(b));
        else if (scaled) v = S::mul(alpha, v);
        v = vactivate<S>(v, A);
        return residual ? S::add(v, S::load(r)) : v;
      };
      int64_t j = 0;
      for (; j + W <= n; j += W)
        S::store(out + j, finish(S::load(acc + j), bias && !biasPerRow ? bias + j : nullptr,
                                 residual ? residual + j : nullptr));
      if (j < n) {
        // The last partial vector through the same arithmetic, padded.
        const size_t tail = sizeof(float) * static_cast<size_t>(n - j);
        float a[W] = {}, b[W] = {}, r[W] = {}, o[W];
        std::memcpy(a, acc + j, tail);
        if (bias && !biasPerRow) std::memcpy(b, bias + j, tail);
        if (residual) std::memcpy(r, residual + j, tail);
        S::store(o, finish(S::load(a), b, r));
        std::memcpy(out + j, o, tail);
      }
      continue;
    }
    if (bias)
      for (int64_t j = 0; j < n; ++j) acc[j] = e.alpha * acc[j] + bias[j * e.biasStride];
    else if (scaled)
      for (int64_t j = 0; j < n; ++j) acc[j] *= e.alpha;
    activateInPlace<S>(acc, n, A);
    for (int64_t j = 0; j < n; ++j)
      out[j * e.outStride] = residual ? acc[j] + residual[j * e.residualStride] : acc[j];
  }
}

template <class S>
void gemmEpilogue(const GemmEpilogue &e) {
  withActivation(e.activation, [&e](auto kind) { gemmEpilogueWith<S, decltype(kind)::value>(e); });
}

// --- rows ----------------------------------------------------------------------

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
// up to 4 rows by 4 vectors, then single vectors, then the last columns.
template <class S, class B>
void addRowProducts(const float *p, int64_t ldp, int64_t rows, const B *b, int64_t ldb, int64_t n, int64_t width,
                    float *o, int64_t ldo) {
  constexpr int W = S::W;
  int64_t e = 0;
  for (; e + 4 * W <= width; e += 4 * W) addRowProductsColumns<S, 4>(p, ldp, rows, b + e, ldb, n, o + e, ldo);
  for (; e + W <= width; e += W) addRowProductsColumns<S, 1>(p, ldp, rows, b + e, ldb, n, o + e, ldo);
  for (; e < width; ++e)
    for (int64_t t = 0; t < rows; ++t) {
      float acc = o[t * ldo + e];
      for (int64_t j = 0; j < n; ++j) acc += p[t * ldp + j] * widenToFloat<S>(b[j * ldb + e]);
      o[t * ldo + e] = acc;
    }
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

// --- element-wise programs -------------------------------------------------------

// One instruction over whole vectors of the block (registers are
// kElementwiseBlock lanes, so rounding `count` up to a vector stays inside;
// the extra lanes are never stored). Opcodes with no vector form here (Log,
// Pow) run their scalar definition lane by lane.
template <class S>
void elementwiseBlock(const Instruction *program, size_t size, size_t inputCount, float *registers, int64_t count) {
  using V = typename S::V;
  constexpr int W = S::W;
  constexpr int64_t kBlock = static_cast<int64_t>(kElementwiseBlock);
  const int64_t lanes = (count + W - 1) / W * W;
  const V one = S::set1(1.0f), zero = S::zero(), nan = S::set1(std::numeric_limits<float>::quiet_NaN());
  for (size_t i = 0; i < size; ++i) {
    const Instruction &in = program[i];
    float *out = registers + (inputCount + i) * kBlock;
    const float *a = registers + in.a * kBlock, *b = registers + in.b * kBlock, *c = registers + in.c * kBlock;
    auto map1 = [&](auto f) {
      for (int64_t e = 0; e < lanes; e += W) S::store(out + e, f(S::load(a + e)));
    };
    auto map2 = [&](auto f) {
      for (int64_t e = 0; e < lanes; e += W) S::store(out + e, f(S::load(a + e), S::load(b + e)));
    };
    auto flag = [&](auto mask) { return S::select(mask, one, zero); };
    switch (in.opcode) {
      case Opcode::Const: {
        const V imm = S::set1(in.imm);
        for (int64_t e = 0; e < lanes; e += W) S::store(out + e, imm);
        break;
      }
      case Opcode::Neg: map1([&](V x) { return S::sub(zero, x); }); break;
      case Opcode::Exp: map1([](V x) { return vexp<S>(x); }); break;
      case Opcode::Sqrt: map1([](V x) { return S::sqrt(x); }); break;
      case Opcode::Rsqrt: map1([&](V x) { return S::div(one, S::sqrt(x)); }); break;
      case Opcode::Abs: map1([](V x) { return S::abs(x); }); break;
      case Opcode::Relu: map1([](V x) { return vactivate<S>(x, Activation::Relu); }); break;
      case Opcode::Gelu: map1([](V x) { return vactivate<S>(x, Activation::Gelu); }); break;
      case Opcode::GeluTanh: map1([](V x) { return vactivate<S>(x, Activation::GeluTanh); }); break;
      case Opcode::Silu: map1([](V x) { return vactivate<S>(x, Activation::Silu); }); break;
      case Opcode::Sigmoid: map1([&](V x) { return S::div(one, S::add(one, vexp<S>(S::sub(zero, x)))); }); break;
      case Opcode::Tanh: map1([](V x) { return vtanh<S>(x); }); break;
      case Opcode::Not: map1([&](V x) { return flag(S::equal(x, zero)); }); break;
      case Opcode::Add: map2([](V x, V y) { return S::add(x, y); }); break;
      case Opcode::Sub: map2([](V x, V y) { return S::sub(x, y); }); break;
      case Opcode::Mul: map2([](V x, V y) { return S::mul(x, y); }); break;
      case Opcode::Div: map2([](V x, V y) { return S::div(x, y); }); break;
      // NaN-propagating, as torch.maximum and torch.minimum.
      case Opcode::Max:
        map2([&](V x, V y) { return S::select(S::isNan(x), nan, S::select(S::isNan(y), nan, S::max(x, y))); });
        break;
      case Opcode::Min:
        map2([&](V x, V y) { return S::select(S::isNan(x), nan, S::select(S::isNan(y), nan, S::min(x, y))); });
        break;
      case Opcode::Lt: map2([&](V x, V y) { return flag(S::less(x, y)); }); break;
      case Opcode::Le: map2([&](V x, V y) { return flag(S::lessEqual(x, y)); }); break;
      case Opcode::Gt: map2([&](V x, V y) { return flag(S::greater(x, y)); }); break;
      case Opcode::Ge: map2([&](V x, V y) { return flag(S::lessEqual(y, x)); }); break;
      case Opcode::Eq: map2([&](V x, V y) { return flag(S::equal(x, y)); }); break;
      case Opcode::Ne: map2([&](V x, V y) { return flag(S::notEqual(x, y)); }); break;
      case Opcode::Select:
        for (int64_t e = 0; e < lanes; e += W)
          S::store(out + e, S::select(S::notEqual(S::load(a + e), zero), S::load(b + e), S::load(c + e)));
        break;
      default: evaluateLanesF32(in, a, b, c, out, count); break;
    }
  }
}

template <class S, int MR, int NV>
IsaKernels makeKernels(const char *name) {
  IsaKernels kernels{};
  kernels.name = name;
  kernels.gemmMr = MR;
  kernels.gemmNr = NV * S::W;
  kernels.gemmTile = &gemmTile<S, MR, NV>;
  kernels.gemmTileRows = &gemmTileRows<S, MR, NV>;
  kernels.gemmTileRowsVector = &gemmTileRowsVector<S, MR>;
  kernels.gemvPanel = &gemvPanel<S, NV>;
  kernels.vectorFloats = S::W;
  kernels.gemmEpilogue = &gemmEpilogue<S>;
  kernels.reduceRow = &reduceRow<S>;
  kernels.expShiftSum = &expShiftSum<S>;
  kernels.scaleInPlace = &scaleInPlace<S>;
  kernels.addScaled = &addScaled<S>;
  kernels.weightedSum = &weightedSum<S>;
  kernels.rowDots = &rowDots<S, float>;
  kernels.addRowProducts = &addRowProducts<S, float>;
  kernels.rowDotsBf16 = &rowDots<S, uint16_t>;
  kernels.addRowProductsBf16 = &addRowProducts<S, uint16_t>;
  kernels.maskRow = &maskRow<S>;
  kernels.squaredDeviation = &squaredDeviation<S>;
  kernels.normalizeRow = &normalizeRow<S>;
  kernels.elementwiseBlock = &elementwiseBlock<S>;
  kernels.expInPlace = &expInPlace<S>;
  kernels.activateInPlace = &activateInPlace<S>;
  return kernels;
}

}  // namespace ein::detail::cpu::isa
