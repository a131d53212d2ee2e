// f16 and bf16 to and from f32, for feeding half-precision inputs and
// reading such outputs (the runtime computes in f32 and stores these types).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ein {

inline float halfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN
  } else if (exponent != 0) {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;  // zero
  } else {
    // Subnormal: shift the mantissa up until its leading one is implicit.
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    out = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float value;
  std::memcpy(&value, &out, sizeof value);
  return value;
}

// Round to nearest, ties to even; overflow gives inf, NaN stays NaN.
inline uint16_t floatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (magnitude < 0x38800000u) {
    // Subnormal or zero in f16: scale by 2^24 and round the integer.
    float scaled;
    uint32_t unsignedBits = magnitude;
    std::memcpy(&scaled, &unsignedBits, sizeof scaled);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled * 16777216.0f)));
  }
  const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

inline float bfloatToFloat(uint16_t bits) {
  const uint32_t out = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &out, sizeof value);
  return value;
}

// Round to nearest, ties to even; NaN stays NaN.
inline uint16_t floatToBfloat(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace ein
