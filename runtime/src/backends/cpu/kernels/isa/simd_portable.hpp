// One float per "vector": the portable fallback runs the same templates as
// the SIMD builds, in plain C++ (the compiler may still vectorise loops).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ein::detail::cpu::isa {

struct Portable {
  using V = float;
  using Mask = bool;
  static constexpr int W = 1;
  static constexpr int Registers = 16;  // vector registers (xmm, as scalars)
  static V zero() { return 0.0f; }
  static V set1(float x) { return x; }
  static V load(const float *p) { return *p; }
  static V load(const uint16_t *p) {  // a bf16 key/value cache's element, widened exactly
    const uint32_t wide = static_cast<uint32_t>(*p) << 16;
    float value;
    std::memcpy(&value, &wide, sizeof value);
    return value;
  }
  static void loadPairs(const uint32_t *p, V &even, V &odd) {  // a bf16 pair, widened exactly
    const uint32_t low = *p << 16, high = *p & 0xffff0000u;
    std::memcpy(&even, &low, sizeof even);
    std::memcpy(&odd, &high, sizeof odd);
  }
  static void store(float *p, V v) { *p = v; }
  static V fmadd(V a, V b, V c) { return a * b + c; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  // As the x86 instructions: the second operand when either is NaN.
  static V min(V a, V b) { return a < b ? a : b; }
  static V max(V a, V b) { return a > b ? a : b; }
  static V abs(V a) { return std::fabs(a); }
  static V copySign(V magnitude, V sign) { return std::copysign(magnitude, sign); }
  static Mask less(V a, V b) { return a < b; }
  static Mask greater(V a, V b) { return a > b; }
  static Mask isNan(V a) { return a != a; }
  static Mask lessEqual(V a, V b) { return a <= b; }
  static Mask equal(V a, V b) { return a == b; }
  static Mask notEqual(V a, V b) { return a != b; }
  static V sqrt(V a) { return std::sqrt(a); }
  static V select(Mask m, V ifTrue, V ifFalse) { return m ? ifTrue : ifFalse; }
  static Mask flagsSet(const uint8_t *p) { return *p != 0; }
  static V round(V a) { return std::nearbyint(a); }
  static V pow2(V n) { return std::ldexp(1.0f, static_cast<int>(n)); }
  // p * 2^n for integral n in [-127, 128]: 2^128 overflows the exponent, so in two steps.
  static V scaleByPow2(V p, V n) {
    const V half = round(mul(n, set1(0.5f)));
    return mul(mul(p, pow2(half)), pow2(sub(n, half)));
  }
  static float reduceAdd(V v) { return v; }
  static void reduceAdd4(V a, V b, V c, V d, float *out) { out[0] = a, out[1] = b, out[2] = c, out[3] = d; }
  static float reduceMax(V v) { return v; }
};

}  // namespace ein::detail::cpu::isa
