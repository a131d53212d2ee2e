#include <cmath>
#include <limits>

#include "kernels/reference/reference_kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {
namespace {

double initialValue(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean: return 0.0;
    case ReduceKind::Prod: return 1.0;
    case ReduceKind::Max: return -std::numeric_limits<double>::infinity();
    case ReduceKind::Min: return std::numeric_limits<double>::infinity();
  }
  return 0.0;
}

double combine(ReduceKind kind, double accumulator, double value) {
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean: return accumulator + value;
    case ReduceKind::Prod: return accumulator * value;
    case ReduceKind::Max: return std::max(accumulator, value);
    case ReduceKind::Min: return std::min(accumulator, value);
  }
  return accumulator;
}

}  // namespace

// y[kept..] = reduce over the trailing axes of x[kept.., reduced..], in
// double. NaN propagates through max and min too (as torch.amax/amin); the
// mean of nothing is NaN.
Status reduceF32Reference(const Reduce &op, const KernelContext &context) {
  const float *x = context.data<const float>(op.x);
  float *y = context.data<float>(op.y);
  const size_t keptRank = op.shape.size() - op.reducedRank;
  const Dims kept = op.shape.first(keptRank), reduced = op.shape.dropFirst(keptRank);
  const Dims xKept = op.x.strides.first(keptRank), xReduced = op.x.strides.dropFirst(keptRank);
  const int64_t count = reduced.product();
  forEachIndex<2>(kept, {op.x.offset, op.y.offset}, {&xKept, &op.y.strides}, [&](const std::array<int64_t, 2> &base) {
    double accumulator = initialValue(op.kind);
    bool sawNan = false;
    forEachIndex<1>(reduced, {base[0]}, {&xReduced}, [&](const std::array<int64_t, 1> &at) {
      double value = x[at[0]];
      sawNan |= std::isnan(value);
      accumulator = combine(op.kind, accumulator, value);
    });
    if (op.kind == ReduceKind::Mean) accumulator /= static_cast<double>(count);
    if (sawNan) accumulator = std::numeric_limits<double>::quiet_NaN();
    y[base[1]] = static_cast<float>(accumulator);
  });
  return Status();
}

}  // namespace ein::detail::cpu
