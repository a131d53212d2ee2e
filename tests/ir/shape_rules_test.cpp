// The ein ops' shape rules (inferResultType) through the three ways in: the
// rule itself, InferTypeOpInterface (the builders that take no result type and
// inferReturnTypes, which report a failure at the op's location) and the
// verifier, which names a wrong result by its shape.
#include <gtest/gtest.h>

#include "ir/ein/ein_dialect.hpp"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

namespace {

using namespace mlir;
using namespace ein::ir;

class ShapeRules : public ::testing::Test {
 protected:
  ShapeRules() : builder(&context) {
    context.loadDialect<EinDialect, func::FuncDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    auto function = func::FuncOp::create(builder.getUnknownLoc(), "f", builder.getFunctionType({}, {}));
    module->push_back(function);
    builder.setInsertionPointToEnd(function.addEntryBlock());
  }

  RankedTensorType tensor(llvm::ArrayRef<int64_t> shape, Type element = {}) {
    return RankedTensorType::get(shape, element ? element : builder.getF32Type());
  }
  Value param(llvm::ArrayRef<int64_t> shape, Type element = {}) {
    return builder.create<ParamOp>(builder.getUnknownLoc(), tensor(shape, element), builder.getStringAttr("p"));
  }
  static std::string message(const ein::EquationResult<RankedTensorType> &rule) {
    return ein::failed(rule) ? std::get<ein::EquationError>(rule).message : "(accepted)";
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
};

TEST_F(ShapeRules, BuildersInferTheResultType) {
  Location loc = builder.getUnknownLoc();
  Value a = param({2, 3}), b = param({3, 4}), row = param({4});
  auto einsum = builder.create<EinsumOp>(loc, builder.getStringAttr("i j, j k -> i k"), ValueRange{a, b});
  EXPECT_EQ(einsum.getType(), tensor({2, 4}));
  auto matmul = builder.create<MatmulOp>(loc, a, b);
  EXPECT_EQ(matmul.getType(), tensor({2, 4}));
  auto less = builder.create<BinaryOp>(loc, BinaryKind::lt, matmul, row);
  EXPECT_EQ(less.getType(), tensor({2, 4}, builder.getI1Type()));
  auto reduce = builder.create<ReduceOp>(loc, matmul, ReduceKind::sum, llvm::SmallVector<int64_t>{1},
                                         /*keepdim=*/true, /*correction=*/0);
  EXPECT_EQ(reduce.getType(), tensor({2, 1}));
  auto concat = builder.create<ConcatOp>(loc, ValueRange{a, a}, /*axis=*/1);
  EXPECT_EQ(concat.getType(), tensor({2, 6}));
  Value q = param({2, 5, 8}), k = param({2, 7, 8}), v = param({2, 7, 4});
  auto attention = builder.create<AttentionOp>(loc, q, k, v, /*mask=*/Value(), llvm::APFloat(0.5), MaskKind::none,
                                               llvm::APFloat(0.0), /*causal_positions=*/nullptr,
                                               /*softcap=*/llvm::APFloat(0.0));
  EXPECT_EQ(attention.getType(), tensor({2, 5, 4}));
  builder.create<func::ReturnOp>(loc);
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(ShapeRules, RulesSayWhyOperandsAdmitNoResult) {
  EXPECT_EQ(message(MatmulOp::inferResultType(tensor({2, 3}), tensor({4, 5}))),
            "inner sizes differ: [2, 3] @ [4, 5] (3 vs 4)");
  EXPECT_EQ(message(MatmulOp::inferResultType(tensor({2, 2, 3}), tensor({3, 3, 4}))),
            "batch axes: shapes [2] and [3] do not broadcast (axis 0: 2 vs 3)");
  EXPECT_EQ(message(LinearOp::inferResultType(tensor({3, 5}), tensor({7, 6}), Type())),
            "weight [7, 6] takes 6 input features but the input has 5");
  EXPECT_EQ(message(ReduceOp::inferResultType(tensor({2, 3}), {2}, false, 0)), "axis 2 is out of range for rank 2");
  EXPECT_EQ(message(SliceOp::inferResultType(tensor({6}), {2}, {3}, {}, {2})),
            "axis 0 takes 3 elements from 2 in steps of 2 out of 6");
  EXPECT_EQ(message(EinsumOp::inferResultType("i  j -> i", TypeRange{tensor({2, 3})})),
            "equation is not canonical: expected \"i j -> i\"");
  EXPECT_EQ(message(EmbeddingOp::inferResultType(tensor({4}), tensor({10, 8}))), "ids must be i32 or i64");
  EXPECT_EQ(message(AttentionOp::inferResultType(tensor({2, 5, 8}), tensor({2, 7, 6}), tensor({2, 7, 4}), Type(),
                                                 MaskKind::none)),
            "query and key feature sizes differ: 8 and 6");
  EXPECT_EQ(message(LayerNormOp::inferResultType(tensor({2, 8}), Type(), tensor({4}), Type())),
            "weight should be [8]");
}

TEST_F(ShapeRules, InferReturnTypesReportsTheRulesMessageAtTheOp) {
  std::string reported;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    reported = diagnostic.str();
    return success();
  });
  Value a = param({2, 3}), b = param({4, 5});
  llvm::SmallVector<Type> types;
  llvm::SmallVector<Value> operands{a, b};
  MatmulOp::Adaptor adaptor{ValueRange(operands)};
  EXPECT_TRUE(failed(MatmulOp::inferReturnTypes(&context, builder.getUnknownLoc(), adaptor, types)));
  EXPECT_EQ(reported, "'ein.matmul' op inner sizes differ: [2, 3] @ [4, 5] (3 vs 4)");
}

TEST_F(ShapeRules, TheVerifierNamesAWrongResultByItsShape) {
  std::string reported;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    reported = diagnostic.str();
    return success();
  });
  Value a = param({2, 3}), b = param({3, 4});
  builder.create<MatmulOp>(builder.getUnknownLoc(), tensor({2, 5}), a, b);
  builder.create<func::ReturnOp>(builder.getUnknownLoc());
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_EQ(reported, "'ein.matmul' op result shape [2, 5] should be [2, 4]");
}

}  // namespace

