#include <algorithm>

#include "backends/cpu/kernels/element_io.hpp"
#include "kernels/reference/reference_kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"
#include "ops/scalar_functions.hpp"

namespace ein::detail::cpu {

namespace {

constexpr int64_t kBlock = static_cast<int64_t>(kElementwiseBlock);

// Runs the program over `count` lanes. Register r holds lanes
// [r * kBlock, r * kBlock + count): the opcode is decoded once per block.
void execute(const std::vector<Instruction> &program, size_t inputCount, float *registers, int64_t count) {
  for (size_t i = 0; i < program.size(); ++i) {
    const Instruction &in = program[i];
    float *out = registers + (inputCount + i) * kBlock;
    const float *a = registers + in.a * kBlock, *b = registers + in.b * kBlock, *c = registers + in.c * kBlock;
    evaluateLanesF32(in, a, b, c, out, count);
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
