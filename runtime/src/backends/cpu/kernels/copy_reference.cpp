#include <cstring>

#include "backends/cpu/kernels/element_io.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {

namespace {

// y[i..] = x[i..] converted from f32 to y's dtype (storeFromF32: bf16 rounds
// to nearest even): f32 rows appended to a bf16 key/value cache.
void copyFromF32(const Copy &op, const KernelContext &context) {
  const float *x = context.data<const float>(op.x);
  std::byte *y = context.bases[op.y.tensor];
  const DType to = context.dtype(op.y);
  if (op.shape.empty()) return storeFromF32(y, to, op.y.offset, 1, 1, x + op.x.offset);
  const size_t outerRank = op.shape.size() - 1;
  const Dims xOuter = op.x.strides.first(outerRank), yOuter = op.y.strides.first(outerRank);
  const int64_t length = op.shape.back(), xStep = op.x.strides.back(), yStep = op.y.strides.back();
  forEachIndex<2>(op.shape.first(outerRank), {op.x.offset, op.y.offset}, {&xOuter, &yOuter},
                  [&](const std::array<int64_t, 2> &at) {
                    if (xStep == 1) return storeFromF32(y, to, at[1], yStep, length, x + at[0]);
                    for (int64_t i = 0; i < length; ++i) storeFromF32(y, to, at[1] + i * yStep, 1, 1, x + at[0] + i * xStep);
                  });
}

}  // namespace

// y[i..] = x[i..] for any dtype, element by element as bytes; rows that are
// contiguous on both sides are copied whole. The one conversion the loader
// allows, f32 into bf16, rounds (copyFromF32).
Status copyReference(const Copy &op, const KernelContext &context) {
  if (context.dtype(op.x) != context.dtype(op.y)) {
    copyFromF32(op, context);
    return Status();
  }
  const size_t elementSize = dtypeSize(context.dtype(op.x));
  const std::byte *x = context.bases[op.x.tensor];
  std::byte *y = context.bases[op.y.tensor];
  if (op.shape.empty()) {
    std::memcpy(y + op.y.offset * elementSize, x + op.x.offset * elementSize, elementSize);
    return Status();
  }
  const size_t outerRank = op.shape.size() - 1;
  const Dims outer = op.shape.first(outerRank);
  const Dims xOuter = op.x.strides.first(outerRank), yOuter = op.y.strides.first(outerRank);
  const int64_t length = op.shape.back(), xStep = op.x.strides.back(), yStep = op.y.strides.back();
  if (length == 0) return Status();
  const bool contiguous = xStep == 1 && yStep == 1;
  forEachIndex<2>(outer, {op.x.offset, op.y.offset}, {&xOuter, &yOuter}, [&](const std::array<int64_t, 2> &at) {
    if (contiguous) {
      std::memmove(y + at[1] * elementSize, x + at[0] * elementSize, length * elementSize);
      return;
    }
    for (int64_t i = 0; i < length; ++i)
      std::memcpy(y + (at[1] + i * yStep) * elementSize, x + (at[0] + i * xStep) * elementSize, elementSize);
  });
  return Status();
}

}  // namespace ein::detail::cpu
