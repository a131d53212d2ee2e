// Lowers the ein dialect to kern ops: one op per runtime kernel call.
//
// Every ein value is tracked as a Layout, a strided view of a buffer. Slices,
// rearranges that only permute/split/merge axes, and broadcasts produce new
// layouts without any op; kernels read their operands through the views. A
// copy is inserted only where a view cannot be expressed (the axes of a
// composed group do not merge) or a kernel needs a dense operand.
#include <map>
#include <set>

#include "ein/IR/Equations.h"
#include "passes/Passes.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"

namespace ein {
#define GEN_PASS_DEF_CONVERTEINTOKERN
#include "passes/Passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::ir::BinaryKind;
using ein::ir::UnaryKind;
using ein::kern::denseStrides;

namespace {

// Element (i0, i1, ...) of the value is element `offset + sum(ik * strides[k])`
// of `buffer`'s flat row-major storage.
struct Layout {
  Value buffer;
  int64_t offset = 0;
  SmallVector<int64_t> sizes;
  SmallVector<int64_t> strides;
};

int64_t product(ArrayRef<int64_t> sizes) {
  int64_t result = 1;
  for (int64_t size : sizes) result *= size;
  return result;
}

Layout denseLayout(Value buffer) {
  auto type = cast<RankedTensorType>(buffer.getType());
  return Layout{buffer, 0, SmallVector<int64_t>(type.getShape()), denseStrides(type.getShape())};
}

bool isDense(const Layout &layout) {
  auto type = cast<RankedTensorType>(layout.buffer.getType());
  if (layout.offset != 0 || product(layout.sizes) != type.getNumElements()) return false;
  SmallVector<int64_t> dense = denseStrides(layout.sizes);
  for (size_t i = 0; i < layout.sizes.size(); ++i)
    if (layout.sizes[i] != 1 && layout.strides[i] != dense[i]) return false;
  return true;
}

// Merges axes (outer to inner) into one (size, stride) when they are laid out
// like one axis; unit axes are ignored.
std::optional<std::pair<int64_t, int64_t>> mergeAxes(ArrayRef<int64_t> sizes, ArrayRef<int64_t> strides) {
  int64_t size = 1, stride = 0;
  bool any = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    if (any && stride != strides[i] * sizes[i]) return std::nullopt;
    size *= sizes[i];
    stride = strides[i];
    any = true;
  }
  return std::make_pair(size, stride);
}

ein::kern::ViewAttr viewOf(MLIRContext *context, int64_t offset, ArrayRef<int64_t> strides) {
  return ein::kern::ViewAttr::get(context, offset, strides);
}

class Lowering {
 public:
  explicit Lowering(func::FuncOp function) : function(function), builder(function.getContext()) {}

  LogicalResult run() {
    for (BlockArgument argument : function.getArguments()) layouts[argument] = denseLayout(argument);
    SmallVector<Operation *> einOps;
    for (Operation &op : function.getBody().front()) {
      builder.setInsertionPoint(&op);
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        if (failed(lowerReturn(ret))) return failure();
        continue;
      }
      if (!isa<ein::ir::EinDialect>(op.getDialect())) continue;
      einOps.push_back(&op);
      if (failed(lower(&op))) return failure();
    }
    // Users come after their definitions: erase in reverse. Params and
    // non-scalar constants are storage and stay while kernels read them.
    for (Operation *op : llvm::reverse(einOps))
      if (!isa<ein::ir::ParamOp, ein::ir::ConstantOp>(op) || op->use_empty()) op->erase();
    return success();
  }

 private:
  MLIRContext *context() { return function.getContext(); }

  LogicalResult lower(Operation *op) {
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case<ein::ir::ParamOp>([&](auto param) {
          layouts[param] = denseLayout(param);
          return success();
        })
        .Case<ein::ir::ConstantOp>([&](ein::ir::ConstantOp constant) {
          layouts[constant] = denseLayout(constant);
          auto value = dyn_cast<DenseElementsAttr>(constant.getValue());
          if (value && value.isSplat() && constant.getType().getNumElements() == 1) {
            Type element = value.getElementType();
            if (isa<FloatType>(element))
              scalars[constant] = value.getSplatValue<APFloat>().convertToDouble();
            else if (element.isInteger(1))
              scalars[constant] = value.getSplatValue<bool>() ? 1.0 : 0.0;
            else if (isa<IntegerType>(element))
              scalars[constant] = static_cast<double>(value.getSplatValue<APInt>().getSExtValue());
          }
          return success();
        })
        .Case<ein::ir::SliceOp>([&](auto slice) { return lowerSlice(slice); })
        .Case<ein::ir::RearrangeOp>([&](auto rearrange) { return lowerRearrange(rearrange); })
        .Case<ein::ir::UnaryOp>([&](auto unary) { return lowerUnary(unary); })
        .Case<ein::ir::BinaryOp>([&](auto binary) { return lowerBinary(binary); })
        .Case<ein::ir::WhereOp>([&](auto where) { return lowerWhere(where); })
        .Case<ein::ir::CastOp>([&](auto cast) { return lowerCast(cast); })
        .Case<ein::ir::SoftmaxOp>([&](auto softmax) { return lowerSoftmax(softmax); })
        .Case<ein::ir::ReduceOp>([&](auto reduce) { return lowerReduce(reduce); })
        .Case<ein::ir::EinsumOp>([&](auto einsum) { return lowerEinsum(einsum); })
        .Case<ein::ir::MatmulOp>([&](auto matmul) { return lowerMatmul(matmul); })
        .Case<ein::ir::LinearOp>([&](auto linear) { return lowerLinear(linear); })
        .Case<ein::ir::LayerNormOp>([&](auto norm) { return lowerLayerNorm(norm); })
        .Case<ein::ir::AttentionOp>([&](auto attention) { return lowerAttention(attention); })
        .Case<ein::ir::TalkingHeadsAttentionOp>([&](auto attention) { return lowerTalkingHeadsAttention(attention); })
        .Case<ein::ir::EmbeddingOp>([&](auto embedding) { return lowerEmbedding(embedding); })
        .Case<ein::ir::ConcatOp>([&](auto concat) { return lowerConcat(concat); })
        .Default([&](Operation *other) {
          return other->emitOpError() << "has no kernel lowering yet";
        });
  }

  // ---- views -------------------------------------------------------------

  LogicalResult lowerSlice(ein::ir::SliceOp slice) {
    const Layout &input = layouts.at(slice.getInput());
    Layout result{input.buffer, input.offset, {}, {}};
    for (size_t i = 0; i < input.sizes.size(); ++i) {
      result.offset += slice.getOffsets()[i] * input.strides[i];
      if (llvm::is_contained(slice.getDropped(), static_cast<int64_t>(i))) continue;
      result.sizes.push_back(slice.getSizes()[i]);
      result.strides.push_back(input.strides[i]);
    }
    layouts[slice] = result;
    return success();
  }

