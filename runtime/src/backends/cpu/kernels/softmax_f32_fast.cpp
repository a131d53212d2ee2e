// Vectorised, threaded softmax over the last axis: per row the max, then
// exp(x - max) and its sum in one pass, then a scale by 1 / sum. A NaN, +inf
// or all -inf row gives NaN through the arithmetic itself (NaN max, or
// inf - inf), as in the reference.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/flush_subnormals.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {

Status softmaxF32Fast(const Softmax &op, const KernelContext &context) {
  const IsaKernels &isa = *context.isa;
  const float *x = context.data<const float>(op.x);
  float *y = context.data<float>(op.y);
  const size_t rowRank = op.shape.size() - 1;
  const Dims rows = op.shape.first(rowRank);
  const Dims xRows = op.x.strides.first(rowRank), yRows = op.y.strides.first(rowRank);
  const int64_t length = op.shape.back(), xStep = op.x.strides.back(), yStep = op.y.strides.back();
  if (length == 0) return Status();
  context.parallelChunks(rows.product(), std::max<int64_t>(1, 32768 / length), [&](int64_t begin, int64_t end,
                                                                                    int thread) {
    const FlushSubnormalsScope flush;  // tiny probabilities become 0, not slow subnormals
    float *scratch = context.threadScratch(thread);
    IndexOffsets<2> at(rows, {&xRows, &yRows}, {op.x.offset, op.y.offset}, begin);
    for (int64_t r = begin; r < end; ++r, at.next()) {
      const float *src = x + at[0];
      float *out = y + at[1];
      // Work in the output row when it is contiguous, else in scratch.
      float *row = yStep == 1 ? out : scratch;
      if (xStep == 1) {
        if (row != src) std::memmove(row, src, sizeof(float) * static_cast<size_t>(length));
      } else {
        for (int64_t i = 0; i < length; ++i) row[i] = src[i * xStep];
      }
      const float max = isa.reduceRow(row, length, ReduceKind::Max);
      const float sum = isa.expShiftSum(row, length, max);
      isa.scaleInPlace(row, length, 1.0f / sum);
      if (row != out)
        for (int64_t i = 0; i < length; ++i) out[i * yStep] = row[i];
    }
  });
  return Status();
}

Status runStep(const Softmax &op, const KernelContext &context) { return softmaxF32Fast(op, context); }
size_t stepScratchFloats(const Softmax &op) { return static_cast<size_t>(op.shape.back()); }

}  // namespace ein::detail::cpu
