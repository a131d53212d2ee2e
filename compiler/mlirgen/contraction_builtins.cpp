// The built-ins that contract or move axes: einsum, einops (rearrange,
// reduce, repeat), transpose, reshape, conv2d and linear.
#include "compiler/mlirgen/generator.hpp"

#include <array>

namespace ein::mlirgen::detail {

EValue Generator::callEinsum(const ast::Call &call, Scope &scope) { return EValue{Tensor{einsum(call, scope)}}; }

EValue Generator::callEinops(const ast::Call &call, Scope &scope) { return EValue{Tensor{einops(call, scope)}}; }

EValue Generator::callLinear(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"x", "weight", "bias"}, 2, false);
  mlir::Value x = tensorArgument(call, scope, args, "x"), w = tensorArgument(call, scope, args, "weight");
  ein::Shape xs = shapeOf(x), ws = shapeOf(w);
  if (ws.size() != 2) fail(args.get("weight")->loc, "linear() weight must be [out, in], got " + ein::formatShape(ws));
  if (xs.empty() || xs.back() != ws[1])
    fail(at, "linear() weight " + ein::formatShape(ws) + " takes " + ws[1].str() + " input features but x " +
                 ein::formatShape(xs) + " has " + (xs.empty() ? std::string("none") : xs.back().str()));
  mlir::Value b;
  if (args.get("bias")) {
    b = tensorArgument(call, scope, args, "bias");
    if (shapeOf(b) != ein::Shape{ws[0]})
      fail(args.get("bias")->loc, "linear() bias has shape " + shapeString(typeOf(b)) + " but should be [" +
                                      ws[0].str() + "]");
  }
  auto type = inferred(ir::LinearOp::inferResultType(x.getType(), w.getType(), b ? b.getType() : Type()), at);
  return EValue{Tensor{builder.create<ir::LinearOp>(at, type, x, w, b)}};
}

EValue Generator::callTranspose(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"x", "dim0", "dim1"}, 3, false);
  mlir::Value x = tensorArgument(call, scope, args, "x");
  int64_t rank = typeOf(x).getRank();
  int64_t i = axesArgument(*args.get("dim0"), scope, rank)[0];
  int64_t j = axesArgument(*args.get("dim1"), scope, rank)[0];
  std::vector<std::string> labels;
  for (int64_t d = 0; d < rank; ++d) labels.push_back(std::string("d").append(std::to_string(d)));
  ein::EinsumEquation equation{{labels}, labels};
  std::swap(equation.output[i], equation.output[j]);
  return EValue{Tensor{einsumOp(at, equation.str(), x)}};
}

mlir::Value Generator::einsumOp(Location at, const std::string &equation, mlir::ValueRange operands) {
  auto type = inferred(ir::EinsumOp::inferResultType(equation, operands.getTypes()), at);
  return builder.create<ir::EinsumOp>(at, type, builder.getStringAttr(equation), operands);
}

mlir::DictionaryAttr Generator::sizeDictionary(const std::map<std::string, ein::Size> &sizes) {
  llvm::SmallVector<mlir::NamedAttribute> entries;
  for (const auto &[axis, value] : sizes)
    entries.push_back(builder.getNamedAttr(axis, value.isConstant()
                                                     ? mlir::Attribute(builder.getI64IntegerAttr(*value.constant()))
                                                     : mlir::Attribute(ir::SizesAttr::get(&context, {value}))));
  return builder.getDictionaryAttr(entries);
}

mlir::Value Generator::rearrange(Location at, mlir::Value x, const std::string &pattern,
                                 const std::map<std::string, ein::Size> &sizes, const ast::SourceLoc &where) {
  mlir::DictionaryAttr sizeDict = sizeDictionary(sizes);
  auto type = inferred(ir::RearrangeOp::inferResultType(x.getType(), pattern, sizeDict, /*reduction=*/false), loc(where));
  return builder.create<ir::RearrangeOp>(at, type, x, builder.getStringAttr(pattern), sizeDict, nullptr);
}

