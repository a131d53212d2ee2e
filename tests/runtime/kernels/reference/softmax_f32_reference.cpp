#include <cmath>
#include <limits>

#include "kernels/reference/reference_kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {

// y = exp(x - max) / sum(exp(x - max)) along the last axis. Subtracting the
// row's max keeps exp in range; a row that is all -inf (or holds +inf or NaN)
// gives NaN, as in PyTorch.
Status softmaxF32Reference(const Softmax &op, const KernelContext &context) {
  const float *x = context.data<const float>(op.x);
  float *y = context.data<float>(op.y);
  const size_t rowRank = op.shape.size() - 1;
  const Dims rows = op.shape.first(rowRank);
  const Dims xRows = op.x.strides.first(rowRank), yRows = op.y.strides.first(rowRank);
  const int64_t length = op.shape.back(), xStep = op.x.strides.back(), yStep = op.y.strides.back();
  if (length == 0) return Status();
  forEachIndex<2>(rows, {op.x.offset, op.y.offset}, {&xRows, &yRows}, [&](const std::array<int64_t, 2> &base) {
    double max = -std::numeric_limits<double>::infinity();
    bool sawNan = false;
    for (int64_t i = 0; i < length; ++i) {
      double value = x[base[0] + i * xStep];
      sawNan |= std::isnan(value);
      max = std::max(max, value);
    }
    if (sawNan) max = std::numeric_limits<double>::quiet_NaN();
    double sum = 0.0;
    for (int64_t i = 0; i < length; ++i) sum += std::exp(double(x[base[0] + i * xStep]) - max);
    for (int64_t i = 0; i < length; ++i)
      y[base[1] + i * yStep] = static_cast<float>(std::exp(double(x[base[0] + i * xStep]) - max) / sum);
  });
  return Status();
}

}  // namespace ein::detail::cpu
