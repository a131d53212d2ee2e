#include <cmath>
#include <limits>

#include "ein/half_float.hpp"
#include "kernels/reference/reference_kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {
namespace {

// The masked score, exactly as the schema defines each mask kind.
double maskScore(MaskKind kind, double score, const KernelContext &context, const std::optional<View> &mask,
                 int64_t at, float fill) {
  switch (kind) {
    case MaskKind::None: return score;
    case MaskKind::Add: return score + double(context.data<const float>(*mask)[at]);
    case MaskKind::Keep: return context.data<const uint8_t>(*mask)[at] != 0 ? score : double(fill);
    case MaskKind::Drop: return context.data<const uint8_t>(*mask)[at] != 0 ? double(fill) : score;
  }
  return score;
}

// row[0..length) = softmax(row) in place. An all -inf row gives NaN (the max
// is -inf and exp(-inf - -inf) is NaN), as in PyTorch.
void softmaxRow(double *row, int64_t length) {
  double max = -std::numeric_limits<double>::infinity();
  bool sawNan = false;
  for (int64_t j = 0; j < length; ++j) {
    sawNan |= std::isnan(row[j]);
    max = std::max(max, row[j]);
  }
  if (sawNan) max = std::numeric_limits<double>::quiet_NaN();
  double sum = 0.0;
  for (int64_t j = 0; j < length; ++j) sum += row[j] = std::exp(row[j] - max);
  for (int64_t j = 0; j < length; ++j) row[j] /= sum;
}

}  // namespace

// For each batch index and query: scores in double, mask, softmax, then the
// weighted sum of values. Scratch holds one row of `keys` doubles.
Status attentionF32Reference(const Attention &op, const KernelContext &context) {
  if (op.batch.product() * op.queries * op.valueDim == 0) return Status();  // nothing to write
  const float *q = context.data<const float>(op.q);
  float *out = context.data<float>(op.out);
  // k and v: f32, or bf16 (a bf16 key/value cache), each element as f32.
  auto keyValue = [&, bf16 = op.bf16KeyValues](const View &view, int64_t at) {
    return bf16 ? bfloatToFloat(context.data<const uint16_t>(view)[at]) : context.data<const float>(view)[at];
  };
  auto *scores = reinterpret_cast<double *>(context.scratch);
  const View &maskView = op.mask ? *op.mask : op.out;  // walked alongside, read only with a mask
  const size_t r = op.batch.size();
  const Dims qB = op.q.strides.first(r), kB = op.k.strides.first(r), vB = op.v.strides.first(r),
             oB = op.out.strides.first(r), mB = maskView.strides.first(r);
  const int64_t qI = op.q.strides[r], qD = op.q.strides[r + 1], kJ = op.k.strides[r], kD = op.k.strides[r + 1],
                vJ = op.v.strides[r], vE = op.v.strides[r + 1], oI = op.out.strides[r], oE = op.out.strides[r + 1],
                mI = maskView.strides[r], mJ = maskView.strides[r + 1];
  forEachIndex<5>(op.batch, {op.q.offset, op.k.offset, op.v.offset, op.out.offset, maskView.offset},
                  {&qB, &kB, &vB, &oB, &mB}, [&](const std::array<int64_t, 5> &base) {
                    for (int64_t i = 0; i < op.queries; ++i) {
                      const int64_t visible = op.visibleKeys(i);
                      for (int64_t j = 0; j < op.keys; ++j) {
                        if (j >= visible) {
                          scores[j] = -std::numeric_limits<double>::infinity();
                          continue;
                        }
                        double dot = 0.0;
                        for (int64_t d = 0; d < op.headDim; ++d)
                          dot += double(q[base[0] + i * qI + d * qD]) * double(keyValue(op.k, base[1] + j * kJ + d * kD));
                        double score = double(op.scale) * dot;
                        if (op.softcap > 0.0f) score = double(op.softcap) * std::tanh(score / double(op.softcap));
                        scores[j] = maskScore(op.maskKind, score, context, op.mask, base[4] + i * mI + j * mJ,
                                              op.maskFill);
                      }
                      softmaxRow(scores, op.keys);
                      for (int64_t e = 0; e < op.valueDim; ++e) {
                        double sum = 0.0;
                        for (int64_t j = 0; j < op.keys; ++j) sum += scores[j] * double(keyValue(op.v, base[2] + j * vJ + e * vE));
                        out[base[3] + i * oI + e * oE] = static_cast<float>(sum);
                      }
                    }
                  });
  return Status();
}

