// Ranged dims and what depends on them: the size expressions that (size)
// fields refer to and the run-time checks. Decoded and verified once, when a
// model loads; evaluated once per instantiation (a new set of dim values),
// never per element or per run of the same shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ein/model.hpp"
#include "ein/schema/ein_artifact_generated.h"
#include "ein/status.hpp"

namespace ein::detail {

// Bounds on what an artifact may ask of the evaluator, so that a hostile one
// costs at most a bounded amount of work per instantiation.
inline constexpr size_t kMaxDims = 64;
inline constexpr size_t kMaxSizeExpressions = size_t{1} << 16;
inline constexpr size_t kMaxSizeExpressionOps = 256;
inline constexpr size_t kMaxSizeExpressionDepth = 32;

enum class SizeOpcode : uint8_t { Constant, Dim, Add, Sub, Mul, FloorDiv, Mod, Max, Min };

struct SizeOp {
  SizeOpcode opcode = SizeOpcode::Constant;
  int64_t operand = 0;  // the constant, or the dim's number
};

enum class CheckKind : uint8_t { Equal, LessEqual, Divides };

struct SizeCheck {
  CheckKind kind = CheckKind::Equal;
  int64_t lhs = 0, rhs = 0;  // (size) fields
  std::string location, message;
};

// The dims, expressions and checks of one artifact, verified: every postfix
// program is well formed (no underflow, one value left, bounded length and
// depth, known opcodes, existing dims) and every check's fields refer to
// existing expressions.
class SizeProgram {
 public:
  const std::vector<DimInfo> &dims() const { return dims_; }
  size_t expressionCount() const { return expressions_.size(); }
  bool dynamic() const { return !dims_.empty(); }

  // Every expression's value at some dim values, and the expressions that
  // have none there (an overflow, a division by zero or a negative result),
  // in increasing order.
  struct Values {
    std::vector<int64_t> values;
    std::vector<size_t> missing;
  };
  Values valuesAt(std::span<const int64_t> dimValues) const;
  // Why `expression` has no value at `dimValues` (InvalidArgument, naming the
  // expression and the dims: "size t // (t - 3) divides by zero at t = 3").
  Status noValue(size_t expression, std::span<const int64_t> dimValues) const;
  // A (size) field's value, or why it has none.
  StatusOr<int64_t> valueOf(int64_t field, std::span<const int64_t> dimValues, const Values &values) const;
  // Every expression's value at `dimValues` (one per dim), in order, or the
  // first one's noValue() error.
  StatusOr<std::vector<int64_t>> evaluate(std::span<const int64_t> dimValues) const;
  // The checks at `dimValues`: "model.ein:3:5: t + 1 <= 197, but 300 > 197
  // (t = 299)". A check whose sizes have no value fails with noValue().
  Status check(std::span<const int64_t> dimValues, const Values &values) const;

  // A (size) field as text: "7", "t", "t + 1", "max(b, 2) * t".
  std::string text(int64_t field) const;
  // The dim a field is exactly (its expression is the single op Dim), if any.
  std::optional<size_t> bareDim(int64_t field) const;
  // Whether a field's value depends on any dim, or on dim `dim`.
  bool dependsOnDims(int64_t field) const;
  bool dependsOnDim(int64_t field, size_t dim) const;
  // "t = 7, b = 2": the dims the fields depend on, at `dimValues`.
  std::string dimsText(std::initializer_list<int64_t> fields, std::span<const int64_t> dimValues) const;

  // Decodes Model.dims, .sizes and .checks; InvalidArtifact when malformed.
  static StatusOr<SizeProgram> decode(const schema::Model &model);

 private:
  std::vector<bool> dimsUsed(int64_t field) const;

  std::vector<DimInfo> dims_;
  std::vector<std::vector<SizeOp>> expressions_;
  std::vector<SizeCheck> checks_;
};

// Reads every (size) field: a constant as it is, a reference (a negative
// field) as the value of its expression. With no expressions (a version-1
// style artifact) a negative field is read as written, so the step checks
// report it as the negative size it is.
class SizeResolver {
 public:
  SizeResolver() = default;
  explicit SizeResolver(std::span<const int64_t> values) : values_(values) {}

  StatusOr<int64_t> operator()(int64_t field, const char *what) const;

 private:
  std::span<const int64_t> values_;
};

// Checks that every negative (size) field of `model` refers to one of its
// `expressionCount` expressions. It walks every long field of the verified
// artifact, all of which are (size) fields except Binding.upper_bound,
// Dim.min, Dim.max and SizeOp.operand.
Status checkSizeReferences(const schema::Model &model, size_t expressionCount);
// Appends the (size) fields of a verified step (the same walk) and the
// tensors its views name.
void collectStepReferences(const schema::Step &step, std::vector<int64_t> &sizeFields, std::vector<uint32_t> &tensors);

}  // namespace ein::detail
