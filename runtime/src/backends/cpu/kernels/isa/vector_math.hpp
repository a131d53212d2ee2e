// Math on whole vectors: exp, erf and tanh, the activations built from them,
// and their in-place maps over a row.
//
// Templates on the SIMD type S (simd_*.hpp), instantiated by each ISA's
// table file (isa_avx512.cpp, isa_avx2.cpp, isa_portable.cpp), which is built
// for that ISA: nothing here may be out-of-line code one ISA's file could
// share with another's.
#pragma once

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
void softcapInPlace(float *x, int64_t n, float cap) {
  const typename S::V c = S::set1(cap), inverse = S::set1(1.0f / cap);
  mapInPlace<S>(x, n, [c, inverse](typename S::V v) { return S::mul(c, vtanh<S>(S::mul(v, inverse))); });
}

template <class S>
void activateInPlace(float *x, int64_t n, Activation activation) {
  if (activation == Activation::None) return;
  withActivation(activation, [x, n](auto kind) {
    mapInPlace<S>(x, n, [](typename S::V v) { return vactivate<S>(v, decltype(kind)::value); });
  });
}

}  // namespace ein::detail::cpu::isa
