// Walks a row-major index space while tracking the flat element offset of
// several strided views at once, without allocating.
#pragma once

#include <array>
#include <cstdint>

#include "util/dims.hpp"

namespace ein::detail::cpu {

// Calls body(offsets) for every index (i0, i1, ...) of `shape` in row-major
// order, where offsets[v] = start[v] + sum(ik * strides[v][k]). Nothing is
// visited when a size is 0; a rank-0 shape is visited once.
template <size_t N, typename Body>
void forEachIndex(const Dims &shape, const std::array<int64_t, N> &start, const std::array<const Dims *, N> &strides,
                  Body &&body) {
  for (int64_t size : shape)
    if (size == 0) return;
  std::array<int64_t, kMaxRank> index{};
  std::array<int64_t, N> offsets = start;
  while (true) {
    body(offsets);
    size_t axis = shape.size();
    while (true) {
      if (axis == 0) return;
      --axis;
      if (++index[axis] < shape[axis]) {
        for (size_t v = 0; v < N; ++v) offsets[v] += (*strides[v])[axis];
        break;
      }
      for (size_t v = 0; v < N; ++v) offsets[v] -= (*strides[v])[axis] * (shape[axis] - 1);
      index[axis] = 0;
    }
  }
}

// start + sum(ik * strides[k]) for the row-major index number `flat` of
// `shape` (the rows of a chunk handed to a thread).
inline int64_t offsetOfIndex(const Dims &shape, const Dims &strides, int64_t start, int64_t flat) {
  int64_t offset = start;
  for (size_t axis = shape.size(); axis-- > 0;) {
    offset += flat % shape[axis] * strides[axis];
    flat /= shape[axis];
  }
  return offset;
}

}  // namespace ein::detail::cpu
