// Reference CPU kernels: simple loops that compute exactly what the schema
// says. Each takes its decoded step and the base address of every tensor.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "../../program.hpp"

namespace ein::cpu {

// Base addresses of the program's tensors for one run.
using TensorBases = std::byte *const *;

void gemmF32Reference(const detail::Gemm &step, TensorBases bases);
void elementwiseF32Reference(const detail::Elementwise &step, const std::vector<detail::TensorSlot> &tensors,
                             TensorBases bases);
void softmaxF32Reference(const detail::Softmax &step, TensorBases bases);
void reduceF32Reference(const detail::Reduce &step, TensorBases bases);
// Fails on an id outside [0, rows).
Status gatherF32Reference(const detail::Gather &step, const std::vector<detail::TensorSlot> &tensors,
                          TensorBases bases);
void copyReference(const detail::Copy &step, size_t elementSize, TensorBases bases);

// Calls `body(offsets)` for every index of `shape` (row-major), where
// offsets[v] is the flat element offset of view v at that index.
template <size_t N, typename Body>
void forEachIndex(const std::vector<int64_t> &shape, const std::array<const detail::View *, N> &views, Body &&body) {
  for (int64_t size : shape)
    if (size == 0) return;
  size_t rank = shape.size();
  std::vector<int64_t> index(rank, 0);
  std::array<int64_t, N> offsets;
  for (size_t v = 0; v < N; ++v) offsets[v] = views[v]->offset;
  while (true) {
    body(offsets);
    size_t axis = rank;
    while (axis > 0) {
      --axis;
      if (++index[axis] < shape[axis]) {
        for (size_t v = 0; v < N; ++v) offsets[v] += views[v]->strides[axis];
        break;
      }
      for (size_t v = 0; v < N; ++v) offsets[v] -= views[v]->strides[axis] * (shape[axis] - 1);
      index[axis] = 0;
      if (axis == 0) return;
    }
    if (rank == 0) return;
  }
}

}  // namespace ein::cpu
