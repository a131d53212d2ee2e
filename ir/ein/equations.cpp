#include "ir/ein/equations.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

namespace ein {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == separator) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

bool isLabelChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

bool isWordLabel(std::string_view label) {
  if (label.empty() || std::isdigit(static_cast<unsigned char>(label.front()))) return false;
  return std::all_of(label.begin(), label.end(), isLabelChar);
}

// The character at `text[i]` as the user wrote it: a whole UTF-8 sequence for a
// non-ASCII byte, so that messages stay valid UTF-8.
std::string characterAt(std::string_view text, size_t i) {
  unsigned char lead = static_cast<unsigned char>(text[i]);
  size_t length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  length = std::min(length, text.size() - i);
  for (size_t k = 1; k < length; ++k)
    if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) length = 1;
  if (length == 1 && lead >= 0x80) {  // not UTF-8: show the byte
    static const char *hex = "0123456789ABCDEF";
    return std::string("\\x") + hex[lead >> 4] + hex[lead & 15];
  }
  return std::string(text.substr(i, length));
}

constexpr std::string_view kEllipsis = "...";

// Splits one einsum term into labels, keeping "..." as one token.
EquationResult<std::vector<std::string>> splitTerm(std::string_view term, bool words, bool canonical = false) {
  std::vector<std::string> labels;
  size_t i = 0;
  while (i < term.size()) {
    char c = term[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (term.substr(i, 3) == kEllipsis) {
      labels.emplace_back(kEllipsis);
      i += 3;
    } else if (canonical && c == '.' && i + 1 < term.size() && std::isdigit(static_cast<unsigned char>(term[i + 1]))) {
      size_t end = i + 1;  // an expanded ellipsis axis, ".0"
      while (end < term.size() && std::isdigit(static_cast<unsigned char>(term[end]))) ++end;
      labels.emplace_back(term.substr(i, end - i));
      i = end;
    } else if (words) {
      size_t end = i;
      while (end < term.size() && isLabelChar(term[end])) ++end;
      std::string_view word = term.substr(i, end - i);
      if (!isWordLabel(word))
        return EquationError{"invalid label '" + (end > i ? std::string(word) : characterAt(term, i)) + "' in \"" +
                             std::string(trim(term)) + "\""};
      labels.emplace_back(word);
      i = end;
    } else {
      if (!std::isalpha(static_cast<unsigned char>(c)))
        return EquationError{"invalid label '" + characterAt(term, i) + "' in \"" + std::string(trim(term)) +
                             "\" (labels are letters, or words separated by spaces)"};
      labels.emplace_back(1, c);
      ++i;
    }
  }
  return labels;
}

std::string ellipsisLabel(size_t i) { return "." + std::to_string(i); }

}  // namespace

