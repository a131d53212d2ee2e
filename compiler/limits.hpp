// The compiler's limits, in one place (README.md, "Limits"). Models and
// weight files beyond them are refused with a located error where the data
// enters: the parser (nesting), MLIR generation (numbers, dims, tensor types,
// block calls, loops) and the safetensors reader (shapes). The runtime has
// its own copy of the tensor limits (runtime/src/util/limits.hpp): the two
// sides share only the artifact schema, and the runtime must not trust einc.
// Plain C++: the front end uses it without MLIR.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace ein::limits {

// Axes of any tensor (the runtime's kMaxRank).
inline constexpr int64_t kMaxRank = 16;
// Elements of any tensor: the product of its sizes, and of its nonzero sizes
// (an empty tensor may not hide sizes whose product overflows). Any single
// size is bounded by it too.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;
// Bytes of any tensor (8-byte elements at the element limit: 8 TiB).
inline constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 43;
// The weight segment of an artifact (parameters and constants), checked
// before each parameter's values are read or generated.
inline constexpr uint64_t kMaxWeightBytes = uint64_t{1} << 36;
// Integers the model computes with (dims, axes, loop bounds, integer
// constants) are doubles while folded; beyond 2^53 they are no longer exact.
inline constexpr int64_t kMaxExactInteger = int64_t{1} << 53;
// Syntactic nesting (parentheses, brackets, calls, indented blocks) the
// recursive-descent parser accepts.
inline constexpr int kMaxNesting = 256;
// Block calls nested inside each other (blocks are inlined), and iterations
// of one `for` loop (loops are unrolled).
inline constexpr int kMaxCallDepth = 64;
// Expressions evaluated inside each other, counting those of inlined blocks
// (each call evaluates the block's body inside the calling expression).
inline constexpr int kMaxEvaluationDepth = 1024;
inline constexpr int64_t kMaxLoopIterations = 100000;

// The number of elements of `shape`, or nullopt when a size is negative or
// the product of the nonzero sizes exceeds kMaxTensorElements. Every shape
// that enters the compiler goes through it, so products never overflow.
inline std::optional<int64_t> checkedElementCount(std::span<const int64_t> shape) {
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t size : shape) {
    if (size < 0) return std::nullopt;
    if (size == 0) {
      empty = true;
      continue;
    }
    if (size > kMaxTensorElements / nonzero) return std::nullopt;
    nonzero *= size;
  }
  return empty ? 0 : nonzero;
}

}  // namespace ein::limits
