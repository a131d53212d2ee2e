#include <cstring>

#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {

// y[i..] = x[i..] for any dtype, element by element as bytes; rows that are
// contiguous on both sides are copied whole.
Status copyReference(const Copy &op, const KernelContext &context) {
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