EquationResult<EinsumEquation> EinsumEquation::parse(std::string_view text,
                                                     const std::vector<int64_t> &operandRanks, bool canonical) {
  std::string_view lhs = text, rhs;
  bool explicitOutput = false;
  if (size_t arrow = text.find("->"); arrow != std::string_view::npos) {
    lhs = text.substr(0, arrow);
    rhs = text.substr(arrow + 2);
    explicitOutput = true;
    if (rhs.find("->") != std::string_view::npos)
      return EquationError{"einsum equation has more than one '->'"};
  }
  std::vector<std::string_view> terms = split(lhs, ',');
  // Word labels when any term has a space between two labels.
  bool words = canonical;
  auto hasInnerSpace = [](std::string_view term) {
    term = trim(term);
    return std::any_of(term.begin(), term.end(),
                       [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
  };
  for (std::string_view term : terms) words |= hasInnerSpace(term);
  if (explicitOutput) words |= hasInnerSpace(rhs);

  if (terms.size() != operandRanks.size())
    return EquationError{"einsum equation names " + std::to_string(terms.size()) + " operand" +
                         (terms.size() == 1 ? "" : "s") + " but " + std::to_string(operandRanks.size()) +
                         (operandRanks.size() == 1 ? " is" : " are") + " given"};

  // First pass: labels per operand and how many axes each "..." covers.
  std::vector<std::vector<std::string>> termLabels;
  std::vector<size_t> covered(terms.size(), 0);
  size_t ellipsisRank = 0;
  for (size_t operand = 0; operand < terms.size(); ++operand) {
    auto labels = splitTerm(terms[operand], words, canonical);
    if (failed(labels)) return std::get<EquationError>(labels);
    auto &list = std::get<std::vector<std::string>>(labels);
    size_t ellipses = std::count(list.begin(), list.end(), std::string(kEllipsis));
    if (ellipses > 1) return EquationError{"einsum operand " + std::to_string(operand + 1) + " has more than one '...'"};
    int64_t named = static_cast<int64_t>(list.size() - ellipses);
    int64_t rank = operandRanks[operand];
    if (ellipses == 0 ? named != rank : named > rank)
      return EquationError{"einsum operand " + std::to_string(operand + 1) + " has " + std::to_string(rank) +
                           " axes but \"" + std::string(trim(terms[operand])) + "\" names " +
                           (ellipses ? "at least " : "") + std::to_string(named)};
    if (ellipses) covered[operand] = static_cast<size_t>(rank - named);
    ellipsisRank = std::max(ellipsisRank, covered[operand]);
    termLabels.push_back(std::move(list));
  }
  // Second pass: expand "..." into broadcast labels aligned on the right, as in
  // NumPy, so ".0" is the outermost broadcast axis of the widest operand.
  EinsumEquation equation;
  for (size_t operand = 0; operand < terms.size(); ++operand) {
    std::vector<std::string> expanded;
    for (const std::string &label : termLabels[operand]) {
      if (label != kEllipsis) {
        expanded.push_back(label);
        continue;
      }
      for (size_t i = 0; i < covered[operand]; ++i)
        expanded.push_back(ellipsisLabel(ellipsisRank - covered[operand] + i));
    }
    equation.inputs.push_back(std::move(expanded));
  }

  if (explicitOutput) {
    auto labels = splitTerm(rhs, words, canonical);
    if (failed(labels)) return std::get<EquationError>(labels);
    for (const std::string &label : std::get<std::vector<std::string>>(labels)) {
      if (label == kEllipsis) {
        for (size_t i = 0; i < ellipsisRank; ++i) equation.output.push_back(ellipsisLabel(i));
      } else {
        equation.output.push_back(label);
      }
    }
    std::set<std::string> seen;
    for (const std::string &label : equation.output) {
      if (!seen.insert(label).second)
        return EquationError{"einsum output label '" + label + "' appears more than once"};
      bool inInputs = std::any_of(equation.inputs.begin(), equation.inputs.end(), [&](const auto &term) {
        return std::find(term.begin(), term.end(), label) != term.end();
      });
      if (!inInputs) return EquationError{"einsum output label '" + label + "' appears in no operand"};
    }
  } else {
    // NumPy's implicit output: broadcast axes first, then every label that occurs
    // exactly once, in alphabetical order.
    for (size_t i = 0; i < ellipsisRank; ++i) equation.output.push_back(ellipsisLabel(i));
    std::map<std::string, int> counts;
    for (const auto &term : equation.inputs)
      for (const std::string &label : term)
        if (label.front() != '.') ++counts[label];
    for (const auto &[label, count] : counts)
      if (count == 1) equation.output.push_back(label);
  }
  return equation;
}

std::string EinsumEquation::str() const {
  auto join = [](const std::vector<std::string> &labels) {
    std::string text;
    for (size_t i = 0; i < labels.size(); ++i) text += (i ? " " : "") + labels[i];
    return text;
  };
  std::string text;
  for (size_t i = 0; i < inputs.size(); ++i) text += (i ? ", " : "") + join(inputs[i]);
  return text + " -> " + join(output);
}

EquationResult<Shape> EinsumEquation::inferShape(const std::vector<Shape> &operandShapes) const {
  if (operandShapes.size() != inputs.size())
    return EquationError{"einsum equation names " + std::to_string(inputs.size()) + " operands but " +
                         std::to_string(operandShapes.size()) + " are given"};
  struct Binding {
    Size size;
    size_t operand;
  };
  std::map<std::string, Binding> sizes;
  for (size_t operand = 0; operand < inputs.size(); ++operand) {
    const Shape &shape = operandShapes[operand];
    if (shape.size() != inputs[operand].size())
      return EquationError{"einsum operand " + std::to_string(operand + 1) + " has " +
                           std::to_string(shape.size()) + " axes but the equation names " +
                           std::to_string(inputs[operand].size())};
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      const std::string &label = inputs[operand][axis];
      auto [it, inserted] = sizes.try_emplace(label, Binding{shape[axis], operand});
      if (inserted || it->second.size == shape[axis]) continue;
      std::string name = label.front() == '.' ? "broadcast axis " + label.substr(1) : "axis '" + label + "'";
      return EquationError{name + " is " + it->second.size.str() + " in operand " +
                           std::to_string(it->second.operand + 1) + " and " + shape[axis].str() +
                           " in operand " + std::to_string(operand + 1)};
    }
  }
  Shape result;
  for (const std::string &label : output) result.push_back(sizes.at(label).size);
  return result;
}

std::vector<std::vector<size_t>> EinsumEquation::broadcastAxes(const std::vector<Shape> &operandShapes) const {
  // Labels with a size other than 1 in some operand.
  std::set<std::string> stretched;
  for (size_t operand = 0; operand < inputs.size() && operand < operandShapes.size(); ++operand)
    for (size_t axis = 0; axis < inputs[operand].size() && axis < operandShapes[operand].size(); ++axis)
      if (operandShapes[operand][axis] != 1) stretched.insert(inputs[operand][axis]);
  std::vector<std::vector<size_t>> axes(inputs.size());
  for (size_t operand = 0; operand < inputs.size() && operand < operandShapes.size(); ++operand) {
    const std::vector<std::string> &term = inputs[operand];
    for (size_t axis = 0; axis < term.size() && axis < operandShapes[operand].size(); ++axis)
      if (operandShapes[operand][axis] == 1 && stretched.count(term[axis]) &&
          std::count(term.begin(), term.end(), term[axis]) == 1)
        axes[operand].push_back(axis);
  }
  return axes;
}

EinsumEquation EinsumEquation::withoutAxes(const std::vector<std::vector<size_t>> &axes) const {
  EinsumEquation result = *this;
  for (size_t operand = 0; operand < axes.size() && operand < inputs.size(); ++operand) {
    result.inputs[operand].clear();
    for (size_t axis = 0; axis < inputs[operand].size(); ++axis)
      if (std::find(axes[operand].begin(), axes[operand].end(), axis) == axes[operand].end())
        result.inputs[operand].push_back(inputs[operand][axis]);
  }
  return result;
}

namespace {

// One side of an einops pattern, tokenised as einops does: tokens are runs of
// letters, digits, '_' and '.', separated by spaces and parentheses.
EquationResult<EinopsSide> parseEinopsSide(std::string_view text, char side) {
  const std::string quoted = "\"" + std::string(trim(text)) + "\"";
  EinopsSide result;
  bool inGroup = false;
  EinopsSide::Group group;
  auto addToken = [&](std::string_view token) -> std::optional<EquationError> {
    if (token.find('.') != std::string_view::npos) {
      if (token != kEllipsis)
        return EquationError{"'" + std::string(token) + "' in einops pattern " + quoted +
                             ": dots may only form an ellipsis '...', written apart from axis names"};
      if (result.hasEllipsis) return EquationError{"einops pattern side " + quoted + " has more than one '...'"};
      result.hasEllipsis = true;
      if (!inGroup) {
        result.groups.push_back({{}, true});
      } else if (side == 'l') {
        return EquationError{"'...' inside parentheses is not allowed on the left of an einops pattern (" + quoted + ")"};
      } else {
        group.axes.emplace_back(kEllipsis);
      }
      return std::nullopt;
    }
    if (std::all_of(token.begin(), token.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      if (token.size() > 18) return EquationError{"anonymous axis " + std::string(token) + " is too large"};
      int64_t size = std::stoll(std::string(token));
      if (size == 0) return EquationError{"anonymous axis 0 in einops pattern " + quoted + ": an axis has a positive size"};
      if (size == 1) {  // a unit axis: an empty group alone, nothing inside a group
        if (!inGroup) result.groups.push_back({});
        return std::nullopt;
      }
      std::string name = std::string("#") + side + std::to_string(result.anonymousSizes.size());
      result.anonymousSizes[name] = size;
      if (inGroup)
        group.axes.push_back(name);
      else
        result.groups.push_back({{name}, false});
      return std::nullopt;
    }
    if (!isWordLabel(token))
      return EquationError{"invalid axis name '" + std::string(token) + "' in einops pattern " + quoted};
    if (token.front() == '_' || token.back() == '_')
      return EquationError{"axis name '" + std::string(token) + "' in einops pattern " + quoted +
                           " starts or ends with '_', which einops does not allow"};
    if (inGroup)
      group.axes.emplace_back(token);
    else
      result.groups.push_back({{std::string(token)}, false});
    return std::nullopt;
  };

  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '(') {
      if (inGroup) return EquationError{"nested parentheses in einops pattern " + quoted};
      inGroup = true;
      group = {};
      ++i;
    } else if (c == ')') {
      if (!inGroup) return EquationError{"unbalanced ')' in einops pattern " + quoted};
      inGroup = false;
      result.groups.push_back(group);
      ++i;
    } else if (isLabelChar(c) || c == '.') {
      size_t end = i;
      while (end < text.size() && (isLabelChar(text[end]) || text[end] == '.')) ++end;
      if (auto error = addToken(text.substr(i, end - i))) return *error;
      i = end;
    } else {
      return EquationError{"unexpected '" + characterAt(text, i) + "' in einops pattern " + quoted +
                           " (axis names are ASCII letters, digits and '_')"};
    }
  }
  if (inGroup) return EquationError{"unclosed '(' in einops pattern " + quoted};
  return result;
}

}  // namespace