EValue Generator::callReshape(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"x", "shape"}, 2, false);
  mlir::Value x = tensorArgument(call, scope, args, "x");
  const ast::Expr &shapeExpr = *args.get("shape");
  if (shapeExpr.kind != ast::Expr::Kind::List) fail(shapeExpr.loc, "reshape() shape must be a list, e.g. [b, -1, d]");
  ein::Shape from = shapeOf(x);
  std::vector<int64_t> to;
  std::optional<int64_t> constantTotal = ein::product(from).constant();  // bounded when its type was made
  if (!constantTotal) fail(call.loc, "reshape() of a tensor sized by ranged dims " + ein::formatShape(from) +
                                         " is not supported; use rearrange(), whose groups name the dims");
  const int64_t total = *constantTotal;
  std::optional<size_t> inferred;
  std::vector<int64_t> given;  // the sizes other than -1
  for (const auto &[size, where] : integerList(shapeExpr, scope, "a reshape() size")) {
    if (size == -1) {
      if (inferred) fail(where, "only one reshape() size may be -1");
      inferred = to.size();
    } else if (size < 0) {
      fail(where, "reshape() size " + std::to_string(size) + " is negative (only -1 may be)");
    } else {
      given.push_back(size);
    }
    to.push_back(size);
  }
  std::optional<int64_t> counted = limits::checkedElementCount(given);
  if (!counted) fail(shapeExpr.loc, "reshape() sizes " + ein::formatShape(ein::Shape(to.begin(), to.end())) +
                                        " are beyond the tensor limits");
  const int64_t known = *counted;
  if (inferred) {
    if (known == 0 || total % known != 0)
      fail(shapeExpr.loc, "reshape() cannot infer the -1 in " + ein::formatShape(ein::Shape(to.begin(), to.end())) +
                              ": " + std::to_string(total) +
                              " elements do not divide into " + std::to_string(known));
    to[*inferred] = total / known;
  } else if (known != total) {
    fail(shapeExpr.loc, "reshape() cannot make " + ein::formatShape(from) + " (" + std::to_string(total) +
                            " elements) into " + ein::formatShape(ein::Shape(to.begin(), to.end())) + " (" +
                            std::to_string(known) + ")");
  }
  if (ein::Shape(to.begin(), to.end()) == from) return EValue{Tensor{x}};
  std::string inAxes, outAxes;
  std::map<std::string, ein::Size> sizes;
  for (size_t i = 0; i < from.size(); ++i) inAxes += " i" + std::to_string(i);
  for (size_t i = 0; i < to.size(); ++i) {
    outAxes += " o" + std::to_string(i);
    sizes["o" + std::to_string(i)] = to[i];
  }
  mlir::Value flat = from.size() == 1 ? x : rearrange(at, x, inAxes + " -> (" + inAxes + ")", {}, call.loc);
  if (to.size() == 1) return EValue{Tensor{flat}};
  return EValue{Tensor{rearrange(at, flat, "(" + outAxes + ") ->" + outAxes, sizes, call.loc)}};
}

