// A short list of sizes or strides stored inline: the runtime caps ranks at
// kMaxRank, so kernels can slice and walk index spaces without allocating.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "util/limits.hpp"

namespace ein::detail {

class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<int64_t> values) {
    for (int64_t value : values) push_back(value);
  }

  size_t size() const { return rank_; }
  bool empty() const { return rank_ == 0; }
  int64_t operator[](size_t axis) const { return values_[axis]; }
  int64_t &operator[](size_t axis) { return values_[axis]; }
  const int64_t *begin() const { return values_.data(); }
  const int64_t *end() const { return values_.data() + rank_; }
  const int64_t *data() const { return values_.data(); }
  int64_t back() const { return values_[rank_ - 1]; }

  void push_back(int64_t value) {
    assert(rank_ < kMaxRank);
    values_[rank_++] = value;
  }
  // Axes [from, to).
  Dims slice(size_t from, size_t to) const {
    Dims result;
    for (size_t axis = from; axis < to; ++axis) result.push_back(values_[axis]);
    return result;
  }
  Dims first(size_t count) const { return slice(0, count); }
  Dims dropFirst(size_t count) const { return slice(count, rank_); }
  Dims dropLast(size_t count) const { return slice(0, rank_ - count); }
  Dims concat(const Dims &tail) const {
    Dims result = *this;
    for (int64_t value : tail) result.push_back(value);
    return result;
  }
  // The product of the sizes; callers use it on verified spaces only.
  int64_t product() const {
    int64_t result = 1;
    for (int64_t value : *this) result *= value;
    return result;
  }
  std::vector<int64_t> vector() const { return {begin(), end()}; }

  bool operator==(const Dims &other) const {
    if (rank_ != other.rank_) return false;
    for (size_t axis = 0; axis < rank_; ++axis)
      if (values_[axis] != other.values_[axis]) return false;
    return true;
  }

 private:
  std::array<int64_t, kMaxRank> values_{};
  size_t rank_ = 0;
};

}  // namespace ein::detail
