// The element-wise interpreter, vectorised and threaded: the iteration space
// is cut into blocks of kElementwiseBlock lanes along the innermost axis,
// chunks of blocks go to the threads, and each block runs the register
// program through the ISA's vector code (isa/elementwise_block.hpp).
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/element_io.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"
#include "ops/scalar_functions.hpp"

namespace ein::detail::cpu {

// Here, in a file built for the baseline ISA, so that no per-ISA file compiles
// a copy of it (isa.hpp).
void evaluateLanesF32(const Instruction &in, const float *a, const float *b, const float *c, float *out,
                      int64_t count) {
  ops::evaluateLanes(in.opcode, in.imm, a, b, c, out, count);
}

namespace {

constexpr int64_t kBlock = static_cast<int64_t>(kElementwiseBlock);

// Per-thread scratch: the registers, then each input's lanes for a block
// (a pointer) and each view's offset at the block's row (the inputs', then
// the output's).
struct ElementwiseScratch {
  float *registers;
  const float **operands;
  int64_t *offsets;
  ElementwiseScratch(float *scratch, const Elementwise &op)
      : registers(scratch),
        operands(reinterpret_cast<const float **>(scratch + op.registerCount() * kBlock)),
        offsets(reinterpret_cast<int64_t *>(operands + op.inputs.size())) {}
  static size_t floats(const Elementwise &op) {
    return op.registerCount() * kElementwiseBlock + 2 * op.inputs.size() + 2 * (op.inputs.size() + 1);
  }
};

}  // namespace

Status elementwiseF32Fast(const Elementwise &op, const KernelContext &context) {
  const IsaKernels &isa = *context.isa;
  const size_t inputCount = op.inputs.size(), size = op.program.size();
  const size_t outerRank = op.shape.empty() ? 0 : op.shape.size() - 1;
  const Dims outer = op.shape.first(outerRank);
  const int64_t inner = op.shape.empty() ? 1 : op.shape.back();
  if (inner == 0 || outer.product() == 0) return Status();
  const DType outputType = context.dtype(op.output);
  const int64_t outStep = op.shape.empty() ? 0 : op.output.strides.back();
  const int64_t blocksPerRow = (inner + kBlock - 1) / kBlock;
  // About 4096 lane-instructions per chunk at least, so tiny steps stay on one thread.
  const int64_t grain = std::max<int64_t>(1, 16 / static_cast<int64_t>(std::max<size_t>(size, 1)));
  // f32 lanes one apart, whole vectors: read and written where they lie,
  // not copied through a register (a decode step's rows of 32 or 64 lanes
  // spent more time in the copies than in the program).
  auto inPlace = [&](DType dtype, int64_t step, int64_t count) {
    return dtype == DType::F32 && step == 1 && count % isa.vectorFloats == 0;
  };
  context.parallelChunks(outer.product() * blocksPerRow, grain, [&](int64_t begin, int64_t end, int thread) {
    const ElementwiseScratch s(context.threadScratch(thread), op);
    const int64_t row = begin / blocksPerRow;
    for (size_t v = 0; v < inputCount; ++v)
      s.offsets[v] = offsetOfIndex(outer, op.inputs[v].strides, op.inputs[v].offset, row);
    s.offsets[inputCount] = offsetOfIndex(outer, op.output.strides, op.output.offset, row);
    IndexOdometer rows(outer, row);
    // start: the block's first lane in its row; past the row's end, the next row's first.
    for (int64_t block = begin, start = begin % blocksPerRow * kBlock; block < end; ++block, start += kBlock) {
      if (start >= inner) {
        start = 0;
        rows.next([&](size_t axis, int64_t delta) {
          for (size_t v = 0; v < inputCount; ++v) s.offsets[v] += delta * op.inputs[v].strides[axis];
          s.offsets[inputCount] += delta * op.output.strides[axis];
        });
      }
      const int64_t count = std::min(kBlock, inner - start);
      for (size_t v = 0; v < inputCount; ++v) {
        const View &view = op.inputs[v];
        const int64_t step = op.shape.empty() ? 0 : view.strides.back(), offset = s.offsets[v] + start * step;
        float *copy = s.registers + v * kBlock;
        if (inPlace(context.dtype(view), step, count)) {
          s.operands[v] = reinterpret_cast<const float *>(context.bases[view.tensor]) + offset;
        } else {
          loadAsF32(context.bases[view.tensor], context.dtype(view), offset, step, count, copy);
          s.operands[v] = copy;
        }
      }
      const int64_t first = s.offsets[inputCount] + start * outStep;
      if (inPlace(outputType, outStep, count)) {
        isa.elementwiseBlock(op.program.data(), size, s.operands, inputCount, s.registers,
                             reinterpret_cast<float *>(context.bases[op.output.tensor]) + first, count);
        continue;
      }
      float *result = s.registers + (op.registerCount() - 1) * kBlock;
      isa.elementwiseBlock(op.program.data(), size, s.operands, inputCount, s.registers, result, count);
      storeFromF32(context.bases[op.output.tensor], outputType, first, outStep, count, result);
    }
  });
  return Status();
}

Status runStep(const Elementwise &op, const KernelContext &context) { return elementwiseF32Fast(op, context); }
size_t stepScratchFloats(const Elementwise &op) { return ElementwiseScratch::floats(op); }

}  // namespace ein::detail::cpu