EValue Generator::callConv(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  const std::string &name = call.callee;
  const size_t n = name == "conv1d" ? 1 : 2;  // spatial axes
  Arguments args = bindArguments(call, {"x", "weight", "bias", "stride", "padding", "dilation", "groups"}, 2, false);
  mlir::Value x = floatTensor(evaluate(*args.get("x"), scope), args.get("x")->loc, name + "() input");
  mlir::Value weight = floatTensor(evaluate(*args.get("weight"), scope), args.get("weight")->loc, name + "() weight");
  const ein::Shape in = shapeOf(x), kernel = shapeOf(weight);
  const std::string layout = n == 1 ? "[batch, channels, length]" : "[batch, channels, height, width]";
  if (in.size() != n + 2) fail(args.get("x")->loc, name + "() input must be " + layout + ", not " + ein::formatShape(in));
  const int64_t groups = args.get("groups") ? integer(*args.get("groups"), scope, name + "() groups") : 1;
  const ast::SourceLoc &groupsLoc = args.get("groups") ? args.get("groups")->loc : call.loc;
  if (groups < 1) fail(groupsLoc, name + "() groups must be positive");
  std::optional<int64_t> channels = in[1].constant();
  if (!channels) fail(args.get("x")->loc, name + "() over a ranged channel count " + in[1].str() + " is not supported");
  if (*channels % groups != 0)
    fail(groupsLoc, name + "() input channels " + std::to_string(*channels) + " are not divisible by groups " +
                        std::to_string(groups));
  const int64_t groupChannels = *channels / groups;
  bool kernelFixed = kernel.size() == n + 2;
  for (const ein::Size &size : kernel) kernelFixed = kernelFixed && size.isConstant();
  if (!kernelFixed || *kernel[1].constant() != groupChannels || *kernel[0].constant() % groups != 0)
    fail(args.get("weight")->loc,
         name + "() weight must be [out, " + std::to_string(groupChannels) + (n == 1 ? ", k]" : ", kh, kw]") +
             (groups > 1 ? " with out divisible by groups " + std::to_string(groups) : std::string()) + ", not " +
             ein::formatShape(kernel));
  if (elementType(weight) != elementType(x)) weight = cast(at, weight, elementType(x));
  std::vector<int64_t> window;
  for (size_t d = 0; d < n; ++d) window.push_back(*kernel[2 + d].constant());

  // One integer, or one per spatial axis, each at least `minimum` (0 or 1).
  auto perAxis = [&](const std::string &what, int64_t fallback, int64_t minimum) {
    std::vector<int64_t> values(n, fallback);
    if (const ast::Expr *expr = args.get(what)) {
      auto list = integerList(*expr, scope, name + "() " + what);
      if (list.size() != 1 && list.size() != n)
        fail(expr->loc, name + "() " + what + " is one integer" + (n == 1 ? "" : " or two"));
      for (size_t d = 0; d < n; ++d) values[d] = list[list.size() == 1 ? 0 : d].first;
      for (int64_t value : values)
        if (value < minimum) fail(expr->loc, name + "() " + what + " must be " + (minimum == 0 ? "non-negative" : "positive"));
    }
    return values;
  };
  const std::vector<int64_t> stride = perAxis("stride", 1, 1), dilation = perAxis("dilation", 1, 1);
  std::vector<std::pair<int64_t, int64_t>> pads(n + 2, {0, 0});
  const ast::Expr *paddingExpr = args.get("padding");
  const EValue paddingValue = paddingExpr ? evaluate(*paddingExpr, scope) : EValue{Number{0, true}};
  if (const auto *text = std::get_if<String>(&paddingValue.value)) {
    const std::string &mode = text->value;
    if (mode == "same") {
      // As torch: the output as long as the input, the odd element of the
      // padding after; only with stride 1.
      if (llvm::any_of(stride, [](int64_t s) { return s != 1; }))
        fail(paddingExpr->loc, name + "() padding=\"same\" needs stride 1, as in torch");
      for (size_t d = 0; d < n; ++d) {
        const int64_t total = dilation[d] * (window[d] - 1);
        pads[2 + d] = {total / 2, total - total / 2};
      }
    } else if (mode != "valid") {
      fail(paddingExpr->loc, name + "() padding is a number, a list, \"same\" or \"valid\", not \"" + mode + "\"");
    }
  } else {
    const std::vector<int64_t> padding = perAxis("padding", 0, 0);
    for (size_t d = 0; d < n; ++d) pads[2 + d] = {padding[d], padding[d]};
  }
  x = padded(at, x, pads, 0.0, call.loc);
  const ein::Shape paddedShape = shapeOf(x);
  for (size_t d = 0; d < n; ++d) {
    const ein::Size &size = paddedShape[2 + d];
    const int64_t span = ir::WindowsOp::span(window[d], dilation[d]);
    const std::string what = name + "() input's axis " + std::to_string(2 + d) + ", padded to " + size.str() +
                             ", is shorter than the kernel's span " + std::to_string(span);
    requireSizes({ein::SizeCheck::LessEqual, ein::Size(span), size, what}, loc(args.get("x")->loc));
  }
  auto windowsType = inferred(ir::WindowsOp::inferResultType(x.getType(), window, stride, dilation), at);
  mlir::Value windows = builder.create<ir::WindowsOp>(at, windowsType, x, builder.getDenseI64ArrayAttr(window),
                                                      builder.getDenseI64ArrayAttr(stride),
                                                      builder.getDenseI64ArrayAttr(dilation));
  // windows [b, c, o.., k..] and weight [out, c / groups, k..]: per group,
  // a contraction over the group's channels and the window.
  std::string outAxes, kernelAxes;
  for (size_t d = 0; d < n; ++d) {
    outAxes += " o" + std::to_string(d);
    kernelAxes += " k" + std::to_string(d);
  }
  const std::map<std::string, ein::Size> groupSizes = {{"g", ein::Size(groups)}};
  mlir::Value y;
  if (groups == 1) {
    y = einsumOp(at, "b c" + outAxes + kernelAxes + ", f c" + kernelAxes + " -> b f" + outAxes, {windows, weight});
  } else {
    windows = rearrange(at, windows, "b (g c)" + outAxes + kernelAxes + " -> b g c" + outAxes + kernelAxes, groupSizes,
                        call.loc);
    weight = rearrange(at, weight, "(g f) c" + kernelAxes + " -> g f c" + kernelAxes, groupSizes, call.loc);
    y = einsumOp(at, "b g c" + outAxes + kernelAxes + ", g f c" + kernelAxes + " -> b g f" + outAxes,
                 {windows, weight});
    y = rearrange(at, y, "b g f" + outAxes + " -> b (g f)" + outAxes, {}, call.loc);
  }
  if (const ast::Expr *biasExpr = args.get("bias")) {
    mlir::Value bias = floatTensor(evaluate(*biasExpr, scope), biasExpr->loc, name + "() bias");
    if (shapeOf(bias) != ein::Shape{kernel[0]})
      fail(biasExpr->loc, name + "() bias must be [" + kernel[0].str() + "], not " + ein::formatShape(shapeOf(bias)));
    bias = rearrange(at, cast(at, bias, elementType(x)), n == 1 ? "f -> f 1" : "f -> f 1 1", {}, biasExpr->loc);
    y = binaryOp(at, ir::BinaryKind::add, y, bias);
  }
  return EValue{Tensor{y}};
}

