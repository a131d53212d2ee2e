// The dialects' side of the op table (ir/op_table.cpp): every element-wise
// kind of the ein dialect has its opcode, each unary kind but logical_not
// lowers to an op the artifact writer maps back to the same opcode, and every
// epilogue activation is a kern op.
#include <gtest/gtest.h>

#include "ir/kern/kern_dialect.hpp"
#include "ir/op_table.hpp"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace {

using namespace mlir;
using namespace ein::ir;
namespace ops = ein::ops;

TEST(OpTable, EveryUnaryKindIsAUnaryOpcodeAndLowersToItsOp) {
  MLIRContext context;
  context.loadDialect<ein::kern::KernDialect, arith::ArithDialect, math::MathDialect>();
  OpBuilder builder(&context);
  Location loc = builder.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  builder.setInsertionPointToEnd(module->getBody());
  Value x = builder.create<arith::ConstantOp>(loc, builder.getF32FloatAttr(0.5f));
  for (uint32_t value = 0; value <= getMaxEnumValForUnaryKind(); ++value) {
    auto kind = static_cast<UnaryKind>(value);
    SCOPED_TRACE(stringifyUnaryKind(kind).str());
    ops::Opcode opcode = opcodeOf(kind);
    EXPECT_EQ(ops::operandCount(opcode), 1);
    Value result = createScalarOp(builder, loc, opcode, x);
    if (kind == UnaryKind::logical_not) {  // lowered as x == 0
      EXPECT_FALSE(result);
      continue;
    }
    ASSERT_TRUE(result);
    EXPECT_EQ(opcodeOfScalarOp(result.getDefiningOp()), opcode);
  }
}

TEST(OpTable, EveryBinaryKindIsABinaryOpcode) {
  for (uint32_t value = 0; value <= getMaxEnumValForBinaryKind(); ++value) {
    auto kind = static_cast<BinaryKind>(value);
    EXPECT_EQ(ops::operandCount(opcodeOf(kind)), 2) << stringifyBinaryKind(kind).str();
  }
}

TEST(OpTable, ScalarFunctionsFoldInDouble) {
  EXPECT_DOUBLE_EQ(applyScalar(UnaryKind::exp, 1.0), std::exp(1.0));
  EXPECT_DOUBLE_EQ(applyScalar(UnaryKind::relu, -2.0), 0.0);
  EXPECT_NEAR(applyScalar(UnaryKind::gelu, 1.0), 0.8413447460685429, 1e-15);
}

TEST(OpTable, EveryEpilogueActivationIsAKernOp) {
  MLIRContext context;
  context.loadDialect<ein::kern::KernDialect>();
  for (uint32_t value = 1; value <= ein::kern::getMaxEnumValForActivation(); ++value) {
    std::string name = "kern." + ein::kern::stringifyActivation(static_cast<ein::kern::Activation>(value)).str();
    EXPECT_TRUE(OperationName(name, &context).isRegistered()) << name;
  }
}

}  // namespace
