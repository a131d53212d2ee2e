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
        if constexpr (std::is_same_v<Op, Gemm>) return &invoke<Gemm, gemmF32Reference>;
        if constexpr (std::is_same_v<Op, Elementwise>) return &invoke<Elementwise, elementwiseF32Reference>;
        if constexpr (std::is_same_v<Op, Softmax>) return &invoke<Softmax, softmaxF32Reference>;
        if constexpr (std::is_same_v<Op, Reduce>) return &invoke<Reduce, reduceF32Reference>;
        if constexpr (std::is_same_v<Op, Gather>) return &invoke<Gather, gatherF32Reference>;
        if constexpr (std::is_same_v<Op, Copy>) return &invoke<Copy, copyReference>;
      },
      kernel);
}

size_t scratchFloats(const detail::Kernel &kernel) {
  if (const auto *op = std::get_if<Elementwise>(&kernel)) return op->registerCount() * kElementwiseBlock;
  return 0;
}

}  // namespace ein::detail::cpu
