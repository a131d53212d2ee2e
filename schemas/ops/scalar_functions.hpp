// The scalar definition of every opcode and activation of the op table: what
// an element-wise instruction computes, for one element, in T (float in the
// runtime, double in the compiler's constant folding and reference
// evaluator). Host and device code: the CPU reference kernels and scalar
// fallbacks, the CUDA kernels and the compiler all compute these functions.
// The CPU's vector kernels (runtime/src/backends/cpu/kernels/isa) have their own SIMD
// forms, tested against these.
//
// Math goes through std:: so that T picks the float or double function (nvcc
// maps std:: math to the device's functions); never -ffast-math or
// --use_fast_math: NaN and infinities must behave as IEEE says.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/ops.hpp"

namespace ein::ops {

template <class T>
EIN_HOST_DEVICE inline T constant(T imm) {
  return imm;
}
template <class T>
EIN_HOST_DEVICE inline T identity(T x) {
  return x;
}
template <class T>
EIN_HOST_DEVICE inline T neg(T x) {
  return -x;
}
template <class T>
EIN_HOST_DEVICE inline T exp(T x) {
  return std::exp(x);
}
template <class T>
EIN_HOST_DEVICE inline T log(T x) {
  return std::log(x);
}
template <class T>
EIN_HOST_DEVICE inline T sqrt(T x) {
  return std::sqrt(x);
}
template <class T>
EIN_HOST_DEVICE inline T rsqrt(T x) {
  return T(1) / std::sqrt(x);
}
template <class T>
EIN_HOST_DEVICE inline T abs(T x) {
  return std::fabs(x);
}
// NaN stays NaN, as in torch.relu (and the vector kernels' max(0, x)).
template <class T>
EIN_HOST_DEVICE inline T relu(T x) {
  return x < T(0) ? T(0) : x;
}
// Exact GELU: 0.5 x (1 + erf(x / sqrt(2))).
template <class T>
EIN_HOST_DEVICE inline T gelu(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
}
// GELU's tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class T>
EIN_HOST_DEVICE inline T geluTanh(T x) {
  return T(0.5) * x * (T(1) + std::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
}
// exp(-x) overflowing to inf still gives the limit 0.
template <class T>
EIN_HOST_DEVICE inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}
template <class T>
EIN_HOST_DEVICE inline T silu(T x) {
  return x * sigmoid(x);
}
template <class T>
EIN_HOST_DEVICE inline T tanh(T x) {
  return std::tanh(x);
}
template <class T>
EIN_HOST_DEVICE inline T logicalNot(T x) {
  return x == T(0) ? T(1) : T(0);
}
template <class T>
EIN_HOST_DEVICE inline T add(T a, T b) {
  return a + b;
}
template <class T>
EIN_HOST_DEVICE inline T sub(T a, T b) {
  return a - b;
}
template <class T>
EIN_HOST_DEVICE inline T mul(T a, T b) {
  return a * b;
}
template <class T>
EIN_HOST_DEVICE inline T div(T a, T b) {
  return a / b;
}
template <class T>
EIN_HOST_DEVICE inline T pow(T a, T b) {
  return std::pow(a, b);
}
// NaN from either side wins, as torch.maximum and torch.minimum.
template <class T>
EIN_HOST_DEVICE inline T maximum(T a, T b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : (a < b ? b : a);
}
template <class T>
EIN_HOST_DEVICE inline T minimum(T a, T b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : (b < a ? b : a);
}
// Comparisons give 1 or 0.
template <class T>
EIN_HOST_DEVICE inline T less(T a, T b) {
  return a < b ? T(1) : T(0);
}
template <class T>
EIN_HOST_DEVICE inline T lessEqual(T a, T b) {
  return a <= b ? T(1) : T(0);
}
template <class T>
EIN_HOST_DEVICE inline T greater(T a, T b) {
  return a > b ? T(1) : T(0);
}
template <class T>
EIN_HOST_DEVICE inline T greaterEqual(T a, T b) {
  return a >= b ? T(1) : T(0);
}
template <class T>
EIN_HOST_DEVICE inline T equal(T a, T b) {
  return a == b ? T(1) : T(0);
}
template <class T>
EIN_HOST_DEVICE inline T notEqual(T a, T b) {
  return a != b ? T(1) : T(0);
}
template <class T>
EIN_HOST_DEVICE inline T select(T condition, T onTrue, T onFalse) {
  return condition != T(0) ? onTrue : onFalse;
}
// torch.nn.functional.softplus with beta 1 and threshold 20: log(1 + e^x),
// and x itself above the threshold, where the two agree in float.
template <class T>
EIN_HOST_DEVICE inline T softplus(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}
// torch.sin and torch.cos, in radians.
template <class T>
EIN_HOST_DEVICE inline T sin(T x) {
  return std::sin(x);
}
template <class T>
EIN_HOST_DEVICE inline T cos(T x) {
  return std::cos(x);
}
// Python's and torch's floor division and remainder: the quotient rounds
// towards -inf and the remainder has the sign of the divisor (-7 // 2 == -4,
// -7 % 2 == 1, 7 % -2 == -1). On floats as torch.floor_divide and
// torch.remainder: x // 0 is +-inf (NaN for 0 // 0) and x % 0 is NaN.
template <class T>
EIN_HOST_DEVICE inline T floorDiv(T a, T b) {
  return std::floor(a / b);
}
template <class T>
EIN_HOST_DEVICE inline T mod(T a, T b) {
  T r = std::fmod(a, b);
  return r != T(0) && ((r < T(0)) != (b < T(0))) ? r + b : r;
}
// Rounding to integral values, as torch.floor, ceil, trunc and round (which
// rounds halves to even: round(2.5) == 2, round(-0.5) == -0).
template <class T>
EIN_HOST_DEVICE inline T floor(T x) {
  return std::floor(x);
}
template <class T>
EIN_HOST_DEVICE inline T ceil(T x) {
  return std::ceil(x);
}
template <class T>
EIN_HOST_DEVICE inline T trunc(T x) {
  return std::trunc(x);
}
template <class T>
EIN_HOST_DEVICE inline T round(T x) {
  return std::nearbyint(x);  // the default rounding mode: to nearest, halves to even
}

// The registers an opcode of `arity` passes to its function (Const: its imm).
#define EIN_OPERANDS_0(a, b, c, imm) imm
#define EIN_OPERANDS_1(a, b, c, imm) a
#define EIN_OPERANDS_2(a, b, c, imm) a, b
#define EIN_OPERANDS_3(a, b, c, imm) a, b, c

// One instruction on one element.
template <class T>
EIN_HOST_DEVICE inline T evaluate(Opcode opcode, T a, T b, T c, T imm) {
  switch (opcode) {
#define EIN_OPCODE(Name, arity, spelling, function, mlirOp) \
  case Opcode::Name: return function<T>(EIN_OPERANDS_##arity(a, b, c, imm));
#include "ops/op_table.def"
  }
  return std::numeric_limits<T>::quiet_NaN();
}

// One instruction on `count` elements of registers a, b, c, decoded once:
// the CPU reference kernel, and the vector kernels' path for opcodes they
// have no vector form of.
template <class T>
inline void evaluateLanes(Opcode opcode, T imm, const T *a, const T *b, const T *c, T *out, int64_t count) {
  switch (opcode) {
#define EIN_OPCODE(Name, arity, spelling, function, mlirOp)                                          \
  case Opcode::Name:                                                                                 \
    for (int64_t e = 0; e < count; ++e) out[e] = function<T>(EIN_OPERANDS_##arity(a[e], b[e], c[e], imm)); \
    return;
#include "ops/op_table.def"
  }
}

template <class T>
EIN_HOST_DEVICE inline T activate(Activation activation, T x) {
  switch (activation) {
#define EIN_ACTIVATION(Name, spelling, function) \
  case Activation::Name: return function<T>(x);
#include "ops/op_table.def"
  }
  return x;
}

}  // namespace ein::ops