mlir::Value Generator::einsum(const ast::Call &call, Scope &scope) {
  if (!call.keywords.empty()) fail(call.keywords.front().loc, "einsum() takes no keyword arguments");
  if (call.positional.size() < 2) fail(call.loc, "einsum() needs an equation and at least one operand");
  const ast::Expr &equationExpr = *call.positional[0];
  std::string text = stringArgument(equationExpr, scope, "einsum() equation");
  llvm::SmallVector<mlir::Value> operands;
  std::vector<int64_t> ranks;
  std::vector<ein::Shape> shapes;
  for (size_t i = 1; i < call.positional.size(); ++i) {
    mlir::Value operand = tensor(evaluate(*call.positional[i], scope), call.positional[i]->loc,
                                 "einsum() operand " + std::to_string(i));
    operands.push_back(operand);
    ranks.push_back(typeOf(operand).getRank());
    shapes.push_back(shapeOf(operand));
  }
  for (size_t i = 1; i < operands.size(); ++i)
    if (elementType(operands[i]) != elementType(operands[0]))
      fail(call.positional[i + 1]->loc, "einsum() operand " + std::to_string(i + 1) + " is " +
                                            typeString(elementType(operands[i])) + " but operand 1 is " +
                                            typeString(elementType(operands[0])));
  auto parsed = ein::EinsumEquation::parse(text, ranks);
  if (ein::failed(parsed)) fail(equationExpr.loc, std::get<ein::EquationError>(parsed).message);
  // Size-1 axes that broadcast become index 0 of that axis, their label left
  // out of that operand's term.
  std::vector<std::vector<size_t>> broadcast = std::get<ein::EinsumEquation>(parsed).broadcastAxes(shapes);
  const ein::EinsumEquation equation = std::get<ein::EinsumEquation>(parsed).withoutAxes(broadcast);
  for (size_t i = 0; i < operands.size(); ++i) {
    if (broadcast[i].empty()) continue;
    ein::Shape offsets(ranks[i], 0), sizes = shapes[i];
    llvm::SmallVector<int64_t> dropped;
    for (size_t axis : broadcast[i]) dropped.push_back(static_cast<int64_t>(axis));
    operands[i] = slice(loc(call.positional[i + 1]->loc), operands[i], offsets, sizes, dropped);
    shapes[i] = shapeOf(operands[i]);
  }
  return einsumOp(loc(call.loc), equation.str(), operands);
}

