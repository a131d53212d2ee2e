// Strided loads and stores between a tensor of any dtype and f32 lanes: the
// element-wise kernels compute in f32 and keep f16/bf16 and integers as
// storage types.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ein/half_float.hpp"
#include "program/program.hpp"

namespace ein::detail::cpu {

// An integer result computed in f32: exact for |x| < 2^24, rounded to the
// nearest integer otherwise; NaN gives 0 and values beyond the type saturate,
// so no float-to-int conversion is ever undefined.
template <typename Int>
Int floatToInt(float value) {
  if (std::isnan(value)) return 0;
  const double rounded = std::nearbyint(static_cast<double>(value));
  if (rounded <= static_cast<double>(std::numeric_limits<Int>::min())) return std::numeric_limits<Int>::min();
  if (rounded >= static_cast<double>(std::numeric_limits<Int>::max())) return std::numeric_limits<Int>::max();
  return static_cast<Int>(rounded);
}

// An element of a tensor stored as f32 or as bf16 bits (bf16 weights, a
// bf16 key/value cache), as f32 (exact) and as bf16 bits (f32 rounded to
// nearest even, bf16 as it is).
inline float widenToF32(float x) { return x; }
inline float widenToF32(uint16_t bf16) { return bfloatToFloat(bf16); }
inline uint32_t bf16Bits(float x) { return floatToBfloat(x); }
inline uint32_t bf16Bits(uint16_t bf16) { return bf16; }

// out[e] = element offset + e * step of the tensor at `base`, as f32.
inline void loadAsF32(const std::byte *base, DType dtype, int64_t offset, int64_t step, int64_t count, float *out) {
  auto load = [&](auto convert, const auto *in) {
    for (int64_t e = 0; e < count; ++e) out[e] = convert(in[offset + e * step]);
  };
  switch (dtype) {
    case DType::F32: {
      const auto *in = reinterpret_cast<const float *>(base) + offset;
      if (step == 1) std::memcpy(out, in, sizeof(float) * static_cast<size_t>(count));
      else if (step == 0) std::fill(out, out + count, *in);
      else
        for (int64_t e = 0; e < count; ++e) out[e] = in[e * step];
      return;
    }
    case DType::F16: return load(halfToFloat, reinterpret_cast<const uint16_t *>(base));
    case DType::BF16: return load(bfloatToFloat, reinterpret_cast<const uint16_t *>(base));
    case DType::I32: return load([](int32_t x) { return static_cast<float>(x); }, reinterpret_cast<const int32_t *>(base));
    case DType::I64: return load([](int64_t x) { return static_cast<float>(x); }, reinterpret_cast<const int64_t *>(base));
    case DType::Bool:
      return load([](uint8_t x) { return x != 0 ? 1.0f : 0.0f; }, reinterpret_cast<const uint8_t *>(base));
    case DType::I8:  // int8 gemm weights only (the loader); read as their values
      return load([](int8_t x) { return static_cast<float>(x); }, reinterpret_cast<const int8_t *>(base));
    case DType::I4:  // never: the loader lets only the int4 gemm's packing read an i4 tensor
      std::fill(out, out + count, std::numeric_limits<float>::quiet_NaN());
      return;
  }
}

// Element offset + e * step of the tensor at `base` = in[e], converted to its dtype.
inline void storeFromF32(std::byte *base, DType dtype, int64_t offset, int64_t step, int64_t count, const float *in) {
  auto store = [&](auto convert, auto *out) {
    for (int64_t e = 0; e < count; ++e) out[offset + e * step] = convert(in[e]);
  };
  switch (dtype) {
    case DType::F32: {
      float *out = reinterpret_cast<float *>(base) + offset;
      if (step == 1) std::memcpy(out, in, sizeof(float) * static_cast<size_t>(count));
      else
        for (int64_t e = 0; e < count; ++e) out[e * step] = in[e];
      return;
    }
    case DType::F16: return store(floatToHalf, reinterpret_cast<uint16_t *>(base));
    case DType::BF16: return store(floatToBfloat, reinterpret_cast<uint16_t *>(base));
    case DType::I32: return store(floatToInt<int32_t>, reinterpret_cast<int32_t *>(base));
    case DType::I64: return store(floatToInt<int64_t>, reinterpret_cast<int64_t *>(base));
    case DType::Bool:
      return store([](float x) { return static_cast<uint8_t>(x != 0.0f); }, reinterpret_cast<uint8_t *>(base));
    case DType::I8: return store(floatToInt<int8_t>, reinterpret_cast<int8_t *>(base));  // never written (the loader)
    case DType::I4: return;  // never written (the loader)
  }
}

}  // namespace ein::detail::cpu
