// The CPU kernels: what a kernel sees of a run (KernelContext), the fast
// kernels the kernel table chooses, and the table itself. Their oracle, the
// reference kernels (plain loops computing exactly what the schema's comments
// say), is not shipped: it is the tests' library ein_reference_kernels
// (tests/runtime/kernels/reference).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ein/status.hpp"
#include "backends/cpu/kernels/isa/isa.hpp"
#include "program/program.hpp"
#include "util/thread_pool.hpp"

namespace ein::detail::cpu {

// What a kernel sees of one run.
struct KernelContext {
  const std::vector<Tensor> &tensors;
  std::byte *const *bases;  // base address of every tensor
  // Working memory: scratchFloats(kernel) floats for each thread, thread t's
  // at scratch + t * scratchStride.
  float *scratch;
  size_t scratchStride = 0;
  ThreadPool *pool = nullptr;  // null: everything runs on the caller, as thread 0
  const IsaKernels *isa = nullptr;  // the fast kernels' instruction set
  const std::vector<PackedMatrix> *packed = nullptr;  // the program's pre-packed weights

  float *threadScratch(int thread) const { return scratch + static_cast<size_t>(thread) * scratchStride; }
  int threads() const { return pool ? pool->threads() : 1; }
  // body(item, thread) for each item in [0, count), spread over the threads.
  template <typename Body>
  void parallelFor(int64_t count, Body &&body) const {
    if (pool) return pool->run(count, body);
    for (int64_t item = 0; item < count; ++item) body(item, 0);
  }

  // body(begin, end, thread) over [0, total) in contiguous chunks of at least
  // `grain` items, about four per thread so uneven chunks still balance, and
  // a multiple of the threads where there are more chunks than threads (197
  // rows at grain 85: 4 chunks of 50, not 3 of 66, two of them on one thread).
  template <typename Body>
  void parallelChunks(int64_t total, int64_t grain, Body &&body) const {
    if (total <= 0) return;
    grain = grain < 1 ? 1 : grain;
    int64_t chunks = (total + grain - 1) / grain;
    if (chunks > 4 * threads()) chunks = 4 * threads();
    if (chunks > threads()) chunks = std::min(total, (chunks + threads() - 1) / threads() * threads());
    if (threads() == 1) chunks = 1;
    const int64_t size = (total + chunks - 1) / chunks;
    parallelFor((total + size - 1) / size, [&](int64_t chunk, int thread) {
      const int64_t begin = chunk * size, end = begin + size < total ? begin + size : total;
      body(begin, end, thread);
    });
  }

