// The built-in function table and the element-wise, reduction, norm and
// selection built-ins.
#include "compiler/mlirgen/generator.hpp"

#include "ir/op_table.hpp"

namespace ein::mlirgen::detail {

// Every unary kind is the built-in of its name, but those written as operators
// (-x, not x).
const std::map<std::string, ir::UnaryKind> &Generator::unaryKinds() {
  static const std::map<std::string, ir::UnaryKind> kinds = [] {
    std::map<std::string, ir::UnaryKind> entries;
    for (uint32_t value = 0; value <= ir::getMaxEnumValForUnaryKind(); ++value) {
      auto kind = static_cast<ir::UnaryKind>(value);
      if (kind != ir::UnaryKind::neg && kind != ir::UnaryKind::logical_not)
        entries[ir::stringifyUnaryKind(kind).str()] = kind;
    }
    return entries;
  }();
  return kinds;
}

const std::map<std::string, Generator::Builtin> &Generator::builtins() {
  static const std::map<std::string, Builtin> table = [] {
    std::map<std::string, Builtin> entries;
    for (const auto &entry : unaryKinds()) entries[entry.first] = &Generator::callUnary;
    for (const char *name : {"maximum", "minimum"}) entries[name] = &Generator::callMaximumOrMinimum;
    entries["einsum"] = &Generator::callEinsum;
    for (const char *name : {"rearrange", "reduce", "repeat"}) entries[name] = &Generator::callEinops;
    entries["softmax"] = &Generator::callSoftmax;
    for (const char *name : {"sum", "mean", "max", "min", "var", "std", "any", "all"})
      entries[name] = &Generator::callReduction;
    for (const char *name : {"argmax", "argmin"}) entries[name] = &Generator::callArgExtreme;
    entries["layernorm"] = &Generator::callLayerNorm;
    entries["rmsnorm"] = &Generator::callLayerNorm;
    entries["linear"] = &Generator::callLinear;
    entries["embedding"] = &Generator::callEmbedding;
    entries["masked_fill"] = &Generator::callMaskedFill;
    entries["where"] = &Generator::callWhere;
    entries["concat"] = &Generator::callConcat;
    entries["transpose"] = &Generator::callTranspose;
    entries["reshape"] = &Generator::callReshape;
    for (const char *name : {"conv1d", "conv2d"}) entries[name] = &Generator::callConv;
    entries["scaled_dot_product_attention"] = &Generator::callScaledDotProductAttention;
    entries["append"] = &Generator::callAppend;
    entries["keep"] = &Generator::callKeep;
    entries["arange"] = &Generator::callArange;
    entries["roll"] = &Generator::callRoll;
    entries["pad"] = &Generator::callPad;
    entries["take"] = &Generator::callTake;
    for (const char *name : {"f32", "i32", "i64", "bool"}) entries[name] = &Generator::callCast;
    entries["len"] = &Generator::callLen;
    return entries;
  }();
  return table;
}

// f32(x), i32(x), i64(x) and bool(x), as torch's .float(), .int(), .long() and
// .bool(): a float becomes an integer rounded towards zero, and anything
// becomes bool as x != 0.
EValue Generator::callCast(const ast::Call &call, Scope &scope) {
  Arguments args = bindArguments(call, {"x"}, 1, false);
  EValue x = evaluate(*args.get("x"), scope);
  const std::string &to = call.callee;
  if (auto *boolean = std::get_if<Boolean>(&x.value)) x = EValue{Number{boolean->value ? 1.0 : 0.0, true}};
  if (auto *n = std::get_if<Number>(&x.value)) {
    if (to == "bool") return EValue{Boolean{n->value != 0}};
    if (to == "f32") return EValue{Number{n->value, false}};
    const int64_t integer = exactInteger(Number{std::trunc(n->value), true}, args.get("x")->loc, to + "() of a number");
    return EValue{Number{static_cast<double>(integer), true}};
  }
  mlir::Value t = tensor(x, args.get("x")->loc, to + "() argument");
  mlir::Type element = to == "f32"   ? mlir::Type(builder.getF32Type())
                       : to == "i32" ? mlir::Type(builder.getI32Type())
                       : to == "i64" ? mlir::Type(builder.getI64Type())
                                     : mlir::Type(builder.getI1Type());
  return EValue{Tensor{cast(loc(call.loc), t, element)}};
}

// len(list): how many items a list (a list config) holds, as Python's len.
EValue Generator::callLen(const ast::Call &call, Scope &scope) {
  Arguments args = bindArguments(call, {"x"}, 1, false);
  EValue x = evaluate(*args.get("x"), scope);
  auto *list = std::get_if<List>(&x.value);
  if (!list) fail(args.get("x")->loc, std::string("len() takes a list, such as a list config, not ") + kindName(x));
  return EValue{Number{static_cast<double>(list->items.size()), true}};
}

EValue Generator::callUnary(const ast::Call &call, Scope &scope) {
  const ir::UnaryKind kind = unaryKinds().at(call.callee);
  Arguments args = bindArguments(call, {"x"}, 1, false);
  EValue x = evaluate(*args.get("x"), scope);
  if (auto *n = std::get_if<Number>(&x.value))
    return EValue{Number{ir::applyScalar(kind, n->value), n->isInteger && keepsIntegers(kind)}};
  // As in torch, abs() of an integer tensor is an integer tensor, and rounding one leaves it as it is.
  if (auto *t = std::get_if<Tensor>(&x.value); t && isInteger(t->value) && keepsIntegers(kind))
    return kind == ir::UnaryKind::abs ? EValue{Tensor{unaryOp(loc(call.loc), kind, t->value)}} : x;
  return EValue{Tensor{unaryOp(loc(call.loc), kind, floatTensor(x, args.get("x")->loc, call.callee + "() argument"))}};
}

bool Generator::keepsIntegers(ir::UnaryKind kind) {
  using K = ir::UnaryKind;
  return kind == K::abs || kind == K::floor || kind == K::ceil || kind == K::trunc || kind == K::round;
}

EValue Generator::callMaximumOrMinimum(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  const std::string &name = call.callee;
  Arguments args = bindArguments(call, {"a", "b"}, 2, false);
  auto [x, y] = promote(at, evaluate(*args.get("a"), scope), args.get("a")->loc, evaluate(*args.get("b"), scope),
                        args.get("b")->loc);
  return EValue{Tensor{binaryOp(at, name == "maximum" ? ir::BinaryKind::maximum : ir::BinaryKind::minimum, x, y)}};
}

EValue Generator::callSoftmax(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"x", "axis"}, 1, false);
  mlir::Value x = floatTensor(evaluate(*args.get("x"), scope), args.get("x")->loc, "softmax() argument 'x'");
  int64_t rank = typeOf(x).getRank();
  if (rank == 0) fail(args.get("x")->loc, "softmax() needs a tensor with at least one axis");
  int64_t axis = args.get("axis") ? axesArgument(*args.get("axis"), scope, rank)[0] : rank - 1;
  return EValue{Tensor{builder.create<ir::SoftmaxOp>(at, x.getType(), x, builder.getI64IntegerAttr(axis))}};
}

