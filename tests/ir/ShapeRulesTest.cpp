// The ein ops' shape rules (inferResultType) through the three ways in: the
// rule itself, InferTypeOpInterface (the builders that take no result type and
// inferReturnTypes, which report a failure at the op's location) and the
// verifier, which names a wrong result by its shape.
#include <gtest/gtest.h>

#include "ein/IR/EinDialect.h"
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
                                               llvm::APFloat(0.0));
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
