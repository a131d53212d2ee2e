#include "ir/ein/size.hpp"

#include <algorithm>
#include <cctype>
#include <limits>

namespace ein {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

int64_t saturate(__int128 value) {
  if (value > kMax) return kMax;
  if (value < kMin) return kMin;
  return static_cast<int64_t>(value);
}

int64_t floorDivide(int64_t a, int64_t b) {
  int64_t quotient = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? quotient - 1 : quotient;
}

int compareAtoms(const Size::Atom &lhs, const Size::Atom &rhs) {
  if (lhs.isDim() != rhs.isDim()) return lhs.isDim() ? -1 : 1;
  if (lhs.isDim()) return lhs.dim.compare(rhs.dim) < 0 ? -1 : (lhs.dim == rhs.dim ? 0 : 1);
  if (lhs.divisor != rhs.divisor) return lhs.divisor < rhs.divisor ? -1 : 1;
  return Size::compare(*lhs.numerator, *rhs.numerator);
}

// Orders factor lists by degree, then atom by atom: constants first.
int compareFactors(const std::vector<Size::Atom> &lhs, const std::vector<Size::Atom> &rhs) {
  if (lhs.size() != rhs.size()) return lhs.size() < rhs.size() ? -1 : 1;
  for (size_t i = 0; i < lhs.size(); ++i)
    if (int order = compareAtoms(lhs[i], rhs[i])) return order;
  return 0;
}

std::string atomText(const Size::Atom &atom) {
  if (atom.isDim()) return atom.dim;
  return "floordiv(" + atom.numerator->str() + ", " + std::to_string(atom.divisor) + ")";
}

// Recursive descent over str()'s grammar:
//   sum := product (('+' | '-') product)*
//   product := factor ('*' factor)*
//   factor := integer | name | '(' sum ')' | '-' factor | 'floordiv' '(' sum ',' integer ')'
class SizeParser {
 public:
  explicit SizeParser(std::string_view text) : text_(text) {}

  std::optional<Size> parseAll(std::string *error) {
    std::optional<Size> size = sum();
    skipSpaces();
    if (size && position_ != text_.size()) fail("unexpected '" + std::string(1, text_[position_]) + "'");
    if (!error_.empty()) {
      if (error) *error = error_ + " at offset " + std::to_string(errorAt_) + " of \"" + std::string(text_) + "\"";
      return std::nullopt;
    }
    return size;
  }

 private:
  std::optional<Size> sum() {
    std::optional<Size> value = product();
    while (value) {
      if (accept('+')) {
        std::optional<Size> rhs = product();
        if (!rhs) return std::nullopt;
        *value = *value + *rhs;
      } else if (accept('-')) {
        std::optional<Size> rhs = product();
        if (!rhs) return std::nullopt;
        *value = *value - *rhs;
      } else {
        break;
      }
    }
    return value;
  }

  std::optional<Size> product() {
    std::optional<Size> value = factor();
    while (value && accept('*')) {
      std::optional<Size> rhs = factor();
      if (!rhs) return std::nullopt;
      *value = *value * *rhs;
    }
    return value;
  }

  std::optional<Size> factor() {
    skipSpaces();
    if (accept('-')) {
      std::optional<Size> value = factor();
      if (value) *value = -*value;
      return value;
    }
    if (accept('(')) {
      std::optional<Size> value = sum();
      if (value && !accept(')')) return fail("expected ')'");
      return value;
    }
    if (position_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[position_]))) {
      std::optional<int64_t> value = integer();
      if (!value) return std::nullopt;
      return Size(*value);
    }
    std::string name = identifier();
    if (name.empty()) return fail("expected a size");
    if (name != "floordiv") return Size::dim(name);
    if (!accept('(')) return fail("expected '(' after floordiv");
    std::optional<Size> numerator = sum();
    if (!numerator) return std::nullopt;
    if (!accept(',')) return fail("expected ','");
    skipSpaces();
    std::optional<int64_t> divisor = integer();
    if (!divisor) return std::nullopt;
    if (*divisor <= 0) return fail("the divisor must be positive");
    if (!accept(')')) return fail("expected ')'");
    return Size::floorDiv(*numerator, *divisor);
  }

  std::optional<int64_t> integer() {
    size_t start = position_;
    __int128 value = 0;
    while (position_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[position_]))) {
      value = value * 10 + (text_[position_++] - '0');
      if (value > kMax) return fail("integer out of range");
    }
    if (position_ == start) return fail("expected an integer");
    return static_cast<int64_t>(value);
  }

  std::string identifier() {
    size_t start = position_;
    while (position_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[position_])) || text_[position_] == '_'))
      ++position_;
    if (start < text_.size() && std::isdigit(static_cast<unsigned char>(text_[start]))) position_ = start;
    return std::string(text_.substr(start, position_ - start));
  }

  bool accept(char c) {
    skipSpaces();
    if (position_ < text_.size() && text_[position_] == c) {
      ++position_;
      return true;
    }
    return false;
  }

  void skipSpaces() {
    while (position_ < text_.size() && text_[position_] == ' ') ++position_;
  }

  std::nullopt_t fail(const std::string &message) {
    if (error_.empty()) {
      error_ = message;
      errorAt_ = position_;
    }
    return std::nullopt;
  }

  std::string_view text_;
  size_t position_ = 0;
  std::string error_;
  size_t errorAt_ = 0;
};

}  // namespace