  LogicalResult lowerRearrange(ein::ir::RearrangeOp rearrange) {
    const Layout &input = layouts.at(rearrange.getInput());
    ein::EinopsKind kind = ein::EinopsKind::Rearrange;
    if (rearrange.getReduction()) kind = ein::EinopsKind::Reduce;
    auto planned = ein::planEinops(kind, rearrange.getPattern(), ein::Shape(input.sizes.begin(), input.sizes.end()),
                                   rearrange.getSizeMap());
    if (ein::failed(planned) && kind == ein::EinopsKind::Rearrange)
      planned = ein::planEinops(ein::EinopsKind::Repeat, rearrange.getPattern(),
                                ein::Shape(input.sizes.begin(), input.sizes.end()), rearrange.getSizeMap());
    if (ein::failed(planned)) return rearrange.emitOpError() << std::get<ein::EquationError>(planned).message;
    const ein::EinopsPlan &plan = std::get<ein::EinopsPlan>(planned);

    // Strides of the elementary input axes: a composed dimension splits like a
    // row-major block.
    SmallVector<int64_t> axisStrides(plan.inputAxes.size());
    for (int i = static_cast<int>(plan.inputAxes.size()) - 1; i >= 0; --i) {
      bool lastOfDim = i + 1 == static_cast<int>(plan.inputAxes.size()) ||
                       plan.inputAxisDim[i + 1] != plan.inputAxisDim[i];
      axisStrides[i] = lastOfDim ? input.strides[plan.inputAxisDim[i]] : axisStrides[i + 1] * plan.inputAxisSizes[i + 1];
    }
    SmallVector<int64_t> outSizes, outStrides;
    for (size_t i = 0; i < plan.outputAxes.size(); ++i) {
      outSizes.push_back(plan.outputAxisSizes[i]);
      outStrides.push_back(plan.outputSource[i] < 0 ? 0 : axisStrides[plan.outputSource[i]]);
    }
    auto resultType = rearrange.getType();

    if (!plan.reducedAxes.empty()) {
      // einops.reduce: kept axes in output order, then the reduced ones.
      SmallVector<int64_t> shape = outSizes, strides = outStrides;
      for (int axis : plan.reducedAxes) {
        shape.push_back(plan.inputAxisSizes[axis]);
        strides.push_back(axisStrides[axis]);
      }
      auto kind = toKernReduce(*rearrange.getReduction());
      if (!kind) return rearrange.emitOpError() << "reduction '" << stringifyReduceKind(*rearrange.getReduction())
                                                << "' has no kernel yet";
      Value result = buildReduce(rearrange.getLoc(), resultType, input, shape, strides,
                                 static_cast<int64_t>(plan.reducedAxes.size()), *kind);
      layouts[rearrange] = denseLayout(result);
      return success();
    }

    Layout result{input.buffer, input.offset, {}, {}};
    for (const auto &group : plan.outputGroups) {
      SmallVector<int64_t> sizes, strides;
      for (int member : group) {
        sizes.push_back(outSizes[member]);
        strides.push_back(outStrides[member]);
      }
      auto merged = mergeAxes(sizes, strides);
      if (!merged) {
        // Not expressible as a view: materialise the elementary axes densely,
        // which is exactly the row-major layout of the composed result.
        Value copy = buildCopy(rearrange.getLoc(), resultType, Layout{input.buffer, input.offset, outSizes, outStrides});
        layouts[rearrange] = denseLayout(copy);
        return success();
      }
      result.sizes.push_back(merged->first);
      result.strides.push_back(merged->second);
    }
    layouts[rearrange] = result;
    return success();
  }

  // ---- kernels -------------------------------------------------------------

  Value buildCopy(Location loc, RankedTensorType resultType, const Layout &source) {
    return builder.create<ein::kern::CopyOp>(loc, resultType, source.buffer, builder.getDenseI64ArrayAttr(source.sizes),
                                             viewOf(context(), source.offset, source.strides));
  }

  // A dense buffer holding `layout`'s elements in row-major order.
  Layout materialize(Location loc, const Layout &layout) {
    if (isDense(layout)) return layout;
    auto element = cast<RankedTensorType>(layout.buffer.getType()).getElementType();
    return denseLayout(buildCopy(loc, RankedTensorType::get(layout.sizes, element), layout));
  }

  static std::optional<ein::kern::ReduceKind> toKernReduce(ein::ir::ReduceKind kind) {
    switch (kind) {
      case ein::ir::ReduceKind::sum: return ein::kern::ReduceKind::sum;
      case ein::ir::ReduceKind::mean: return ein::kern::ReduceKind::mean;
      case ein::ir::ReduceKind::max: return ein::kern::ReduceKind::max;
      case ein::ir::ReduceKind::min: return ein::kern::ReduceKind::min;
      case ein::ir::ReduceKind::prod: return ein::kern::ReduceKind::prod;
      default: return std::nullopt;
    }
  }

  // Reduces the trailing `reducedRank` axes of `shape`, reading `source`'s
  // buffer with `strides` (over `shape`).
  Value buildReduce(Location loc, RankedTensorType resultType, const Layout &source, ArrayRef<int64_t> shape,
                    ArrayRef<int64_t> strides, int64_t reducedRank, ein::kern::ReduceKind kind) {
    return builder.create<ein::kern::ReduceOp>(
        loc, resultType, source.buffer, builder.getDenseI64ArrayAttr(shape), builder.getI64IntegerAttr(reducedRank),
        ein::kern::ReduceKindAttr::get(context(), kind), viewOf(context(), source.offset, strides));
  }

  // `layout` read over `shape` with NumPy broadcasting (aligned on the right).
  static SmallVector<int64_t> broadcastStrides(const Layout &layout, ArrayRef<int64_t> shape) {
    SmallVector<int64_t> strides(shape.size(), 0);
    size_t shift = shape.size() - layout.sizes.size();
    for (size_t i = 0; i < layout.sizes.size(); ++i)
      if (layout.sizes[i] != 1) strides[shift + i] = layout.strides[i];
    return strides;
  }

  using ScalarBody = llvm::function_ref<Value(OpBuilder &, Location, ArrayRef<Value>)>;

