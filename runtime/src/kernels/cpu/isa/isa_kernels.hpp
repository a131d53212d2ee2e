// The ISA-generic kernel templates, instantiated once per SIMD type S (see
// simd_*.hpp) by isa_avx512.cpp, isa_avx2.cpp and isa_portable.cpp. Each of
// those files is built for its ISA, so this header must only be included
// inside their namespaces (no out-of-line code may leak to other ISAs).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/isa/isa.hpp"

namespace ein::detail::cpu::isa {

// exp(x) to ~1 ulp (Cephes' range reduction and polynomial). Below
// -87.33 it is 0 (subnormal results are flushed), above 88.72 +inf, and NaN
// stays NaN: softmax relies on exp(-inf) == 0 exactly.
template <class S>
typename S::V vexp(typename S::V x) {
  if constexpr (S::W == 1) {
    return std::exp(x);
  } else {
    using V = typename S::V;
    const V hi = S::set1(88.7228317f), lo = S::set1(-87.3365479f);
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
    // n is at most 128 here; 2^128 overflows the exponent, so scale in two steps.
    const V half = S::round(S::mul(n, S::set1(0.5f)));
    V result = S::mul(S::mul(p, S::pow2(half)), S::pow2(S::sub(n, half)));
    result = S::select(underflow, S::zero(), result);
    return S::select(overflow, S::set1(std::numeric_limits<float>::infinity()), result);
  }
}

// erf(x) with absolute error below 2e-7 (Abramowitz & Stegun 7.1.26).
template <class S>
typename S::V verf(typename S::V x) {
  if constexpr (S::W == 1) {
    return std::erf(x);
  } else {
    using V = typename S::V;
    const V one = S::set1(1.0f);
    const V a = S::abs(x);
    const V t = S::div(one, S::fmadd(S::set1(0.3275911f), a, one));
    V p = S::set1(1.061405429f);
    p = S::fmadd(p, t, S::set1(-1.453152027f));
    p = S::fmadd(p, t, S::set1(1.421413741f));
    p = S::fmadd(p, t, S::set1(-0.284496736f));
    p = S::fmadd(p, t, S::set1(0.254829592f));
    p = S::mul(p, t);
    const V y = S::sub(one, S::mul(p, vexp<S>(S::mul(S::sub(S::zero(), a), a))));
    return S::copySign(y, x);
  }
}

// tanh(x) = sign(x) (1 - 2 / (exp(2|x|) + 1)); exact to a few 1e-7.
template <class S>
typename S::V vtanh(typename S::V x) {
  if constexpr (S::W == 1) {
    return std::tanh(x);
  } else {
    using V = typename S::V;
    const V one = S::set1(1.0f);
    const V e = vexp<S>(S::mul(S::set1(2.0f), S::abs(x)));
    return S::copySign(S::sub(one, S::div(S::set1(2.0f), S::add(e, one))), x);
  }
}

// The activations of activations.hpp, for whole vectors.
template <class S>
typename S::V vactivate(typename S::V x, Activation activation) {
  using V = typename S::V;
  const V half = S::set1(0.5f), one = S::set1(1.0f);
  switch (activation) {
    case Activation::None: return x;
    case Activation::Relu: return S::max(x, S::zero());  // NaN gives 0, as x > 0 ? x : 0 does
    case Activation::Gelu: return S::mul(S::mul(half, x), S::add(one, verf<S>(S::mul(x, S::set1(0.70710678118654752f)))));
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

template <class S>
void activateInPlace(float *x, int64_t n, Activation activation) {
  if (activation == Activation::None) return;
  mapInPlace<S>(x, n, [activation](typename S::V v) { return vactivate<S>(v, activation); });
}

// --- gemm ------------------------------------------------------------------

// The register tile: MR rows x NV vectors of accumulators, one packed
// a-column broadcast per row and NV b-vector loads per step of k.
template <class S, int MR, int NV>
void gemmTile(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool accumulate) {
  using V = typename S::V;
  constexpr int W = S::W, NR = NV * W;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? S::load(c + r * ldc + v * W) : S::zero();
  for (int64_t p = 0; p < kc; ++p) {
    V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = S::load(b + p * NR + v * W);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const V ar = S::set1(a[p * MR + r]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = S::fmadd(ar, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) S::store(c + r * ldc + v * W, acc[r][v]);
}

template <class S>
void gemmEpilogue(const GemmEpilogueRow &e) {
  using V = typename S::V;
  constexpr int W = S::W;
  float *acc = e.acc;
  const int64_t n = e.n, whole = n / W * W;
  const V alpha = S::set1(e.alpha);
  if (e.bias && e.biasStride <= 1) {
    // Contiguous or broadcast (stride 0) bias.
    int64_t j = 0;
    if (e.biasStride == 0) {
      const V bias = S::set1(e.bias[0]);
      for (; j < whole; j += W) S::store(acc + j, S::fmadd(alpha, S::load(acc + j), bias));
      for (; j < n; ++j) acc[j] = e.alpha * acc[j] + e.bias[0];
    } else {
      for (; j < whole; j += W) S::store(acc + j, S::fmadd(alpha, S::load(acc + j), S::load(e.bias + j)));
      for (; j < n; ++j) acc[j] = e.alpha * acc[j] + e.bias[j];
    }
  } else if (e.bias) {
    for (int64_t j = 0; j < n; ++j) acc[j] = e.alpha * acc[j] + e.bias[j * e.biasStride];
  } else if (e.alpha != 1.0f) {
    mapInPlace<S>(acc, n, [alpha](V v) { return S::mul(alpha, v); });
  }
  activateInPlace<S>(acc, n, e.activation);
  if (e.outStride == 1 && (!e.residual || e.residualStride == 1)) {
    int64_t j = 0;
    if (e.residual)
      for (; j < whole; j += W) S::store(e.out + j, S::add(S::load(acc + j), S::load(e.residual + j)));
    else
      for (; j < whole; j += W) S::store(e.out + j, S::load(acc + j));
    for (; j < n; ++j) e.out[j] = e.residual ? acc[j] + e.residual[j] : acc[j];
  } else {
    for (int64_t j = 0; j < n; ++j)
      e.out[j * e.outStride] = e.residual ? acc[j] + e.residual[j * e.residualStride] : acc[j];
  }
}

template <class S, int MR, int NV>
IsaKernels makeKernels(const char *name) {
  IsaKernels kernels{};
  kernels.name = name;
  kernels.gemmMr = MR;
  kernels.gemmNr = NV * S::W;
  kernels.gemmTile = &gemmTile<S, MR, NV>;
  kernels.gemmEpilogue = &gemmEpilogue<S>;
  kernels.expInPlace = &expInPlace<S>;
  kernels.activateInPlace = &activateInPlace<S>;
  return kernels;
}

}  // namespace ein::detail::cpu::isa