Size::Size(int64_t constant) {
  if (constant != 0) terms_.push_back({constant, {}});
}

Size Size::dim(const std::string &name) {
  Size size;
  size.terms_.push_back({1, {Atom{name, nullptr, 0}}});
  return size;
}

Size Size::floorDiv(const Size &numerator, int64_t divisor) {
  if (divisor <= 0 || numerator.overflowed_) {
    Size invalid;
    invalid.overflowed_ = true;
    return invalid;
  }
  // numerator = divisor * whole + rest, each coefficient of rest in
  // [0, divisor): floor(numerator / divisor) = whole + floor(rest / divisor),
  // as whole is an integer at any dims. A constant rest adds nothing.
  Size whole, rest;
  for (const Term &term : numerator.terms_) {
    int64_t quotient = floorDivide(term.coefficient, divisor);
    int64_t remainder = term.coefficient - quotient * divisor;
    if (quotient != 0) whole.terms_.push_back({quotient, term.factors});
    if (remainder != 0) rest.terms_.push_back({remainder, term.factors});
  }
  if (rest.isConstant()) return whole;
  Size quotient;
  quotient.terms_.push_back({1, {Atom{"", std::make_shared<const Size>(rest), divisor}}});
  return whole + quotient;
}

std::optional<Size> Size::exactQuotient(const Size &numerator, const Size &divisor) {
  if (numerator.overflowed_ || divisor.overflowed_ || divisor.terms_.size() != 1 || divisor.terms_[0].coefficient == 0)
    return std::nullopt;
  const Term &by = divisor.terms_[0];
  Size quotient;
  for (const Term &term : numerator.terms_) {
    if (term.coefficient % by.coefficient != 0) return std::nullopt;
    std::vector<Atom> rest = term.factors;
    for (const Atom &factor : by.factors) {
      auto found = std::find_if(rest.begin(), rest.end(), [&](const Atom &atom) { return compareAtoms(atom, factor) == 0; });
      if (found == rest.end()) return std::nullopt;
      rest.erase(found);
    }
    quotient.terms_.push_back({term.coefficient / by.coefficient, std::move(rest)});
  }
  quotient.canonicalize();
  return quotient;
}

Size Size::mod(const Size &numerator, int64_t divisor) { return numerator - Size(divisor) * floorDiv(numerator, divisor); }

std::optional<Size> Size::parse(std::string_view text, std::string *error) { return SizeParser(text).parseAll(error); }

std::optional<int64_t> Size::constant() const {
  if (overflowed_) return std::nullopt;
  if (terms_.empty()) return 0;
  if (terms_.size() == 1 && terms_[0].factors.empty()) return terms_[0].coefficient;
  return std::nullopt;
}

std::set<std::string> Size::dims() const {
  std::set<std::string> names;
  for (const Term &term : terms_)
    for (const Atom &atom : term.factors) {
      if (atom.isDim()) {
        names.insert(atom.dim);
      } else {
        std::set<std::string> inner = atom.numerator->dims();
        names.insert(inner.begin(), inner.end());
      }
    }
  return names;
}

void Size::canonicalize() {
  for (Term &term : terms_)
    std::sort(term.factors.begin(), term.factors.end(),
              [](const Atom &a, const Atom &b) { return compareAtoms(a, b) < 0; });
  std::sort(terms_.begin(), terms_.end(),
            [](const Term &a, const Term &b) { return compareFactors(a.factors, b.factors) < 0; });
  std::vector<Term> merged;
  for (Term &term : terms_) {
    if (!merged.empty() && compareFactors(merged.back().factors, term.factors) == 0) {
      if (__builtin_add_overflow(merged.back().coefficient, term.coefficient, &merged.back().coefficient))
        overflowed_ = true;
    } else {
      merged.push_back(std::move(term));
    }
  }
  merged.erase(std::remove_if(merged.begin(), merged.end(), [](const Term &t) { return t.coefficient == 0; }),
               merged.end());
  terms_ = std::move(merged);
}

Size operator+(const Size &lhs, const Size &rhs) {
  Size sum;
  sum.overflowed_ = lhs.overflowed_ || rhs.overflowed_;
  sum.terms_ = lhs.terms_;
  sum.terms_.insert(sum.terms_.end(), rhs.terms_.begin(), rhs.terms_.end());
  sum.canonicalize();
  return sum;
}

Size operator-(const Size &lhs, const Size &rhs) {
  Size negated = rhs;
  for (Size::Term &term : negated.terms_)
    if (__builtin_mul_overflow(term.coefficient, int64_t{-1}, &term.coefficient)) negated.overflowed_ = true;
  return lhs + negated;
}