  // One kern.elementwise computing `body` of `operands` at every element of
  // `resultType`. Scalar constants become immediates in the body.
  FailureOr<Value> buildElementwise(Location loc, RankedTensorType resultType, ArrayRef<Value> operands,
                                    ArrayRef<Layout> operandLayouts, ScalarBody body) {
    Type element = resultType.getElementType();
    // Half floats only appear here as the stored result of a cast
    // (ein-widen-half-floats computes everything else in f32).
    if (!element.isF32() && !element.isF16() && !element.isBF16() && !element.isSignlessInteger())
      return emitError(loc) << "element-wise arithmetic on " << element << " has no kernel yet (f32, integers, bool)";
    SmallVector<Value> inputs;
    SmallVector<Attribute> views;
    for (auto [operand, layout] : llvm::zip(operands, operandLayouts)) {
      if (operand && scalars.count(operand)) continue;
      inputs.push_back(layout.buffer);
      views.push_back(viewOf(context(), layout.offset, broadcastStrides(layout, resultType.getShape())));
    }
    auto op = builder.create<ein::kern::ElementwiseOp>(loc, resultType, inputs, builder.getArrayAttr(views));
    OpBuilder::InsertionGuard guard(builder);
    Block *block = builder.createBlock(&op.getBody());
    SmallVector<Value> values;
    for (auto [operand, layout] : llvm::zip(operands, operandLayouts)) {
      if (operand && scalars.count(operand)) {
        values.push_back(constantF32(loc, scalars.at(operand)));
        continue;
      }
      values.push_back(block->addArgument(builder.getF32Type(), loc));
    }
    Value result = body(builder, loc, values);
    if (result.getType().isInteger(1)) result = builder.create<arith::UIToFPOp>(loc, builder.getF32Type(), result);
    builder.create<ein::kern::YieldOp>(loc, result);
    return op.getResult();
  }

  FailureOr<Value> buildElementwise(Location loc, RankedTensorType resultType, ArrayRef<Value> operands,
                                    ScalarBody body) {
    SmallVector<Layout> operandLayouts;
    for (Value operand : operands) operandLayouts.push_back(layouts.at(operand));
    return buildElementwise(loc, resultType, operands, operandLayouts, body);
  }

  Value constantF32(Location loc, double value) {
    return builder.create<arith::ConstantOp>(loc, builder.getF32FloatAttr(static_cast<float>(value)));
  }

  LogicalResult assignElementwise(Operation *op, FailureOr<Value> result) {
    if (failed(result)) return failure();
    layouts[op->getResult(0)] = denseLayout(*result);
    return success();
  }

