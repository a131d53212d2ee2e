// f32 values in 16-bit floats (bf16, f16) and back, as the compiler stores
// and reads weights: rounded to nearest even (NaN stays NaN; f16 overflows to
// infinity, as a cast does); widening is exact.
#pragma once

#include <cstdint>

#include "llvm/ADT/APFloat.h"
#include "mlir/IR/Types.h"

namespace ein::ir {

// The format of a 16-bit float element type: f16's, else bf16's.
inline const llvm::fltSemantics &halfSemantics(mlir::Type element) {
  return element.isF16() ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat();
}

inline uint16_t toHalfBits(float value, const llvm::fltSemantics &semantics) {
  llvm::APFloat converted(value);
  bool lost = false;
  converted.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &lost);
  return static_cast<uint16_t>(converted.bitcastToAPInt().getZExtValue());
}

inline float fromHalfBits(uint16_t bits, const llvm::fltSemantics &semantics) {
  return llvm::APFloat(semantics, llvm::APInt(16, bits)).convertToFloat();
}

}  // namespace ein::ir