// Shapes over ranged dims: the same rules with sizes such as b, t + 1.
class SymbolicShapeRules : public ShapeRules {
 protected:
  RankedTensorType sized(const ein::Shape &shape) { return sizedTensorType(shape, builder.getF32Type()); }
  const ein::Size b = ein::Size::dim("b"), t = ein::Size::dim("t");
};

TEST_F(SymbolicShapeRules, TypesKeepConstantSizesStaticAndEncodeTheRest) {
  RankedTensorType type = sized({b, t + 1, 384});
  EXPECT_EQ(type.getShape(), (llvm::ArrayRef<int64_t>{ShapedType::kDynamic, ShapedType::kDynamic, 384}));
  EXPECT_EQ(shapeOf(type), (ein::Shape{b, t + 1, 384}));
  EXPECT_TRUE(isSizedTensor(type));
  EXPECT_EQ(sized({b, 1 + t, 384}), type);  // one canonical form, one type
  EXPECT_NE(sized({b, t, 384}), type);
  EXPECT_EQ(sized({2, 3}), tensor({2, 3}));  // no ranged dim: a plain static type
  // A dynamic axis needs the encoding to say its size.
  EXPECT_FALSE(isSizedTensor(RankedTensorType::get({ShapedType::kDynamic}, builder.getF32Type())));
}

