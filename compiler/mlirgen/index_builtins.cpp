// Index built-ins: arange, roll, pad and take. What they compute from
// integers known at compile time is a constant (folded into the artifact by
// ein-fold-constants where further ops of constants follow); what moves
// elements is a gather or a concat of views.
#include "compiler/mlirgen/generator.hpp"

#include <numeric>

namespace ein::mlirgen::detail {

// The most elements a constant that arange or roll builds at compile time
// may have (2^24 i64 values, 128 MiB of artifact).
constexpr int64_t kMaxConstantElements = int64_t{1} << 24;

mlir::Value Generator::integerTensor(Location at, const std::vector<int64_t> &shape,
                                     const std::vector<int64_t> &values) {
  auto type = RankedTensorType::get(shape, builder.getI64Type());
  return builder.create<ir::ConstantOp>(at, mlir::DenseElementsAttr::get(type, llvm::ArrayRef<int64_t>(values)));
}

// torch.arange over integers: start, end and step may be sizes of ranged dims
// (`arange(p, p + t)`), then the step must be 1 and the tensor is a slice of
// a constant that covers every value start and end may take.
EValue Generator::callArange(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"start", "end", "step"}, 0, false);
  const ast::Expr *startExpr = args.get("start"), *endExpr = args.get("end");
  if (!endExpr) {  // arange(end): one positional argument is the end
    if (call.positional.empty()) fail(call.loc, "arange() is missing argument 'end'");
    endExpr = startExpr;
    startExpr = nullptr;
  }
  ein::Size start = startExpr ? size(*startExpr, scope, "arange() start") : ein::Size(0);
  ein::Size end = size(*endExpr, scope, "arange() end");
  int64_t step = args.get("step") ? integer(*args.get("step"), scope, "arange() step") : 1;
  const ast::SourceLoc &stepLoc = args.get("step") ? args.get("step")->loc : call.loc;
  if (step == 0) fail(stepLoc, "arange() step must not be zero");
  auto startValue = start.constant(), endValue = end.constant();
  if (startValue && endValue && step != 1) {
    int64_t span = *endValue - *startValue;
    int64_t count = std::max<int64_t>(0, step > 0 ? (span + step - 1) / step : (span + step + 1) / step);
    if (count > kMaxConstantElements)
      fail(call.loc, "arange() has " + std::to_string(count) + " elements, more than the limit of " +
                         std::to_string(kMaxConstantElements));
    std::vector<int64_t> values(count);
    for (int64_t i = 0; i < count; ++i) values[i] = *startValue + i * step;
    return EValue{Tensor{integerTensor(at, {count}, values)}};
  }
  if (step != 1) fail(stepLoc, "arange() over ranged dims (" + start.str() + " to " + end.str() + ") takes step 1 only");
  return EValue{Tensor{rangeTensor(at, start, end, call.loc, "arange(" + start.str() + ", " + end.str() + ")")}};
}

mlir::Value Generator::rangeTensor(Location at, ein::Size start, ein::Size end, const ast::SourceLoc &where,
                                   const std::string &what) {
  auto startValue = start.constant(), endValue = end.constant();
  if (startValue && endValue) {
    int64_t count = std::max<int64_t>(0, *endValue - *startValue);
    if (count > kMaxConstantElements)
      fail(where, what + " needs " + std::to_string(count) + " index values, more than the limit of " +
                      std::to_string(kMaxConstantElements));
    std::vector<int64_t> values(count);
    std::iota(values.begin(), values.end(), *startValue);
    return integerTensor(at, {count}, values);
  }
  ein::SizeBounds low = start.bounds(ranges), high = end.bounds(ranges);
  if (high.max - low.min > kMaxConstantElements)
    fail(where, what + " may reach " + std::to_string(low.min) + " to " +
                    std::to_string(high.max) + ", more values than the limit on a tensor's elements");
  std::vector<int64_t> values(std::max<int64_t>(0, high.max - low.min));
  std::iota(values.begin(), values.end(), low.min);
  mlir::Value all = integerTensor(at, {static_cast<int64_t>(values.size())}, values);
  ein::Size count = end - start;
  requireSizes({ein::SizeCheck::LessEqual, start, end, what + " ends before it starts"},
               at);
  return slice(at, all, {start - low.min}, {count}, {}, {});
}

