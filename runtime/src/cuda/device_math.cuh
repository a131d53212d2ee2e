// Device-side scalar helpers shared by the kernels: the activations (the same
// functions as kernels/cpu/activations.hpp, in f32), NaN-propagating max/min,
// masks, and warp reductions.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/device_types.hpp"

namespace ein::cuda {

__device__ __forceinline__ float reluF(float x) { return x > 0.0f ? x : 0.0f; }
__device__ __forceinline__ float geluF(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }
__device__ __forceinline__ float geluTanhF(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float sigmoidF(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float siluF(float x) { return x * sigmoidF(x); }

__device__ __forceinline__ float activate(Activation activation, float x) {
  switch (activation) {
    case Activation::None: return x;
    case Activation::Relu: return reluF(x);
    case Activation::Gelu: return geluF(x);
    case Activation::GeluTanh: return geluTanhF(x);
    case Activation::Silu: return siluF(x);
  }
  return x;
}

// As torch.maximum / torch.minimum: NaN wins.
__device__ __forceinline__ float maximumF(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : fmaxf(a, b); }
__device__ __forceinline__ float minimumF(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : fminf(a, b); }

// The masked score, as the schema defines each mask kind; `mask` is the
// mask's tensor and `at` the element offset in it.
__device__ __forceinline__ float maskScore(MaskKind kind, float score, const void *mask, int64_t at, float fill) {
  switch (kind) {
    case MaskKind::None: return score;
    case MaskKind::Add: return score + static_cast<const float *>(mask)[at];
    case MaskKind::Keep: return static_cast<const uint8_t *>(mask)[at] != 0 ? score : fill;
    case MaskKind::Drop: return static_cast<const uint8_t *>(mask)[at] != 0 ? fill : score;
  }
  return score;
}

__device__ __forceinline__ float warpSum(float value) {
  for (int delta = 16; delta > 0; delta >>= 1) value += __shfl_xor_sync(0xffffffffu, value, delta);
  return value;
}
// Max that ignores NaN (fmaxf); callers track NaN separately where it matters.
__device__ __forceinline__ float warpMax(float value) {
  for (int delta = 16; delta > 0; delta >>= 1) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, delta));
  return value;
}
__device__ __forceinline__ bool warpAny(bool value) { return __any_sync(0xffffffffu, value); }

// exp(x - max) for an online softmax: 0 when max is -inf (nothing seen yet
// but masked scores), so a fully masked prefix of keys adds nothing; the
// caller turns a row whose sum stays 0 into NaN, as softmax does.
__device__ __forceinline__ float expShifted(float x, float max) { return max == -INFINITY ? 0.0f : expf(x - max); }

__device__ __forceinline__ int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace ein::cuda
