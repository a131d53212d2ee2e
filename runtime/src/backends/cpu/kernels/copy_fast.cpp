// Threaded same-dtype copy (a rearrange the views could not absorb: ViT's
// patches, a transpose, a convolution's windows into im2col rows). The
// view's axes are simplified first (copyLoops): axes of size 1 dropped, the
// rest walked in the destination's order, and neighbours contiguous in both
// views merged, so the innermost loop is as long as it can be and each
// thread writes the destination front to back. Chunks of the index space's
// rows go to the threads; within a chunk the innermost two axes run as
// plain loops and the outer ones are stepped (IndexOffsets), so the
// row-major walk's bookkeeping is paid once per group of rows, and short
// contiguous rows (a 7-wide window row is 28 bytes) are copied in fixed
// 16, 8 or 4 byte pieces instead of through a library call each. A
// conversion into another dtype (f32 into a bf16 cache) is left to the
// reference.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {
namespace {

// `bytes` from src to dst (distinct tensors, so never overlapping): whole
// pieces, the last one overlapping the one before where bytes is not a
// multiple (it writes the same values again).
inline void copyRow(std::byte *dst, const std::byte *src, size_t bytes) {
  if (bytes > 256) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const auto pieces = [&](auto piece) {
    constexpr size_t kPiece = decltype(piece)::value;
    size_t at = 0;
    for (; at + kPiece <= bytes; at += kPiece) std::memcpy(dst + at, src + at, kPiece);
    if (at < bytes) std::memcpy(dst + bytes - kPiece, src + bytes - kPiece, kPiece);
  };
  if (bytes >= 16) return pieces(std::integral_constant<size_t, 16>());
  if (bytes >= 8) return pieces(std::integral_constant<size_t, 8>());
  if (bytes >= 4) return pieces(std::integral_constant<size_t, 4>());
  for (size_t at = 0; at < bytes; ++at) dst[at] = src[at];
}

// length elements of Element, x at xStep, y at yStep apart.
template <typename Element>
void copyStrided(std::byte *dst, int64_t yStep, const std::byte *src, int64_t xStep, int64_t length) {
  auto *y = reinterpret_cast<Element *>(dst);
  const auto *x = reinterpret_cast<const Element *>(src);
  for (int64_t i = 0; i < length; ++i) std::memcpy(y + i * yStep, x + i * xStep, sizeof(Element));
}

// The loops a copy runs: its shape and the two views' strides, at least two
// axes (leading ones of size 1 where fewer are left).
struct CopyLoops {
  Dims shape, x, y;
};

// op's axes without those of size 1, ordered by the destination's strides
// (largest outermost; kept as they are where y repeats an element, stride
// 0, so the last write stays the last), then each axis merged into the one
// before where both views step over it contiguously (an outer stride is
// the inner one times its size in x and in y).
CopyLoops copyLoops(const Copy &op) {
  std::array<size_t, kMaxRank> order{};
  size_t rank = 0;
  bool repeats = false;
  for (size_t axis = 0; axis < op.shape.size(); ++axis)
    if (op.shape[axis] != 1) {
      order[rank++] = axis;
      repeats = repeats || op.y.strides[axis] == 0;
    }
  if (!repeats)
    std::stable_sort(order.begin(), order.begin() + rank, [&](size_t a, size_t b) {
      return std::llabs(op.y.strides[a]) > std::llabs(op.y.strides[b]);
    });
  CopyLoops loops;
  for (size_t i = 0; i < rank; ++i) {
    const size_t axis = order[i];
    const int64_t size = op.shape[axis], xStride = op.x.strides[axis], yStride = op.y.strides[axis];
    const size_t last = loops.shape.size() - 1;
    if (!loops.shape.empty() && loops.x[last] == xStride * size && loops.y[last] == yStride * size) {
      loops.shape[last] *= size;
      loops.x[last] = xStride;
      loops.y[last] = yStride;
      continue;
    }
    loops.shape.push_back(size);
    loops.x.push_back(xStride);
    loops.y.push_back(yStride);
  }
  while (loops.shape.size() < 2) {
    loops.shape = Dims{1}.concat(loops.shape);
    loops.x = Dims{0}.concat(loops.x);
    loops.y = Dims{0}.concat(loops.y);
  }
  return loops;
}

}  // namespace

Status copyFast(const Copy &op, const KernelContext &context) {
  const size_t elementSize = dtypeSize(context.dtype(op.x));
  // Into another dtype, a rank-0 copy, or a tensor into itself: the reference.
  if (context.dtype(op.x) != context.dtype(op.y) || op.shape.empty() || op.x.tensor == op.y.tensor ||
      (elementSize != 1 && elementSize != 2 && elementSize != 4 && elementSize != 8))
    return copyReference(op, context);
  if (op.shape.product() == 0) return Status();
  const CopyLoops loops = copyLoops(op);
  const size_t rank = loops.shape.size();
  const int64_t length = loops.shape[rank - 1], rowsPerGroup = loops.shape[rank - 2];
  const Dims groups = loops.shape.first(rank - 2);
  const Dims xGroups = loops.x.first(rank - 2), yGroups = loops.y.first(rank - 2);
  const int64_t xRow = loops.x[rank - 2], yRow = loops.y[rank - 2];
  const int64_t xStep = loops.x[rank - 1], yStep = loops.y[rank - 1];
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
    IndexOffsets<2> group(groups, {&xGroups, &yGroups}, {op.x.offset, op.y.offset}, begin / rowsPerGroup);
    for (int64_t row = begin, first = begin % rowsPerGroup; row < end; group.next(), first = 0) {
      const int64_t last = std::min(rowsPerGroup, first + (end - row));
      for (int64_t r = first; r < last; ++r) copyGroupRow(group[0] + r * xRow, group[1] + r * yRow);
      row += last - first;
    }
  });
  return Status();
}

Status runStep(const Copy &op, const KernelContext &context) { return copyFast(op, context); }
size_t stepScratchFloats(const Copy &) { return 0; }

}  // namespace ein::detail::cpu
