// Plain structs shared by the CUDA host code (cuda_executor.cpp, built by the
// host compiler) and the kernels (.cu, built by nvcc). They are passed to
// kernels by value or live in device memory, so they hold no pointers to host
// memory and nothing with a constructor that runs code.
#pragma once

#include <cstdint>

#include "ops/ops.hpp"  // EIN_HOST_DEVICE and the kernels' enums

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

// The op table's enums, as the host side's program.hpp has them.
using Op = ops::Opcode;
using ops::Activation;
using ops::LayerNormVariant;
using ops::MaskKind;
using ops::ReduceKind;

// The arithmetic the tensor-core kernels may use (ein::Precision).
enum class Precision : uint8_t { Fp32 = 0, Bf16, Fp16 };

}  // namespace ein::cuda
