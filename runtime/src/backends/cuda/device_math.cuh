// Device-side helpers shared by the kernels: the op table's scalar functions
// (ops/scalar_functions.hpp, the CPU's definitions, in f32), masks, and warp
// reductions.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backends/cuda/device_types.hpp"
#include "ops/scalar_functions.hpp"

namespace ein::cuda {

// The masked score, as the schema defines each mask kind; `mask` is the
// mask's tensor and `at` the element offset in it.
// Causal attention (causalPositions P > 0) hides key j from query i where
// j > i % P + keys - P.
__device__ __forceinline__ bool causallyHidden(int64_t causalPositions, int64_t i, int64_t j, int64_t keys) {
  return causalPositions > 0 && j > i % causalPositions + keys - causalPositions;
}

__device__ __forceinline__ float maskScore(MaskKind kind, float score, const void *mask, int64_t at, float fill) {
  switch (kind) {
    case MaskKind::None: return score;
    case MaskKind::Add: return score + static_cast<const float *>(mask)[at];
    case MaskKind::Keep: return static_cast<const uint8_t *>(mask)[at] != 0 ? score : fill;
    case MaskKind::Drop: return static_cast<const uint8_t *>(mask)[at] != 0 ? fill : score;
  }
  return score;
}

// The sum and the max over each group of `kLanes` consecutive lanes (the
// whole warp by default; 4 for the lanes that share a row of an mma tile).
template <int kLanes = 32>
__device__ __forceinline__ float warpSum(float value) {
  for (int delta = kLanes / 2; delta > 0; delta >>= 1) value += __shfl_xor_sync(0xffffffffu, value, delta);
  return value;
}
// Max that ignores NaN (fmaxf); callers track NaN separately where it matters.
template <int kLanes = 32>
__device__ __forceinline__ float warpMax(float value) {
  for (int delta = kLanes / 2; delta > 0; delta >>= 1)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, delta));
  return value;
}
__device__ __forceinline__ bool warpAny(bool value) { return __any_sync(0xffffffffu, value); }

// exp(x - max) for an online softmax: 0 when max is -inf (nothing seen yet
// but masked scores), so a fully masked prefix of keys adds nothing; the
// caller turns a row whose sum stays 0 into NaN, as softmax does.
__device__ __forceinline__ float expShifted(float x, float max) { return max == -INFINITY ? 0.0f : expf(x - max); }

__device__ __forceinline__ int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace ein::cuda
