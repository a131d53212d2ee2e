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

}  // namespace

Status elementwiseF32Fast(const Elementwise &op, const KernelContext &context) {
  const IsaKernels &isa = *context.isa;
  const size_t inputCount = op.inputs.size();
  const size_t outerRank = op.shape.empty() ? 0 : op.shape.size() - 1;
  const Dims outer = op.shape.first(outerRank);
  const int64_t inner = op.shape.empty() ? 1 : op.shape.back();
  if (inner == 0 || outer.product() == 0) return Status();
  const DType outputType = context.dtype(op.output);
  const int64_t outStep = op.shape.empty() ? 0 : op.output.strides.back();
  const int64_t blocksPerRow = (inner + kBlock - 1) / kBlock;
  // About 4096 lane-instructions per chunk at least, so tiny steps stay on one thread.
  const int64_t grain = std::max<int64_t>(1, 16 / static_cast<int64_t>(std::max<size_t>(op.program.size(), 1)));
  context.parallelChunks(outer.product() * blocksPerRow, grain, [&](int64_t begin, int64_t end, int thread) {
    float *registers = context.threadScratch(thread);
    const float *result = registers + (op.registerCount() - 1) * kBlock;
    for (int64_t block = begin; block < end; ++block) {
      const int64_t row = block / blocksPerRow, start = block % blocksPerRow * kBlock;
      const int64_t count = std::min(kBlock, inner - start);
      for (size_t v = 0; v < inputCount; ++v) {
        const View &view = op.inputs[v];
        const int64_t step = op.shape.empty() ? 0 : view.strides.back();
        const int64_t offset = offsetOfIndex(outer, view.strides, view.offset, row) + start * step;
        loadAsF32(context.bases[view.tensor], context.dtype(view), offset, step, count, registers + v * kBlock);
      }
      isa.elementwiseBlock(op.program.data(), op.program.size(), inputCount, registers, count);
      const int64_t first = offsetOfIndex(outer, op.output.strides, op.output.offset, row) + start * outStep;
      storeFromF32(context.bases[op.output.tensor], outputType, first, outStep, count, result);
    }
  });
  return Status();
}

Status runStep(const Elementwise &op, const KernelContext &context) { return elementwiseF32Fast(op, context); }
size_t stepScratchFloats(const Elementwise &op) { return op.registerCount() * kElementwiseBlock; }

}  // namespace ein::detail::cpu
