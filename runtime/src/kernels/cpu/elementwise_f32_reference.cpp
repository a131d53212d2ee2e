#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/element_io.hpp"
#include "kernels/cpu/kernels.hpp"
#include "kernels/cpu/strided_loop.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int64_t kBlock = static_cast<int64_t>(kElementwiseBlock);

// NaN-propagating, as torch.maximum and torch.minimum.
float maximum(float a, float b) { return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : std::max(a, b); }
float minimum(float a, float b) { return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : std::min(a, b); }

// Runs the program over `count` lanes. Register r holds lanes
// [r * kBlock, r * kBlock + count): the opcode is decoded once per block.
void execute(const std::vector<Instruction> &program, size_t inputCount, float *registers, int64_t count) {
  for (size_t i = 0; i < program.size(); ++i) {
    const Instruction &in = program[i];
    float *out = registers + (inputCount + i) * kBlock;
    const float *a = registers + in.a * kBlock, *b = registers + in.b * kBlock, *c = registers + in.c * kBlock;
#define EIN_LANES(expr)                                    \
  for (int64_t e = 0; e < count; ++e) out[e] = (expr); \
  break
    switch (in.opcode) {
      case Opcode::Const: EIN_LANES(in.imm);
      case Opcode::Neg: EIN_LANES(-a[e]);
      case Opcode::Exp: EIN_LANES(std::exp(a[e]));
      case Opcode::Log: EIN_LANES(std::log(a[e]));
      case Opcode::Sqrt: EIN_LANES(std::sqrt(a[e]));
      case Opcode::Rsqrt: EIN_LANES(1.0f / std::sqrt(a[e]));
      case Opcode::Abs: EIN_LANES(std::fabs(a[e]));
      case Opcode::Relu: EIN_LANES(relu(a[e]));
      case Opcode::Gelu: EIN_LANES(gelu(a[e]));
      case Opcode::GeluTanh: EIN_LANES(geluTanh(a[e]));
      case Opcode::Silu: EIN_LANES(silu(a[e]));
      case Opcode::Sigmoid: EIN_LANES(sigmoid(a[e]));
      case Opcode::Tanh: EIN_LANES(std::tanh(a[e]));
      case Opcode::Not: EIN_LANES(a[e] == 0.0f ? 1.0f : 0.0f);
      case Opcode::Add: EIN_LANES(a[e] + b[e]);
      case Opcode::Sub: EIN_LANES(a[e] - b[e]);
      case Opcode::Mul: EIN_LANES(a[e] * b[e]);
      case Opcode::Div: EIN_LANES(a[e] / b[e]);
      case Opcode::Pow: EIN_LANES(std::pow(a[e], b[e]));
      case Opcode::Max: EIN_LANES(maximum(a[e], b[e]));
      case Opcode::Min: EIN_LANES(minimum(a[e], b[e]));
      case Opcode::Lt: EIN_LANES(a[e] < b[e] ? 1.0f : 0.0f);
      case Opcode::Le: EIN_LANES(a[e] <= b[e] ? 1.0f : 0.0f);
      case Opcode::Gt: EIN_LANES(a[e] > b[e] ? 1.0f : 0.0f);
      case Opcode::Ge: EIN_LANES(a[e] >= b[e] ? 1.0f : 0.0f);
      case Opcode::Eq: EIN_LANES(a[e] == b[e] ? 1.0f : 0.0f);
      case Opcode::Ne: EIN_LANES(a[e] != b[e] ? 1.0f : 0.0f);
      case Opcode::Select: EIN_LANES(a[e] != 0.0f ? b[e] : c[e]);
    }
#undef EIN_LANES
  }
}

}  // namespace

// out[i..] = program(inputs[0][i..], ...): the outer axes one index at a
// time, the innermost axis in blocks of kBlock lanes.
Status elementwiseF32Reference(const Elementwise &op, const KernelContext &context) {
  const size_t inputCount = op.inputs.size();
  float *registers = context.scratch;
  const float *result = registers + (op.registerCount() - 1) * kBlock;
  const size_t outerRank = op.shape.empty() ? 0 : op.shape.size() - 1;
  const Dims outer = op.shape.first(outerRank);
  const int64_t inner = op.shape.empty() ? 1 : op.shape.back();
  if (inner == 0) return Status();
  const DType outputType = context.dtype(op.output);
  const int64_t outStep = op.shape.empty() ? 0 : op.output.strides.back();
  const Dims outOuter = op.output.strides.first(outerRank);
  // The output's walk drives the loop; each input's outer offset is
  // recomputed from the same index, so any number of inputs needs no
  // per-run allocation.
  Dims index;
  for (size_t axis = 0; axis < outerRank; ++axis) index.push_back(0);
  forEachIndex<1>(outer, {op.output.offset}, {&outOuter}, [&](const std::array<int64_t, 1> &outBase) {
    for (int64_t start = 0; start < inner; start += kBlock) {
      const int64_t count = std::min(kBlock, inner - start);
      for (size_t v = 0; v < inputCount; ++v) {
        const View &view = op.inputs[v];
        int64_t offset = view.offset;
        for (size_t axis = 0; axis < outerRank; ++axis) offset += index[axis] * view.strides[axis];
        const int64_t step = op.shape.empty() ? 0 : view.strides.back();
        loadAsF32(context.bases[view.tensor], context.dtype(view), offset + start * step, step, count,
                  registers + v * kBlock);
      }
      execute(op.program, inputCount, registers, count);
      const int64_t first = outBase[0] + start * outStep;
      storeFromF32(context.bases[op.output.tensor], outputType, first, outStep, count, result);
    }
    // Advance the row-major index in step with forEachIndex's walk.
    for (size_t axis = outerRank; axis-- > 0;) {
      if (++index[axis] < outer[axis]) break;
      index[axis] = 0;
    }
  });
  return Status();
}

}  // namespace ein::detail::cpu