// torch.roll. Along axes other than the last, with static sizes, a roll is a
// gather of rows by a constant index (so a window partition after it folds
// into the same step); otherwise each rolled axis is one concat of two views.
EValue Generator::callRoll(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"x", "shifts", "axis"}, 3, false);
  mlir::Value x = tensorArgument(call, scope, args, "x");
  ein::Shape shape = shapeOf(x);
  int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) fail(args.get("x")->loc, "roll() needs a tensor with at least one axis");
  auto shifts = integerList(*args.get("shifts"), scope, "a roll() shift");
  llvm::SmallVector<int64_t> axes = axesArgument(*args.get("axis"), scope, rank);
  if (axes.size() != shifts.size())
    fail(args.get("axis")->loc, "roll() has " + std::to_string(shifts.size()) + " shifts for " +
                                    std::to_string(axes.size()) + " axes");
  // Each axis' shift in [0, n): an element moves from i to (i + shift) mod n.
  std::map<int64_t, int64_t> rolled;
  for (size_t i = 0; i < axes.size(); ++i) {
    std::optional<int64_t> n = shape[axes[i]].constant();
    if (!n) fail(args.get("axis")->loc, "roll() along axis " + std::to_string(axes[i]) + " of size " +
                                            shape[axes[i]].str() + ", which depends on ranged dims, is not supported");
    if (*n == 0) continue;
    int64_t shift = ((shifts[i].first % *n) + *n) % *n;
    rolled[axes[i]] = (rolled[axes[i]] + shift) % *n;
  }
  for (auto it = rolled.begin(); it != rolled.end();) it = it->second == 0 ? rolled.erase(it) : std::next(it);
  if (rolled.empty()) return EValue{Tensor{x}};

  std::optional<int64_t> rows = ein::product(ein::Shape(shape.begin(), shape.end() - 1)).constant();
  if (rank >= 2 && rows && !rolled.count(rank - 1)) {
    std::vector<int64_t> dims;
    for (int64_t axis = 0; axis + 1 < rank; ++axis) dims.push_back(*shape[axis].constant());
    std::vector<int64_t> index(*rows);
    std::vector<int64_t> position(dims.size(), 0);
    for (int64_t row = 0; row < *rows; ++row) {
      // The source row of `position`: each rolled axis reads (i - shift) mod n.
      int64_t source = 0;
      for (size_t axis = 0; axis < dims.size(); ++axis) {
        int64_t i = position[axis];
        if (auto found = rolled.find(static_cast<int64_t>(axis)); found != rolled.end())
          i = (i - found->second + dims[axis]) % dims[axis];
        source = source * dims[axis] + i;
      }
      index[row] = source;
      for (size_t axis = dims.size(); axis-- > 0;) {
        if (++position[axis] < dims[axis]) break;
        position[axis] = 0;
      }
    }
    mlir::Value ids = integerTensor(at, dims, index);
    return EValue{Tensor{embeddingOp(at, ids, rearrange(at, x, "... c -> (...) c", {}, call.loc))}};
  }
  for (auto [axis, shift] : rolled) {
    ein::Shape zeros(shape.size(), 0), head = shape, tail = shape, tailOffsets = zeros;
    int64_t n = *shape[axis].constant();
    tailOffsets[axis] = n - shift;
    tail[axis] = shift;
    head[axis] = n - shift;
    mlir::Value last = slice(at, x, tailOffsets, tail, {}, {}), first = slice(at, x, zeros, head, {}, {});
    x = concatOp(at, {last, first}, axis);
  }
  return EValue{Tensor{x}};
}

// torch.nn.functional.pad with a constant: `pad` lists (before, after) pairs
// from the last axis backwards, as torch does.
EValue Generator::callPad(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"x", "pad", "value"}, 2, false);
  mlir::Value x = tensorArgument(call, scope, args, "x");
  auto pads = integerList(*args.get("pad"), scope, "a pad() size");
  double value = numberArgument(args.get("value"), scope, 0.0, "pad() value");
  int64_t rank = typeOf(x).getRank();
  if (pads.size() % 2 != 0 || static_cast<int64_t>(pads.size()) > 2 * rank)
    fail(args.get("pad")->loc, "pad() takes (before, after) pairs for at most the " + std::to_string(rank) +
                                   " axes of x, from the last one backwards; got " + std::to_string(pads.size()) +
                                   " sizes");
  for (const auto &[size, where] : pads)
    if (size < 0) fail(where, "pad() sizes must not be negative (cropping is a slice)");
  std::vector<std::pair<int64_t, int64_t>> byAxis(static_cast<size_t>(rank), {0, 0});
  for (size_t pair = 0; pair < pads.size() / 2; ++pair)
    byAxis[static_cast<size_t>(rank) - 1 - pair] = {pads[2 * pair].first, pads[2 * pair + 1].first};
  return EValue{Tensor{padded(at, x, byAxis, value, call.loc)}};
}

