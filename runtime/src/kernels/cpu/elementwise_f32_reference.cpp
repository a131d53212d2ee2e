#include <cmath>

#include "kernels.hpp"

namespace ein::cpu {
namespace {

constexpr int64_t kBlock = 256;

float load(const std::byte *base, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::F32: return reinterpret_cast<const float *>(base)[index];
    case DType::I32: return static_cast<float>(reinterpret_cast<const int32_t *>(base)[index]);
    case DType::I64: return static_cast<float>(reinterpret_cast<const int64_t *>(base)[index]);
    case DType::Bool: return reinterpret_cast<const uint8_t *>(base)[index] ? 1.0f : 0.0f;
    default: return 0.0f;  // rejected by the verifier
  }
}

float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
float geluTanh(float x) { return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x))); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Runs the program over `count` elements held column-wise in `registers`.
void execute(const std::vector<detail::Instruction> &program, size_t inputs, std::vector<float> &registers,
             int64_t count) {
  for (size_t i = 0; i < program.size(); ++i) {
    const detail::Instruction &in = program[i];
    float *out = &registers[(inputs + i) * kBlock];
    const float *a = &registers[in.a * kBlock], *b = &registers[in.b * kBlock], *c = &registers[in.c * kBlock];
    using detail::Opcode;
    switch (in.opcode) {
#define EIN_LOOP(expr) \
  for (int64_t e = 0; e < count; ++e) out[e] = (expr); \
  break;
      case Opcode::Const: EIN_LOOP(in.imm)
      case Opcode::Neg: EIN_LOOP(-a[e])
      case Opcode::Exp: EIN_LOOP(std::exp(a[e]))
      case Opcode::Log: EIN_LOOP(std::log(a[e]))
      case Opcode::Sqrt: EIN_LOOP(std::sqrt(a[e]))
      case Opcode::Rsqrt: EIN_LOOP(1.0f / std::sqrt(a[e]))
      case Opcode::Abs: EIN_LOOP(std::fabs(a[e]))
      case Opcode::Relu: EIN_LOOP(a[e] > 0.0f ? a[e] : 0.0f)
      case Opcode::Gelu: EIN_LOOP(gelu(a[e]))
      case Opcode::GeluTanh: EIN_LOOP(geluTanh(a[e]))
      case Opcode::Silu: EIN_LOOP(a[e] * sigmoid(a[e]))
      case Opcode::Sigmoid: EIN_LOOP(sigmoid(a[e]))
      case Opcode::Tanh: EIN_LOOP(std::tanh(a[e]))
      case Opcode::Not: EIN_LOOP(a[e] == 0.0f ? 1.0f : 0.0f)
      case Opcode::Add: EIN_LOOP(a[e] + b[e])
      case Opcode::Sub: EIN_LOOP(a[e] - b[e])
      case Opcode::Mul: EIN_LOOP(a[e] * b[e])
      case Opcode::Div: EIN_LOOP(a[e] / b[e])
      case Opcode::Pow: EIN_LOOP(std::pow(a[e], b[e]))
      // NaN-propagating, as torch.maximum/minimum.
      case Opcode::Max: EIN_LOOP(std::isnan(a[e]) || std::isnan(b[e]) ? NAN : std::fmax(a[e], b[e]))
      case Opcode::Min: EIN_LOOP(std::isnan(a[e]) || std::isnan(b[e]) ? NAN : std::fmin(a[e], b[e]))
      case Opcode::Lt: EIN_LOOP(a[e] < b[e] ? 1.0f : 0.0f)
      case Opcode::Le: EIN_LOOP(a[e] <= b[e] ? 1.0f : 0.0f)
      case Opcode::Gt: EIN_LOOP(a[e] > b[e] ? 1.0f : 0.0f)
      case Opcode::Ge: EIN_LOOP(a[e] >= b[e] ? 1.0f : 0.0f)
      case Opcode::Eq: EIN_LOOP(a[e] == b[e] ? 1.0f : 0.0f)
      case Opcode::Ne: EIN_LOOP(a[e] != b[e] ? 1.0f : 0.0f)
      case Opcode::Select: EIN_LOOP(a[e] != 0.0f ? b[e] : c[e])
#undef EIN_LOOP
    }
  }
}

}  // namespace

// Walks the outer axes one index at a time and the innermost axis in blocks,
// so the program's dispatch is paid once per block, not per element.
void elementwiseF32Reference(const detail::Elementwise &step, const std::vector<detail::TensorSlot> &tensors,
                             TensorBases bases) {
  size_t inputs = step.inputs.size();
  std::vector<float> registers((inputs + step.program.size()) * kBlock);
  size_t resultRegister = inputs + step.program.size() - 1;
  std::vector<int64_t> outer(step.shape);
  int64_t inner = 1;
  if (!outer.empty()) {
    inner = outer.back();
    outer.pop_back();
  }
  // Views over the outer axes only; the innermost stride is applied below.
  std::vector<detail::View> outerViews;
  for (const detail::View &view : step.inputs) outerViews.push_back(view);
  outerViews.push_back(step.output);
  std::vector<int64_t> innerStrides;
  for (detail::View &view : outerViews) {
    innerStrides.push_back(view.strides.empty() ? 0 : view.strides.back());
    if (!view.strides.empty()) view.strides.pop_back();
  }
  for (int64_t size : step.shape)
    if (size == 0) return;
  std::vector<int64_t> index(outer.size(), 0);
  std::vector<int64_t> offsets(outerViews.size());
  for (size_t v = 0; v < outerViews.size(); ++v) offsets[v] = outerViews[v].offset;
  const detail::TensorSlot &outTensor = tensors[step.output.tensor];
  while (true) {
    for (int64_t start = 0; start < inner; start += kBlock) {
      int64_t count = std::min(kBlock, inner - start);
      for (size_t v = 0; v < inputs; ++v) {
        const detail::View &view = step.inputs[v];
        DType dtype = tensors[view.tensor].dtype;
        float *slot = &registers[v * kBlock];
        for (int64_t e = 0; e < count; ++e) slot[e] = load(bases[view.tensor], dtype, offsets[v] + (start + e) * innerStrides[v]);
      }
      execute(step.program, inputs, registers, count);
      const float *result = &registers[resultRegister * kBlock];
      int64_t base = offsets[inputs], stride = innerStrides[inputs];
      if (outTensor.dtype == DType::Bool) {
        auto *out = reinterpret_cast<uint8_t *>(bases[step.output.tensor]);
        for (int64_t e = 0; e < count; ++e) out[base + (start + e) * stride] = result[e] != 0.0f;
      } else {
        auto *out = reinterpret_cast<float *>(bases[step.output.tensor]);
        for (int64_t e = 0; e < count; ++e) out[base + (start + e) * stride] = result[e];
      }
    }
    size_t axis = outer.size();
    bool done = true;
    while (axis > 0) {
      --axis;
      if (++index[axis] < outer[axis]) {
        for (size_t v = 0; v < outerViews.size(); ++v) offsets[v] += outerViews[v].strides[axis];
        done = false;
        break;
      }
      for (size_t v = 0; v < outerViews.size(); ++v) offsets[v] -= outerViews[v].strides[axis] * (outer[axis] - 1);
      index[axis] = 0;
    }
    if (done) return;
  }
}

}  // namespace ein::cpu
