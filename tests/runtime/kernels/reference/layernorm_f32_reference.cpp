#include <cmath>

#include "kernels/reference/reference_kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {

// Row by row: x' = x + residual (added in f32, as PyTorch does, and written to
// `sum`), then mean and variance (RMSNorm: the mean square) in double. The row is staged in scratch (n
// doubles) before anything is written, so y or sum may alias x in place.
Status layerNormF32Reference(const LayerNorm &op, const KernelContext &context) {
  const int64_t n = op.shape.back();
  if (n == 0) return Status();
  const size_t rowRank = op.shape.size() - 1;
  const Dims rows = op.shape.first(rowRank);
  const float *x = context.data<const float>(op.x);
  float *y = context.data<float>(op.y);
  const float *residual = op.residual ? context.data<const float>(*op.residual) : nullptr;
  float *sum = op.sum ? context.data<float>(*op.sum) : nullptr;
  const float *gamma = op.gamma ? context.data<const float>(*op.gamma) : nullptr;
  const float *beta = op.beta ? context.data<const float>(*op.beta) : nullptr;
  // Absent views are walked as x, never read or written.
  const View &rView = op.residual ? *op.residual : op.x, &sView = op.sum ? *op.sum : op.x;
  const Dims xR = op.x.strides.first(rowRank), yR = op.y.strides.first(rowRank), rR = rView.strides.first(rowRank),
             sR = sView.strides.first(rowRank);
  const int64_t xC = op.x.strides.back(), yC = op.y.strides.back(), rC = rView.strides.back(), sC = sView.strides.back();
  auto *row = reinterpret_cast<double *>(context.scratch);
  forEachIndex<4>(rows, {op.x.offset, op.y.offset, rView.offset, sView.offset}, {&xR, &yR, &rR, &sR},
                  [&](const std::array<int64_t, 4> &base) {
                    double total = 0.0;
                    for (int64_t c = 0; c < n; ++c) {
                      float value = x[base[0] + c * xC];
                      if (residual) value += residual[base[2] + c * rC];
                      row[c] = value;
                      total += value;
                    }
                    // RMSNorm: no centring, the mean square about 0.
                    const double mean = op.variant == LayerNormVariant::Rms ? 0.0 : total / double(n);
                    double squares = 0.0;
                    for (int64_t c = 0; c < n; ++c) squares += (row[c] - mean) * (row[c] - mean);
                    const double scale = op.variant == LayerNormVariant::UnbiasedStd
                                             ? 1.0 / (std::sqrt(squares / double(n - 1)) + double(op.epsilon))
                                             : 1.0 / std::sqrt(squares / double(n) + double(op.epsilon));
                    for (int64_t c = 0; c < n; ++c) {
                      if (sum) sum[base[3] + c * sC] = static_cast<float>(row[c]);
                      double value = (row[c] - mean) * scale;
                      if (gamma) value *= double(gamma[op.gamma->offset + c * op.gamma->strides[0]]);
                      if (beta) value += double(beta[op.beta->offset + c * op.beta->strides[0]]);
                      y[base[1] + c * yC] = static_cast<float>(value);
                    }
                  });
  return Status();
}

}  // namespace ein::detail::cpu