Size operator*(const Size &lhs, const Size &rhs) {
  Size product;
  product.overflowed_ = lhs.overflowed_ || rhs.overflowed_;
  for (const Size::Term &a : lhs.terms_)
    for (const Size::Term &b : rhs.terms_) {
      Size::Term term;
      if (__builtin_mul_overflow(a.coefficient, b.coefficient, &term.coefficient)) product.overflowed_ = true;
      term.factors = a.factors;
      term.factors.insert(term.factors.end(), b.factors.begin(), b.factors.end());
      product.terms_.push_back(std::move(term));
    }
  product.canonicalize();
  return product;
}

int Size::compare(const Size &lhs, const Size &rhs) {
  if (lhs.overflowed_ != rhs.overflowed_) return lhs.overflowed_ ? 1 : -1;
  if (lhs.overflowed_) return 0;
  size_t common = std::min(lhs.terms_.size(), rhs.terms_.size());
  for (size_t i = 0; i < common; ++i) {
    if (int order = compareFactors(lhs.terms_[i].factors, rhs.terms_[i].factors)) return order;
    if (lhs.terms_[i].coefficient != rhs.terms_[i].coefficient)
      return lhs.terms_[i].coefficient < rhs.terms_[i].coefficient ? -1 : 1;
  }
  if (lhs.terms_.size() != rhs.terms_.size()) return lhs.terms_.size() < rhs.terms_.size() ? -1 : 1;
  return 0;
}

std::optional<int64_t> Size::evaluate(
    const std::function<std::optional<int64_t>(const std::string &)> &dimValue) const {
  if (overflowed_) return std::nullopt;
  int64_t total = 0;
  for (const Term &term : terms_) {
    int64_t value = term.coefficient;
    for (const Atom &atom : term.factors) {
      std::optional<int64_t> factor =
          atom.isDim() ? dimValue(atom.dim) : atom.numerator->evaluate(dimValue);
      if (!factor) return std::nullopt;
      if (!atom.isDim()) factor = floorDivide(*factor, atom.divisor);
      if (__builtin_mul_overflow(value, *factor, &value)) return std::nullopt;
    }
    if (__builtin_add_overflow(total, value, &total)) return std::nullopt;
  }
  return total;
}

std::optional<int64_t> Size::evaluate(const std::map<std::string, int64_t> &dimValues) const {
  return evaluate([&](const std::string &name) -> std::optional<int64_t> {
    auto found = dimValues.find(name);
    if (found == dimValues.end()) return std::nullopt;
    return found->second;
  });
}

SizeBounds Size::bounds(const DimRanges &ranges) const {
  if (overflowed_) return {kMin, kMax};
  __int128 low = 0, high = 0;
  for (const Term &term : terms_) {
    __int128 termLow = term.coefficient, termHigh = term.coefficient;
    for (const Atom &atom : term.factors) {
      SizeBounds factor{0, kMax};
      if (atom.isDim()) {
        auto found = ranges.find(atom.dim);
        if (found != ranges.end()) factor = {found->second.min, found->second.max};
      } else {
        SizeBounds inner = atom.numerator->bounds(ranges);
        factor = {floorDivide(inner.min, atom.divisor), floorDivide(inner.max, atom.divisor)};
      }
      __int128 corners[] = {termLow * factor.min, termLow * factor.max, termHigh * factor.min,
                            termHigh * factor.max};
      termLow = saturate(*std::min_element(std::begin(corners), std::end(corners)));
      termHigh = saturate(*std::max_element(std::begin(corners), std::end(corners)));
    }
    low = saturate(low + termLow);
    high = saturate(high + termHigh);
  }
  return {saturate(low), saturate(high)};
}

std::string Size::str() const {
  if (overflowed_) return "<overflow>";
  if (terms_.empty()) return "0";
  std::string text;
  // Highest degree first, the constant last: "b*t*384 + t + 1".
  for (auto term = terms_.rbegin(); term != terms_.rend(); ++term) {
    int64_t coefficient = term->coefficient;
    bool negative = coefficient < 0;
    if (text.empty()) {
      if (negative) text += "-";
    } else {
      text += negative ? " - " : " + ";
    }
    uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(coefficient) : static_cast<uint64_t>(coefficient);
    std::string factors;
    for (const Atom &atom : term->factors) {
      if (!factors.empty()) factors += '*';
      factors += atomText(atom);
    }
    if (factors.empty())
      text += std::to_string(magnitude);
    else
      text += magnitude == 1 ? factors : factors + "*" + std::to_string(magnitude);
  }
  return text;
}

size_t Size::hash() const {
  return std::hash<std::string>()(str());
}

std::string formatShape(const Shape &sizes) {
  std::string text = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) text += ", ";
    text += sizes[i].str();
  }
  return text + "]";
}

Size product(const Shape &shape) {
  Size result = 1;
  for (const Size &size : shape) result *= size;
  return result;
}

}  // namespace ein
