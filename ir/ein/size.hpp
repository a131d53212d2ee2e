// Sizes that may depend on ranged dims (`dim t = 1..512`).
//
// A Size is an integer polynomial over dims and floor quotients, kept in one
// canonical form, so two sizes are equal exactly when their forms are equal:
// `t + 1` built from a concat equals `1 + t` built from a slice. Shapes,
// strides, offsets and element counts all are Sizes; a model with no ranged
// dims only ever has constant ones. Plain C++: no MLIR.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ein {

// The values a dim may take at run time.
struct DimRange {
  int64_t min = 0;
  int64_t max = 0;
};
using DimRanges = std::map<std::string, DimRange>;

// The values a size takes over the dims' ranges (saturating at the int64 limits).
struct SizeBounds {
  int64_t min = 0;
  int64_t max = 0;
};

class Size {
 public:
  // A factor of a term: a dim, or floor(numerator / divisor) of a size that
  // the divisor does not divide.
  struct Atom {
    std::string dim;                        // when numerator is null
    std::shared_ptr<const Size> numerator;  // a quotient otherwise
    int64_t divisor = 0;

    bool isDim() const { return numerator == nullptr; }
  };
  // coefficient * factors[0] * factors[1] * ...; no factors: a constant.
  struct Term {
    int64_t coefficient = 0;
    std::vector<Atom> factors;  // sorted
  };

  Size(int64_t constant = 0);  // NOLINT: constants convert implicitly, as ints do
  static Size dim(const std::string &name);
  // floor(numerator / divisor), divisor > 0; exact wherever the divisor
  // divides the polynomial's coefficients.
  static Size floorDiv(const Size &numerator, int64_t divisor);
  // numerator - divisor * floor(numerator / divisor).
  static Size mod(const Size &numerator, int64_t divisor);
  // numerator / divisor where the divisor, one term (`b`, `2*b*t`), divides
  // every term of the numerator (`b*384 + b*t`): the same value at any dims.
  // nullopt otherwise.
  static std::optional<Size> exactQuotient(const Size &numerator, const Size &divisor);
  // Parses what str() prints ("b*t*384", "t + 1", "floordiv(t + 15, 16)").
  static std::optional<Size> parse(std::string_view text, std::string *error = nullptr);

  std::optional<int64_t> constant() const;
  bool isConstant() const { return constant().has_value(); }
  // An arithmetic step left the int64 range: the size means nothing, and
  // every check on it (limits, equality) fails.
  bool overflowed() const { return overflowed_; }
  const std::vector<Term> &terms() const { return terms_; }
  // The dims it depends on, quotients included.
  std::set<std::string> dims() const;

  friend Size operator+(const Size &lhs, const Size &rhs);
  friend Size operator-(const Size &lhs, const Size &rhs);
  friend Size operator*(const Size &lhs, const Size &rhs);
  Size operator-() const { return Size(0) - *this; }
  Size &operator+=(const Size &other) { return *this = *this + other; }
  Size &operator*=(const Size &other) { return *this = *this * other; }

  friend bool operator==(const Size &lhs, const Size &rhs) { return compare(lhs, rhs) == 0; }
  friend bool operator!=(const Size &lhs, const Size &rhs) { return compare(lhs, rhs) != 0; }
  // A total order on canonical forms, for maps and sorting (SizeOrder). Sizes
  // have no `<`: which of two sizes is larger depends on the dims' values.
  static int compare(const Size &lhs, const Size &rhs);

  // The value at the given dims' values; nullopt when a dim is missing or a
  // step overflows.
  std::optional<int64_t> evaluate(const std::function<std::optional<int64_t>(const std::string &)> &dimValue) const;
  std::optional<int64_t> evaluate(const std::map<std::string, int64_t> &dimValues) const;
  // Bounds over the dims' ranges (a dim missing from `ranges` counts as
  // [0, INT64_MAX]).
  SizeBounds bounds(const DimRanges &ranges) const;

  std::string str() const;
  size_t hash() const;

 private:
  void canonicalize();

  std::vector<Term> terms_;  // sorted by factors, no zero coefficients, unique factor lists
  bool overflowed_ = false;
};

struct SizeOrder {
  bool operator()(const Size &lhs, const Size &rhs) const { return Size::compare(lhs, rhs) < 0; }
};

// A condition on sizes that the compiler cannot decide (it depends on the
// dims' values), checked at run time. `message` says what must hold in the
// model's terms.
struct SizeCheck {
  enum Kind { Equal, LessEqual, Divides };  // lhs == rhs, lhs <= rhs, lhs divides rhs
  Kind kind = Equal;
  Size lhs, rhs;
  std::string message;
};

// A tensor's sizes, axis by axis.
using Shape = std::vector<Size>;

std::string formatShape(const Shape &shape);  // "[b, t + 1, 384]"
// The product of the sizes (an element count).
Size product(const Shape &shape);

}  // namespace ein
