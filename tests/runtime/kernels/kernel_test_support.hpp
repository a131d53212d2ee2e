// What the per-op kernel tests (tests/runtime/kernels/<op>_test.cpp) share:
// the float64 formulas their naive loops use, strided layouts, and the run of
// a fast kernel on every instruction set this CPU has against the reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "artifact_builder.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "step_harness.hpp"

namespace ein::testing {

using detail::cpu::IsaKernels;

inline double activate(fb::Activation activation, double x) {
  switch (activation) {
    case fb::Activation::None: return x;
    case fb::Activation::Relu: return x > 0 ? x : 0;
    case fb::Activation::Gelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case fb::Activation::GeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case fb::Activation::Silu: return x / (1 + std::exp(-x));
  }
  return x;
}

inline std::string isaName(const IsaKernels *isa) { return isa->name; }

inline size_t product(const std::vector<int64_t> &shape) {
  return std::accumulate(shape.begin(), shape.end(), size_t{1}, [](size_t a, int64_t b) { return a * b; });
}

// A tensor stored with its logical axes in the order `perm` (storage axis s
// holds logical axis perm[s]); `view` reads it in logical order.
struct Layout {
  std::vector<int64_t> storageShape;
  std::vector<int64_t> strides;  // per logical axis

  Layout(const std::vector<int64_t> &shape, std::vector<size_t> perm) {
    if (perm.empty()) {
      perm.resize(shape.size());
      std::iota(perm.begin(), perm.end(), 0);
    }
    for (size_t axis : perm) storageShape.push_back(shape[axis]);
    std::vector<int64_t> dense = denseStrides(storageShape);
    strides.assign(shape.size(), 0);
    for (size_t s = 0; s < perm.size(); ++s) strides[perm[s]] = dense[s];
  }
  ViewSpec view(uint32_t tensor) const { return {tensor, 0, strides}; }
  // The flat storage position of a logical index.
  size_t at(const std::vector<int64_t> &index) const {
    int64_t flat = 0;
    for (size_t axis = 0; axis < index.size(); ++axis) flat += index[axis] * strides[axis];
    return static_cast<size_t>(flat);
  }
};

// softmax in place; an all -inf row gives NaN like PyTorch.
inline void naiveSoftmax(std::vector<double> &row) {
  double max = -INFINITY;
  for (double value : row) max = std::max(max, value);
  if (std::any_of(row.begin(), row.end(), [](double v) { return std::isnan(v); })) max = NAN;
  double sum = 0;
  for (double &value : row) sum += value = std::exp(value - max);
  for (double &value : row) value /= sum;
}

inline double applyMask(fb::MaskKind kind, double score, double mask, float fill) {
  switch (kind) {
    case fb::MaskKind::None: return score;
    case fb::MaskKind::Add: return score + mask;
    case fb::MaskKind::Keep: return mask != 0 ? score : fill;
    case fb::MaskKind::Drop: return mask != 0 ? fill : score;
  }
  return score;
}

// Runs `fast` on every ISA and thread count and compares with `reference`.
template <typename Op>
void expectFastMatchesReference(const std::vector<uint8_t> &artifact,
                                Status (*fast)(const Op &, const detail::cpu::KernelContext &),
                                Status (*reference)(const Op &, const detail::cpu::KernelContext &), double tolerance) {
  StepHarness harness(artifact);
  std::vector<float> want = harness.run(reference, detail::cpu::portableKernels(), 1);
  for (const IsaKernels *isa : detail::cpu::supportedKernels())
    for (int threads : {1, 2}) {
      std::vector<float> got = harness.run(fast, *isa, threads);
      expectNear(got, want, tolerance, std::string(isa->name) + " threads " + std::to_string(threads));
    }
}

// Rows of a layernorm, softmax, reduce or element-wise step: odd sizes, one
// row, long rows, and x stored transposed.
struct RowCase {
  std::string name;
  int64_t rows, width;
  bool transposed;  // x stored [width, rows]
};

inline void PrintTo(const RowCase &c, std::ostream *out) { *out << c.name; }

class RowKernelTest : public ::testing::TestWithParam<RowCase> {
 protected:
  ViewSpec x(ArtifactBuilder &builder) const {
    const RowCase &c = GetParam();
    if (c.transposed) return ViewSpec{builder.input("x", fb::DType::F32, {c.width, c.rows}), 0, {1, c.rows}};
    return dense(builder.input("x", fb::DType::F32, {c.rows, c.width}), {c.rows, c.width});
  }
};

inline std::vector<RowCase> rowCases() {
  return {RowCase{"one", 1, 1, false}, RowCase{"seven_by_seven", 7, 7, true}, RowCase{"vit_197x384", 197, 384, false},
          RowCase{"transposed_197x600", 197, 600, true}, RowCase{"long_rows_3x5000", 3, 5000, false}};
}

}  // namespace ein::testing