mlir::Value Generator::einops(const ast::Call &call, Scope &scope) {
  bool isReduce = call.callee == "reduce";
  Arguments args = isReduce ? bindArguments(call, {"x", "pattern", "reduction"}, 3, true)
                            : bindArguments(call, {"x", "pattern"}, 2, true);
  mlir::Value x = tensor(evaluate(*args.get("x"), scope), args.get("x")->loc, call.callee + "() argument 'x'");
  std::string pattern = stringArgument(*args.get("pattern"), scope, call.callee + "() pattern");
  std::map<std::string, ein::Size> sizes;
  for (const auto &[axis, expr] : args.extra) sizes[axis] = size(*expr, scope, "size of axis '" + axis + "'");
  ein::EinopsKind kind = isReduce ? ein::EinopsKind::Reduce
                         : call.callee == "repeat" ? ein::EinopsKind::Repeat
                                                   : ein::EinopsKind::Rearrange;
  auto plan = ein::planEinops(kind, pattern, shapeOf(x), sizes);
  if (ein::failed(plan)) fail(args.get("pattern")->loc, std::get<ein::EquationError>(plan).message);
  for (const ein::SizeCheck &check : std::get<ein::EinopsPlan>(plan).checks)
    requireSizes({check.kind, check.lhs, check.rhs, call.callee + "(\"" + pattern + "\"): " + check.message},
                 loc(args.get("pattern")->loc));
  std::optional<ir::ReduceKind> reduction;
  ReductionInput input;
  if (isReduce) {
    std::string name = stringArgument(*args.get("reduction"), scope, "reduce() reduction");
    bool logical = name == "any" || name == "all";
    auto parsed = logical ? std::optional(name == "any" ? ir::ReduceKind::max : ir::ReduceKind::min)
                          : ir::symbolizeReduceKind(name);
    if (!parsed || *parsed == ir::ReduceKind::var || *parsed == ir::ReduceKind::std)
      fail(args.get("reduction")->loc,
           "unknown reduction '" + name + "' (expected sum, mean, max, min, prod, any or all)");
    reduction = *parsed;
    input = reductionInput(loc(call.loc), x, *reduction, logical);
    x = input.x;
  }
  // The plan above checks the pattern as the function called (rearrange,
  // reduce or repeat) reads it; the op's rule gives the type.
  mlir::DictionaryAttr sizeDict = sizeDictionary(sizes);
  auto type = inferred(ir::RearrangeOp::inferResultType(x.getType(), pattern, sizeDict, reduction.has_value()),
                       loc(args.get("pattern")->loc));
  ir::ReduceKindAttr reductionAttr = reduction ? ir::ReduceKindAttr::get(&context, *reduction) : nullptr;
  mlir::Value result = builder.create<ir::RearrangeOp>(loc(call.loc), type, x, builder.getStringAttr(pattern),
                                                       sizeDict, reductionAttr);
  return reductionResult(loc(call.loc), result, input);
}

}  // namespace ein::mlirgen::detail
