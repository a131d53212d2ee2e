#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

// body(values, y) for each kept item of a reduction over the trailing
// `reducedRank` axes (Reduce, Variance): `values` the item's reduced
// elements of x in row-major order, `y` its output element.
template <typename Op, typename Body>
void forEachKeptItem(const Op &op, const KernelContext &context, Body &&body) {
  const float *x = context.data<const float>(op.x);
  float *y = context.data<float>(op.y);
  const size_t keptRank = op.shape.size() - op.reducedRank;
  const Dims kept = op.shape.first(keptRank), reduced = op.shape.dropFirst(keptRank);
  const Dims xKept = op.x.strides.first(keptRank), xReduced = op.x.strides.dropFirst(keptRank);
  std::vector<double> values;
  forEachIndex<2>(kept, {op.x.offset, op.y.offset}, {&xKept, &op.y.strides}, [&](const std::array<int64_t, 2> &base) {
    values.clear();
    forEachIndex<1>(reduced, {base[0]}, {&xReduced}, [&](const std::array<int64_t, 1> &at) { values.push_back(x[at[0]]); });
    body(values, y[base[1]]);
  });
}

}  // namespace

// y[kept..] = reduce over the trailing axes of x[kept.., reduced..], in
// double. NaN propagates through max and min too (as torch.amax/amin); the
// mean of nothing is NaN.
Status reduceF32Reference(const Reduce &op, const KernelContext &context) {
  forEachKeptItem(op, context, [&](const std::vector<double> &values, float &y) {
    double accumulator = initialValue(op.kind);
    bool sawNan = false;
    for (double value : values) {
      sawNan |= std::isnan(value);
      accumulator = combine(op.kind, accumulator, value);
    }
    if (op.kind == ReduceKind::Mean) accumulator /= static_cast<double>(values.size());
    if (sawNan) accumulator = std::numeric_limits<double>::quiet_NaN();
    y = static_cast<float>(accumulator);
  });
  return Status();
}

// y[kept..] = sum (x - mean)^2 / max(0, n - correction) over the trailing
// axes (its square root when `root`), in double, the mean first: torch.var
// and torch.std.
Status varianceF32Reference(const Variance &op, const KernelContext &context) {
  forEachKeptItem(op, context, [&](const std::vector<double> &values, float &y) {
    const double n = static_cast<double>(values.size());
    double sum = 0.0, squares = 0.0;
    for (double value : values) sum += value;
    for (double value : values) squares += (value - sum / n) * (value - sum / n);
    const double variance = squares / std::max(0.0, n - static_cast<double>(op.correction));
    y = static_cast<float>(op.root ? std::sqrt(variance) : variance);
  });
  return Status();
}

}  // namespace ein::detail::cpu
