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

// The row-major index of `shape` from index number `flat` on, stepped one
// index at a time: next(moved) calls moved(axis, delta) for each axis whose
// index changes (the carried ones go back by size - 1), so views stepped
// along pay for offsetOfIndex's divisions once instead of per index.
class IndexOdometer {
 public:
  IndexOdometer(const Dims &shape, int64_t flat) : shape_(shape) {
    for (size_t axis = shape.size(); axis-- > 0;) {
      index_[axis] = shape[axis] > 0 ? flat % shape[axis] : 0;
      flat = shape[axis] > 0 ? flat / shape[axis] : 0;
    }
  }
  template <typename Moved>
  void next(Moved &&moved) {
    for (size_t axis = shape_.size(); axis-- > 0;) {
      if (++index_[axis] < shape_[axis]) {
        moved(axis, int64_t{1});
        return;
      }
      moved(axis, 1 - shape_[axis]);
      index_[axis] = 0;
    }
  }

 private:
  const Dims &shape_;
  std::array<int64_t, kMaxRank> index_{};
};

// The offsets of N views at consecutive row-major indices of `shape`, from
// index number `flat` on: next() steps one index on (IndexOdometer), so a
// thread's run of rows pays for offsetOfIndex's divisions once instead of
// per row (a 384-wide layernorm row spent a fifth of its time there).
template <size_t N>
class IndexOffsets {
 public:
  IndexOffsets(const Dims &shape, const std::array<const Dims *, N> &strides, const std::array<int64_t, N> &start,
               int64_t flat)
      : odometer_(shape, flat), strides_(strides) {
    for (size_t v = 0; v < N; ++v) offsets_[v] = offsetOfIndex(shape, *strides[v], start[v], flat);
  }
  int64_t operator[](size_t v) const { return offsets_[v]; }
  void next() {
    odometer_.next([&](size_t axis, int64_t delta) {
      for (size_t v = 0; v < N; ++v) offsets_[v] += delta * (*strides_[v])[axis];
    });
  }

 private:
  IndexOdometer odometer_;
  std::array<const Dims *, N> strides_;
  std::array<int64_t, N> offsets_{};
};

}  // namespace ein::detail::cpu
