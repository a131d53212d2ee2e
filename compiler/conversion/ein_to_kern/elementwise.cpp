// Element-wise ops (unary, binary, where, cast), concat and embedding: one
// kernel each, reading operands through their views.
#include "compiler/conversion/ein_to_kern/lowering.hpp"

#include "ir/op_table.hpp"

namespace ein::conversion {

FailureOr<Value> Lowering::buildElementwise(Location loc, RankedTensorType resultType, ArrayRef<Value> operands,
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
    views.push_back(viewOf(context(), layout.offset, broadcastStrides(layout, ein::ir::shapeOf(resultType))));
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

FailureOr<Value> Lowering::buildElementwise(Location loc, RankedTensorType resultType, ArrayRef<Value> operands,
                                            ScalarBody body) {
  SmallVector<Layout> operandLayouts;
  for (Value operand : operands) operandLayouts.push_back(layouts.at(operand));
  return buildElementwise(loc, resultType, operands, operandLayouts, body);
}

Value Lowering::constantF32(Location loc, double value) {
  return builder.create<arith::ConstantOp>(loc, builder.getF32FloatAttr(static_cast<float>(value)));
}

LogicalResult Lowering::assignElementwise(Operation *op, FailureOr<Value> result) {
  if (failed(result)) return failure();
  layouts[op->getResult(0)] = denseLayout(*result);
  return success();
}

Value Lowering::isNonZero(OpBuilder &b, Location loc, Value x) {
  Value zero = b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(0.0f));
  return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNE, x, zero);
}

Value Lowering::unaryScalar(OpBuilder &b, Location loc, UnaryKind kind, Value x) {
  if (kind == UnaryKind::logical_not) {
    Value zero = b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(0.0f));
    return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OEQ, x, zero);
  }
  // Every other kind is the op its opcode's row names (math.exp, kern.gelu, ...).
  Value result = ir::createScalarOp(b, loc, ir::opcodeOf(kind), x);
  assert(result && "a unary kind's row names no op");
  return result;
}

Value Lowering::binaryScalar(OpBuilder &b, Location loc, BinaryKind kind, Value x, Value y) {
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
    case BinaryKind::floordiv: return b.create<ein::kern::FloorDivOp>(loc, x, y);
    case BinaryKind::mod: return b.create<ein::kern::ModOp>(loc, x, y);
  }
  llvm_unreachable("unknown binary kind");
}

LogicalResult Lowering::lowerUnary(ein::ir::UnaryOp unary) {
  UnaryKind kind = unary.getKind();
  return assignElementwise(unary, buildElementwise(unary.getLoc(), unary.getType(), {unary.getInput()},
                                                   [&](OpBuilder &b, Location loc, ArrayRef<Value> x) {
                                                     return unaryScalar(b, loc, kind, x[0]);
                                                   }));
}

LogicalResult Lowering::lowerBinary(ein::ir::BinaryOp binary) {
  BinaryKind kind = binary.getKind();
  return assignElementwise(binary,
                           buildElementwise(binary.getLoc(), binary.getType(), {binary.getLhs(), binary.getRhs()},
                                            [&](OpBuilder &b, Location loc, ArrayRef<Value> x) {
                                              return binaryScalar(b, loc, kind, x[0], x[1]);
                                            }));
}

LogicalResult Lowering::lowerWhere(ein::ir::WhereOp where) {
  return assignElementwise(
      where, buildElementwise(where.getLoc(), where.getType(),
                              {where.getCondition(), where.getOnTrue(), where.getOnFalse()},
                              [&](OpBuilder &b, Location loc, ArrayRef<Value> x) -> Value {
                                return b.create<arith::SelectOp>(loc, isNonZero(b, loc, x[0]), x[1], x[2]);
                              }));
}

LogicalResult Lowering::lowerCast(ein::ir::CastOp cast) {
  // The kernel converts every input to f32 and stores the result type, an
  // integer rounded to nearest: a float becomes an integer rounded towards
  // zero first, as torch's .long() (and the reference evaluator) do.
  Type from = cast.getInput().getType().getElementType(), to = cast.getType().getElementType();
  const bool truncate = isa<FloatType>(from) && to.isSignlessInteger() && !to.isInteger(1);
  return assignElementwise(
      cast, buildElementwise(cast.getLoc(), cast.getType(), {cast.getInput()},
                             [&](OpBuilder &b, Location loc, ArrayRef<Value> x) {
                               return truncate ? ein::ir::createScalarOp(b, loc, ops::Opcode::Trunc, x) : x[0];
                             }));
}

LogicalResult Lowering::lowerConcat(ein::ir::ConcatOp concat) {
  SmallVector<Value> buffers;
  SmallVector<Attribute> views;
  Shape sizes;
  int64_t axis = concat.getAxis();
  for (Value input : concat.getInputs()) {
    const Layout &layout = layouts.at(input);
    buffers.push_back(layout.buffer);
    views.push_back(viewOf(context(), layout.offset, layout.strides));
    sizes.push_back(layout.sizes[axis]);
  }
  // Each part a copy; kern-fuse-elementwise may compute parts in place later.
  SmallVector<int64_t> partInputs(buffers.size(), 1);
  auto result = builder.create<ein::kern::ConcatOp>(
      concat.getLoc(), concat.getType(), buffers, builder.getArrayAttr(views), builder.getDenseI64ArrayAttr(partInputs),
      builder.getI64IntegerAttr(axis), sizesAttr(context(), sizes), buffers.size());
  OpBuilder::InsertionGuard guard(builder);
  for (Region &part : result.getParts()) {
    Block *body = builder.createBlock(&part);
    builder.create<ein::kern::YieldOp>(concat.getLoc(), body->addArgument(builder.getF32Type(), concat.getLoc()));
  }
  layouts[concat] = denseLayout(result);
  return success();
}

LogicalResult Lowering::lowerEmbedding(ein::ir::EmbeddingOp embedding) {
  const Layout &ids = layouts.at(embedding.getIds());
  Layout table = materialize(embedding.getLoc(), layouts.at(embedding.getTable()));
  Value result = builder.create<ein::kern::GatherOp>(embedding.getLoc(), embedding.getType(), ids.buffer,
                                                     table.buffer, viewOf(context(), ids.offset, ids.strides));
  layouts[embedding] = denseLayout(result);
  return success();
}

}  // namespace ein::conversion