mlir::Value Generator::truthAsFloat(Location at, mlir::Value x) {
  if (!elementType(x).isInteger(1))
    x = binaryOp(at, ir::BinaryKind::ne, x, scalarConstant(at, 0.0, elementType(x)));
  return cast(at, x, builder.getF32Type());
}

mlir::Value Generator::truthOf(Location at, mlir::Value reduced) {
  return binaryOp(at, ir::BinaryKind::gt, reduced, scalarConstant(at, 0.5, builder.getF32Type()));
}

Generator::ReductionInput Generator::reductionInput(Location at, mlir::Value x, ir::ReduceKind kind, bool logical) {
  bool extremum = kind == ir::ReduceKind::max || kind == ir::ReduceKind::min;
  if (logical || (extremum && elementType(x).isInteger(1))) return {truthAsFloat(at, x), true, Type()};
  if (isFloat(x)) return {x, false, Type()};
  Type integerResult;
  if (extremum) integerResult = elementType(x);
  else if (kind == ir::ReduceKind::sum || kind == ir::ReduceKind::prod) integerResult = builder.getI64Type();
  return {cast(at, x, builder.getF32Type()), false, integerResult};
}

mlir::Value Generator::reductionResult(Location at, mlir::Value reduced, const ReductionInput &input) {
  if (input.logical) return truthOf(at, reduced);
  if (input.integerResult) return cast(at, reduced, input.integerResult);
  return reduced;
}