  static Value isNonZero(OpBuilder &b, Location loc, Value x) {
    Value zero = b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(0.0f));
    return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNE, x, zero);
  }

  static Value unaryScalar(OpBuilder &b, Location loc, UnaryKind kind, Value x) {
    switch (kind) {
      case UnaryKind::neg: return b.create<arith::NegFOp>(loc, x);
      case UnaryKind::exp: return b.create<math::ExpOp>(loc, x);
      case UnaryKind::log: return b.create<math::LogOp>(loc, x);
      case UnaryKind::sqrt: return b.create<math::SqrtOp>(loc, x);
      case UnaryKind::rsqrt: return b.create<math::RsqrtOp>(loc, x);
      case UnaryKind::abs: return b.create<math::AbsFOp>(loc, x);
      case UnaryKind::relu: return b.create<ein::kern::ReluOp>(loc, x);
      case UnaryKind::gelu: return b.create<ein::kern::GeluOp>(loc, x);
      case UnaryKind::gelu_tanh: return b.create<ein::kern::GeluTanhOp>(loc, x);
      case UnaryKind::silu: return b.create<ein::kern::SiluOp>(loc, x);
      case UnaryKind::sigmoid: return b.create<ein::kern::SigmoidOp>(loc, x);
      case UnaryKind::tanh: return b.create<math::TanhOp>(loc, x);
      case UnaryKind::logical_not: {
        Value zero = b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(0.0f));
        return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OEQ, x, zero);
      }
    }
    llvm_unreachable("unknown unary kind");
  }

  static Value binaryScalar(OpBuilder &b, Location loc, BinaryKind kind, Value x, Value y) {
    auto compare = [&](arith::CmpFPredicate predicate) -> Value {
      return b.create<arith::CmpFOp>(loc, predicate, x, y);
    };
    switch (kind) {
      case BinaryKind::add: return b.create<arith::AddFOp>(loc, x, y);
      case BinaryKind::sub: return b.create<arith::SubFOp>(loc, x, y);
      case BinaryKind::mul: return b.create<arith::MulFOp>(loc, x, y);
      case BinaryKind::div: return b.create<arith::DivFOp>(loc, x, y);
      case BinaryKind::pow: return b.create<math::PowFOp>(loc, x, y);
      case BinaryKind::maximum: return b.create<arith::MaximumFOp>(loc, x, y);
      case BinaryKind::minimum: return b.create<arith::MinimumFOp>(loc, x, y);
      case BinaryKind::lt: return compare(arith::CmpFPredicate::OLT);
      case BinaryKind::le: return compare(arith::CmpFPredicate::OLE);
      case BinaryKind::gt: return compare(arith::CmpFPredicate::OGT);
      case BinaryKind::ge: return compare(arith::CmpFPredicate::OGE);
      case BinaryKind::eq: return compare(arith::CmpFPredicate::OEQ);
      case BinaryKind::ne: return compare(arith::CmpFPredicate::UNE);
    }
    llvm_unreachable("unknown binary kind");
  }

  LogicalResult lowerUnary(ein::ir::UnaryOp unary) {
    UnaryKind kind = unary.getKind();
    return assignElementwise(unary, buildElementwise(unary.getLoc(), unary.getType(), {unary.getInput()},
                                                     [&](OpBuilder &b, Location loc, ArrayRef<Value> x) {
                                                       return unaryScalar(b, loc, kind, x[0]);
                                                     }));
  }

  LogicalResult lowerBinary(ein::ir::BinaryOp binary) {
    BinaryKind kind = binary.getKind();
    return assignElementwise(binary,
                             buildElementwise(binary.getLoc(), binary.getType(), {binary.getLhs(), binary.getRhs()},
                                              [&](OpBuilder &b, Location loc, ArrayRef<Value> x) {
                                                return binaryScalar(b, loc, kind, x[0], x[1]);
                                              }));
  }

  LogicalResult lowerWhere(ein::ir::WhereOp where) {
    return assignElementwise(
        where, buildElementwise(where.getLoc(), where.getType(),
                                {where.getCondition(), where.getOnTrue(), where.getOnFalse()},
                                [&](OpBuilder &b, Location loc, ArrayRef<Value> x) -> Value {
                                  return b.create<arith::SelectOp>(loc, isNonZero(b, loc, x[0]), x[1], x[2]);
                                }));
  }

  LogicalResult lowerCast(ein::ir::CastOp cast) {
    // The kernel converts every input to f32 and stores the result type.
    return assignElementwise(cast, buildElementwise(cast.getLoc(), cast.getType(), {cast.getInput()},
                                                    [&](OpBuilder &, Location, ArrayRef<Value> x) { return x[0]; }));
  }

  LogicalResult lowerConcat(ein::ir::ConcatOp concat) {
    SmallVector<Value> buffers;
    SmallVector<Attribute> views;
    SmallVector<int64_t> sizes;
    int64_t axis = concat.getAxis();
    for (Value input : concat.getInputs()) {
      const Layout &layout = layouts.at(input);
      buffers.push_back(layout.buffer);
      views.push_back(viewOf(context(), layout.offset, layout.strides));
      sizes.push_back(layout.sizes[axis]);
    }
    Value result = builder.create<ein::kern::ConcatOp>(concat.getLoc(), concat.getType(), buffers,
                                                       builder.getArrayAttr(views), builder.getI64IntegerAttr(axis),
                                                       builder.getDenseI64ArrayAttr(sizes));
    layouts[concat] = denseLayout(result);
    return success();
  }

  LogicalResult lowerSoftmax(ein::ir::SoftmaxOp softmax) {
    const Layout &input = layouts.at(softmax.getInput());
    int64_t axis = softmax.getAxisAttr().getInt();
    SmallVector<int64_t> resultStrides = denseStrides(softmax.getType().getShape());
    // Move the softmax axis last in the iteration space.
    SmallVector<int64_t> shape, xStrides, yStrides;
    for (size_t i = 0; i <= input.sizes.size(); ++i) {
      size_t dim = i == input.sizes.size() ? axis : i;
      if (i < input.sizes.size() && static_cast<int64_t>(i) == axis) continue;
      shape.push_back(input.sizes[dim]);
      xStrides.push_back(input.strides[dim]);
      yStrides.push_back(resultStrides[dim]);
    }
    Value result = builder.create<ein::kern::SoftmaxOp>(softmax.getLoc(), softmax.getType(), input.buffer,
                                                        builder.getDenseI64ArrayAttr(shape),
                                                        viewOf(context(), input.offset, xStrides),
                                                        viewOf(context(), 0, yStrides));
    layouts[softmax] = denseLayout(result);
    return success();
  }

  // Reduces `axes` of `input` (any layout) with a kernel; the result is dense
  // over the kept axes in order.
  Value reduceAxes(Location loc, const Layout &input, ArrayRef<int64_t> axes, ein::kern::ReduceKind kind,
                   Type element) {
    SmallVector<int64_t> shape, strides, keptShape;
    for (size_t i = 0; i < input.sizes.size(); ++i) {
      if (llvm::is_contained(axes, static_cast<int64_t>(i))) continue;
      shape.push_back(input.sizes[i]);
      strides.push_back(input.strides[i]);
      keptShape.push_back(input.sizes[i]);
    }
    for (int64_t axis : axes) {
      shape.push_back(input.sizes[axis]);
      strides.push_back(input.strides[axis]);
    }
    return buildReduce(loc, RankedTensorType::get(keptShape, element), input, shape, strides,
                       static_cast<int64_t>(axes.size()), kind);
  }

  // `reduced` (dense over the kept axes) read back over `fullSizes`, with stride
  // 0 along the reduced axes.
  static Layout broadcastReduced(Value reduced, ArrayRef<int64_t> fullSizes, ArrayRef<int64_t> axes) {
    Layout layout{reduced, 0, SmallVector<int64_t>(fullSizes), {}};
    SmallVector<int64_t> kept;
    for (size_t i = 0; i < fullSizes.size(); ++i)
      if (!llvm::is_contained(axes, static_cast<int64_t>(i))) kept.push_back(fullSizes[i]);
    SmallVector<int64_t> keptStrides = denseStrides(kept);
    size_t next = 0;
    for (size_t i = 0; i < fullSizes.size(); ++i)
      layout.strides.push_back(llvm::is_contained(axes, static_cast<int64_t>(i)) ? 0 : keptStrides[next++]);
    return layout;
  }

  LogicalResult lowerReduce(ein::ir::ReduceOp reduce) {
    const Layout &input = layouts.at(reduce.getInput());
    Location loc = reduce.getLoc();
    Type element = reduce.getType().getElementType();
    SmallVector<int64_t> axes(reduce.getAxes());
    if (element.isSignlessInteger() && toKernReduce(reduce.getKind())) {
      // Integers reduce in f32 (exact below 2^24) and are stored back as integers.
      auto copy = [](OpBuilder &, Location, ArrayRef<Value> x) { return x[0]; };
      Type f32 = builder.getF32Type();
      auto widened = buildElementwise(loc, RankedTensorType::get(input.sizes, f32), {Value()}, {input}, copy);
      if (failed(widened)) return failure();
      Value reduced = reduceAxes(loc, denseLayout(*widened), axes, *toKernReduce(reduce.getKind()), f32);
      auto keptType = cast<RankedTensorType>(reduced.getType());
      auto narrowed = buildElementwise(loc, RankedTensorType::get(keptType.getShape(), element), {Value()},
                                       {denseLayout(reduced)}, copy);
      if (failed(narrowed)) return failure();
      layouts[reduce] = Layout{*narrowed, 0, SmallVector<int64_t>(reduce.getType().getShape()),
                               denseStrides(reduce.getType().getShape())};
      return success();
    }
    if (!element.isF32()) return reduce.emitOpError() << "reductions of " << element << " have no kernel yet";
    if (auto kind = toKernReduce(reduce.getKind())) {
      Value result = reduceAxes(loc, input, axes, *kind, element);
      layouts[reduce] = Layout{result, 0, SmallVector<int64_t>(reduce.getType().getShape()),
                               denseStrides(reduce.getType().getShape())};
      return success();
    }
    // var / std: mean, squared deviations, their sum over (n - correction).
    Value mean = reduceAxes(loc, input, axes, ein::kern::ReduceKind::mean, element);
    auto fullType = RankedTensorType::get(input.sizes, element);
    Layout meanLayout = broadcastReduced(mean, input.sizes, axes);
    auto squares = buildElementwise(loc, fullType, {Value(), Value()}, {input, meanLayout},
                                    [](OpBuilder &b, Location loc, ArrayRef<Value> x) -> Value {
                                      Value centered = b.create<arith::SubFOp>(loc, x[0], x[1]);
                                      return b.create<arith::MulFOp>(loc, centered, centered);
                                    });
    if (failed(squares)) return failure();
    Value sum = reduceAxes(loc, denseLayout(*squares), axes, ein::kern::ReduceKind::sum, element);
    int64_t count = 1;
    for (int64_t axis : axes) count *= input.sizes[axis];
    double divisor = static_cast<double>(count - reduce.getCorrectionAttr().getInt());
    bool isStd = reduce.getKind() == ein::ir::ReduceKind::std;
    auto keptType = cast<RankedTensorType>(sum.getType());
    auto result = buildElementwise(loc, keptType, {Value()}, {denseLayout(sum)},
                                   [&](OpBuilder &b, Location loc, ArrayRef<Value> x) -> Value {
                                     Value variance = b.create<arith::DivFOp>(loc, x[0], constantF32(loc, divisor));
                                     return isStd ? b.create<math::SqrtOp>(loc, variance).getResult() : variance;
                                   });
    if (failed(result)) return failure();
    layouts[reduce] = Layout{*result, 0, SmallVector<int64_t>(reduce.getType().getShape()),
                             denseStrides(reduce.getType().getShape())};
    return success();
  }

  ein::kern::ViewAttr viewOfLayout(const Layout &layout) {
    return viewOf(context(), layout.offset, layout.strides);
  }

  // The buffer and view of an optional operand read over `shape`
  // (broadcasting), or nulls.
  std::pair<Value, ein::kern::ViewAttr> optionalView(Value value, ArrayRef<int64_t> shape) {
    if (!value) return {Value(), ein::kern::ViewAttr()};
    const Layout &layout = layouts.at(value);
    return {layout.buffer, viewOf(context(), layout.offset, broadcastStrides(layout, shape))};
  }

  LogicalResult lowerLayerNorm(ein::ir::LayerNormOp norm) {
    if (!norm.getType().getElementType().isF32())
      return norm.emitOpError() << "layer norms of " << norm.getType().getElementType() << " have no kernel yet";
    const Layout &input = layouts.at(norm.getInput());
    ArrayRef<int64_t> shape = norm.getType().getShape();
    auto [residual, residualView] = optionalView(norm.getResidual(), shape);
    auto [gamma, gammaView] = optionalView(norm.getWeight(), shape.take_back());
    auto [beta, betaView] = optionalView(norm.getBias(), shape.take_back());
    auto variant = norm.getVariant() == ein::ir::LayerNormVariant::unbiased_std ? ein::kern::LayerNormVariant::unbiased_std
                                                                                : ein::kern::LayerNormVariant::variance;
    Value result = builder.create<ein::kern::LayerNormOp>(
        norm.getLoc(), norm.getType(), input.buffer, residual, gamma, beta, builder.getDenseI64ArrayAttr(shape),
        viewOfLayout(input), residualView, gammaView, betaView,
        builder.getF32FloatAttr(static_cast<float>(norm.getEps().convertToDouble())),
        ein::kern::LayerNormVariantAttr::get(context(), variant));
    layouts[norm] = denseLayout(result);
    return success();
  }

  static ein::kern::MaskKind toKernMask(ein::ir::MaskKind kind) {
    return static_cast<ein::kern::MaskKind>(static_cast<int>(kind));
  }

  // Where an attention op writes its result [batch.., I, E]: straight into
  // the layout of a following rearrange that only permutes and merges its
  // axes (the head merge "b h n d -> b n (h d)"), so that rearrange is a dense
  // view and needs no copy; else densely.
  struct Placement {
    RankedTensorType bufferType;
    SmallVector<int64_t> strides;  // of the op's result axes in the buffer
  };
  static Placement placeAttentionOutput(Operation *op) {
    Value result = op->getResult(0);
    auto type = cast<RankedTensorType>(result.getType());
    Placement dense{type, denseStrides(type.getShape())};
    auto merge = result.hasOneUse() ? dyn_cast<ein::ir::RearrangeOp>(*result.getUsers().begin()) : nullptr;
    if (!merge || merge.getReduction()) return dense;
    auto planned = ein::planEinops(ein::EinopsKind::Rearrange, merge.getPattern(),
                                   ein::Shape(type.getShape().begin(), type.getShape().end()), merge.getSizeMap());
    if (ein::failed(planned)) return dense;
    const ein::EinopsPlan &plan = std::get<ein::EinopsPlan>(planned);
    if (plan.inputAxes.size() != static_cast<size_t>(type.getRank()) || llvm::is_contained(plan.outputSource, -1))
      return dense;
    // Each result axis is one elementary axis of the rearranged, dense buffer.
    SmallVector<int64_t> elementary =
        denseStrides(SmallVector<int64_t>(plan.outputAxisSizes.begin(), plan.outputAxisSizes.end()));
    Placement placement{merge.getType(), SmallVector<int64_t>(type.getRank(), 0)};
    for (size_t o = 0; o < plan.outputSource.size(); ++o)
      placement.strides[plan.inputAxisDim[plan.outputSource[o]]] = elementary[o];
    return placement;
  }

  // What both attention ops lower to alike: q [batch.., I, D], k, v
  // [batch.., J, E] and the mask [batch.., I, J] as views, the sizes, the
  // result's placement and the scale and mask attributes. For talking heads
  // the heads axis is the last of `batch`.
  struct AttentionParts {
    SmallVector<int64_t> batch;
    IntegerAttr queries, keys, headDim, valueDim;
    Value q, k, v, mask;
    ein::kern::ViewAttr qView, kView, vView, maskView, outView;
    RankedTensorType resultType;
    SmallVector<int64_t> outStrides;
    FloatAttr scale, maskFill;
    ein::kern::MaskKindAttr maskKind;
  };
  template <typename Op>
  AttentionParts attentionParts(Op op) {
    ArrayRef<int64_t> qShape = op.getQuery().getType().getShape(), vShape = op.getValue().getType().getShape();
    AttentionParts parts;
    parts.batch.assign(qShape.begin(), qShape.end() - 2);
    SmallVector<int64_t> scores = parts.batch;
    scores.append({qShape[qShape.size() - 2], vShape[vShape.size() - 2]});
    parts.queries = builder.getI64IntegerAttr(scores[scores.size() - 2]);
    parts.keys = builder.getI64IntegerAttr(scores.back());
    parts.headDim = builder.getI64IntegerAttr(qShape.back());
    parts.valueDim = builder.getI64IntegerAttr(vShape.back());
    for (auto [value, buffer, view] : {std::tuple(op.getQuery(), &parts.q, &parts.qView),
                                       std::tuple(op.getKey(), &parts.k, &parts.kView),
                                       std::tuple(op.getValue(), &parts.v, &parts.vView)}) {
      *buffer = layouts.at(value).buffer;
      *view = viewOfLayout(layouts.at(value));
    }
    std::tie(parts.mask, parts.maskView) = optionalView(op.getMask(), scores);
    Placement placement = placeAttentionOutput(op);
    parts.resultType = placement.bufferType;
    parts.outStrides = placement.strides;
    parts.outView = viewOf(context(), 0, placement.strides);
    parts.scale = builder.getF32FloatAttr(static_cast<float>(op.getScale().convertToDouble()));
    parts.maskFill = builder.getF32FloatAttr(static_cast<float>(op.getMaskFill().convertToDouble()));
    parts.maskKind = ein::kern::MaskKindAttr::get(context(), toKernMask(op.getMaskKind()));
    return parts;
  }

  LogicalResult lowerAttention(ein::ir::AttentionOp attention) {
    AttentionParts p = attentionParts(attention);
    Value result = builder.create<ein::kern::AttentionOp>(
        attention.getLoc(), p.resultType, p.q, p.k, p.v, p.mask, builder.getDenseI64ArrayAttr(p.batch), p.queries,
        p.keys, p.headDim, p.valueDim, p.scale, p.qView, p.kView, p.vView, p.outView, p.maskView, p.maskKind,
        p.maskFill);
    layouts[attention] = Layout{result, 0, SmallVector<int64_t>(attention.getType().getShape()), p.outStrides};
    return success();
  }

  LogicalResult lowerTalkingHeadsAttention(ein::ir::TalkingHeadsAttentionOp attention) {
    AttentionParts p = attentionParts(attention);
    int64_t heads = p.batch.pop_back_val();
    auto [preMix, preMixView] = optionalView(attention.getPreMix(), {heads, heads});
    auto [preBias, preBiasView] = optionalView(attention.getPreBias(), {heads});
    auto [postMix, postMixView] = optionalView(attention.getPostMix(), {heads, heads});
    auto [postBias, postBiasView] = optionalView(attention.getPostBias(), {heads});
    Value result = builder.create<ein::kern::TalkingHeadsAttentionOp>(
        attention.getLoc(), p.resultType, p.q, p.k, p.v, preMix, preBias, postMix, postBias, p.mask,
        builder.getDenseI64ArrayAttr(p.batch), builder.getI64IntegerAttr(heads), p.queries, p.keys, p.headDim,
        p.valueDim, p.scale, p.qView, p.kView, p.vView, p.outView, preMixView, preBiasView, postMixView,
        postBiasView, p.maskView, p.maskKind, p.maskFill);
    layouts[attention] = Layout{result, 0, SmallVector<int64_t>(attention.getType().getShape()), p.outStrides};
    return success();
  }

  LogicalResult lowerEmbedding(ein::ir::EmbeddingOp embedding) {
    const Layout &ids = layouts.at(embedding.getIds());
    Layout table = materialize(embedding.getLoc(), layouts.at(embedding.getTable()));
    Value result = builder.create<ein::kern::GatherOp>(embedding.getLoc(), embedding.getType(), ids.buffer,
                                                       table.buffer, viewOf(context(), ids.offset, ids.strides));
    layouts[embedding] = denseLayout(result);
    return success();
  }

  // ---- contractions ----------------------------------------------------------

  struct Operand {
    Layout layout;
    SmallVector<std::string> labels;
  };

  // A label repeated inside one operand takes the diagonal: one axis whose
  // stride is the sum of the repeated axes' strides.
  static Operand takeDiagonals(Operand operand) {
    Operand result{Layout{operand.layout.buffer, operand.layout.offset, {}, {}}, {}};
    for (size_t i = 0; i < operand.labels.size(); ++i) {
      auto *found = llvm::find(result.labels, operand.labels[i]);
      if (found != result.labels.end()) {
        result.layout.strides[found - result.labels.begin()] += operand.layout.strides[i];
        continue;
      }
      result.labels.push_back(operand.labels[i]);
      result.layout.sizes.push_back(operand.layout.sizes[i]);
      result.layout.strides.push_back(operand.layout.strides[i]);
    }
    return result;
  }

  // Sums away the labels of `operand` that appear in `keep` nowhere.
  Operand sumOut(Location loc, Operand operand, const std::set<std::string> &keep) {
    SmallVector<int64_t> axes;
    for (size_t i = 0; i < operand.labels.size(); ++i)
      if (!keep.count(operand.labels[i])) axes.push_back(static_cast<int64_t>(i));
    if (axes.empty()) return operand;
    Type element = cast<RankedTensorType>(operand.layout.buffer.getType()).getElementType();
    Value reduced = reduceAxes(loc, operand.layout, axes, ein::kern::ReduceKind::sum, element);
    Operand result{denseLayout(reduced), {}};
    for (size_t i = 0; i < operand.labels.size(); ++i)
      if (keep.count(operand.labels[i])) result.labels.push_back(operand.labels[i]);
    return result;
  }

  // `operand` rewritten densely with its labels in `order`.
  Operand permuteDense(Location loc, const Operand &operand, ArrayRef<std::string> order) {
    Layout permuted{operand.layout.buffer, operand.layout.offset, {}, {}};
    for (const std::string &label : order) {
      size_t i = llvm::find(operand.labels, label) - operand.labels.begin();
      permuted.sizes.push_back(operand.layout.sizes[i]);
      permuted.strides.push_back(operand.layout.strides[i]);
    }
    return Operand{materialize(loc, permuted), SmallVector<std::string>(order)};
  }

  static int64_t strideOf(const Operand &operand, const std::string &label) {
    auto *found = llvm::find(operand.labels, label);
    return found == operand.labels.end() ? 0 : operand.layout.strides[found - operand.labels.begin()];
  }

  // C[out] = sum over the other labels of A * B (+ bias), as one batched GEMM.
  // Labels in A, B and the output are batch axes; in A and the output only, M;
  // in B and the output only, N; in A and B only, K. Multi-axis M, N and K are
  // merged into one axis each where the strides allow; M and N axes that do
  // not merge become batch axes with stride 0 in the other operand, and K axes
  // that do not merge make both operands be copied into a matching order.
  FailureOr<Value> buildContraction(Location loc, Operand a, Operand b, ArrayRef<std::string> outLabels,
                                    RankedTensorType resultType, std::optional<Layout> bias) {
    a = takeDiagonals(std::move(a));
    b = takeDiagonals(std::move(b));
    std::set<std::string> out(outLabels.begin(), outLabels.end());
    std::set<std::string> keepA = out, keepB = out;
    keepA.insert(b.labels.begin(), b.labels.end());
    keepB.insert(a.labels.begin(), a.labels.end());
    a = sumOut(loc, std::move(a), keepA);
    b = sumOut(loc, std::move(b), keepB);

    std::map<std::string, int64_t> sizes;
    for (auto *operand : {&a, &b})
      for (size_t i = 0; i < operand->labels.size(); ++i) sizes[operand->labels[i]] = operand->layout.sizes[i];
    auto inA = [&](const std::string &l) { return llvm::is_contained(a.labels, l); };
    auto inB = [&](const std::string &l) { return llvm::is_contained(b.labels, l); };

    SmallVector<std::string> batch, mLabels, nLabels, kLabels;
    for (const std::string &label : outLabels) {
      if (inA(label) && inB(label)) batch.push_back(label);
      else if (inA(label)) mLabels.push_back(label);
      else nLabels.push_back(label);
    }
    for (const std::string &label : a.labels)
      if (inB(label) && !out.count(label)) kLabels.push_back(label);

    SmallVector<int64_t> cStrides = denseStrides(resultType.getShape());
    auto strideC = [&](const std::string &label) {
      return cStrides[llvm::find(outLabels, label) - outLabels.begin()];
    };

    auto sizesOf = [&](ArrayRef<std::string> labels) {
      SmallVector<int64_t> result;
      for (const std::string &label : labels) result.push_back(sizes.at(label));
      return result;
    };
    auto stridesOf = [&](const Operand &operand, ArrayRef<std::string> labels) {
      SmallVector<int64_t> result;
      for (const std::string &label : labels) result.push_back(strideOf(operand, label));
      return result;
    };
    auto stridesInC = [&](ArrayRef<std::string> labels) {
      SmallVector<int64_t> result;
      for (const std::string &label : labels) result.push_back(strideC(label));
      return result;
    };

    // K must be one axis in both operands.
    auto kMerges = [&]() {
      return mergeAxes(sizesOf(kLabels), stridesOf(a, kLabels)) && mergeAxes(sizesOf(kLabels), stridesOf(b, kLabels));
    };
    if (!kMerges()) {
      SmallVector<std::string> orderA, orderB(kLabels.begin(), kLabels.end());
      for (const std::string &label : a.labels)
        if (!llvm::is_contained(kLabels, label)) orderA.push_back(label);
      orderA.append(kLabels.begin(), kLabels.end());
      for (const std::string &label : b.labels)
        if (!llvm::is_contained(kLabels, label)) orderB.push_back(label);
      a = permuteDense(loc, a, orderA);
      b = permuteDense(loc, b, orderB);
    }

    // The longest suffix of `labels` that merges in both `first` and C; the
    // rest become batch axes.
    auto splitMerged = [&](SmallVector<std::string> &labels, const Operand &first) {
      size_t start = 0;
      while (start < labels.size()) {
        ArrayRef<std::string> suffix(labels.begin() + start, labels.end());
        if (mergeAxes(sizesOf(suffix), stridesOf(first, suffix)) && mergeAxes(sizesOf(suffix), stridesInC(suffix)))
          break;
        ++start;
      }
      // (An empty erase would self-move-assign std::string in SmallVector.)
      if (start == 0) return;
      batch.append(labels.begin(), labels.begin() + start);
      labels.erase(labels.begin(), labels.begin() + start);
    };
    splitMerged(mLabels, a);
    splitMerged(nLabels, b);

    auto merged = [&](ArrayRef<std::string> labels, ArrayRef<int64_t> strides) {
      auto axis = mergeAxes(sizesOf(labels), strides);
      return axis ? *axis : std::make_pair<int64_t, int64_t>(1, 0);
    };
    auto [m, aStrideM] = merged(mLabels, stridesOf(a, mLabels));
    int64_t cStrideM = merged(mLabels, stridesInC(mLabels)).second;
    auto [n, bStrideN] = merged(nLabels, stridesOf(b, nLabels));
    int64_t cStrideN = merged(nLabels, stridesInC(nLabels)).second;
    auto [k, aStrideK] = merged(kLabels, stridesOf(a, kLabels));
    int64_t bStrideK = merged(kLabels, stridesOf(b, kLabels)).second;

    SmallVector<int64_t> batchSizes = sizesOf(batch);
    SmallVector<int64_t> aView = stridesOf(a, batch), bView = stridesOf(b, batch), cView = stridesInC(batch);
    aView.append({aStrideM, aStrideK});
    bView.append({bStrideK, bStrideN});
    cView.append({cStrideM, cStrideN});

    Value biasBuffer;
    ein::kern::ViewAttr biasView;
    if (bias) {
      // `bias` is indexed by the output labels; it fuses when it merges like C.
      auto biasStride = [&](const std::string &label) {
        return bias->strides[llvm::find(outLabels, label) - outLabels.begin()];
      };
      auto biasStrides = [&](ArrayRef<std::string> labels) {
        SmallVector<int64_t> result;
        for (const std::string &label : labels) result.push_back(biasStride(label));
        return result;
      };
      auto biasM = mergeAxes(sizesOf(mLabels), biasStrides(mLabels));
      auto biasN = mergeAxes(sizesOf(nLabels), biasStrides(nLabels));
      if (!biasM || !biasN) return emitError(loc) << "bias layout does not fit the GEMM";
      SmallVector<int64_t> strides = biasStrides(batch);
      strides.append({mLabels.empty() ? 0 : biasM->second, nLabels.empty() ? 0 : biasN->second});
      biasBuffer = bias->buffer;
      biasView = viewOf(context(), bias->offset, strides);
    }
    auto gemm = builder.create<ein::kern::GemmOp>(
        loc, resultType, a.layout.buffer, b.layout.buffer, biasBuffer, /*residual=*/Value(),
        builder.getDenseI64ArrayAttr(batchSizes), builder.getI64IntegerAttr(m), builder.getI64IntegerAttr(n),
        builder.getI64IntegerAttr(k), viewOf(context(), a.layout.offset, aView),
        viewOf(context(), b.layout.offset, bView), viewOf(context(), 0, cView), biasView,
        /*residual_view=*/ein::kern::ViewAttr(), builder.getF32FloatAttr(1.0f),
        ein::kern::ActivationAttr::get(context(), ein::kern::Activation::none));
    return gemm.getResult();
  }

  LogicalResult assignContraction(Operation *op, FailureOr<Value> result) {
    if (failed(result)) return failure();
    layouts[op->getResult(0)] = denseLayout(*result);
    return success();
  }

  static std::string axisLabel(size_t i) { return "d" + std::to_string(i); }

  LogicalResult lowerEinsum(ein::ir::EinsumOp einsum) {
    SmallVector<int64_t> ranks;
    for (Value input : einsum.getInputs()) ranks.push_back(cast<RankedTensorType>(input.getType()).getRank());
    auto parsed = ein::EinsumEquation::parse(einsum.getEquation(), std::vector<int64_t>(ranks.begin(), ranks.end()),
                                               /*canonical=*/true);
    if (ein::failed(parsed)) return einsum.emitOpError() << std::get<ein::EquationError>(parsed).message;
    const auto &equation = std::get<ein::EinsumEquation>(parsed);
    auto operandOf = [&](size_t i) {
      return Operand{layouts.at(einsum.getInputs()[i]),
                     SmallVector<std::string>(equation.inputs[i].begin(), equation.inputs[i].end())};
    };
    SmallVector<std::string> outLabels(equation.output.begin(), equation.output.end());
    Location loc = einsum.getLoc();

    if (equation.inputs.size() == 1) {
      // Transpose, diagonal and sums: a view, reduced where labels vanish.
      Operand operand = sumOut(loc, takeDiagonals(operandOf(0)), std::set<std::string>(outLabels.begin(), outLabels.end()));
      Layout result{operand.layout.buffer, operand.layout.offset, {}, {}};
      for (const std::string &label : outLabels) {
        size_t i = llvm::find(operand.labels, label) - operand.labels.begin();
        result.sizes.push_back(operand.layout.sizes[i]);
        result.strides.push_back(operand.layout.strides[i]);
      }
      layouts[einsum] = result;
      return success();
    }

    // Three or more operands were split into pairs by ein-plan-contractions.
    if (equation.inputs.size() != 2)
      return einsum.emitOpError() << "has " << equation.inputs.size()
                                  << " operands: run ein-plan-contractions before lowering";
    auto result = buildContraction(loc, operandOf(0), operandOf(1), outLabels, einsum.getType(), std::nullopt);
    if (failed(result)) return failure();
    layouts[einsum] = denseLayout(*result);
    return success();
  }

  // `layout` stretched to `rank` axes and `sizes` by broadcasting (stride 0).
  static Layout broadcastTo(const Layout &layout, ArrayRef<int64_t> sizes) {
    Layout result{layout.buffer, layout.offset, SmallVector<int64_t>(sizes), {}};
    size_t shift = sizes.size() - layout.sizes.size();
    for (size_t i = 0; i < sizes.size(); ++i)
      result.strides.push_back(i < shift || layout.sizes[i - shift] == 1 ? 0 : layout.strides[i - shift]);
    return result;
  }

  LogicalResult lowerMatmul(ein::ir::MatmulOp matmul) {
    Layout lhs = layouts.at(matmul.getLhs()), rhs = layouts.at(matmul.getRhs());
    bool lhsVector = lhs.sizes.size() == 1, rhsVector = rhs.sizes.size() == 1;
    // NumPy: batch axes broadcast; a vector operand has no M (or N) axis,
    // and no batch axes either (its only axis is K).
    size_t batchRank = std::max(lhs.sizes.size() - (lhsVector ? 1 : 2), rhs.sizes.size() - (rhsVector ? 1 : 2));
    SmallVector<int64_t> batchSizes(batchRank, 1);
    auto collect = [&](const Layout &layout, size_t matrixRank) {
      size_t own = layout.sizes.size() - matrixRank;
      for (size_t i = 0; i < own; ++i) {
        size_t slot = batchRank - own + i;
        batchSizes[slot] = std::max(batchSizes[slot], layout.sizes[i]);
      }
    };
    collect(lhs, lhsVector ? 1 : 2);
    collect(rhs, rhsVector ? 1 : 2);
    SmallVector<std::string> batchLabels;
    for (size_t i = 0; i < batchRank; ++i) batchLabels.push_back(axisLabel(i));

    auto withBatch = [&](const Layout &layout, ArrayRef<std::string> matrixLabels) {
      size_t matrixRank = matrixLabels.size();
      SmallVector<int64_t> sizes(batchSizes);
      for (size_t i = layout.sizes.size() - matrixRank; i < layout.sizes.size(); ++i) sizes.push_back(layout.sizes[i]);
      Operand operand{broadcastTo(layout, sizes), batchLabels};
      operand.labels.append(matrixLabels.begin(), matrixLabels.end());
      return operand;
    };
    SmallVector<std::string> lhsMatrix = lhsVector ? SmallVector<std::string>{"k"} : SmallVector<std::string>{"m", "k"};
    SmallVector<std::string> rhsMatrix = rhsVector ? SmallVector<std::string>{"k"} : SmallVector<std::string>{"k", "n"};
    SmallVector<std::string> outLabels = batchLabels;
    if (!lhsVector) outLabels.push_back("m");
    if (!rhsVector) outLabels.push_back("n");
    return assignContraction(matmul, buildContraction(matmul.getLoc(), withBatch(lhs, lhsMatrix),
                                                      withBatch(rhs, rhsMatrix), outLabels, matmul.getType(),
                                                      std::nullopt));
  }

  LogicalResult lowerLinear(ein::ir::LinearOp linear) {
    const Layout &input = layouts.at(linear.getInput());
    SmallVector<std::string> inputLabels, outLabels;
    for (size_t i = 0; i + 1 < input.sizes.size(); ++i) inputLabels.push_back(axisLabel(i));
    outLabels = inputLabels;
    inputLabels.push_back("i");
    outLabels.push_back("o");
    std::optional<Layout> bias;
    if (linear.getBias()) bias = broadcastTo(layouts.at(linear.getBias()), linear.getType().getShape());
    return assignContraction(linear, buildContraction(linear.getLoc(), Operand{input, inputLabels},
                                                      Operand{layouts.at(linear.getWeight()), {"o", "i"}}, outLabels,
                                                      linear.getType(), bias));
  }

  // ---- outputs ----------------------------------------------------------------

  // Each result must be its own dense buffer written by a kernel: outputs live
  // in the caller's buffers, so views, inputs, params and repeated results get
  // a copy.
  LogicalResult lowerReturn(func::ReturnOp ret) {
    std::set<Operation *> claimed;
    for (OpOperand &operand : ret->getOpOperands()) {
      Value value = operand.get();
      const Layout &layout = layouts.at(value);
      Operation *producer = layout.buffer.getDefiningOp();
      bool ownBuffer = producer && isa<ein::kern::KernDialect>(producer->getDialect()) && isDense(layout) &&
                       layout.buffer.getType() == value.getType() && !claimed.count(producer);
      Value buffer = ownBuffer ? layout.buffer : buildCopy(ret.getLoc(), cast<RankedTensorType>(value.getType()), layout);
      claimed.insert(buffer.getDefiningOp());
      operand.set(buffer);
    }
    return success();
  }

  func::FuncOp function;
  OpBuilder builder;
  DenseMap<Value, Layout> layouts;
  DenseMap<Value, double> scalars;  // single-element constants, used as immediates
};

struct ConvertEinToKernPass : ein::impl::ConvertEinToKernBase<ConvertEinToKernPass> {
  void runOnOperation() override {
    if (failed(Lowering(getOperation()).run())) signalPassFailure();
  }
};

}  // namespace
