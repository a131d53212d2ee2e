#include <cmath>

#include "kernels.hpp"

namespace ein::cpu {

float activate(detail::Activation activation, float x) {
  switch (activation) {
    case detail::Activation::None: return x;
    case detail::Activation::Relu: return x > 0.0f ? x : 0.0f;
    case detail::Activation::Gelu: return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case detail::Activation::GeluTanh:
      return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case detail::Activation::Silu: return x / (1.0f + std::exp(-x));
  }
  return x;
}

void gemmF32Reference(const detail::Gemm &step, TensorBases bases) {
  const auto *a = reinterpret_cast<const float *>(bases[step.a.tensor]);
  const auto *b = reinterpret_cast<const float *>(bases[step.b.tensor]);
  auto *c = reinterpret_cast<float *>(bases[step.c.tensor]);
  const float *bias = step.hasBias ? reinterpret_cast<const float *>(bases[step.bias.tensor]) : nullptr;
  size_t batchRank = step.batch.size();
  std::array<const detail::View *, 4> views{&step.a, &step.b, &step.c, step.hasBias ? &step.bias : &step.c};
  forEachIndex(step.batch, views, [&](const std::array<int64_t, 4> &base) {
    const int64_t *as = step.a.strides.data() + batchRank, *bs = step.b.strides.data() + batchRank;
    const int64_t *cs = step.c.strides.data() + batchRank, *biasStrides = step.bias.strides.data() + batchRank;
    for (int64_t i = 0; i < step.m; ++i) {
      for (int64_t j = 0; j < step.n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < step.k; ++p)
          sum += static_cast<double>(a[base[0] + i * as[0] + p * as[1]]) * b[base[1] + p * bs[0] + j * bs[1]];
        float value = static_cast<float>(step.alpha * sum);
        if (bias) value += bias[base[3] + i * biasStrides[0] + j * biasStrides[1]];
        c[base[2] + i * cs[0] + j * cs[1]] = activate(step.activation, value);
      }
    }
  });
}

}  // namespace ein::cpu
