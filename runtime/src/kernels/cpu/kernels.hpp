// Reference CPU kernels: plain loops computing exactly what the schema's
// comments say, for any rank and any (verified) strides. They are the
// baseline that faster kernels are tested against.
#pragma once

#include <cstddef>
#include <vector>

#include "ein/status.hpp"
#include "program.hpp"

namespace ein::detail::cpu {

// What a kernel sees of one run.
struct KernelContext {
  const std::vector<Tensor> &tensors;
  std::byte *const *bases;  // base address of every tensor
  float *scratch;           // scratchFloats(kernel) floats of working memory

  template <typename T>
  T *data(const View &view) const {
    return reinterpret_cast<T *>(bases[view.tensor]);
  }
  DType dtype(const View &view) const { return tensors[view.tensor].dtype; }
};

Status gemmF32Reference(const Gemm &op, const KernelContext &context);
Status elementwiseF32Reference(const Elementwise &op, const KernelContext &context);
Status softmaxF32Reference(const Softmax &op, const KernelContext &context);
Status reduceF32Reference(const Reduce &op, const KernelContext &context);
Status gatherF32Reference(const Gather &op, const KernelContext &context);  // fails on an id outside [0, rows)
Status copyReference(const Copy &op, const KernelContext &context);

// The CPU kernel table: the function that runs a decoded step, chosen once
// when a session is created.
using KernelFn = Status (*)(const detail::Kernel &kernel, const KernelContext &context);
KernelFn selectKernel(const detail::Kernel &kernel);
// Working memory the chosen kernel needs, in floats.
size_t scratchFloats(const detail::Kernel &kernel);

// Elements per register in the element-wise interpreter.
inline constexpr size_t kElementwiseBlock = 256;

}  // namespace ein::detail::cpu
