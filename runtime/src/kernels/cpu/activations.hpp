// Scalar activation functions shared by the gemm epilogue and the
// element-wise interpreter, so both compute the same function.
#pragma once

#include <cmath>

namespace ein::detail::cpu {

template <typename T>
T relu(T x) {
  return x > T(0) ? x : T(0);
}
// Exact GELU: 0.5 x (1 + erf(x / sqrt(2))).
template <typename T>
T gelu(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
}
// GELU's tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <typename T>
T geluTanh(T x) {
  return T(0.5) * x * (T(1) + std::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
}
template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}
template <typename T>
T silu(T x) {
  return x * sigmoid(x);
}

}  // namespace ein::detail::cpu
