// Parsing and shape rules of einsum equations and einops patterns.
//
// Shared by the front end (which reports errors at the call's source location)
// and the `ein` dialect's verifiers (which re-check the IR), so both agree on
// what an equation means. Plain C++: no MLIR.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/ein/size.hpp"

namespace ein {

// A failure with a human-readable reason ("operand 2 has 3 axes but ...").
struct EquationError {
  std::string message;
};

template <typename T>
using EquationResult = std::variant<T, EquationError>;

template <typename T>
bool failed(const EquationResult<T> &result) {
  return std::holds_alternative<EquationError>(result);
}

// An einsum equation with every operand's labels spelled out: ellipses are
// expanded into labels ".0", ".1", ... (which no user label can clash with)
// and an implicit output is made explicit, so that the canonical text
// ("b h i d, b h j d -> b h i j") says everything.
struct EinsumEquation {
  std::vector<std::vector<std::string>> inputs;
  std::vector<std::string> output;

  // Parses `text` in either label style: single letters ("sd,hde->hse") or
  // space-separated words ("b h i d, b h j d -> b h i j"). `operandRanks`
  // expands "..." and is checked against the label counts.
  // `canonical` reads the IR's form (always words, ".N" labels allowed).
  static EquationResult<EinsumEquation> parse(std::string_view text,
                                              const std::vector<int64_t> &operandRanks,
                                              bool canonical = false);

  std::string str() const;

  // Binds every label to a size from the operands and returns the result shape.
  EquationResult<Shape> inferShape(const std::vector<Shape> &operandShapes) const;

  // NumPy and torch broadcast an axis of size 1 against the size its label has
  // in another operand. Taking index 0 of that axis and leaving its label out
  // of that operand's term means the same, and keeps one size per label in the
  // IR (inferShape holds every label to one size). Returns, per operand, those
  // axes (labels that occur once in the term, ellipsis axes too).
  std::vector<std::vector<size_t>> broadcastAxes(const std::vector<Shape> &operandShapes) const;
  // This equation with those axes' labels left out of their terms.
  EinsumEquation withoutAxes(const std::vector<std::vector<size_t>> &axes) const;
};

// One side of an einops pattern: a list of groups; a group is one axis name or
// a parenthesised composition "(h d)"; "1" and "()" are empty groups. An
// anonymous axis ("2" in "(h 2)") gets a name of its own ("#l0" on the left,
// "#r0" on the right: no identifier clashes with them) and its size in
// `anonymousSizes`. "..." alone is a group with isEllipsis; inside a group
// (only on the right, as in einops) it is the member "...".
struct EinopsSide {
  struct Group {
    std::vector<std::string> axes;
    bool isEllipsis = false;
  };
  std::vector<Group> groups;
  std::map<std::string, int64_t> anonymousSizes;
  bool hasEllipsis = false;
};

// How an einops rearrange/reduce/repeat maps input to output, in terms of
// elementary axes (after decomposing every composed input group).
struct EinopsPlan {
  std::vector<std::string> inputAxes;   // elementary input axes, input order
  Shape inputAxisSizes;
  std::vector<int> inputAxisDim;        // the input dimension each one comes from
  std::vector<std::string> outputAxes;  // elementary output axes, output order
  Shape outputAxisSizes;
  std::vector<std::vector<int>> outputGroups;  // indices into outputAxes
  Shape resultShape;

  // Position of output axis i among inputAxes, or -1 for a new (repeated) axis.
  std::vector<int> outputSource;
  // Positions (in inputAxes) of the axes that a reduce removes.
  std::vector<int> reducedAxes;
  // What the dims' values must satisfy (a ranged axis that splits evenly).
  std::vector<SizeCheck> checks;
};

enum class EinopsKind { Rearrange, Reduce, Repeat };

// Plans `pattern` ("b (h d) -> b h d") over an input of `inputShape` with the
// keyword `sizes` (h=8, or b=b for a ranged dim).
EquationResult<EinopsPlan> planEinops(EinopsKind kind, std::string_view pattern,
                                      const Shape &inputShape,
                                      const std::map<std::string, Size> &sizes);

// NumPy broadcasting of two shapes (aligned on the right). A size 1
// stretches; other sizes must be equal (a ranged dim is never taken for 1).
EquationResult<Shape> broadcastShapes(const Shape &lhs, const Shape &rhs);

}  // namespace ein
