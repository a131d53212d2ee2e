#include "ein/half_float.hpp"
#include "kernels/reference/reference_kernels.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"
#include "ops/scalar_functions.hpp"

namespace ein::detail::cpu {

namespace {

// The quantized gemms' walk: for each batch element and row of a,
// rowSums(aRow, aK, sums) gives the row's n sums before alpha (in double),
// then alpha, the bias, the activation and the residual go on as the
// schema's Gemm says, into c.
template <typename RowSums>
Status quantizedGemmReference(const Gemm &op, const KernelContext &context, RowSums &&rowSums) {
  const float *a = context.data<const float>(op.a);
  float *c = context.data<float>(op.c);
  const float *bias = op.bias ? context.data<const float>(*op.bias) : nullptr;
  const float *residual = op.residual ? context.data<const float>(*op.residual) : nullptr;
  const View &biasView = op.bias ? *op.bias : op.c, &residualView = op.residual ? *op.residual : op.c;
  const size_t r = op.batch.size();
  const Dims aBatch = op.a.strides.first(r), cBatch = op.c.strides.first(r), biasBatch = biasView.strides.first(r),
             residualBatch = residualView.strides.first(r);
  const int64_t aM = op.a.strides[r], aK = op.a.strides[r + 1], cM = op.c.strides[r], cN = op.c.strides[r + 1];
  std::vector<double> sums(static_cast<size_t>(op.n));
  forEachIndex<4>(op.batch, {op.a.offset, op.c.offset, biasView.offset, residualView.offset},
                  {&aBatch, &cBatch, &biasBatch, &residualBatch}, [&](const std::array<int64_t, 4> &base) {
                    for (int64_t i = 0; i < op.m; ++i) {
                      rowSums(a + base[0] + i * aM, aK, sums);
                      for (int64_t j = 0; j < op.n; ++j) {
                        double value = double(op.alpha) * sums[static_cast<size_t>(j)];
                        if (bias) value += bias[base[2] + i * biasView.strides[r] + j * biasView.strides[r + 1]];
                        value = ops::activate(op.activation, value);
                        if (residual)
                          value += residual[base[3] + i * residualView.strides[r] + j * residualView.strides[r + 1]];
                        c[base[1] + i * cM + j * cN] = static_cast<float>(value);
                      }
                    }
                  });
  return Status();
}

// The int8 gemm by its definition (the schema's Gemm): each row of a
// quantized by quantizeRowS8, the sums of products exact (int64), the rest
// in double.
Status gemmS8Reference(const Gemm &op, const KernelContext &context) {
  const int8_t *b = context.data<const int8_t>(op.b);
  const float *scale = context.data<const float>(*op.bScale);
  const size_t r = op.batch.size();
  const int64_t bK = op.b.strides[r], bN = op.b.strides[r + 1];
  std::vector<uint8_t> q(static_cast<size_t>(op.k));
  return quantizedGemmReference(op, context, [&](const float *row, int64_t aK, std::vector<double> &sums) {
    const double rowScale = quantizeRowS8(row, aK, op.k, op.k, 0, q.data());
    for (int64_t j = 0; j < op.n; ++j) {
      int64_t sum = 0;
      for (int64_t p = 0; p < op.k; ++p)
        sum += int64_t(static_cast<int8_t>(q[static_cast<size_t>(p)])) * b[op.b.offset + p * bK + j * bN];
      sums[static_cast<size_t>(j)] =
          rowScale * double(scale[op.bScale->offset + j * op.bScale->strides[0]]) * double(sum);
    }
  });
}

// The group-scaled gemm by its definition (the schema's Gemm with
// b_group_scale, i4 or i8 weights): each row of a quantized per group of 32
// by quantizeGroupsS8, each group's sum of products exact, the rest in double.
Status gemmGroupedReference(const Gemm &op, const KernelContext &context) {
  const auto *b = context.data<const uint8_t>(op.b);
  const bool int4 = context.dtype(op.b) == DType::I4;
  const uint16_t *scale = context.data<const uint16_t>(*op.bGroupScale);
  const View &scaleView = *op.bGroupScale;
  const size_t r = op.batch.size();
  const int64_t bK = op.b.strides[r], bN = op.b.strides[r + 1], groups = (op.k + 31) / 32;
  auto weight = [&](int64_t p, int64_t j) {
    const int64_t index = op.b.offset + p * bK + j * bN;
    if (!int4) return int(static_cast<int8_t>(b[index]));
    const int nibble = (b[index / 2] >> (index % 2 * 4)) & 15;
    return nibble >= 8 ? nibble - 16 : nibble;
  };
  std::vector<int8_t> q(static_cast<size_t>(groups * 32));
  std::vector<float> groupScale(static_cast<size_t>(groups));
  std::vector<int32_t> groupSum(static_cast<size_t>(groups));
  return quantizedGemmReference(op, context, [&](const float *row, int64_t aK, std::vector<double> &sums) {
    quantizeGroupsS8(row, aK, op.k, groups, q.data(), groupScale.data(), groupSum.data());
    for (int64_t j = 0; j < op.n; ++j) {
      double sum = 0.0;
      for (int64_t g = 0; g < groups; ++g) {
        int64_t exact = 0;
        for (int64_t p = g * 32; p < std::min(op.k, g * 32 + 32); ++p)
          exact += int64_t(q[static_cast<size_t>(p)]) * weight(p, j);
        const uint16_t bits = scale[scaleView.offset + g * scaleView.strides[0] + j * scaleView.strides[1]];
        sum += double(groupScale[static_cast<size_t>(g)]) * double(halfToFloat(bits)) * double(exact);
      }
      sums[static_cast<size_t>(j)] = sum;
    }
  });
}

}  // namespace

// c[b.., m, n] = activation(alpha * sum_k a[b.., m, k] * b[b.., k, n] + bias[b.., m, n])
//               + residual[b.., m, n], accumulated in double.
Status gemmF32Reference(const Gemm &op, const KernelContext &context) {
  // Nothing to write; the verifier bounds the batch loop only when c is non-empty.
  if (op.m == 0 || op.n == 0) return Status();
  if (op.bScale) return gemmS8Reference(op, context);
  if (op.bGroupScale) return gemmGroupedReference(op, context);
  const float *a = context.data<const float>(op.a);
  // b may hold bf16 weights (a bf16 artifact): read as the f32 they widen to.
  const bool bIsBf16 = context.dtype(op.b) == DType::BF16;
  const float *b = bIsBf16 ? nullptr : context.data<const float>(op.b);
  const uint16_t *b16 = bIsBf16 ? context.data<const uint16_t>(op.b) : nullptr;
  auto bAt = [&](int64_t index) { return double(b16 ? bfloatToFloat(b16[index]) : b[index]); };
  float *c = context.data<float>(op.c);
  const float *bias = op.bias ? context.data<const float>(*op.bias) : nullptr;
  const float *residual = op.residual ? context.data<const float>(*op.residual) : nullptr;
  // Absent views are walked as c, never read.
  const View &biasView = op.bias ? *op.bias : op.c, &residualView = op.residual ? *op.residual : op.c;
  const size_t r = op.batch.size();
  const Dims aBatch = op.a.strides.first(r), bBatch = op.b.strides.first(r), cBatch = op.c.strides.first(r),
             biasBatch = biasView.strides.first(r), residualBatch = residualView.strides.first(r);
  const int64_t aM = op.a.strides[r], aK = op.a.strides[r + 1];
  const int64_t bK = op.b.strides[r], bN = op.b.strides[r + 1];
  const int64_t cM = op.c.strides[r], cN = op.c.strides[r + 1];
  const int64_t biasM = biasView.strides[r], biasN = biasView.strides[r + 1];
  const int64_t resM = residualView.strides[r], resN = residualView.strides[r + 1];
  forEachIndex<5>(op.batch, {op.a.offset, op.b.offset, op.c.offset, biasView.offset, residualView.offset},
                  {&aBatch, &bBatch, &cBatch, &biasBatch, &residualBatch}, [&](const std::array<int64_t, 5> &base) {
                    for (int64_t i = 0; i < op.m; ++i) {
                      for (int64_t j = 0; j < op.n; ++j) {
                        double sum = 0.0;
                        for (int64_t p = 0; p < op.k; ++p)
                          sum += double(a[base[0] + i * aM + p * aK]) * bAt(base[1] + p * bK + j * bN);
                        double value = double(op.alpha) * sum;
                        if (bias) value += bias[base[3] + i * biasM + j * biasN];
                        value = ops::activate(op.activation, value);
                        if (residual) value += residual[base[4] + i * resM + j * resN];
                        c[base[2] + i * cM + j * cN] = static_cast<float>(value);
                      }
                    }
                  });
  return Status();
}

}  // namespace ein::detail::cpu