// For each batch index and query, all heads at once: scores [heads, keys],
// pre-mix, mask, softmax, post-mix, values. Scratch holds two [heads, keys]
// tables of doubles.
Status talkingHeadsAttentionF32Reference(const TalkingHeadsAttention &op, const KernelContext &context) {
  const int64_t heads = op.heads, keys = op.keys;
  if (op.batch.product() * heads * op.queries * op.valueDim == 0) return Status();
  const float *q = context.data<const float>(op.q);
  const float *k = context.data<const float>(op.k);
  const float *v = context.data<const float>(op.v);
  float *out = context.data<float>(op.out);
  auto *scores = reinterpret_cast<double *>(context.scratch);
  double *mixed = scores + heads * keys;
  const View &maskView = op.mask ? *op.mask : op.out;
  const size_t r = op.batch.size();
  const Dims qB = op.q.strides.first(r), kB = op.k.strides.first(r), vB = op.v.strides.first(r),
             oB = op.out.strides.first(r), mB = maskView.strides.first(r);
  const int64_t qH = op.q.strides[r], qI = op.q.strides[r + 1], qD = op.q.strides[r + 2];
  const int64_t kH = op.k.strides[r], kJ = op.k.strides[r + 1], kD = op.k.strides[r + 2];
  const int64_t vH = op.v.strides[r], vJ = op.v.strides[r + 1], vE = op.v.strides[r + 2];
  const int64_t oH = op.out.strides[r], oI = op.out.strides[r + 1], oE = op.out.strides[r + 2];
  const int64_t mH = maskView.strides[r], mI = maskView.strides[r + 1], mJ = maskView.strides[r + 2];
  // mixed[g, j] = sum_h mix[g, h] * from[h, j] + bias[g]
  auto mix = [&](const View &matrix, const std::optional<View> &bias, const double *from, double *to) {
    const float *w = context.data<const float>(matrix);
    const float *b = bias ? context.data<const float>(*bias) : nullptr;
    for (int64_t g = 0; g < heads; ++g)
      for (int64_t j = 0; j < keys; ++j) {
        double sum = b ? double(b[bias->offset + g * bias->strides[0]]) : 0.0;
        for (int64_t h = 0; h < heads; ++h)
          sum += double(w[matrix.offset + g * matrix.strides[0] + h * matrix.strides[1]]) * from[h * keys + j];
        to[g * keys + j] = sum;
      }
  };
  forEachIndex<5>(
      op.batch, {op.q.offset, op.k.offset, op.v.offset, op.out.offset, maskView.offset}, {&qB, &kB, &vB, &oB, &mB},
      [&](const std::array<int64_t, 5> &base) {
        for (int64_t i = 0; i < op.queries; ++i) {
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t j = 0; j < keys; ++j) {
              double dot = 0.0;
              for (int64_t d = 0; d < op.headDim; ++d)
                dot += double(q[base[0] + h * qH + i * qI + d * qD]) * double(k[base[1] + h * kH + j * kJ + d * kD]);
              scores[h * keys + j] = double(op.scale) * dot;
            }
          double *logits = scores;
          if (op.preMix) {
            mix(*op.preMix, op.preBias, scores, mixed);
            logits = mixed;
          }
          for (int64_t g = 0; g < heads; ++g) {
            for (int64_t j = 0; j < keys; ++j)
              logits[g * keys + j] = maskScore(op.maskKind, logits[g * keys + j], context, op.mask,
                                               base[4] + g * mH + i * mI + j * mJ, op.maskFill);
            softmaxRow(logits + g * keys, keys);
          }
          double *probs = logits;
          if (op.postMix) {
            probs = logits == scores ? mixed : scores;
            mix(*op.postMix, op.postBias, logits, probs);
          }
          for (int64_t g = 0; g < heads; ++g)
            for (int64_t e = 0; e < op.valueDim; ++e) {
              double sum = 0.0;
              for (int64_t j = 0; j < keys; ++j)
                sum += probs[g * keys + j] * double(v[base[2] + g * vH + j * vJ + e * vE]);
              out[base[3] + g * oH + i * oI + e * oE] = static_cast<float>(sum);
            }
        }
      });
  return Status();
}

}  // namespace ein::detail::cpu
