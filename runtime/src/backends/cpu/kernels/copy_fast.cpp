// Threaded same-dtype copy (a rearrange the views could not absorb: ViT's
// patches, a transpose). Chunks of the index space's rows go to the
// threads; within a chunk the innermost two axes run as plain loops, so the
// row-major walk's bookkeeping is paid once per group of rows, and short
// contiguous rows (a 16-pixel patch row is 64 bytes) are copied 16 bytes at
// a time inline instead of through a library call each. A conversion into
// another dtype (f32 into a bf16 cache) is left to the reference.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {
namespace {

// `bytes` from src to dst (distinct tensors, so never overlapping).
inline void copyRow(std::byte *dst, const std::byte *src, size_t bytes) {
  if (bytes > 256) {
    std::memcpy(dst, src, bytes);
    return;
  }
  for (; bytes >= 16; bytes -= 16, dst += 16, src += 16) std::memcpy(dst, src, 16);
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

// length elements of Element, x at xStep, y at yStep apart.
template <typename Element>
void copyStrided(std::byte *dst, int64_t yStep, const std::byte *src, int64_t xStep, int64_t length) {
  auto *y = reinterpret_cast<Element *>(dst);
  const auto *x = reinterpret_cast<const Element *>(src);
  for (int64_t i = 0; i < length; ++i) std::memcpy(y + i * yStep, x + i * xStep, sizeof(Element));
}

}  // namespace

Status copyFast(const Copy &op, const KernelContext &context) {
  const size_t elementSize = dtypeSize(context.dtype(op.x));
  // Into another dtype, a rank-0 copy, or a tensor into itself: the reference.
  if (context.dtype(op.x) != context.dtype(op.y) || op.shape.size() < 2 || op.x.tensor == op.y.tensor ||
      (elementSize != 1 && elementSize != 2 && elementSize != 4 && elementSize != 8))
    return copyReference(op, context);
  const size_t rank = op.shape.size();
  const int64_t length = op.shape[rank - 1], rowsPerGroup = op.shape[rank - 2];
  const Dims groups = op.shape.first(rank - 2);
  const Dims xGroups = op.x.strides.first(rank - 2), yGroups = op.y.strides.first(rank - 2);
  const int64_t xRow = op.x.strides[rank - 2], yRow = op.y.strides[rank - 2];
  const int64_t xStep = op.x.strides[rank - 1], yStep = op.y.strides[rank - 1];
  if (length == 0 || rowsPerGroup == 0 || groups.product() == 0) return Status();
  const std::byte *x = context.bases[op.x.tensor];
  std::byte *y = context.bases[op.y.tensor];
  const bool contiguous = xStep == 1 && yStep == 1;
  const size_t rowBytes = elementSize * static_cast<size_t>(length);
  const auto copyGroupRow = [&](int64_t xAt, int64_t yAt) {
    std::byte *dst = y + static_cast<size_t>(yAt) * elementSize;
    const std::byte *src = x + static_cast<size_t>(xAt) * elementSize;
    if (contiguous) return copyRow(dst, src, rowBytes);
    switch (elementSize) {
      case 1: return copyStrided<uint8_t>(dst, yStep, src, xStep, length);
      case 2: return copyStrided<uint16_t>(dst, yStep, src, xStep, length);
      case 4: return copyStrided<uint32_t>(dst, yStep, src, xStep, length);
      default: return copyStrided<uint64_t>(dst, yStep, src, xStep, length);
    }
  };
  // About 16 KB of rows a chunk; a chunk may start and end inside a group.
  const int64_t grain = std::max<int64_t>(1, 16384 / static_cast<int64_t>(std::max<size_t>(1, rowBytes)));
  context.parallelChunks(groups.product() * rowsPerGroup, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t row = begin; row < end;) {
      const int64_t g = row / rowsPerGroup, first = row % rowsPerGroup;
      const int64_t last = std::min(rowsPerGroup, first + (end - row));
      const int64_t xAt = offsetOfIndex(groups, xGroups, op.x.offset, g);
      const int64_t yAt = offsetOfIndex(groups, yGroups, op.y.offset, g);
      for (int64_t r = first; r < last; ++r) copyGroupRow(xAt + r * xRow, yAt + r * yRow);
      row += last - first;
    }
  });
  return Status();
}

Status runStep(const Copy &op, const KernelContext &context) { return copyFast(op, context); }
size_t stepScratchFloats(const Copy &) { return 0; }

}  // namespace ein::detail::cpu
