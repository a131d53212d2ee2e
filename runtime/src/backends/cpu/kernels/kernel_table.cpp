#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <variant>

#include "backends/cpu/kernels/kernels.hpp"

namespace ein::detail::cpu {
namespace {

template <typename Op, Status (*Run)(const Op &, const KernelContext &)>
Status invoke(const detail::Kernel &kernel, const KernelContext &context) {
  return Run(std::get<Op>(kernel), context);
}

// int8 weights (an int8 artifact's gemms) or f32/bf16 ones.
Status gemmFast(const Gemm &op, const KernelContext &context) {
  return op.bScale ? gemmS8Dynamic(op, context) : gemmF32Packed(op, context);
}

// A decode step's few queries against a long cache, or any other attention.
Status attentionFast(const Attention &op, const KernelContext &context) {
  return attentionF32DecodeApplies(op) ? attentionF32Decode(op, context) : attentionF32Flash(op, context);
}

}  // namespace

KernelFn selectKernel(const detail::Kernel &kernel) {
  return std::visit(
      [](const auto &op) -> KernelFn {
        using Op = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<Op, Gemm>) return &invoke<Gemm, gemmFast>;
        if constexpr (std::is_same_v<Op, Elementwise>) return &invoke<Elementwise, elementwiseF32Fast>;
        if constexpr (std::is_same_v<Op, Softmax>) return &invoke<Softmax, softmaxF32Fast>;
        if constexpr (std::is_same_v<Op, Reduce>) return &invoke<Reduce, reduceF32Fast>;
        if constexpr (std::is_same_v<Op, Gather>) return &invoke<Gather, gatherF32Fast>;
        if constexpr (std::is_same_v<Op, Copy>) return &invoke<Copy, copyFast>;
        if constexpr (std::is_same_v<Op, Attention>) return &invoke<Attention, attentionFast>;
        if constexpr (std::is_same_v<Op, TalkingHeadsAttention>)
          return &invoke<TalkingHeadsAttention, talkingHeadsAttentionF32Fast>;
        if constexpr (std::is_same_v<Op, LayerNorm>) return &invoke<LayerNorm, layerNormF32Fast>;
      },
      kernel);
}

namespace {

// count doubles as floats, saturated so that a size from a hostile artifact
// makes the allocation fail instead of wrapping around.
size_t doublesAsFloats(unsigned __int128 count) {
  constexpr size_t kLimit = SIZE_MAX / 16;
  return count * 2 > kLimit ? kLimit : static_cast<size_t>(count * 2);
}

}  // namespace

// Whether a step's iteration space is empty (for a reduction: no kept item
// or nothing to reduce): its kernels then never touch scratch, so it needs
// none, however large its other sizes (an empty attention's keys) are.
bool needsNoScratch(const detail::Kernel &kernel) {
  return std::visit(
      [](const auto &op) -> bool {
        using Op = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<Op, Gemm>) return op.batch.product() * op.m * op.n == 0;
        if constexpr (std::is_same_v<Op, Attention>) return op.batch.product() * op.queries * op.valueDim == 0;
        if constexpr (std::is_same_v<Op, TalkingHeadsAttention>)
          return op.batch.product() * op.heads * op.queries * op.valueDim == 0;
        if constexpr (std::is_same_v<Op, Reduce>) return op.shape.product() == 0;
        if constexpr (std::is_same_v<Op, Gather>) return op.idsShape.product() * op.width == 0;
        if constexpr (std::is_same_v<Op, Elementwise> || std::is_same_v<Op, Softmax> || std::is_same_v<Op, Copy> ||
                      std::is_same_v<Op, LayerNorm>)
          return op.shape.product() == 0;
      },
      kernel);
}

// The most either kernel of a step needs (the fast one runs in sessions; the
// reference is its oracle in the tests, with the same scratch).
size_t scratchFloats(const detail::Kernel &kernel) {
  if (needsNoScratch(kernel)) return 0;
  if (const auto *op = std::get_if<Gemm>(&kernel))
    return op->bScale ? gemmS8DynamicScratchFloats(*op) : gemmF32PackedScratchFloats(*op);
  if (const auto *op = std::get_if<Elementwise>(&kernel)) return op->registerCount() * kElementwiseBlock;
  if (const auto *op = std::get_if<Softmax>(&kernel)) return static_cast<size_t>(op->shape.back());
  if (const auto *op = std::get_if<Reduce>(&kernel)) return reduceF32FastScratchFloats(*op);
  if (const auto *op = std::get_if<Attention>(&kernel))
    return std::max({doublesAsFloats(static_cast<uint64_t>(op->keys)), attentionF32FlashScratchFloats(*op),
                     attentionF32DecodeScratchFloats(*op)});
  if (const auto *op = std::get_if<TalkingHeadsAttention>(&kernel))
    return std::max(doublesAsFloats(static_cast<unsigned __int128>(2) * static_cast<uint64_t>(op->heads) *
                                    static_cast<uint64_t>(op->keys)),
                    talkingHeadsAttentionF32FastScratchFloats(*op));
  if (const auto *op = std::get_if<LayerNorm>(&kernel))
    return std::max(doublesAsFloats(static_cast<uint64_t>(op->shape.back())),
                    static_cast<size_t>(std::min<unsigned __int128>(
                        static_cast<unsigned __int128>(3) * static_cast<uint64_t>(op->shape.back()), SIZE_MAX / 16)));
  return 0;
}

}  // namespace ein::detail::cpu
