// Vectorised, threaded layer norm over the last axis. Each row with a
// residual or a sum output, or strided, is staged in scratch as
// x' = x + residual (so y or sum may alias x; a contiguous row with neither
// is read in place, one copy of it fewer), then mean and the
// variance about it (RMSNorm: the mean square about 0; two passes, f32 with vector accumulators), then one
// normalising pass into y. gamma and beta are staged once per chunk when
// they are not contiguous.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {

Status layerNormF32Fast(const LayerNorm &op, const KernelContext &context) {
  const IsaKernels &isa = *context.isa;
  const int64_t n = op.shape.back();
  if (n == 0) return Status();
  const size_t rowRank = op.shape.size() - 1;
  const Dims rows = op.shape.first(rowRank);
  const float *x = context.data<const float>(op.x);
  float *y = context.data<float>(op.y);
  const float *residual = op.residual ? context.data<const float>(*op.residual) : nullptr;
  float *sum = op.sum ? context.data<float>(*op.sum) : nullptr;
  const float *gamma = op.gamma ? context.data<const float>(*op.gamma) + op.gamma->offset : nullptr;
  const float *beta = op.beta ? context.data<const float>(*op.beta) + op.beta->offset : nullptr;
  const int64_t gammaStep = op.gamma ? op.gamma->strides[0] : 1, betaStep = op.beta ? op.beta->strides[0] : 1;
  const int64_t xC = op.x.strides.back(), yC = op.y.strides.back();
  const int64_t rC = op.residual ? op.residual->strides.back() : 0, sC = op.sum ? op.sum->strides.back() : 0;
  const Dims xR = op.x.strides.first(rowRank), yR = op.y.strides.first(rowRank);
  // The rows of the residual and the sum follow x's where absent (unused).
  const Dims rR = op.residual ? op.residual->strides.first(rowRank) : xR;
  const Dims sR = op.sum ? op.sum->strides.first(rowRank) : xR;
  const float nf = static_cast<float>(n);
  context.parallelChunks(rows.product(), std::max<int64_t>(1, 32768 / n), [&](int64_t begin, int64_t end, int thread) {
    float *row = context.threadScratch(thread);
    float *g = row + n, *b = row + 2 * n;  // staged gamma and beta
    const float *gammaRow = gamma, *betaRow = beta;
    if (gamma && gammaStep != 1) {
      for (int64_t c = 0; c < n; ++c) g[c] = gamma[c * gammaStep];
      gammaRow = g;
    }
    if (beta && betaStep != 1) {
      for (int64_t c = 0; c < n; ++c) b[c] = beta[c * betaStep];
      betaRow = b;
    }
    IndexOffsets<4> at(rows, {&xR, &yR, &rR, &sR}, {op.x.offset, op.y.offset, op.residual ? op.residual->offset : 0,
                       op.sum ? op.sum->offset : 0}, begin);
    for (int64_t r = begin; r < end; ++r, at.next()) {
      const float *xs = x + at[0];
      // A contiguous row with nothing added is read where it is (y may
      // alias it only element for element, which the last pass allows).
      const bool inPlace = xC == 1 && !residual && !sum;
      const float *source = inPlace ? xs : row;
      if (!inPlace) {
        if (xC == 1) std::memcpy(row, xs, sizeof(float) * static_cast<size_t>(n));
        else
          for (int64_t c = 0; c < n; ++c) row[c] = xs[c * xC];
      }
      if (residual) {
        // Added in f32, as PyTorch does.
        const float *rs = residual + at[2];
        if (rC == 1)
          isa.addScaled(row, rs, n, 1.0f);  // 1 * rs[c] + row[c] rounds once: the same sum
        else
          for (int64_t c = 0; c < n; ++c) row[c] += rs[c * rC];
      }
      if (sum) {
        float *ss = sum + at[3];
        if (sC == 1) std::memcpy(ss, row, sizeof(float) * static_cast<size_t>(n));
        else
          for (int64_t c = 0; c < n; ++c) ss[c * sC] = row[c];
      }
      // RMSNorm does not centre: its squares are about 0.
      const float mean = op.variant == LayerNormVariant::Rms ? 0.0f : isa.reduceRow(source, n, ReduceKind::Sum) / nf;
      const float squares = isa.squaredDeviation(source, n, mean);
      const float scale = op.variant == LayerNormVariant::UnbiasedStd
                              ? 1.0f / (std::sqrt(squares / static_cast<float>(n - 1)) + op.epsilon)
                              : 1.0f / std::sqrt(squares / nf + op.epsilon);
      float *ys = y + at[1];
      if (yC == 1) {
        isa.normalizeRow(source, n, mean, scale, gammaRow, betaRow, ys);
      } else {
        isa.normalizeRow(source, n, mean, scale, gammaRow, betaRow, row);
        for (int64_t c = 0; c < n; ++c) ys[c * yC] = row[c];
      }
    }
  });
  return Status();
}

Status runStep(const LayerNorm &op, const KernelContext &context) { return layerNormF32Fast(op, context); }
// Three rows of floats, or the reference kernel's row of doubles.
size_t stepScratchFloats(const LayerNorm &op) {
  return std::max(doublesAsFloats(static_cast<uint64_t>(op.shape.back())),
                  static_cast<size_t>(std::min<unsigned __int128>(
                      static_cast<unsigned __int128>(3) * static_cast<uint64_t>(op.shape.back()), SIZE_MAX / 16)));
}

}  // namespace ein::detail::cpu