mlir::Value Generator::padded(Location at, mlir::Value x, const std::vector<std::pair<int64_t, int64_t>> &pads,
                              double value, const ast::SourceLoc &where) {
  const auto rank = static_cast<int64_t>(pads.size());
  for (int64_t axis = 0; axis < rank; ++axis) {
    const auto [before, after] = pads[static_cast<size_t>(axis)];
    if (before == 0 && after == 0) continue;
    const ein::Shape shape = shapeOf(x);
    // A block of `amount` values along the axis: a constant of that many,
    // repeated along every other axis (a view: the artifact holds `amount`
    // values, whatever the other sizes, ranged or not).
    auto filled = [&](int64_t amount) -> mlir::Value {
      std::string allAxes;
      std::map<std::string, ein::Size> repeats;
      for (int64_t d = 0; d < rank; ++d) {
        const std::string name = d == axis ? "p" : "a" + std::to_string(d);
        allAxes += " " + name;
        if (d != axis) repeats[name] = shape[d];
      }
      auto scalar = scalarConstant(at, value, elementType(x)).getDefiningOp<ir::ConstantOp>();
      auto splat = mlir::cast<mlir::DenseElementsAttr>(scalar.getValue()).getSplatValue<mlir::Attribute>();
      scalar.erase();
      mlir::Value block = builder.create<ir::ConstantOp>(
          at, mlir::DenseElementsAttr::get(RankedTensorType::get({amount}, elementType(x)), splat));
      return rank == 1 ? block : rearrange(at, block, "p ->" + allAxes, repeats, where);
    };
    llvm::SmallVector<mlir::Value> parts;
    if (before > 0) parts.push_back(filled(before));
    parts.push_back(x);
    if (after > 0) parts.push_back(filled(after));
    x = concatOp(at, parts, axis);
  }
  return x;
}

// numpy.take / torch.index_select generalised to id tensors: the elements of
// x at integer ids along `axis`; the ids' axes replace that axis.
EValue Generator::callTake(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"x", "ids", "axis"}, 2, false);
  mlir::Value x = tensorArgument(call, scope, args, "x"), ids = tensorArgument(call, scope, args, "ids");
  if (!elementType(ids).isSignlessInteger(32) && !elementType(ids).isSignlessInteger(64))
    fail(args.get("ids")->loc, "take() ids must be i32 or i64, not " + typeString(elementType(ids)));
  int64_t rank = typeOf(x).getRank();
  if (rank == 0) fail(args.get("x")->loc, "take() needs a tensor with at least one axis");
  int64_t axis = args.get("axis") ? axesArgument(*args.get("axis"), scope, rank)[0] : 0;
  ein::Shape shape = shapeOf(x);
  std::map<std::string, ein::Size> sizes;
  std::string before, rest, idNames;
  for (int64_t d = 0; d < rank; ++d) {
    std::string name = "x" + std::to_string(d);
    before += (before.empty() ? "" : " ") + name;
    if (d == axis) continue;
    rest += " " + name;
    std::optional<int64_t> constant = shape[d].constant();
    if (!constant) fail(args.get("x")->loc, "take() from a tensor sized by ranged dims " + ein::formatShape(shape) +
                                                " is not supported outside the taken axis");
    sizes[name] = *constant;
  }
  // [n, rest] rows of the taken axis (a view when the axis is the first).
  std::string axisName = "x" + std::to_string(axis);
  mlir::Value table = rearrange(at, x, before + " -> " + axisName + " (" + rest + ")", {}, call.loc);
  mlir::Value gathered = embeddingOp(at, ids, table);
  // [ids.., rest] back into x's order, the ids' axes where `axis` was.
  std::string after;
  for (int64_t i = 0; i < typeOf(ids).getRank(); ++i) idNames += " i" + std::to_string(i);
  for (int64_t d = 0; d < rank; ++d) after += d == axis ? idNames : " x" + std::to_string(d);
  return EValue{Tensor{rearrange(at, gathered, idNames + " (" + rest + ") -> " + after, sizes, call.loc)}};
}

}  // namespace ein::mlirgen::detail
