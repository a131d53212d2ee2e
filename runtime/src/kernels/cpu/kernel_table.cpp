#include <cstdint>
#include <type_traits>

#include "kernels/cpu/kernels.hpp"

namespace ein::detail::cpu {
namespace {

template <typename Op, Status (*Run)(const Op &, const KernelContext &)>
Status invoke(const detail::Kernel &kernel, const KernelContext &context) {
  return Run(std::get<Op>(kernel), context);
}

}  // namespace

KernelFn selectKernel(const detail::Kernel &kernel) {
  return std::visit(
      [](const auto &op) -> KernelFn {
        using Op = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<Op, Gemm>) return &invoke<Gemm, gemmF32Packed>;
        if constexpr (std::is_same_v<Op, Elementwise>) return &invoke<Elementwise, elementwiseF32Reference>;
        if constexpr (std::is_same_v<Op, Softmax>) return &invoke<Softmax, softmaxF32Reference>;
        if constexpr (std::is_same_v<Op, Reduce>) return &invoke<Reduce, reduceF32Reference>;
        if constexpr (std::is_same_v<Op, Gather>) return &invoke<Gather, gatherF32Reference>;
        if constexpr (std::is_same_v<Op, Copy>) return &invoke<Copy, copyReference>;
        if constexpr (std::is_same_v<Op, Attention>) return &invoke<Attention, attentionF32Reference>;
        if constexpr (std::is_same_v<Op, TalkingHeadsAttention>)
          return &invoke<TalkingHeadsAttention, talkingHeadsAttentionF32Reference>;
        if constexpr (std::is_same_v<Op, LayerNorm>) return &invoke<LayerNorm, layerNormF32Reference>;
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

size_t scratchFloats(const detail::Kernel &kernel) {
  if (std::holds_alternative<Gemm>(kernel)) return gemmF32PackedScratchFloats();
  if (const auto *op = std::get_if<Elementwise>(&kernel)) return op->registerCount() * kElementwiseBlock;
  if (const auto *op = std::get_if<Attention>(&kernel)) return doublesAsFloats(static_cast<uint64_t>(op->keys));
  if (const auto *op = std::get_if<TalkingHeadsAttention>(&kernel))
    return doublesAsFloats(static_cast<unsigned __int128>(2) * static_cast<uint64_t>(op->heads) *
                           static_cast<uint64_t>(op->keys));
  if (const auto *op = std::get_if<LayerNorm>(&kernel)) return doublesAsFloats(static_cast<uint64_t>(op->shape.back()));
  return 0;
}

}  // namespace ein::detail::cpu