  template <typename T>
  T *data(const View &view) const {
    return reinterpret_cast<T *>(bases[view.tensor]);
  }
  DType dtype(const View &view) const { return tensors[view.tensor].dtype; }
};

// A gather's id at element `offset` of its ids, and the check of every id
// against [0, rows) (the error names the first bad one in row-major order).
inline int64_t gatherId(const Gather &op, const KernelContext &context, int64_t offset) {
  const std::byte *ids = context.bases[op.ids.tensor];
  return context.dtype(op.ids) == DType::I64 ? reinterpret_cast<const int64_t *>(ids)[offset]
                                             : reinterpret_cast<const int32_t *>(ids)[offset];
}
Status checkGatherIds(const Gather &op, const KernelContext &context);
// y = x element by element, for any dtype, rank and strides (plain loops):
// the one reference kernel the runtime ships, as copyFast's path for what it
// does not take (a conversion into a bf16 cache, rank below 2, a tensor into
// itself).
Status copyReference(const Copy &op, const KernelContext &context);

// Fast kernels (threads, SIMD through context.isa); the reference kernels
// (tests/runtime/kernels/reference) are their oracle in the tests.
Status gemmF32Packed(const Gemm &op, const KernelContext &context);
size_t gemmF32PackedScratchFloats(const Gemm &op);
// The int8 gemm (op.bScale: int8 weights; gemm_s8_dynamic.cpp): rows of a
// quantized at run time, int32 sums on the ISA's s8 tile, f32 epilogue.
Status gemmS8Dynamic(const Gemm &op, const KernelContext &context);
size_t gemmS8DynamicScratchFloats(const Gemm &op);
// op's int8 weights b packed for isa's s8 tile, with their column sums.
StatusOr<PackedMatrix> packS8Weights(const Gemm &op, const int8_t *b, const IsaKernels &isa);
// The group-scaled gemm (op.bGroupScale: int4 weights, or int8 with a scale
// per group; gemm_grouped_dynamic.cpp): weights b (an i4 or i8 tensor's
// bytes, op.groupBits) and their f16 group scales (the scale tensor's)
// packed once at load.
Status gemmGroupedDynamic(const Gemm &op, const KernelContext &context);
size_t gemmGroupedDynamicScratchFloats(const Gemm &op);
StatusOr<PackedMatrix> packGroupedWeights(const Gemm &op, const uint8_t *b, const uint16_t *scales,
                                          const IsaKernels &isa);
// Packs, for the running CPU's kernels (or `isa`'s: tests), the weight
// operand b of every gemm that shares one dense weight matrix across its
// batch (Gemm::packedB); with `eligible` (a flag per step), only the steps it marks (a dynamic
// program's gemms whose weight operand no dim changes).
void prepackGemmWeights(Program &program, const bool *eligible = nullptr,
                        const IsaKernels *isa = nullptr);
Status softmaxF32Fast(const Softmax &op, const KernelContext &context);
Status reduceF32Fast(const Reduce &op, const KernelContext &context);
size_t reduceF32FastScratchFloats(const Reduce &op);
Status elementwiseF32Fast(const Elementwise &op, const KernelContext &context);
Status gatherF32Fast(const Gather &op, const KernelContext &context);  // fails on an id outside [0, rows)
Status copyFast(const Copy &op, const KernelContext &context);
Status layerNormF32Fast(const LayerNorm &op, const KernelContext &context);
// Flash attention: query tiles against key blocks with an online softmax;
// memory is O(keys) per thread (the packed keys and values of one batch).
Status attentionF32Flash(const Attention &op, const KernelContext &context);
size_t attentionF32FlashScratchFloats(const Attention &op);
// Decode-shaped attention (flash-decoding): up to kDecodeQueries queries per
// batch index, keys and values contiguous along d and e, streamed once where
// they lie, the keys split across threads when the batch is small.
inline constexpr int64_t kDecodeQueries = 8;
bool attentionF32DecodeApplies(const Attention &op);
Status attentionF32Decode(const Attention &op, const KernelContext &context);
size_t attentionF32DecodeScratchFloats(const Attention &op);
// Talking heads: all heads of a query tile together, one key row at a time.
Status talkingHeadsAttentionF32Fast(const TalkingHeadsAttention &op, const KernelContext &context);
size_t talkingHeadsAttentionF32FastScratchFloats(const TalkingHeadsAttention &op);

// Each step's CPU kernel, defined in its kernel's file for every step of the
// schema (EIN_FOR_EACH_STEP, generated from the kern ops' definitions):
// runStep runs the step, choosing among its kernels where it has several;
// stepScratchFloats is the working memory it needs per thread, and also what
// its reference kernel (tests) needs: scores and rows in doubles.
#define EIN_DECLARE_STEP_KERNEL(Step)                           \
  Status runStep(const Step &op, const KernelContext &context); \
  size_t stepScratchFloats(const Step &op);
EIN_FOR_EACH_STEP(EIN_DECLARE_STEP_KERNEL)
#undef EIN_DECLARE_STEP_KERNEL

// `count` doubles as floats, saturated so that a size from a hostile artifact
// makes the allocation fail instead of wrapping around.
inline size_t doublesAsFloats(unsigned __int128 count) {
  constexpr size_t kLimit = SIZE_MAX / 16;
  return count * 2 > kLimit ? kLimit : static_cast<size_t>(count * 2);
}

// The CPU kernel table: the function that runs a decoded step (runStep of
// its type), chosen once when a session is created.
using KernelFn = Status (*)(const detail::Kernel &kernel, const KernelContext &context);
KernelFn selectKernel(const detail::Kernel &kernel);
// Working memory the chosen kernel needs, in floats per thread.
size_t scratchFloats(const detail::Kernel &kernel);

}  // namespace ein::detail::cpu
