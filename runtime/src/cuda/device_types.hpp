// Plain structs shared by the CUDA host code (cuda_executor.cpp, built by the
// host compiler) and the kernels (.cu, built by nvcc). They are passed to
// kernels by value or live in device memory, so they hold no pointers to host
// memory and nothing with a constructor that runs code.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define EIN_HOST_DEVICE __host__ __device__
#else
#define EIN_HOST_DEVICE
#endif

namespace ein::cuda {

// Iteration spaces and views passed to kernels have at most this many axes;
// the executor merges axes that every view walks contiguously first, and
// refuses (with a Status) a step that still has more.
inline constexpr int kMaxRank = 8;

struct Shape {
  int32_t rank = 0;
  int64_t size[kMaxRank] = {};

  EIN_HOST_DEVICE int64_t count() const {
    int64_t total = 1;
    for (int32_t axis = 0; axis < rank; ++axis) total *= size[axis];
    return total;
  }
};

// Element (i0, i1, ...) is element offset + sum(ik * stride[k]) of the tensor
// at `data` (a device address). The owning launch says how many strides count.
struct DeviceView {
  void *data = nullptr;
  int64_t offset = 0;
  int64_t stride[kMaxRank] = {};
};

// Offset of the row-major index number `flat` of `shape` in `view`, over the
// first shape.rank strides.
EIN_HOST_DEVICE inline int64_t offsetOf(const Shape &shape, const DeviceView &view, int64_t flat) {
  int64_t offset = view.offset;
  for (int32_t axis = shape.rank - 1; axis >= 0; --axis) {
    const int64_t size = shape.size[axis];
    offset += (flat % size) * view.stride[axis];
    flat /= size;
  }
  return offset;
}

// Matches ein::DType value for value.
enum class ElementType : uint8_t { F32 = 0, F16, BF16, I32, I64, Bool };

// Matches ein::detail::Opcode value for value (checked in cuda_executor.cpp).
enum class Op : uint8_t {
  Const, Neg, Exp, Log, Sqrt, Rsqrt, Abs, Relu, Gelu, GeluTanh, Silu, Sigmoid, Tanh, Not,
  Add, Sub, Mul, Div, Pow, Max, Min, Lt, Le, Gt, Ge, Eq, Ne, Select,
};

// Matches ein::detail::Activation, MaskKind, ReduceKind, LayerNormVariant.
enum class Activation : uint8_t { None = 0, Relu, Gelu, GeluTanh, Silu };
enum class MaskKind : uint8_t { None = 0, Add, Keep, Drop };
enum class ReduceKind : uint8_t { Sum = 0, Mean, Max, Min, Prod };
enum class LayerNormVariant : uint8_t { Variance = 0, UnbiasedStd };

// The arithmetic the tensor-core kernels may use (ein::Precision).
enum class Precision : uint8_t { Fp32 = 0, Bf16, Fp16 };

}  // namespace ein::cuda
