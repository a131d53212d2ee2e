// f32 values in 16-bit floats (bf16, f16) and back, as the compiler stores
// and reads weights: rounded to nearest even (NaN stays NaN; f16 overflows to
// infinity, as a cast does); widening is exact.
#pragma once

#include <cstdint>
#include <cstring>

#include "llvm/ADT/APFloat.h"
#include "mlir/IR/Types.h"

namespace ein::ir {

// The format of a 16-bit float element type: f16's, else bf16's.
inline const llvm::fltSemantics &halfSemantics(mlir::Type element) {
  return element.isF16() ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat();
}

// bf16 from f32 by its bits: the upper half, rounded to nearest even, a NaN
// kept a quiet NaN. APFloat's conversion gives the same bits at a hundred
// times the cost, too slow for the billion weights of a 1B model.
inline uint16_t toBf16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline uint16_t toHalfBits(float value, const llvm::fltSemantics &semantics) {
  if (&semantics == &llvm::APFloat::BFloat()) return toBf16Bits(value);
  llvm::APFloat converted(value);
  bool lost = false;
  converted.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &lost);
  return static_cast<uint16_t>(converted.bitcastToAPInt().getZExtValue());
}

inline float fromHalfBits(uint16_t bits, const llvm::fltSemantics &semantics) {
  if (&semantics == &llvm::APFloat::BFloat()) {  // exact: bf16 is f32's upper half
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &wide, sizeof value);
    return value;
  }
  return llvm::APFloat(semantics, llvm::APInt(16, bits)).convertToFloat();
}

}  // namespace ein::ir