EValue Generator::callReduction(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  const std::string &name = call.callee;
  bool moment = name == "var" || name == "std";
  bool logical = name == "any" || name == "all";
  Arguments args = moment ? bindArguments(call, {"x", "axis", "unbiased", "keepdim"}, 1, false)
                          : bindArguments(call, {"x", "axis", "keepdim"}, 1, false);
  static const std::map<std::string, ir::ReduceKind> kinds = {
      {"sum", ir::ReduceKind::sum}, {"mean", ir::ReduceKind::mean}, {"max", ir::ReduceKind::max},
      {"min", ir::ReduceKind::min}, {"var", ir::ReduceKind::var},   {"std", ir::ReduceKind::std},
      {"any", ir::ReduceKind::max}, {"all", ir::ReduceKind::min}};
  ReductionInput input = reductionInput(
      at, tensor(evaluate(*args.get("x"), scope), args.get("x")->loc, name + "() argument 'x'"), kinds.at(name),
      logical);
  mlir::Value x = input.x;
  int64_t rank = typeOf(x).getRank();
  llvm::SmallVector<int64_t> axes;
  if (args.get("axis")) axes = axesArgument(*args.get("axis"), scope, rank);
  else if (rank > 0) axes.push_back(rank - 1);
  bool keepdim = boolArgument(args.get("keepdim"), scope, false, "keepdim");
  bool unbiased = moment && boolArgument(args.get("unbiased"), scope, false, "unbiased");
  std::sort(axes.begin(), axes.end());
  mlir::Value reduced = reduceOp(at, x, kinds.at(name), axes, keepdim, unbiased ? 1 : 0);
  return EValue{Tensor{reductionResult(at, reduced, input)}};
}

mlir::Value Generator::reduceOp(Location at, mlir::Value x, ir::ReduceKind kind, llvm::ArrayRef<int64_t> axes,
                                bool keepdim, int64_t correction) {
  auto type = inferred(ir::ReduceOp::inferResultType(x.getType(), axes, keepdim, correction), at);
  return builder.create<ir::ReduceOp>(at, type, x, ir::ReduceKindAttr::get(&context, kind),
                                      builder.getDenseI64ArrayAttr(axes), builder.getBoolAttr(keepdim),
                                      builder.getI64IntegerAttr(correction));
}

// torch.argmax / argmin along one axis: the first index of the largest
// (smallest) value, where a NaN counts as larger (smaller) than any number,
// as i64. Built from what the kernels have: the least index i along the axis
// where x == max (or x is NaN), other places reading n.
EValue Generator::callArgExtreme(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  const bool isMax = call.callee == "argmax";
  Arguments args = bindArguments(call, {"x", "axis", "keepdim"}, 1, false);
  mlir::Value x = floatTensor(evaluate(*args.get("x"), scope), args.get("x")->loc, call.callee + "() argument 'x'");
  const int64_t rank = typeOf(x).getRank();
  if (rank == 0) fail(args.get("x")->loc, call.callee + "() needs a tensor with at least one axis");
  const int64_t axis = args.get("axis") ? axesArgument(*args.get("axis"), scope, rank)[0] : rank - 1;
  const bool keepdim = boolArgument(args.get("keepdim"), scope, false, "keepdim");
  const ein::Size n = shapeOf(x)[axis];
  mlir::Value extreme = reduceOp(at, x, isMax ? ir::ReduceKind::max : ir::ReduceKind::min, {axis}, /*keepdim=*/true);
  mlir::Value hit = binaryOp(at, ir::BinaryKind::eq, x, extreme);
  mlir::Value isNan = binaryOp(at, ir::BinaryKind::ne, x, x);
  // The index along the axis, with unit axes after it so that it broadcasts there.
  std::string unitAxes;
  for (int64_t d = axis + 1; d < rank; ++d) unitAxes += " 1";
  const std::string what = call.callee + "() over axis " + std::to_string(axis) + " (size " + n.str() + ")";
  mlir::Value index = rearrange(at, rangeTensor(at, ein::Size(0), n, call.loc, what), "n -> n" + unitAxes, {}, call.loc);
  mlir::Value past = rangeTensor(at, n, n + ein::Size(1), call.loc, what);
  auto select = [&](mlir::Value condition, mlir::Value onTrue, mlir::Value onFalse) {
    auto type = inferred(ir::WhereOp::inferResultType(condition.getType(), onTrue.getType(), onFalse.getType()), at,
                         call.callee + "(): ");
    return builder.create<ir::WhereOp>(at, type, condition, onTrue, onFalse).getResult();
  };
  mlir::Value candidates = select(isNan, index, select(hit, index, past));
  // The least candidate: min reduces in f32, exact for indices up to 2^24.
  mlir::Value first = reduceOp(at, cast(at, candidates, builder.getF32Type()), ir::ReduceKind::min, {axis}, keepdim);
  return EValue{Tensor{cast(at, first, builder.getI64Type())}};
}

