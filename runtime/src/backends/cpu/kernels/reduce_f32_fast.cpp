// Vectorised, threaded reduction of the trailing axes: each kept element's
// reduced values are read as one contiguous row when their strides allow it,
// else gathered into scratch first. f32 with several accumulators; NaN
// propagates through max and min; the mean of nothing is NaN.
#include <algorithm>
#include <limits>

#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {
namespace {

// Whether the axes of `shape` with `strides` cover one dense run of memory
// in row-major order (size-1 axes may have any stride).
bool isContiguous(const Dims &shape, const Dims &strides) {
  int64_t expected = 1;
  for (size_t axis = shape.size(); axis-- > 0;) {
    if (shape[axis] == 1) continue;
    if (strides[axis] != expected) return false;
    expected *= shape[axis];
  }
  return true;
}

}  // namespace

Status reduceF32Fast(const Reduce &op, const KernelContext &context) {
  const IsaKernels &isa = *context.isa;
  const float *x = context.data<const float>(op.x);
  float *y = context.data<float>(op.y);
  const size_t keptRank = op.shape.size() - op.reducedRank;
  const Dims kept = op.shape.first(keptRank), reduced = op.shape.dropFirst(keptRank);
  const Dims xKept = op.x.strides.first(keptRank), xReduced = op.x.strides.dropFirst(keptRank);
  const int64_t count = reduced.product();
  const bool contiguous = isContiguous(reduced, xReduced);
  context.parallelChunks(kept.product(), std::max<int64_t>(1, 16384 / std::max<int64_t>(count, 1)),
                         [&](int64_t begin, int64_t end, int thread) {
                           float *scratch = context.threadScratch(thread);
                           for (int64_t item = begin; item < end; ++item) {
                             const int64_t base = offsetOfIndex(kept, xKept, op.x.offset, item);
                             const float *row = x + base;
                             if (!contiguous && count > 0) {
                               float *to = scratch;
                               forEachIndex<1>(reduced, {base}, {&xReduced},
                                               [&](const std::array<int64_t, 1> &at) { *to++ = x[at[0]]; });
                               row = scratch;
                             }
                             float value = isa.reduceRow(row, count, op.kind);
                             if (op.kind == ReduceKind::Mean)
                               value = count > 0 ? value / static_cast<float>(count)
                                                 : std::numeric_limits<float>::quiet_NaN();
                             y[offsetOfIndex(kept, op.y.strides, op.y.offset, item)] = value;
                           }
                         });
  return Status();
}

}  // namespace ein::detail::cpu
