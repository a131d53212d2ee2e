#include <cmath>
#include <limits>

#include "kernels.hpp"

namespace ein::cpu {

void reduceF32Reference(const detail::Reduce &step, TensorBases bases) {
  const auto *x = reinterpret_cast<const float *>(bases[step.x.tensor]);
  auto *y = reinterpret_cast<float *>(bases[step.y.tensor]);
  size_t keptRank = step.shape.size() - step.reducedRank;
  std::vector<int64_t> kept(step.shape.begin(), step.shape.begin() + keptRank);
  std::vector<int64_t> reduced(step.shape.begin() + keptRank, step.shape.end());
  detail::View keptX{step.x.tensor, step.x.offset, {step.x.strides.begin(), step.x.strides.begin() + keptRank}};
  detail::View reducedX{step.x.tensor, 0, {step.x.strides.begin() + keptRank, step.x.strides.end()}};
  int64_t count = 1;
  for (int64_t size : reduced) count *= size;
  std::array<const detail::View *, 2> outerViews{&keptX, &step.y};
  forEachIndex(kept, outerViews, [&](const std::array<int64_t, 2> &base) {
    double accumulator = 0.0;
    switch (step.kind) {
      case detail::ReduceKind::Max: accumulator = -std::numeric_limits<double>::infinity(); break;
      case detail::ReduceKind::Min: accumulator = std::numeric_limits<double>::infinity(); break;
      case detail::ReduceKind::Prod: accumulator = 1.0; break;
      default: break;
    }
    bool sawNan = false;
    std::array<const detail::View *, 1> inner{&reducedX};
    forEachIndex(reduced, inner, [&](const std::array<int64_t, 1> &offset) {
      double v = x[base[0] + offset[0]];
      sawNan |= std::isnan(v);
      switch (step.kind) {
        case detail::ReduceKind::Sum:
        case detail::ReduceKind::Mean: accumulator += v; break;
        case detail::ReduceKind::Max: accumulator = std::max(accumulator, v); break;
        case detail::ReduceKind::Min: accumulator = std::min(accumulator, v); break;
        case detail::ReduceKind::Prod: accumulator *= v; break;
      }
    });
    if (step.kind == detail::ReduceKind::Mean) accumulator /= static_cast<double>(count);
    if (sawNan) accumulator = std::numeric_limits<double>::quiet_NaN();
    y[base[1]] = static_cast<float>(accumulator);
  });
}

}  // namespace ein::cpu
