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
  auto type = inferred(ir::EinsumOp::inferResultType(equation.str(), x.getType()), at);
  return EValue{Tensor{
      builder.create<ir::EinsumOp>(at, type, builder.getStringAttr(equation.str()), mlir::ValueRange{x})}};
}

mlir::Value Generator::rearrange(Location at, mlir::Value x, const std::string &pattern,
                                 const std::map<std::string, int64_t> &sizes, const ast::SourceLoc &where) {
  llvm::SmallVector<mlir::NamedAttribute> sizeAttrs;
  for (const auto &[axis, value] : sizes) sizeAttrs.push_back(builder.getNamedAttr(axis, builder.getI64IntegerAttr(value)));
  mlir::DictionaryAttr sizeDict = builder.getDictionaryAttr(sizeAttrs);
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
  std::map<std::string, int64_t> sizes;
  for (size_t i = 0; i < from.size(); ++i) inAxes += " i" + std::to_string(i);
  for (size_t i = 0; i < to.size(); ++i) {
    outAxes += " o" + std::to_string(i);
    sizes["o" + std::to_string(i)] = to[i];
  }
  mlir::Value flat = from.size() == 1 ? x : rearrange(at, x, inAxes + " -> (" + inAxes + ")", {}, call.loc);
  if (to.size() == 1) return EValue{Tensor{flat}};
  return EValue{Tensor{rearrange(at, flat, "(" + outAxes + ") ->" + outAxes, sizes, call.loc)}};
}

EValue Generator::callConv2d(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"x", "weight", "bias", "stride", "padding"}, 2, false);
  mlir::Value x = floatTensor(evaluate(*args.get("x"), scope), args.get("x")->loc, "conv2d() input");
  mlir::Value weight = floatTensor(evaluate(*args.get("weight"), scope), args.get("weight")->loc, "conv2d() weight");
  ein::Shape in = shapeOf(x), kernel = shapeOf(weight);
  if (in.size() != 4) fail(args.get("x")->loc, "conv2d() input must be [batch, channels, height, width], not " +
                                                   ein::formatShape(in));
  if (kernel.size() != 4 || kernel[1] != in[1])
    fail(args.get("weight")->loc, "conv2d() weight must be [out, " + in[1].str() + ", kh, kw], not " +
                                      ein::formatShape(kernel));
  for (int axis : {2, 3})
    if (!in[axis].isConstant() || !kernel[axis].isConstant())
      fail(call.loc, "conv2d() over the ranged size " + (in[axis].isConstant() ? kernel[axis] : in[axis]).str() +
                         " is not supported; use rearrange() to cut the patches");
  if (elementType(weight) != elementType(x)) weight = cast(at, weight, elementType(x));
  auto pair = [&](const char *name, int64_t fallback) {
    std::array<int64_t, 2> values = {fallback, fallback};
    if (const ast::Expr *expr = args.get(name)) {
      auto list = integerList(*expr, scope, std::string("conv2d() ") + name);
      if (list.size() != 1 && list.size() != 2)
        fail(expr->loc, std::string("conv2d() ") + name + " is one integer or two");
      values = {list[0].first, list.back().first};
    }
    return values;
  };
  std::array<int64_t, 2> stride = pair("stride", 1), padding = pair("padding", 0);
  const ast::SourceLoc &strideLoc = args.get("stride") ? args.get("stride")->loc : call.loc;
  if (padding[0] != 0 || padding[1] != 0)
    fail(args.get("padding")->loc, "conv2d() padding is not supported; pad the input before the call");
  std::array<int64_t, 2> out{};
  for (int d = 0; d < 2; ++d) {
    int64_t size = *in[2 + d].constant(), window = *kernel[2 + d].constant();
    if (stride[d] < 1) fail(strideLoc, "conv2d() stride must be positive");
    if (stride[d] < window)
      fail(strideLoc, "conv2d() with stride " + std::to_string(stride[d]) + " below the kernel size " +
                          std::to_string(window) + " (overlapping windows) is not supported: stride >= kernel "
                          "size, as in a patch embedding");
    if (size < window)
      fail(args.get("x")->loc, "conv2d() input is " + std::to_string(size) + " wide, smaller than the kernel's " +
                                   std::to_string(window));
    out[d] = (size - window) / stride[d] + 1;
    // The windows are read as whole stride blocks (below), so the last one's block must fit.
    if (out[d] > size / stride[d])
      fail(strideLoc, "conv2d() over " + std::to_string(size) + " with kernel " + std::to_string(window) +
                          " and stride " + std::to_string(stride[d]) + ": the last window's stride block runs past "
                          "the input; crop it to " + std::to_string((out[d] - 1) * stride[d]) + " first (one window fewer)");
  }
  // Rows and columns past the last window are never read; then each window
  // is a (stride x stride) block, of which the kernel reads the first (kh x kw).
  if (in[2] != out[0] * stride[0] || in[3] != out[1] * stride[1])
    x = slice(at, x, ein::Shape(4, 0), {in[0], in[1], out[0] * stride[0], out[1] * stride[1]}, {});
  mlir::Value windows = rearrange(at, x, "b c (h s1) (w s2) -> b h w c s1 s2", {{"s1", stride[0]}, {"s2", stride[1]}},
                                  call.loc);
  if (stride[0] != kernel[2] || stride[1] != kernel[3])
    windows = slice(at, windows, ein::Shape(6, 0), {in[0], out[0], out[1], in[1], kernel[2], kernel[3]}, {});
  const char *contraction = "b h w c p q, o c p q -> b o h w";
  auto type = inferred(ir::EinsumOp::inferResultType(contraction, mlir::ValueRange{windows, weight}.getTypes()), at);
  mlir::Value y = builder.create<ir::EinsumOp>(at, type, builder.getStringAttr(contraction),
                                               mlir::ValueRange{windows, weight});
  if (const ast::Expr *biasExpr = args.get("bias")) {
    mlir::Value bias = floatTensor(evaluate(*biasExpr, scope), biasExpr->loc, "conv2d() bias");
    if (shapeOf(bias) != ein::Shape{kernel[0]})
      fail(biasExpr->loc, "conv2d() bias must be [" + kernel[0].str() + "], not " +
                              ein::formatShape(shapeOf(bias)));
    bias = rearrange(at, cast(at, bias, elementType(x)), "o -> o 1 1", {}, biasExpr->loc);
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
  auto type = inferred(ir::EinsumOp::inferResultType(equation.str(), mlir::ValueRange(operands).getTypes()),
                       loc(call.loc));
  return builder.create<ir::EinsumOp>(loc(call.loc), type, builder.getStringAttr(equation.str()), operands);
}