// layernorm(x, weight, bias, eps=1e-5) and rmsnorm(x, weight, eps=1e-6), over
// the last axis.
EValue Generator::callLayerNorm(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  const std::string &name = call.callee;
  const bool rms = name == "rmsnorm";
  Arguments args = rms ? bindArguments(call, {"x", "weight", "eps"}, 1, false)
                       : bindArguments(call, {"x", "weight", "bias", "eps"}, 1, false);
  mlir::Value x = floatTensor(evaluate(*args.get("x"), scope), args.get("x")->loc, name + "() argument 'x'");
  if (typeOf(x).getRank() == 0) fail(args.get("x")->loc, name + "() needs a tensor with at least one axis");
  int64_t features = typeOf(x).getShape().back();
  auto affine = [&](const std::string &param) -> mlir::Value {
    if (!args.get(param)) return nullptr;
    mlir::Value v = tensorArgument(call, scope, args, param);
    if (shapeOf(v) != ein::Shape{features})
      fail(args.get(param)->loc, name + "() " + param + " has shape " + shapeString(typeOf(v)) +
                                     " but the input's last axis is " + std::to_string(features));
    return cast(at, v, elementType(x));
  };
  mlir::Value weight = affine("weight"), bias = rms ? mlir::Value() : affine("bias");
  double eps = numberArgument(args.get("eps"), scope, rms ? 1e-6 : 1e-5,
                              rms ? "rmsnorm() eps (RMSNorm has no bias)" : "layernorm() eps");
  auto type = inferred(ir::LayerNormOp::inferResultType(x.getType(), /*residual=*/Type(),
                                                        weight ? weight.getType() : Type(),
                                                        bias ? bias.getType() : Type()),
                       at);
  return EValue{Tensor{builder.create<ir::LayerNormOp>(
      at, type, x, /*residual=*/mlir::Value(), weight, bias, builder.getF64FloatAttr(eps),
      ir::LayerNormVariantAttr::get(&context, rms ? ir::LayerNormVariant::rms : ir::LayerNormVariant::variance))}};
}

EValue Generator::callEmbedding(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"ids", "table"}, 2, false);
  mlir::Value ids = tensorArgument(call, scope, args, "ids"), table = tensorArgument(call, scope, args, "table");
  if (!elementType(ids).isSignlessInteger(32) && !elementType(ids).isSignlessInteger(64))
    fail(args.get("ids")->loc, "embedding() ids must be i32 or i64, not " + typeString(elementType(ids)));
  if (typeOf(table).getRank() != 2)
    fail(args.get("table")->loc, "embedding() table must be [rows, width], got " + shapeString(typeOf(table)));
  return EValue{Tensor{embeddingOp(at, ids, table)}};
}

mlir::Value Generator::embeddingOp(Location at, mlir::Value ids, mlir::Value table) {
  auto type = inferred(ir::EmbeddingOp::inferResultType(ids.getType(), table.getType()), at);
  return builder.create<ir::EmbeddingOp>(at, type, ids, table);
}

mlir::Value Generator::concatOp(Location at, llvm::ArrayRef<mlir::Value> parts, int64_t axis) {
  auto type = inferred(ir::ConcatOp::inferResultType(mlir::ValueRange(parts).getTypes(), axis), at);
  return builder.create<ir::ConcatOp>(at, type, parts, builder.getI64IntegerAttr(axis));
}

