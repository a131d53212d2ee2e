// The compiler's limits, in one place (README.md, "Limits"). Models and
// weight files beyond them are refused with a located error where the data
// enters: the parser (nesting), MLIR generation (numbers, dims, tensor types,
// block calls, loops) and the safetensors reader (shapes). The tensor limits
// are the artifact contract's (schemas/tensor_limits.hpp), which the runtime
// checks again: it trusts no artifact. Plain C++: the front end uses it
// without MLIR.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "tensor_limits.hpp"

namespace ein::limits {

// The weight segment of an artifact (parameters and constants), checked
// before each parameter's values are read or generated.
inline constexpr uint64_t kMaxWeightBytes = uint64_t{1} << 36;

// The message when `adding` bytes to `before` would pass kMaxWeightBytes.
inline std::optional<std::string> weightLimitPassed(uint64_t before, uint64_t adding) {
  if (adding <= kMaxWeightBytes - std::min(before, kMaxWeightBytes)) return std::nullopt;
  return "the weights reach " + std::to_string(before + adding) +
         " bytes with this parameter, beyond the artifact's limit of 2^36 bytes";
}
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

}  // namespace ein::limits