EquationResult<EinopsPlan> planEinops(EinopsKind kind, std::string_view pattern, const Shape &inputShape,
                                      const std::map<std::string, Size> &sizes) {
  size_t arrow = pattern.find("->");
  if (arrow == std::string_view::npos) return EquationError{"einops pattern \"" + std::string(pattern) + "\" has no '->'"};
  if (pattern.find("->", arrow + 2) != std::string_view::npos)
    return EquationError{"einops pattern \"" + std::string(pattern) + "\" has more than one '->'"};
  auto left = parseEinopsSide(pattern.substr(0, arrow), 'l');
  if (failed(left)) return std::get<EquationError>(left);
  auto right = parseEinopsSide(pattern.substr(arrow + 2), 'r');
  if (failed(right)) return std::get<EquationError>(right);
  const EinopsSide &in = std::get<EinopsSide>(left);
  const EinopsSide &out = std::get<EinopsSide>(right);

  // einops' rules: "..." on the right needs one on the left; on the left alone
  // it is reduced, so only reduce allows it; anonymous axes other than 1 exist
  // in reduce (on the left) and repeat (on the right) only.
  const bool inEllipsis = in.hasEllipsis;
  if (out.hasEllipsis && !inEllipsis)
    return EquationError{"'...' is on the right of the einops pattern but not on the left"};
  if (inEllipsis && !out.hasEllipsis && kind != EinopsKind::Reduce)
    return EquationError{"'...' is on the left of the einops pattern but not on the right (only reduce removes axes)"};
  if (kind == EinopsKind::Rearrange && (!in.anonymousSizes.empty() || !out.anonymousSizes.empty()))
    return EquationError{"rearrange takes no anonymous axes other than 1 (reduce and repeat do)"};
  // How messages name an axis: anonymous ones by their size.
  auto axisName = [&](const std::string &axis) {
    for (const EinopsSide *side : {&in, &out})
      if (auto it = side->anonymousSizes.find(axis); it != side->anonymousSizes.end())
        return "anonymous axis " + std::to_string(it->second);
    return "axis '" + axis + "'";
  };

  size_t namedGroups = in.groups.size() - (inEllipsis ? 1 : 0);
  if (inEllipsis ? inputShape.size() < namedGroups : inputShape.size() != namedGroups)
    return EquationError{"einops pattern \"" + std::string(trim(pattern.substr(0, arrow))) + "\" names " +
                         std::to_string(namedGroups) + " axes but the input has " +
                         std::to_string(inputShape.size()) + " (shape " + formatShape(inputShape) + ")"};

  EinopsPlan plan;
  std::map<std::string, Size> known;  // elementary axis sizes
  for (const auto &[name, size] : sizes) {
    if (std::optional<int64_t> constant = size.constant(); constant && *constant <= 0)
      return EquationError{"axis '" + name + "' is given size " + std::to_string(*constant)};
    known[name] = size;
  }
  known.insert(in.anonymousSizes.begin(), in.anonymousSizes.end());
  known.insert(out.anonymousSizes.begin(), out.anonymousSizes.end());
  std::set<std::string> seen;
  size_t dim = 0;
  size_t ellipsisRank = inputShape.size() - namedGroups;
  for (const auto &group : in.groups) {
    if (group.isEllipsis) {
      for (size_t i = 0; i < ellipsisRank; ++i, ++dim) {
        plan.inputAxes.push_back(ellipsisLabel(i));
        plan.inputAxisSizes.push_back(inputShape[dim]);
        plan.inputAxisDim.push_back(static_cast<int>(dim));
      }
      continue;
    }
    const Size &dimSize = inputShape[dim];
    if (group.axes.empty()) {  // "1" or "()"
      if (dimSize != 1)
        return EquationError{"input axis " + std::to_string(dim) + " is " + dimSize.str() + " but the pattern says 1"};
      ++dim;
      continue;
    }
    Size knownProduct = 1;
    int unknown = -1;
    for (size_t i = 0; i < group.axes.size(); ++i) {
      const std::string &axis = group.axes[i];
      if (!seen.insert(axis).second) return EquationError{"axis '" + axis + "' appears twice on the left of the einops pattern"};
      if (auto it = known.find(axis); it != known.end()) {
        knownProduct *= it->second;
      } else if (unknown >= 0) {
        return EquationError{"cannot infer the sizes of both '" + group.axes[unknown] + "' and '" + axis +
                             "' from input axis " + std::to_string(dim) + " (size " + dimSize.str() +
                             "); give one of them, e.g. " + axis + "=..."};
      } else {
        unknown = static_cast<int>(i);
      }
    }
    // The group as written (anonymous axes as their sizes) and the sizes given for it.
    std::string groupText, givenText;
    for (const std::string &axis : group.axes) {
      bool anonymous = axis.front() == '#';
      groupText += (groupText.empty() ? "" : " ") + (anonymous ? known[axis].str() : axis);
      if (known.count(axis) && !anonymous) givenText += (givenText.empty() ? "" : ", ") + axis + "=" + known[axis].str();
    }
    const std::string with = givenText.empty() ? "" : " with " + givenText;
    if (unknown >= 0 && !knownProduct.isConstant()) {
      // Sizes over ranged dims given: the axis must be a multiple of them
      // ("(b t) c -> b t c" with b=b, of a (b t) merged before).
      std::optional<Size> quotient = Size::exactQuotient(dimSize, knownProduct);
      if (!quotient)
        return EquationError{"input axis " + std::to_string(dim) + " (size " + dimSize.str() + ") cannot be split by (" +
                             groupText + ")" + with + ": " + dimSize.str() + " is not a multiple of " +
                             knownProduct.str() + " at every value of the dims"};
      known[group.axes[unknown]] = *quotient;
    } else if (unknown >= 0) {
      std::optional<int64_t> divisor = knownProduct.constant();
      Size quotient = Size::floorDiv(dimSize, *divisor);
      if (quotient * *divisor != dimSize) {
        if (dimSize.isConstant())
          return EquationError{"input axis " + std::to_string(dim) + " (size " + dimSize.str() +
                               ") does not split into (" + groupText + ")" + with + ": " + dimSize.str() +
                               " is not divisible by " + knownProduct.str()};
        // Whether it divides depends on the dims: the runtime checks.
        plan.checks.push_back({SizeCheck::Divides, knownProduct, dimSize,
                               "input axis " + std::to_string(dim) + " (size " + dimSize.str() +
                                   ") must split into (" + groupText + ")" + with});
      }
      known[group.axes[unknown]] = quotient;
    } else if (knownProduct != dimSize) {
      if (group.axes.size() == 1)
        return EquationError{axisName(group.axes[0]) + " is " + dimSize.str() + " in the input (axis " +
                             std::to_string(dim) + ") but " +
                             (givenText.empty() ? "the pattern says " + groupText : givenText + " was given")};
      return EquationError{"input axis " + std::to_string(dim) + " is " + dimSize.str() + " but (" + groupText + ")" +
                           with + " is " + knownProduct.str()};
    }
    for (const std::string &axis : group.axes) {
      plan.inputAxes.push_back(axis);
      plan.inputAxisSizes.push_back(known[axis]);
      plan.inputAxisDim.push_back(static_cast<int>(dim));
    }
    ++dim;
  }

  std::set<std::string> outSeen;
  for (const auto &group : out.groups) {
    std::vector<int> members;
    if (group.isEllipsis) {
      for (size_t i = 0; i < ellipsisRank; ++i) {
        outSeen.insert(ellipsisLabel(i));
        members.push_back(static_cast<int>(plan.outputAxes.size()));
        plan.outputAxes.push_back(ellipsisLabel(i));
      }
      // Each ellipsis axis is its own output dimension.
      for (int member : members) plan.outputGroups.push_back({member});
      continue;
    }
    for (const std::string &axis : group.axes) {
      if (axis == kEllipsis) {  // "(...)" on the right: the ellipsis axes merge into this group
        for (size_t i = 0; i < ellipsisRank; ++i) {
          outSeen.insert(ellipsisLabel(i));
          members.push_back(static_cast<int>(plan.outputAxes.size()));
          plan.outputAxes.push_back(ellipsisLabel(i));
        }
        continue;
      }
      if (!outSeen.insert(axis).second) return EquationError{"axis '" + axis + "' appears twice on the right of the einops pattern"};
      members.push_back(static_cast<int>(plan.outputAxes.size()));
      plan.outputAxes.push_back(axis);
    }
    plan.outputGroups.push_back(members);
  }
  for (const std::string &axis : plan.outputAxes) {
    auto it = std::find(plan.inputAxes.begin(), plan.inputAxes.end(), axis);
    if (it != plan.inputAxes.end()) {
      int position = static_cast<int>(it - plan.inputAxes.begin());
      plan.outputSource.push_back(position);
      plan.outputAxisSizes.push_back(plan.inputAxisSizes[position]);
      continue;
    }
    if (kind != EinopsKind::Repeat)
      return EquationError{axisName(axis) + " is on the right of the einops pattern but not on the left"};
    auto size = known.find(axis);
    if (size == known.end()) return EquationError{"new axis '" + axis + "' needs a size, e.g. " + axis + "=..."};
    plan.outputSource.push_back(-1);
    plan.outputAxisSizes.push_back(size->second);
  }
  for (size_t i = 0; i < plan.inputAxes.size(); ++i) {
    if (outSeen.count(plan.inputAxes[i])) continue;
    if (kind != EinopsKind::Reduce)
      return EquationError{axisName(plan.inputAxes[i]) + " is on the left of the einops pattern but not on the right" +
                           (kind == EinopsKind::Rearrange ? " (use reduce to remove an axis)" : "")};
    plan.reducedAxes.push_back(static_cast<int>(i));
  }
  for (const auto &[name, size] : sizes) {
    bool used = std::find(plan.inputAxes.begin(), plan.inputAxes.end(), name) != plan.inputAxes.end() ||
                std::find(plan.outputAxes.begin(), plan.outputAxes.end(), name) != plan.outputAxes.end();
    if (!used) return EquationError{"size given for axis '" + name + "', which the pattern does not name"};
  }
  for (const auto &members : plan.outputGroups) {
    Shape groupSizes;
    for (int member : members) groupSizes.push_back(plan.outputAxisSizes[member]);
    plan.resultShape.push_back(product(groupSizes));
  }
  return plan;
}

EquationResult<Shape> broadcastShapes(const Shape &lhs, const Shape &rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  Shape result(rank);
  for (size_t i = 0; i < rank; ++i) {
    Size a = i < rank - lhs.size() ? Size(1) : lhs[i - (rank - lhs.size())];
    Size b = i < rank - rhs.size() ? Size(1) : rhs[i - (rank - rhs.size())];
    if (a != b && a != 1 && b != 1)
      return EquationError{"shapes " + formatShape(lhs) + " and " + formatShape(rhs) + " do not broadcast (axis " +
                           std::to_string(i) + ": " + a.str() + " vs " + b.str() + ")"};
    result[i] = a == 1 ? b : a;
  }
  return result;
}

}  // namespace ein
