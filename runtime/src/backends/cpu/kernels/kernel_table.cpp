#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <variant>

#include "backends/cpu/kernels/kernels.hpp"

namespace ein::detail::cpu {
namespace {

template <typename Op>
Status invoke(const detail::Kernel &kernel, const KernelContext &context) {
  return runStep(std::get<Op>(kernel), context);
}

// Whether a step's iteration space is empty (for a reduction: no kept item
// or nothing to reduce): its kernels then never touch scratch, so it needs
// none, however large its other sizes (an empty attention's keys) are.
bool needsNoScratch(const detail::Kernel &kernel) {
  return std::visit(
      [](const auto &op) -> bool {
        using Op = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<Op, Gemm>) return op.batch.product() * op.m * op.n == 0;
        else if constexpr (std::is_same_v<Op, Attention>) return op.batch.product() * op.queries * op.valueDim == 0;
        else if constexpr (std::is_same_v<Op, TalkingHeadsAttention>)
          return op.batch.product() * op.heads * op.queries * op.valueDim == 0;
        else if constexpr (std::is_same_v<Op, Gather>) return op.idsShape.product() * op.width == 0;
        else return op.shape.product() == 0;  // every other step iterates over its shape
      },
      kernel);
}

}  // namespace

KernelFn selectKernel(const detail::Kernel &kernel) {
  return std::visit([](const auto &op) -> KernelFn { return &invoke<std::decay_t<decltype(op)>>; }, kernel);
}

size_t scratchFloats(const detail::Kernel &kernel) {
  if (needsNoScratch(kernel)) return 0;
  return std::visit([](const auto &op) { return stepScratchFloats(op); }, kernel);
}

}  // namespace ein::detail::cpu