mlir::Value Generator::einops(const ast::Call &call, Scope &scope) {
  bool isReduce = call.callee == "reduce";
  Arguments args = isReduce ? bindArguments(call, {"x", "pattern", "reduction"}, 3, true)
                            : bindArguments(call, {"x", "pattern"}, 2, true);
  mlir::Value x = tensor(evaluate(*args.get("x"), scope), args.get("x")->loc, call.callee + "() argument 'x'");
  std::string pattern = stringArgument(*args.get("pattern"), scope, call.callee + "() pattern");
  std::map<std::string, ein::Size> sizes;
  llvm::SmallVector<mlir::NamedAttribute> sizeAttrs;
  for (const auto &[axis, expr] : args.extra) {
    sizes[axis] = size(*expr, scope, "size of axis '" + axis + "'");
    mlir::Attribute attr = sizes[axis].isConstant()
                               ? mlir::Attribute(builder.getI64IntegerAttr(*sizes[axis].constant()))
                               : mlir::Attribute(ir::SizesAttr::get(&context, {sizes[axis]}));
    sizeAttrs.push_back(builder.getNamedAttr(axis, attr));
  }
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
  mlir::DictionaryAttr sizeDict = builder.getDictionaryAttr(sizeAttrs);
  auto type = inferred(ir::RearrangeOp::inferResultType(x.getType(), pattern, sizeDict, reduction.has_value()),
                       loc(args.get("pattern")->loc));
  ir::ReduceKindAttr reductionAttr = reduction ? ir::ReduceKindAttr::get(&context, *reduction) : nullptr;
  mlir::Value result = builder.create<ir::RearrangeOp>(loc(call.loc), type, x, builder.getStringAttr(pattern),
                                                       sizeDict, reductionAttr);
  return reductionResult(loc(call.loc), result, input);
}

}  // namespace ein::mlirgen::detail
