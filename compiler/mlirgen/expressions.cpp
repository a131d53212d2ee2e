// Expressions: names, numbers, operators with PyTorch type promotion,
// indexing and slicing, and the binding of built-in call arguments.
#include "compiler/mlirgen/generator.hpp"

#include <cmath>
#include "ops/scalar_functions.hpp"

namespace ein::mlirgen::detail {

RankedTensorType Generator::inferred(const ein::EquationResult<RankedTensorType> &rule, Location at,
                                     const std::string &context) {
  if (ein::failed(rule)) fail(at, context + std::get<ein::EquationError>(rule).message);
  return std::get<RankedTensorType>(rule);
}

EValue Generator::evaluate(const ast::Expr &expr, Scope &scope) {
  if (++evaluationDepth > limits::kMaxEvaluationDepth)
    fail(expr.loc, "expressions nest deeper than " + std::to_string(limits::kMaxEvaluationDepth) +
                       " levels, counting those of the blocks they call");
  EValue value = evaluateUnbounded(expr, scope);
  --evaluationDepth;
  return value;
}

EValue Generator::evaluateUnbounded(const ast::Expr &expr, Scope &scope) {
  using K = ast::Expr::Kind;
  switch (expr.kind) {
    case K::Number: {
      const auto &number = static_cast<const ast::NumberExpr &>(expr);
      return EValue{Number{number.value, number.isInteger}};
    }
    case K::Bool: return EValue{Boolean{static_cast<const ast::BoolExpr &>(expr).value}};
    case K::String: return EValue{String{static_cast<const ast::StringExpr &>(expr).value}};
    case K::Name: {
      const auto &name = static_cast<const ast::NameExpr &>(expr).name;
      if (auto value = resolveValue(name, scope)) return *value;
      std::string full = resolveName(name, scope);
      if (name.segments.size() == 1) {
        std::vector<std::string> known;
        for (const Scope *names : {&scope, &globals})
          for (const auto &entry : *names) known.push_back(entry.first);
        for (const auto &entry : dims) known.push_back(entry.first);
        fail(expr.loc, "unknown name '" + full + "'" + didYouMean(full, known));
      }
      if (std::optional<std::string> attribute = tensorAttributeMessage(name, scope, std::nullopt))
        fail(expr.loc, *attribute);
      std::vector<std::string> known;
      for (const auto &entry : params) known.push_back(entry.first);
      std::string suggestion = didYouMean(full, known);
      fail(expr.loc, "unknown parameter \"" + full + "\"" +
                         (suggestion.empty() ? " (declare it with `param " + full + ": f32[...]`)" : suggestion));
    }
    case K::Unary: {
      const auto &unary = static_cast<const ast::UnaryExpr &>(expr);
      EValue operand = evaluate(*unary.operand, scope);
      if (unary.op == '+') return operand;
      if (unary.op == '~') {  // torch's ~ of a bool tensor: logical not
        if (auto *boolean = std::get_if<Boolean>(&operand.value)) return EValue{Boolean{!boolean->value}};
        auto *flags = std::get_if<Tensor>(&operand.value);
        if (!flags || !elementType(flags->value).isInteger(1))
          fail(expr.loc, "'~' is the logical not of a bool tensor, not of " +
                             (flags ? "an " + typeString(elementType(flags->value)) + " tensor"
                                    : std::string(kindName(operand))));
        return EValue{Tensor{unaryOp(loc(expr.loc), ir::UnaryKind::logical_not, flags->value)}};
      }
      if (auto *number = std::get_if<Number>(&operand.value)) return EValue{Number{-number->value, number->isInteger}};
      if (auto *ranged = std::get_if<SizeValue>(&operand.value)) return EValue{SizeValue{-ranged->size}};
      auto *tensor = std::get_if<Tensor>(&operand.value);
      mlir::Value value = tensor && isInteger(tensor->value) ? tensor->value  // -ids stays integer, as in torch
                                                              : floatTensor(operand, unary.operand->loc, "unary '-'");
      return EValue{Tensor{unaryOp(loc(expr.loc), ir::UnaryKind::neg, value)}};
    }
    case K::Binary: return binary(static_cast<const ast::BinaryExpr &>(expr), scope);
    case K::Call: return callExpr(static_cast<const ast::Call &>(expr), scope);
    case K::Index: return index(static_cast<const ast::IndexExpr &>(expr), scope);
    case K::List: {
      List list;
      for (const auto &item : static_cast<const ast::ListExpr &>(expr).items) list.items.push_back(evaluate(*item, scope));
      return EValue{std::move(list)};
    }
  }
  fail(expr.loc, "unsupported expression");
}

int64_t Generator::integer(const ast::Expr &expr, Scope &scope, const std::string &what) {
  EValue value = evaluate(expr, scope);
  if (auto *ranged = std::get_if<SizeValue>(&value.value)) failRanged(expr.loc, *ranged, what);
  auto *number = std::get_if<Number>(&value.value);
  if (!number) fail(expr.loc, what + " must be an integer, not " + kindName(value));
  return exactInteger(*number, expr.loc, what);
}

ein::Size Generator::size(const ast::Expr &expr, Scope &scope, const std::string &what) {
  EValue value = evaluate(expr, scope);
  if (auto *ranged = std::get_if<SizeValue>(&value.value)) return ranged->size;
  auto *number = std::get_if<Number>(&value.value);
  if (!number) fail(expr.loc, what + " must be an integer, not " + kindName(value));
  return exactInteger(*number, expr.loc, what);
}

void Generator::failRanged(const ast::SourceLoc &at, const SizeValue &value, const std::string &what) {
  std::string names;
  for (const std::string &dim : value.size.dims()) {
    const ein::DimRange &range = ranges.at(dim);
    names += (names.empty() ? "" : ", ") + dim + " = " + std::to_string(range.min) + ".." + std::to_string(range.max);
  }
  fail(at, what + " must be known when the model compiles, but " + value.size.str() + " depends on the ranged dim" +
               (value.size.dims().size() > 1 ? "s " : " ") + names + ", known only at run time");
}

EValue Generator::sizeArithmetic(const ast::BinaryExpr &expr, const EValue &lhs, const EValue &rhs) {
  auto operand = [&](const EValue &value, const ast::Expr &at) -> ein::Size {
    if (auto *ranged = std::get_if<SizeValue>(&value.value)) return ranged->size;
    auto *number = std::get_if<Number>(&value.value);
    if (!number) fail(at.loc, std::string("a size over ranged dims meets ") + kindName(value) +
                                  "; it enters only integer arithmetic (+, -, *, / by a constant that divides it)");
    return exactInteger(*number, at.loc, "a number in arithmetic with a ranged size");
  };
  ein::Size a = operand(lhs, *expr.lhs), b = operand(rhs, *expr.rhs);
  ein::Size result;
  switch (expr.op) {
    case ast::BinaryOp::Add: result = a + b; break;
    case ast::BinaryOp::Sub: result = a - b; break;
    case ast::BinaryOp::Mul: result = a * b; break;
    case ast::BinaryOp::Div: {
      std::optional<int64_t> divisor = b.constant();
      if (!divisor) fail(expr.rhs->loc, "dividing by " + b.str() + ", a size over ranged dims, is not supported");
      if (*divisor <= 0) fail(expr.rhs->loc, "a ranged size is divided by " + std::to_string(*divisor) + ", not a positive number");
      // A whole number where the divisor divides (checked at run time when
      // that depends on the dims, as an einops split is).
      result = ein::Size::floorDiv(a, *divisor);
      requireSizes({ein::SizeCheck::Divides, *divisor, a, a.str() + " / " + std::to_string(*divisor) + " is not a whole number"},
                   loc(expr.loc));
      break;
    }
    case ast::BinaryOp::FloorDiv: {
      std::optional<int64_t> divisor = b.constant();
      if (!divisor || *divisor <= 0)
        fail(expr.rhs->loc, "a size over ranged dims is floor-divided only by a positive constant, not " + b.str());
      result = ein::Size::floorDiv(a, *divisor);
      break;
    }
    default:
      fail(expr.loc, "only +, -, *, / and // by a constant apply to a size over ranged dims (" +
                         (std::holds_alternative<SizeValue>(lhs.value) ? a : b).str() + ")");
  }
  if (result.overflowed()) fail(expr.loc, "the size " + a.str() + " and " + b.str() + " make overflows 64 bits");
  if (std::optional<int64_t> constant = result.constant()) return EValue{Number{static_cast<double>(*constant), true}};
  return EValue{SizeValue{result}};
}

int64_t Generator::exactInteger(const Number &number, const ast::SourceLoc &at, const std::string &what) {
  if (!std::isfinite(number.value) || std::fabs(number.value) > static_cast<double>(limits::kMaxExactInteger))
    fail(at, what + " is too large: " + formatNumber(number.value) + " (integers are limited to +-2^53)");
  if (!number.isInteger && number.value != std::floor(number.value))
    fail(at, what + " must be an integer, got " + formatNumber(number.value));
  return static_cast<int64_t>(number.value);
}

std::string Generator::formatNumber(double value) {
  std::string text = std::to_string(value);
  while (!text.empty() && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

std::string Generator::shapeString(RankedTensorType type) { return ein::formatShape(ir::shapeOf(type)); }

mlir::Value Generator::tensor(const EValue &value, const ast::SourceLoc &at, const std::string &what) {
  if (auto *t = std::get_if<Tensor>(&value.value)) return t->value;
  fail(at, what + " must be a tensor, not " + kindName(value));
}

mlir::Value Generator::floatTensor(const EValue &value, const ast::SourceLoc &at, const std::string &what) {
  mlir::Value t = tensor(value, at, what);
  return isFloat(t) ? t : cast(loc(at), t, builder.getF32Type());
}

mlir::Value Generator::cast(Location at, mlir::Value value, Type element) {
  if (elementType(value) == element) return value;
  return builder.create<ir::CastOp>(at, typeOf(value).clone(element), value);
}

mlir::Value Generator::scalarConstant(Location at, double value, Type element) {
  auto type = RankedTensorType::get({}, element);
  mlir::DenseElementsAttr attr;
  if (auto floatType = mlir::dyn_cast<mlir::FloatType>(element)) {
    // In the element type's own format (f16, bf16, f32): an attribute's
    // values must have its element type's semantics.
    llvm::APFloat converted(value);
    bool losesInfo = false;
    converted.convert(floatType.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
    attr = mlir::DenseElementsAttr::get(type, converted);
  } else if (element.isInteger(1)) {
    attr = mlir::DenseElementsAttr::get(type, value != 0);
  } else {
    // Integer constants meet integer tensors only as whole numbers (a
    // float number promotes the tensor to f32); they must fit its type.
    unsigned width = element.getIntOrFloatBitWidth();
    double limit = std::ldexp(1.0, static_cast<int>(width) - 1);
    if (!(value >= -limit && value < limit) || std::fabs(value) > static_cast<double>(limits::kMaxExactInteger))
      fail(at, "the integer " + formatNumber(value) + " does not fit the " + typeString(element) + " tensor it meets");
    attr = mlir::DenseElementsAttr::get(type, llvm::APInt(width, static_cast<int64_t>(value), true));
  }
  return builder.create<ir::ConstantOp>(at, attr);
}

mlir::Value Generator::unaryOp(Location at, ir::UnaryKind kind, mlir::Value value) {
  return builder.create<ir::UnaryOp>(at, value.getType(), ir::UnaryKindAttr::get(&context, kind), value);
}

std::pair<mlir::Value, mlir::Value> Generator::promote(Location at, const EValue &lhs, const ast::SourceLoc &lhsLoc,
                                                       const EValue &rhs, const ast::SourceLoc &rhsLoc) {
  auto *lhsNumber = std::get_if<Number>(&lhs.value);
  auto *rhsNumber = std::get_if<Number>(&rhs.value);
  if (lhsNumber || rhsNumber) {
    // A number takes the tensor's type, except a float number with an
    // integer or bool tensor, which gives f32, and an integer number with a
    // bool tensor, which gives i64.
    const EValue &other = lhsNumber ? rhs : lhs;
    const Number &number = lhsNumber ? *lhsNumber : *rhsNumber;
    mlir::Value t = tensor(other, lhsNumber ? rhsLoc : lhsLoc, "an operand");
    if (!number.isInteger) t = isFloat(t) ? t : cast(at, t, builder.getF32Type());
    else if (elementType(t).isInteger(1)) t = cast(at, t, builder.getI64Type());
    mlir::Value constant = scalarConstant(at, number.value, elementType(t));
    return lhsNumber ? std::make_pair(constant, t) : std::make_pair(t, constant);
  }
  mlir::Value a = tensor(lhs, lhsLoc, "an operand"), b = tensor(rhs, rhsLoc, "an operand");
  Type target = commonType(elementType(a), elementType(b));
  return {cast(at, a, target), cast(at, b, target)};
}

Type Generator::commonType(Type ta, Type tb) {
  if (ta == tb) return ta;
  auto rank = [](Type t) { return mlir::isa<mlir::FloatType>(t) ? 3 : t.isInteger(1) ? 0 : t.getIntOrFloatBitWidth() == 32 ? 1 : 2; };
  // Two float types: the wider; f16 with bf16 gives f32, as in PyTorch.
  if (rank(ta) == 3 && rank(tb) == 3)
    return ta.getIntOrFloatBitWidth() != tb.getIntOrFloatBitWidth()
               ? (ta.getIntOrFloatBitWidth() > tb.getIntOrFloatBitWidth() ? ta : tb)
               : builder.getF32Type();
  return rank(ta) >= rank(tb) ? ta : tb;
}

EValue Generator::binary(const ast::BinaryExpr &expr, Scope &scope) {
  EValue lhs = evaluate(*expr.lhs, scope);
  // `and` and `or` stop at a first operand that decides, as Python's do:
  // `len(layer_types) > 0 and layer_types[i] == ...`.
  if (expr.op == ast::BinaryOp::And || expr.op == ast::BinaryOp::Or)
    if (auto *first = std::get_if<Boolean>(&lhs.value); first && first->value == (expr.op == ast::BinaryOp::Or))
      return lhs;
  EValue rhs = evaluate(*expr.rhs, scope);
  Location at = loc(expr.loc);
  ast::BinaryOp op = expr.op;
  if (std::holds_alternative<SizeValue>(lhs.value) || std::holds_alternative<SizeValue>(rhs.value)) {
    bool numeric = !std::holds_alternative<Tensor>(lhs.value) && !std::holds_alternative<Tensor>(rhs.value);
    if (numeric) return sizeArithmetic(expr, lhs, rhs);
    const auto &ranged = std::get<SizeValue>((std::holds_alternative<SizeValue>(lhs.value) ? lhs : rhs).value);
    failRanged(expr.loc, ranged, "a number in tensor arithmetic");
  }
  // Lists join as Python's do: [a] + [b, c].
  if (auto *first = std::get_if<List>(&lhs.value), *second = std::get_if<List>(&rhs.value); first && second) {
    if (op != ast::BinaryOp::Add) fail(expr.loc, std::string("lists join with +, not ") + ast::spelling(op));
    List joined = *first;
    joined.items.insert(joined.items.end(), second->items.begin(), second->items.end());
    return EValue{std::move(joined)};
  }
  if (op == ast::BinaryOp::And || op == ast::BinaryOp::Or) {
    auto *x = std::get_if<Boolean>(&lhs.value), *y = std::get_if<Boolean>(&rhs.value);
    if (!x || !y)
      fail(expr.loc, std::string("'") + ast::spelling(op) + "' takes booleans known when the model compiles, not " +
                         kindName(x ? rhs : lhs) + "; on bool tensors, * is and, and maximum is or");
    return EValue{Boolean{op == ast::BinaryOp::And ? x->value && y->value : x->value || y->value}};
  }
  auto *a = std::get_if<Number>(&lhs.value);
  auto *b = std::get_if<Number>(&rhs.value);
  if (a && b) {
    switch (op) {
      case ast::BinaryOp::Add: return EValue{Number{a->value + b->value, a->isInteger && b->isInteger}};
      case ast::BinaryOp::Sub: return EValue{Number{a->value - b->value, a->isInteger && b->isInteger}};
      case ast::BinaryOp::Mul: return EValue{Number{a->value * b->value, a->isInteger && b->isInteger}};
      case ast::BinaryOp::Div: {
        if (b->value == 0) fail(expr.loc, "division by zero");
        double quotient = a->value / b->value;
        // Integer division that divides exactly stays an integer, so shape
        // expressions like c/h work; otherwise it is a float, as in Python.
        return EValue{Number{quotient, a->isInteger && b->isInteger && quotient == std::floor(quotient)}};
      }
      case ast::BinaryOp::Pow: return EValue{Number{std::pow(a->value, b->value), a->isInteger && b->isInteger && b->value >= 0}};
      case ast::BinaryOp::FloorDiv:
      case ast::BinaryOp::Mod: {
        if (b->value == 0) fail(expr.loc, op == ast::BinaryOp::Mod ? "modulo by zero" : "division by zero");
        double result = op == ast::BinaryOp::Mod ? ops::mod(a->value, b->value) : ops::floorDiv(a->value, b->value);
        return EValue{Number{result, a->isInteger && b->isInteger}};
      }
      case ast::BinaryOp::Lt: return EValue{Boolean{a->value < b->value}};
      case ast::BinaryOp::Le: return EValue{Boolean{a->value <= b->value}};
      case ast::BinaryOp::Gt: return EValue{Boolean{a->value > b->value}};
      case ast::BinaryOp::Ge: return EValue{Boolean{a->value >= b->value}};
      case ast::BinaryOp::Eq: return EValue{Boolean{a->value == b->value}};
      case ast::BinaryOp::Ne: return EValue{Boolean{a->value != b->value}};
      default: fail(expr.loc, "'@' takes tensors, not numbers");
    }
  }
  // Strings, and booleans known when the model compiles, compare for
  // equality (configs: `if hidden_act == "silu"`); a boolean with a tensor
  // is a number in tensor arithmetic below.
  const bool anyString = std::holds_alternative<String>(lhs.value) || std::holds_alternative<String>(rhs.value);
  if (anyString || (std::holds_alternative<Boolean>(lhs.value) && std::holds_alternative<Boolean>(rhs.value))) {
    if ((op != ast::BinaryOp::Eq && op != ast::BinaryOp::Ne) || lhs.value.index() != rhs.value.index())
      fail(expr.loc, std::string("only == and != take ") + (anyString ? "a string" : "two booleans") +
                         ", and compare it with another; here they meet " + kindName(lhs) + " and " + kindName(rhs));
    const bool same = anyString ? std::get<String>(lhs.value).value == std::get<String>(rhs.value).value
                                : std::get<Boolean>(lhs.value).value == std::get<Boolean>(rhs.value).value;
    return EValue{Boolean{op == ast::BinaryOp::Eq ? same : !same}};
  }
  if (op == ast::BinaryOp::MatMul) {
    mlir::Value x = tensor(lhs, expr.lhs->loc, "the left operand of '@'");
    mlir::Value y = tensor(rhs, expr.rhs->loc, "the right operand of '@'");
    return EValue{Tensor{matmul(at, x, y, expr.lhs->loc, expr.rhs->loc)}};
  }
  auto [x, y] = promote(at, lhs, expr.lhs->loc, rhs, expr.rhs->loc);
  ir::BinaryKind kind;
  switch (op) {
    case ast::BinaryOp::Add: kind = ir::BinaryKind::add; break;
    case ast::BinaryOp::Sub: kind = ir::BinaryKind::sub; break;
    case ast::BinaryOp::Mul: kind = ir::BinaryKind::mul; break;
    case ast::BinaryOp::Div:
      kind = ir::BinaryKind::div;
      if (!isFloat(x)) {  // true division, as in Python and PyTorch
        x = cast(at, x, builder.getF32Type());
        y = cast(at, y, builder.getF32Type());
      }
      break;
    case ast::BinaryOp::Pow: kind = ir::BinaryKind::pow; break;
    case ast::BinaryOp::Lt: kind = ir::BinaryKind::lt; break;
    case ast::BinaryOp::Le: kind = ir::BinaryKind::le; break;
    case ast::BinaryOp::Gt: kind = ir::BinaryKind::gt; break;
    case ast::BinaryOp::Ge: kind = ir::BinaryKind::ge; break;
    case ast::BinaryOp::Eq: kind = ir::BinaryKind::eq; break;
    case ast::BinaryOp::Ne: kind = ir::BinaryKind::ne; break;
    case ast::BinaryOp::FloorDiv: kind = ir::BinaryKind::floordiv; break;
    case ast::BinaryOp::Mod: kind = ir::BinaryKind::mod; break;
    default: fail(expr.loc, "unsupported operator");
  }
  return EValue{Tensor{binaryOp(at, kind, x, y)}};
}

mlir::Value Generator::binaryOp(Location at, ir::BinaryKind kind, mlir::Value x, mlir::Value y) {
  auto type = inferred(ir::BinaryOp::inferResultType(kind, x.getType(), y.getType()), at);
  return builder.create<ir::BinaryOp>(at, type, ir::BinaryKindAttr::get(&context, kind), x, y);
}

mlir::Value Generator::matmul(Location at, mlir::Value x, mlir::Value y, const ast::SourceLoc &xLoc, const ast::SourceLoc &yLoc) {
  ein::Shape a = shapeOf(x), b = shapeOf(y);
  if (a.empty()) fail(xLoc, "'@' needs tensors with at least one axis");
  if (b.empty()) fail(yLoc, "'@' needs tensors with at least one axis");
  auto [xx, yy] = promote(at, EValue{Tensor{x}}, xLoc, EValue{Tensor{y}}, yLoc);
  auto type = inferred(ir::MatmulOp::inferResultType(xx.getType(), yy.getType()), at, "'@' ");
  return builder.create<ir::MatmulOp>(at, type, xx, yy);
}

mlir::Value Generator::slice(Location at, mlir::Value value, const ein::Shape &offsets, const ein::Shape &sizes,
                             llvm::ArrayRef<int64_t> dropped, llvm::ArrayRef<int64_t> steps) {
  bool unitSteps = llvm::all_of(steps, [](int64_t step) { return step == 1; });
  if (unitSteps) steps = {};
  auto type = inferred(ir::SliceOp::inferResultType(value.getType(), offsets, sizes, dropped, steps), at);
  return builder.create<ir::SliceOp>(at, type, value, ir::SizesAttr::get(&context, offsets),
                                     ir::SizesAttr::get(&context, sizes), builder.getDenseI64ArrayAttr(dropped),
                                     builder.getDenseI64ArrayAttr(steps));
}

EValue Generator::listItem(const List &list, const ast::IndexExpr &expr, Scope &scope) {
  if (expr.items.size() != 1 || expr.items[0].kind != ast::IndexItem::Kind::Index)
    fail(expr.loc, "a list takes one integer index, as layer_types[i]");
  const ast::Expr &at = *expr.items[0].index;
  EValue index = evaluate(at, scope);
  const auto *number = std::get_if<Number>(&index.value);
  if (!number) fail(at.loc, std::string("a list's index is an integer known when the model compiles, not ") + kindName(index));
  const int64_t size = static_cast<int64_t>(list.items.size());
  int64_t i = exactInteger(*number, at.loc, "a list's index");
  if (i < -size || i >= size)
    fail(at.loc, "index " + std::to_string(i) + " is outside a list of " + std::to_string(size) +
                     (size == 1 ? " item" : " items"));
  return list.items[static_cast<size_t>(i < 0 ? i + size : i)];
}

EValue Generator::index(const ast::IndexExpr &expr, Scope &scope) {
  // x.shape[0]: the message names the size of that axis.
  if (expr.base->kind == ast::Expr::Kind::Name && expr.items.size() == 1 &&
      expr.items[0].kind == ast::IndexItem::Kind::Index) {
    // The index as written: 0, or -1.
    const ast::Expr *index = expr.items[0].index.get();
    bool negative = index->kind == ast::Expr::Kind::Unary && static_cast<const ast::UnaryExpr &>(*index).op == '-';
    if (negative) index = static_cast<const ast::UnaryExpr &>(*index).operand.get();
    const auto &name = static_cast<const ast::NameExpr &>(*expr.base).name;
    if (index->kind == ast::Expr::Kind::Number && static_cast<const ast::NumberExpr &>(*index).isInteger &&
        !resolveValue(name, scope)) {
      auto axis = static_cast<int64_t>(static_cast<const ast::NumberExpr &>(*index).value);
      if (auto attribute = tensorAttributeMessage(name, scope, negative ? -axis : axis)) fail(expr.base->loc, *attribute);
    }
  }
  EValue base = evaluate(*expr.base, scope);
  if (auto *list = std::get_if<List>(&base.value)) return listItem(*list, expr, scope);
  mlir::Value value = tensor(base, expr.base->loc, "an indexed value");
  auto type = typeOf(value);
  int64_t rank = type.getRank();
  size_t ellipses = 0;
  for (const auto &item : expr.items) ellipses += item.kind == ast::IndexItem::Kind::Ellipsis;
  if (ellipses > 1) fail(expr.loc, "an index may hold one '...' at most");
  int64_t named = static_cast<int64_t>(expr.items.size() - ellipses);
  if (named > rank)
    fail(expr.loc, "too many indices: " + std::to_string(named) + " for a tensor of rank " + std::to_string(rank));
  ein::Shape offsets(rank, 0), sizes = shapeOf(value);
  llvm::SmallVector<int64_t> dropped, steps(rank, 1);
  int64_t axis = 0;
  for (const auto &item : expr.items) {
    if (item.kind == ast::IndexItem::Kind::Ellipsis) {
      axis += rank - named;
      continue;
    }
    // Python's rules, bounds over ranged dims included, except that an index
    // or bound past either end is an error (at run time where the dims decide).
    const ein::Size size = sizes[axis];
    const std::string axisText = "axis " + std::to_string(axis) + " (size " + size.str() + ")";
    Location at = loc(item.loc);
    if (item.kind == ast::IndexItem::Kind::Index) {
      int64_t i = integer(*item.index, scope, "an index");
      if (size.isConstant() && (i >= *size.constant() || i < -*size.constant()))
        fail(item.loc, "index " + std::to_string(i) + " is out of range for axis " + std::to_string(axis) +
                           " of size " + size.str());
      // i < size, or -i <= size for an index from the end.
      requireSizes({ein::SizeCheck::LessEqual, i < 0 ? -i : i + 1, size,
                    "index " + std::to_string(i) + " needs " + axisText + " to have " +
                        std::to_string(i < 0 ? -i : i + 1) + " elements or more"},
                   at);
      offsets[axis] = i < 0 ? size + i : ein::Size(i);
      sizes[axis] = 1;
      dropped.push_back(axis);
    } else {
      auto bound = [&](const ast::ExprPtr &e, const ein::Size &fallback, const char *which) {
        if (!e) return fallback;
        ein::Size v = this->size(*e, scope, "a slice bound");
        std::optional<int64_t> constant = v.constant();
        ein::Size position = constant && *constant < 0 ? size + v : v;
        const std::string text = std::string("slice ") + which + " " + v.str();
        requireSizes({ein::SizeCheck::LessEqual, 0, position, text + " lies before the start of " + axisText}, at);
        requireSizes({ein::SizeCheck::LessEqual, position, size, text + " lies past the end of " + axisText}, at);
        return position;
      };
      int64_t step = item.step ? integer(*item.step, scope, "a slice step") : 1;
      if (step < 1)
        fail(item.step->loc, "slice step " + std::to_string(step) + " is not positive (as in PyTorch, steps are >= 1)");
      ein::Size start = bound(item.start, 0, "start"), stop = bound(item.stop, size, "end");
      requireSizes({ein::SizeCheck::LessEqual, start, stop,
                    "slice of " + axisText + " from " + start.str() + " to " + stop.str() + " runs backwards"},
                   at);
      offsets[axis] = start;
      steps[axis] = step;
      sizes[axis] = ein::Size::floorDiv(stop - start + (step - 1), step);
      if (sizes[axis] == 0) fail(item.loc, "slice of axis " + std::to_string(axis) + " is empty");
    }
    ++axis;
  }
  return EValue{Tensor{slice(loc(expr.loc), value, offsets, sizes, dropped, steps)}};
}

namespace {

// An expression as written, without dump()'s outer parentheses.
std::string written(const ast::Expr &expr) {
  std::string text = ast::dump(expr);
  if (text.size() > 2 && text.front() == '(' && text.back() == ')' &&
      (expr.kind == ast::Expr::Kind::Binary || expr.kind == ast::Expr::Kind::Unary))
    return text.substr(1, text.size() - 2);
  return text;
}

std::string ordinal(size_t n) {
  static const char *const kWords[] = {"first", "second", "third", "fourth", "fifth", "sixth"};
  return n >= 1 && n <= 6 ? kWords[n - 1] : std::to_string(n) + "th";
}

}  // namespace

std::optional<std::string> Generator::tensorAttributeMessage(const ast::Name &name, Scope &scope,
                                                             std::optional<int64_t> axis) {
  if (name.segments.size() < 2 || name.segments.back().kind != ast::NameSegment::Kind::Identifier) return std::nullopt;
  ast::Name receiver = name;
  receiver.segments.pop_back();
  std::optional<EValue> value = resolveValue(receiver, scope);
  auto *tensor = value ? std::get_if<Tensor>(&value->value) : nullptr;
  if (!tensor) return std::nullopt;
  const std::string &attribute = name.segments.back().text;
  const std::string x = receiver.str();
  RankedTensorType type = typeOf(tensor->value);
  std::string spelled = name.str() + (axis ? "[" + std::to_string(*axis) + "]" : "");
  if (attribute != "shape" && attribute != "size") {
    std::string message = "'" + spelled + "': " + x + " is a tensor (" + typeString(type) +
                          "), and tensors have no attributes in the language";
    if (attribute == "T" || attribute == "mT") message += "; write transpose(" + x + ", -2, -1)";
    return message;
  }
  std::string message = "'" + spelled + "': the language has no ." + attribute +
                        "; a size is a dim, named where it is declared (dim s = 8) and written in types "
                        "(input x: f32[s, d])";
  int64_t rank = type.getRank();
  if (axis && (*axis >= rank || *axis < -rank))
    return message + "; " + x + " is " + typeString(type) + ", which has no axis " + std::to_string(*axis);
  std::optional<int64_t> position = axis ? std::optional(*axis < 0 ? *axis + rank : *axis) : std::nullopt;
  auto declared = declaredTypes.find(tensor->value);
  if (declared != declaredTypes.end()) {
    const ast::TypeExpr &typeExpr = *declared->second.first;
    std::string declaration = x + " is declared " + typeExpr.dtype + "[";
    for (size_t i = 0; i < typeExpr.dims.size(); ++i) declaration += (i ? ", " : "") + written(*typeExpr.dims[i]);
    declaration += "] at " + ir::locationText(declared->second.second, "?");
    if (!position) return message + "; " + declaration + ": write its dims";
    const ast::Expr &size = *typeExpr.dims[static_cast<size_t>(*position)];
    if (size.kind == ast::Expr::Kind::Number)
      return message + "; " + declaration + ", with the number " + written(size) +
             " for axis " + std::to_string(*position) + ": declare a dim for it (dim n = " +
             written(size) + "), use n in the type and write n";
    return message + "; " + declaration + ", so write " + written(size);
  }
  if (!position) return message + "; " + x + " is " + typeString(type);
  ein::Size size = shapeOf(tensor->value)[static_cast<size_t>(*position)];
  return message + "; axis " + std::to_string(*position) + " of " + x + " (" + typeString(type) + ") has size " +
         size.str() + (size.isConstant() ? ": write the dim that gives it" : ", so write " + size.str());
}

std::string Generator::listArgumentHint(const ast::Call &call, const std::vector<std::string> &names) {
  // The built-ins that take a list, and which of their parameters it is.
  static const std::map<std::string, size_t> kListParameters = {{"concat", 0}, {"reshape", 1}, {"pad", 1}};
  auto listed = kListParameters.find(call.callee);
  if (listed == kListParameters.end()) return "";
  const size_t first = listed->second;
  if (call.positional.size() < first + 2 || call.positional[first]->kind == ast::Expr::Kind::List) return "";
  // concat(x, y, 1): a trailing number is the axis, unless axis= is given too.
  size_t end = call.positional.size();
  bool axisByKeyword = llvm::any_of(call.keywords, [](const ast::KeywordArg &k) { return k.name == "axis"; });
  const ast::Expr &last = *call.positional.back();
  bool lastIsNumber = last.kind == ast::Expr::Kind::Number ||
                      (last.kind == ast::Expr::Kind::Unary &&
                       static_cast<const ast::UnaryExpr &>(last).operand->kind == ast::Expr::Kind::Number);
  if (call.callee == "concat" && !axisByKeyword && lastIsNumber) --end;
  std::string text = call.callee + "(";
  for (size_t i = 0; i < call.positional.size(); ++i) {
    if (i == first) text += std::string(i ? ", " : "") + "[";
    else if (i > 0) text += ", ";
    text += written(*call.positional[i]);
    if (i + 1 == end) text += "]";
  }
  for (const auto &keyword : call.keywords) text += ", " + keyword.name + "=" + written(*keyword.value);
  text += ")";
  std::string what = call.callee == "concat" ? "its tensors" : "the " + names[first];
  return "; " + call.callee + " takes " + what + " as one list: " + text;
}

Generator::Arguments Generator::bindArguments(const ast::Call &call, std::vector<std::string> names, size_t required, bool allowExtra) {
  Arguments args{call, names, std::vector<const ast::Expr *>(names.size(), nullptr), {}};
  if (call.positional.size() > names.size())
    fail(call.positional[names.size()]->loc, call.callee + "() takes at most " + std::to_string(names.size()) +
                                                 " positional argument" + (names.size() == 1 ? "" : "s") +
                                                 listArgumentHint(call, names));
  for (size_t i = 0; i < call.positional.size(); ++i) args.bound[i] = call.positional[i].get();
  for (const auto &keyword : call.keywords) {
    auto it = std::find(names.begin(), names.end(), keyword.name);
    if (it == names.end()) {
      if (!allowExtra)
        fail(keyword.loc, call.callee + "() has no argument '" + keyword.name + "'" + didYouMean(keyword.name, names));
      args.extra[keyword.name] = keyword.value.get();
      continue;
    }
    size_t i = it - names.begin();
    // The positional arguments reached this keyword's place: concat(x, y, axis=0).
    if (args.bound[i])
      fail(keyword.loc, call.callee + "() got argument '" + keyword.name + "' twice: as its " + ordinal(i + 1) +
                            " positional argument (" + written(*args.bound[i]) + ") and as " + keyword.name + "=" +
                            written(*keyword.value) + listArgumentHint(call, names));
    args.bound[i] = keyword.value.get();
  }
  for (size_t i = 0; i < required; ++i)
    if (!args.bound[i]) fail(call.loc, call.callee + "() is missing argument '" + names[i] + "'");
  return args;
}

std::string Generator::stringArgument(const ast::Expr &expr, Scope &scope, const std::string &what) {
  EValue value = evaluate(expr, scope);
  if (auto *s = std::get_if<String>(&value.value)) return s->value;
  fail(expr.loc, what + " must be a string, not " + kindName(value));
}

bool Generator::boolArgument(const ast::Expr *expr, Scope &scope, bool fallback, const std::string &what) {
  if (!expr) return fallback;
  EValue value = evaluate(*expr, scope);
  if (auto *b = std::get_if<Boolean>(&value.value)) return b->value;
  fail(expr->loc, what + " must be true or false, not " + kindName(value));
}

double Generator::numberArgument(const ast::Expr *expr, Scope &scope, double fallback, const std::string &what) {
  if (!expr) return fallback;
  EValue value = evaluate(*expr, scope);
  if (auto *n = std::get_if<Number>(&value.value)) return n->value;
  fail(expr->loc, what + " must be a number, not " + kindName(value));
}

llvm::SmallVector<int64_t> Generator::axesArgument(const ast::Expr &expr, Scope &scope, int64_t rank) {
  EValue value = evaluate(expr, scope);
  std::vector<EValue> items;
  if (auto *list = std::get_if<List>(&value.value)) items = list->items;
  else items.push_back(value);
  llvm::SmallVector<int64_t> axes;
  for (const EValue &item : items) {
    auto *n = std::get_if<Number>(&item.value);
    if (!n || !n->isInteger) fail(expr.loc, "axis must be an integer or a list of integers");
    int64_t axis = exactInteger(*n, expr.loc, "an axis");
    if (axis < -rank || axis >= rank)
      fail(expr.loc, "axis " + std::to_string(axis) + " is out of range for a tensor of rank " + std::to_string(rank));
    axis = axis < 0 ? axis + rank : axis;
    if (llvm::is_contained(axes, axis)) fail(expr.loc, "axis " + std::to_string(axis) + " is listed twice");
    axes.push_back(axis);
  }
  return axes;
}

EValue Generator::callExpr(const ast::Call &call, Scope &scope) {
  if (auto def = defs.find(call.callee); def != defs.end()) return callBlock(*def->second, call, scope);
  if (auto builtin = builtins().find(call.callee); builtin != builtins().end())
    return (this->*builtin->second)(call, scope);
  std::vector<std::string> known;
  for (const auto &entry : builtins()) known.push_back(entry.first);
  for (const auto &entry : defs) known.push_back(entry.first);
  fail(call.loc, "unknown function '" + call.callee + "'" + didYouMean(call.callee, known));
}

mlir::Value Generator::tensorArgument(const ast::Call &call, Scope &scope, const Arguments &args, const std::string &param) {
  const ast::Expr *expr = args.get(param);
  return tensor(evaluate(*expr, scope), expr->loc, call.callee + "() argument '" + param + "'");
}

std::vector<std::pair<int64_t, ast::SourceLoc>> Generator::integerList(const ast::Expr &expr, Scope &scope,
                                                                       const std::string &what) {
  std::vector<std::pair<int64_t, ast::SourceLoc>> values;
  if (expr.kind == ast::Expr::Kind::List)
    for (const ast::ExprPtr &item : static_cast<const ast::ListExpr &>(expr).items)
      values.emplace_back(integer(*item, scope, what), item->loc);
  else
    values.emplace_back(integer(expr, scope, what), expr.loc);
  return values;
}

}  // namespace ein::mlirgen::detail