TEST_F(SymbolicShapeRules, EinsumAndMatmulBindLabelsToSymbolicSizes) {
  auto scores = EinsumOp::inferResultType("b h i d, b h j d -> b h i j",
                                          TypeRange{sized({b, 8, t, 64}), sized({b, 8, t + 1, 64})});
  ASSERT_FALSE(ein::failed(scores)) << message(scores);
  EXPECT_EQ(shapeOf(std::get<RankedTensorType>(scores)), (ein::Shape{b, 8, t, t + 1}));
  EXPECT_EQ(message(EinsumOp::inferResultType("b i, b i -> b", TypeRange{sized({b, t}), sized({b, t + 1})})),
            "axis 'i' is t in operand 1 and t + 1 in operand 2");
  auto product = MatmulOp::inferResultType(sized({b, t, 384}), tensor({384, 1536}));
  ASSERT_FALSE(ein::failed(product)) << message(product);
  EXPECT_EQ(shapeOf(std::get<RankedTensorType>(product)), (ein::Shape{b, t, 1536}));
}

TEST_F(SymbolicShapeRules, BroadcastingStretchesOnlyConstantOnes) {
  auto sum = ein::broadcastShapes({b, t, 384}, {1, t, 384});
  ASSERT_FALSE(ein::failed(sum));
  EXPECT_EQ(std::get<ein::Shape>(sum), (ein::Shape{b, t, 384}));
  // t might be 1 at run time, but the rule does not guess: t and b differ.
  auto mismatch = ein::broadcastShapes({b, t}, {b, b});
  ASSERT_TRUE(ein::failed(mismatch));
  EXPECT_EQ(std::get<ein::EquationError>(mismatch).message, "shapes [b, t] and [b, b] do not broadcast (axis 1: t vs b)");
}

TEST_F(SymbolicShapeRules, EinopsSplitsARangedAxisWithARunTimeCheckWhereNeeded) {
  auto patches = ein::planEinops(ein::EinopsKind::Rearrange, "b (h p) c -> b h p c", {b, t, 3}, {{"p", 16}});
  ASSERT_FALSE(ein::failed(patches));
  const ein::EinopsPlan &plan = std::get<ein::EinopsPlan>(patches);
  EXPECT_EQ(plan.resultShape, (ein::Shape{b, ein::Size::floorDiv(t, 16), 16, 3}));
  ASSERT_EQ(plan.checks.size(), 1u);
  EXPECT_EQ(plan.checks[0].kind, ein::SizeCheck::Divides);
  EXPECT_EQ(plan.checks[0].lhs, ein::Size(16));
  EXPECT_EQ(plan.checks[0].rhs, t);
  // A size that is a multiple by construction needs no check.
  auto exact = ein::planEinops(ein::EinopsKind::Rearrange, "b (n p) -> b n p", {b, t * 16}, {{"p", 16}});
  ASSERT_FALSE(ein::failed(exact));
  EXPECT_EQ(std::get<ein::EinopsPlan>(exact).resultShape, (ein::Shape{b, t, 16}));
  EXPECT_TRUE(std::get<ein::EinopsPlan>(exact).checks.empty());
  auto merged = ein::planEinops(ein::EinopsKind::Rearrange, "b t d -> (b t) d", {b, t, 384}, {});
  ASSERT_FALSE(ein::failed(merged));
  EXPECT_EQ(std::get<ein::EinopsPlan>(merged).resultShape, (ein::Shape{b * t, 384}));
}

TEST_F(SymbolicShapeRules, SlicesProveWhatTheyCanAndLeaveTheRestToRunTimeChecks) {
  // x[:, 1:] over t rows: t - 1 rows from 1 always fit.
  auto tail = SliceOp::inferResultType(sized({b, t}), {0, 1}, {b, t - 1}, {}, {});
  ASSERT_FALSE(ein::failed(tail)) << message(tail);
  EXPECT_EQ(shapeOf(std::get<RankedTensorType>(tail)), (ein::Shape{b, t - 1}));
  // pos[:t + 1] of 197 rows fits for some t only: accepted here, checked at run time.
  EXPECT_EQ(message(SliceOp::inferResultType(tensor({197, 384}), {0, 0}, {t + 1, 384}, {}, {})), "(accepted)");
  // t + 1 rows of t never fit.
  EXPECT_EQ(message(SliceOp::inferResultType(sized({t}), {0}, {t + 1}, {}, {})),
            "axis 0 takes t + 1 elements from 0 in steps of 1 out of t");
}
