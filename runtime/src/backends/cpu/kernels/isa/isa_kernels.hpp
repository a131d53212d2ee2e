// An ISA's kernel table (IsaKernels) from its SIMD type S (simd_*.hpp):
// makeKernels<S, MR, NV> instantiates every micro-kernel family below for S,
// with the f32 gemm tile MR rows by NV vectors. isa_avx512.cpp, isa_avx2.cpp
// and isa_portable.cpp call it, each built for its ISA.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels/isa/elementwise_block.hpp"
#include "backends/cpu/kernels/isa/gemm_f32_epilogue.hpp"
#include "backends/cpu/kernels/isa/gemm_f32_tile.hpp"
#include "backends/cpu/kernels/isa/isa.hpp"
#include "backends/cpu/kernels/isa/row_products.hpp"
#include "backends/cpu/kernels/isa/row_reductions.hpp"
#include "backends/cpu/kernels/isa/row_updates.hpp"
#include "backends/cpu/kernels/isa/vector_math.hpp"

namespace ein::detail::cpu::isa {

template <class S, int MR, int NV>
IsaKernels makeKernels(const char *name) {
  IsaKernels kernels{};
  kernels.name = name;
  kernels.gemmMr = MR;
  kernels.gemmNr = NV * S::W;
  kernels.gemmTile = &gemmTile<S, MR, NV>;
  kernels.gemmTileRows = &gemmTileRows<S, MR, NV>;
  kernels.gemmTileRowsVector = &gemmTileRowsVector<S, MR>;
  kernels.gemmTileRowsUpTo = &gemmTileRowsUpTo<S, MR, NV>;
  kernels.gemvPanel = &gemvPanel<S, NV>;
  kernels.bf16WidenGemvPanel = &gemvPairPanel<S, NV>;
  kernels.bf16WidenPairPanel = &widenPairPanel<S, NV>;
  kernels.vectorFloats = S::W;
  kernels.gemmEpilogue = &gemmEpilogue<S>;
  kernels.reduceRow = &reduceRow<S>;
  kernels.expShiftSum = &expShiftSum<S>;
  kernels.scaleInPlace = &scaleInPlace<S>;
  kernels.addScaled = &addScaled<S>;
  kernels.weightedSum = &weightedSum<S>;
  kernels.rowDots = &rowDots<S, float>;
  kernels.addRowProducts = &addRowProducts<S, float>;
  kernels.columnSums = &columnSums<S>;
  kernels.rowDotsBf16 = &rowDots<S, uint16_t>;
  kernels.addRowProductsBf16 = &addRowProducts<S, uint16_t>;
  kernels.maskRow = &maskRow<S>;
  kernels.squaredDeviation = &squaredDeviation<S>;
  kernels.normalizeRow = &normalizeRow<S>;
  kernels.elementwiseBlock = &elementwiseBlock<S>;
  kernels.expInPlace = &expInPlace<S>;
  kernels.activateInPlace = &activateInPlace<S>;
  kernels.softcapInPlace = &softcapInPlace<S>;
  return kernels;
}

}  // namespace ein::detail::cpu::isa