EValue Generator::callMaskedFill(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"x", "mask", "value"}, 3, false);
  mlir::Value x = tensorArgument(call, scope, args, "x"), mask = tensorArgument(call, scope, args, "mask");
  if (!elementType(mask).isInteger(1))
    fail(args.get("mask")->loc, "masked_fill() mask must be bool, not " + typeString(elementType(mask)));
  auto shape = ein::broadcastShapes(shapeOf(mask), shapeOf(x));
  if (ein::failed(shape) || std::get<ein::Shape>(shape) != shapeOf(x))
    fail(args.get("mask")->loc, "masked_fill() mask of shape " + shapeString(typeOf(mask)) +
                                    " does not broadcast to x of shape " + shapeString(typeOf(x)));
  double fill = numberArgument(args.get("value"), scope, 0, "masked_fill() value");
  mlir::Value constant = scalarConstant(at, fill, elementType(x));
  auto type = inferred(ir::WhereOp::inferResultType(mask.getType(), constant.getType(), x.getType()), at);
  return EValue{Tensor{builder.create<ir::WhereOp>(at, type, mask, constant, x)}};
}

EValue Generator::callWhere(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"condition", "a", "b"}, 3, false);
  mlir::Value condition = tensorArgument(call, scope, args, "condition");
  // An integer condition is true where it is not 0.
  if (elementType(condition).isSignlessInteger(32) || elementType(condition).isSignlessInteger(64))
    condition = binaryOp(at, ir::BinaryKind::ne, condition, scalarConstant(at, 0.0, elementType(condition)));
  if (!elementType(condition).isInteger(1))
    fail(args.get("condition")->loc,
         "where() condition must be bool (or an integer, true where not 0), not " + typeString(elementType(condition)));
  EValue a = evaluate(*args.get("a"), scope), b = evaluate(*args.get("b"), scope);
  const auto *numberA = std::get_if<Number>(&a.value), *numberB = std::get_if<Number>(&b.value);
  mlir::Value onTrue, onFalse;
  if (numberA && numberB) {
    // Two numbers, as torch.where(m, 1.0, 0.0): f32, or i64 when both are
    // integers; the result has the condition's shape.
    Type element = numberA->isInteger && numberB->isInteger ? Type(builder.getI64Type()) : builder.getF32Type();
    onTrue = scalarConstant(at, numberA->value, element);
    onFalse = scalarConstant(at, numberB->value, element);
  } else {
    std::tie(onTrue, onFalse) = promote(at, a, args.get("a")->loc, b, args.get("b")->loc);
  }
  auto type = inferred(ir::WhereOp::inferResultType(condition.getType(), onTrue.getType(), onFalse.getType()), at,
                       "where(): ");
  return EValue{Tensor{builder.create<ir::WhereOp>(at, type, condition, onTrue, onFalse)}};
}

EValue Generator::callConcat(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"tensors", "axis"}, 1, false);
  EValue list = evaluate(*args.get("tensors"), scope);
  auto *items = std::get_if<List>(&list.value);
  if (!items || items->items.empty())
    fail(args.get("tensors")->loc, std::string("concat() takes a non-empty list of tensors") +
                                       (items ? "" : std::string(", not ") + kindName(list)) +
                                       listArgumentHint(call, {"tensors", "axis"}));
  llvm::SmallVector<mlir::Value> tensors;
  for (const EValue &item : items->items) tensors.push_back(tensor(item, args.get("tensors")->loc, "concat() item"));
  // Mixed element types promote, as in torch.cat.
  Type element = elementType(tensors[0]);
  for (mlir::Value item : tensors) element = commonType(element, elementType(item));
  for (mlir::Value &item : tensors) item = cast(at, item, element);
  int64_t rank = typeOf(tensors[0]).getRank();
  int64_t axis = args.get("axis") ? axesArgument(*args.get("axis"), scope, rank)[0] : 0;
  ein::Shape shape = shapeOf(tensors[0]);
  for (size_t i = 1; i < tensors.size(); ++i) {
    ein::Shape other = shapeOf(tensors[i]);
    bool fits = other.size() == shape.size();
    for (int64_t d = 0; fits && d < rank; ++d) fits = d == axis || other[d] == shape[d];
    if (!fits)
      fail(args.get("tensors")->loc, "concat() item " + std::to_string(i + 1) + " has shape " +
                                         ein::formatShape(other) + ", which does not match " +
                                         ein::formatShape(shapeOf(tensors[0])) + " outside axis " +
                                         std::to_string(axis));
  }
  return EValue{Tensor{concatOp(at, tensors, axis)}};
}

}  // namespace ein::mlirgen::detail
