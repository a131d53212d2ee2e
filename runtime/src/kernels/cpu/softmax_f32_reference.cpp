#include <cmath>
#include <limits>

#include "kernels.hpp"

namespace ein::cpu {

void softmaxF32Reference(const detail::Softmax &step, TensorBases bases) {
  const auto *x = reinterpret_cast<const float *>(bases[step.x.tensor]);
  auto *y = reinterpret_cast<float *>(bases[step.y.tensor]);
  std::vector<int64_t> rows(step.shape.begin(), step.shape.end() - 1);
  int64_t length = step.shape.back();
  int64_t xs = step.x.strides.back(), ys = step.y.strides.back();
  std::array<const detail::View *, 2> views{&step.x, &step.y};
  forEachIndex(rows, views, [&](const std::array<int64_t, 2> &base) {
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < length; ++i) max = std::max(max, x[base[0] + i * xs]);
    // A row of -inf gives NaN (exp(-inf - -inf)), as in PyTorch.
    double sum = 0.0;
    for (int64_t i = 0; i < length; ++i) sum += std::exp(static_cast<double>(x[base[0] + i * xs]) - max);
    for (int64_t i = 0; i < length; ++i)
      y[base[1] + i * ys] = static_cast<float>(std::exp(static_cast<double>(x[base[0] + i * xs]) - max) / sum);
  });
}

}  // namespace ein::cpu
