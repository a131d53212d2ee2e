// The reference evaluator, op by op against hand-computed values, and on the
// seed001 conformance models against PyTorch's float64 outputs.
#include "compiler/reference/reference_evaluator.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "compiler/weights/safetensors.hpp"
#include "ir/ein/ein_dialect.hpp"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

namespace fs = std::filesystem;
using ein::reference::ElementKind;
using ein::reference::ParamProvider;
using ein::reference::Tensor;

namespace {

const fs::path kConformanceDir = EIN_CONFORMANCE_CASES_DIR;
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor floats(std::vector<int64_t> shape, std::vector<double> values) {
  return Tensor(std::move(shape), ElementKind::Float, std::move(values));
}
Tensor ints(std::vector<int64_t> shape, std::vector<double> values) {
  return Tensor(std::move(shape), ElementKind::Int, std::move(values));
}
Tensor bools(std::vector<int64_t> shape, std::vector<double> values) {
  return Tensor(std::move(shape), ElementKind::Bool, std::move(values));
}

// Equal shapes and kinds, and every value within `tolerance` (NaN matches NaN).
::testing::AssertionResult tensorsNear(const Tensor &actual, const Tensor &expected, double tolerance = 1e-12) {
  if (actual.shape != expected.shape)
    return ::testing::AssertionFailure() << "shape " << ::testing::PrintToString(actual.shape) << " != "
                                         << ::testing::PrintToString(expected.shape);
  if (actual.kind != expected.kind) return ::testing::AssertionFailure() << "element kinds differ";
  if (actual.values.size() != expected.values.size())
    return ::testing::AssertionFailure() << actual.values.size() << " values for " << expected.values.size();
  for (size_t i = 0; i < actual.values.size(); ++i) {
    double a = actual.values[i], e = expected.values[i];
    bool same = (std::isnan(a) && std::isnan(e)) || a == e || std::abs(a - e) <= tolerance;
    if (!same)
      return ::testing::AssertionFailure() << "value " << i << " is " << a << ", expected " << e << " (all: "
                                           << ::testing::PrintToString(actual.values) << ")";
  }
  return ::testing::AssertionSuccess();
}

// Builds functions from MLIR text and evaluates them.
class ReferenceEvaluatorTest : public ::testing::Test {
protected:
  ReferenceEvaluatorTest() {
    context.loadDialect<ein::ir::EinDialect, mlir::func::FuncDialect>();
    context.allowUnregisteredDialects();  // for the unknown-op test
  }

  // Parses `body` as the body of `@main(signature)` and evaluates it.
  llvm::Expected<std::map<std::string, Tensor>> run(const std::string &source,
                                                    const std::map<std::string, Tensor> &inputs = {},
                                                    const ParamProvider &params = noParams()) {
    mlir::ParserConfig config(&context);
    module = mlir::parseSourceString<mlir::ModuleOp>(source, config, "test.mlir");
    if (!module) return llvm::createStringError(llvm::inconvertibleErrorCode(), "the test's MLIR does not parse");
    auto main = module->lookupSymbol<mlir::func::FuncOp>("main");
    if (!main) return llvm::createStringError(llvm::inconvertibleErrorCode(), "no @main");
    return ein::reference::evaluate(main, inputs, params);
  }

  // Evaluates a function with one result named "y", which must succeed.
  Tensor runOne(const std::string &source, const std::map<std::string, Tensor> &inputs = {},
                const ParamProvider &params = noParams()) {
    auto results = run(source, inputs, params);
    if (!results) {
      ADD_FAILURE() << llvm::toString(results.takeError());
      return Tensor();
    }
    auto y = results->find("y");
    if (y == results->end()) {
      ADD_FAILURE() << "no result named y";
      return Tensor();
    }
    return y->second;
  }

  // The error of a function that must fail.
  std::string runError(const std::string &source, const std::map<std::string, Tensor> &inputs = {},
                       const ParamProvider &params = noParams()) {
    auto results = run(source, inputs, params);
    if (results) return "<no error>";
    return llvm::toString(results.takeError());
  }

  static ParamProvider noParams() {
    return [](llvm::StringRef name, mlir::RankedTensorType) -> llvm::Expected<Tensor> {
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "no parameter " + name.str());
    };
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

// `func.func @main(x: xType) -> (y: yType) { body; return %y }`.
std::string unaryFunction(const std::string &xType, const std::string &yType, const std::string &body) {
  return "func.func @main(%x: " + xType + " {ein.name = \"x\"}) -> (" + yType + " {ein.name = \"y\"}) {\n" + body +
         "\n  return %y : " + yType + "\n}\n";
}

std::string binaryFunction(const std::string &xType, const std::string &wType, const std::string &yType,
                           const std::string &body) {
  return "func.func @main(%x: " + xType + " {ein.name = \"x\"}, %w: " + wType + " {ein.name = \"w\"}) -> (" + yType +
         " {ein.name = \"y\"}) {\n" + body + "\n  return %y : " + yType + "\n}\n";
}

// ---------------------------------------------------------------------------
// einsum

TEST_F(ReferenceEvaluatorTest, EinsumMatmul) {
  Tensor y = runOne(binaryFunction("tensor<2x3xf32>", "tensor<3x2xf32>", "tensor<2x2xf32>", R"mlir(
  %y = ein.einsum "i k, k j -> i j" (%x, %w) : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>)mlir"),
                    {{"x", floats({2, 3}, {1, 2, 3, 4, 5, 6})}, {"w", floats({3, 2}, {7, 8, 9, 10, 11, 12})}});
  EXPECT_TRUE(tensorsNear(y, floats({2, 2}, {58, 64, 139, 154})));
}

TEST_F(ReferenceEvaluatorTest, EinsumBatched) {
  Tensor y = runOne(binaryFunction("tensor<2x1x2xf32>", "tensor<2x2x2xf32>", "tensor<2x1x2xf32>", R"mlir(
  %y = ein.einsum "b i k, b k j -> b i j" (%x, %w) : (tensor<2x1x2xf32>, tensor<2x2x2xf32>) -> tensor<2x1x2xf32>)mlir"),
                    {{"x", floats({2, 1, 2}, {1, 2, 3, 4})}, {"w", floats({2, 2, 2}, {1, 0, 0, 1, 2, 1, 1, 2})}});
  // Batch 0 multiplies by the identity; batch 1 by [[2, 1], [1, 2]].
  EXPECT_TRUE(tensorsNear(y, floats({2, 1, 2}, {1, 2, 10, 11})));
}

TEST_F(ReferenceEvaluatorTest, EinsumTranspose) {
  Tensor y = runOne(unaryFunction("tensor<2x3xf32>", "tensor<3x2xf32>", R"mlir(
  %y = ein.einsum "i j -> j i" (%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>)mlir"),
                    {{"x", floats({2, 3}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_TRUE(tensorsNear(y, floats({3, 2}, {1, 4, 2, 5, 3, 6})));
}

TEST_F(ReferenceEvaluatorTest, EinsumTraceAndDiagonal) {
  Tensor x = floats({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_TRUE(tensorsNear(runOne(unaryFunction("tensor<3x3xf32>", "tensor<f32>", R"mlir(
  %y = ein.einsum "i i -> " (%x) : (tensor<3x3xf32>) -> tensor<f32>)mlir"),
                                 {{"x", x}}),
                          floats({}, {15})));
  EXPECT_TRUE(tensorsNear(runOne(unaryFunction("tensor<3x3xf32>", "tensor<3xf32>", R"mlir(
  %y = ein.einsum "i i -> i" (%x) : (tensor<3x3xf32>) -> tensor<3xf32>)mlir"),
                                 {{"x", x}}),
                          floats({3}, {1, 5, 9})));
}

TEST_F(ReferenceEvaluatorTest, EinsumSumsLabelsMissingFromTheOutput) {
  Tensor y = runOne(unaryFunction("tensor<2x3xf32>", "tensor<3xf32>", R"mlir(
  %y = ein.einsum "i j -> j" (%x) : (tensor<2x3xf32>) -> tensor<3xf32>)mlir"),
                    {{"x", floats({2, 3}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_TRUE(tensorsNear(y, floats({3}, {5, 7, 9})));
}

TEST_F(ReferenceEvaluatorTest, EinsumThreeOperands) {
  // u^T A v with u = [1, 2], A = [[1, 2, 3], [4, 5, 6]], v = [1, 0, -1].
  std::string source = R"mlir(
func.func @main(%u: tensor<2xf32> {ein.name = "u"}, %a: tensor<2x3xf32> {ein.name = "a"},
                %v: tensor<3xf32> {ein.name = "v"}) -> (tensor<f32> {ein.name = "y"}) {
  %y = ein.einsum "i, i j, j -> " (%u, %a, %v) : (tensor<2xf32>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<f32>
  return %y : tensor<f32>
})mlir";
  Tensor y = runOne(source, {{"u", floats({2}, {1, 2})},
                             {"a", floats({2, 3}, {1, 2, 3, 4, 5, 6})},
                             {"v", floats({3}, {1, 0, -1})}});
  EXPECT_TRUE(tensorsNear(y, floats({}, {(1 - 3) + 2 * (4 - 6)})));
}

TEST_F(ReferenceEvaluatorTest, EinsumOuterProductWithWordLabels) {
  Tensor y = runOne(binaryFunction("tensor<2xf32>", "tensor<3xf32>", "tensor<3x2xf32>", R"mlir(
  %y = ein.einsum "row, col -> col row" (%x, %w) : (tensor<2xf32>, tensor<3xf32>) -> tensor<3x2xf32>)mlir"),
                    {{"x", floats({2}, {1, 2})}, {"w", floats({3}, {3, 4, 5})}});
  EXPECT_TRUE(tensorsNear(y, floats({3, 2}, {3, 6, 4, 8, 5, 10})));
}

// ---------------------------------------------------------------------------
// rearrange, reduce, repeat

TEST_F(ReferenceEvaluatorTest, RearrangeSplitsAxes) {
  Tensor y = runOne(unaryFunction("tensor<1x6xf32>", "tensor<1x2x3xf32>", R"mlir(
  %y = ein.rearrange "b (h d) -> b h d" %x {sizes = {h = 2 : i64}} : tensor<1x6xf32> -> tensor<1x2x3xf32>)mlir"),
                    {{"x", floats({1, 6}, {0, 1, 2, 3, 4, 5})}});
  EXPECT_TRUE(tensorsNear(y, floats({1, 2, 3}, {0, 1, 2, 3, 4, 5})));
}

TEST_F(ReferenceEvaluatorTest, RearrangePermutesAndMerges) {
  // "h s e -> s (h e)": x[h][s][e] = 100h + 10s + e.
  std::vector<double> values;
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 3; ++s)
      for (int e = 0; e < 2; ++e) values.push_back(100 * h + 10 * s + e);
  Tensor y = runOne(unaryFunction("tensor<2x3x2xf32>", "tensor<3x4xf32>", R"mlir(
  %y = ein.rearrange "h s e -> s (h e)" %x {sizes = {}} : tensor<2x3x2xf32> -> tensor<3x4xf32>)mlir"),
                    {{"x", floats({2, 3, 2}, values)}});
  EXPECT_TRUE(tensorsNear(y, floats({3, 4}, {0, 1, 100, 101, 10, 11, 110, 111, 20, 21, 120, 121})));
}

TEST_F(ReferenceEvaluatorTest, RearrangeDecomposesIntoANewOrder) {
  // "b n (k h d) -> k b h n d" as attention's qkv split, with b = 1, n = 2, k = 2, h = 1, d = 2.
  Tensor y = runOne(unaryFunction("tensor<1x2x4xf32>", "tensor<2x1x1x2x2xf32>", R"mlir(
  %y = ein.rearrange "b n (k h d) -> k b h n d" %x {sizes = {h = 1 : i64, k = 2 : i64}}
      : tensor<1x2x4xf32> -> tensor<2x1x1x2x2xf32>)mlir"),
                    {{"x", floats({1, 2, 4}, {0, 1, 2, 3, 10, 11, 12, 13})}});
  EXPECT_TRUE(tensorsNear(y, floats({2, 1, 1, 2, 2}, {0, 1, 10, 11, 2, 3, 12, 13})));
}

TEST_F(ReferenceEvaluatorTest, RearrangeAddsUnitAxes) {
  Tensor y = runOne(unaryFunction("tensor<3xf32>", "tensor<3x1x1xf32>", R"mlir(
  %y = ein.rearrange "g -> g 1 1" %x {sizes = {}} : tensor<3xf32> -> tensor<3x1x1xf32>)mlir"),
                    {{"x", floats({3}, {1, 2, 3})}});
  EXPECT_TRUE(tensorsNear(y, floats({3, 1, 1}, {1, 2, 3})));
}

TEST_F(ReferenceEvaluatorTest, EinopsReduce) {
  Tensor x = floats({2, 3}, {1, 5, 3, -4, 2, 0});
  auto reduce = [&](const std::string &kind, const std::string &pattern, const std::string &yType) {
    return runOne(unaryFunction("tensor<2x3xf32>", yType, "  %y = ein.rearrange \"" + pattern +
                                                              "\" %x {sizes = {}, reduction = #ein<reduce " + kind +
                                                              ">} : tensor<2x3xf32> -> " + yType),
                  {{"x", x}});
  };
  EXPECT_TRUE(tensorsNear(reduce("mean", "a b -> a", "tensor<2xf32>"), floats({2}, {3, -2.0 / 3})));
  EXPECT_TRUE(tensorsNear(reduce("max", "a b -> b", "tensor<3xf32>"), floats({3}, {1, 5, 3})));
  EXPECT_TRUE(tensorsNear(reduce("min", "a b -> a", "tensor<2xf32>"), floats({2}, {1, -4})));
  EXPECT_TRUE(tensorsNear(reduce("sum", "a b -> ", "tensor<f32>"), floats({}, {7})));
  EXPECT_TRUE(tensorsNear(reduce("prod", "a b -> b", "tensor<3xf32>"), floats({3}, {-4, 10, 0})));
}

TEST_F(ReferenceEvaluatorTest, EinopsRepeat) {
  // The ViT class token: "1 1 e -> b 1 e" with b = 2.
  Tensor y = runOne(unaryFunction("tensor<1x1x3xf32>", "tensor<2x1x3xf32>", R"mlir(
  %y = ein.rearrange "1 1 e -> b 1 e" %x {sizes = {b = 2 : i64}} : tensor<1x1x3xf32> -> tensor<2x1x3xf32>)mlir"),
                    {{"x", floats({1, 1, 3}, {7, 8, 9})}});
  EXPECT_TRUE(tensorsNear(y, floats({2, 1, 3}, {7, 8, 9, 7, 8, 9})));

  // A new axis inside a composition repeats each element in place.
  Tensor z = runOne(unaryFunction("tensor<2xf32>", "tensor<6xf32>", R"mlir(
  %y = ein.rearrange "a -> (a r)" %x {sizes = {r = 3 : i64}} : tensor<2xf32> -> tensor<6xf32>)mlir"),
                    {{"x", floats({2}, {1, 2})}});
  EXPECT_TRUE(tensorsNear(z, floats({6}, {1, 1, 1, 2, 2, 2})));
}

// ---------------------------------------------------------------------------
// slice, unary, binary, where, cast

TEST_F(ReferenceEvaluatorTest, SliceTakesARangeAndDropsIndexedAxes) {
  Tensor x = floats({2, 3}, {0, 1, 2, 3, 4, 5});
  // x[:, 1:]
  EXPECT_TRUE(tensorsNear(runOne(unaryFunction("tensor<2x3xf32>", "tensor<2x2xf32>", R"mlir(
  %y = ein.slice %x {offsets = #ein.sizes<"0, 1">, sizes = #ein.sizes<"2, 2">, dropped = array<i64>}
      : tensor<2x3xf32> -> tensor<2x2xf32>)mlir"),
                                 {{"x", x}}),
                          floats({2, 2}, {1, 2, 4, 5})));
  // x[:, 2]
  EXPECT_TRUE(tensorsNear(runOne(unaryFunction("tensor<2x3xf32>", "tensor<2xf32>", R"mlir(
  %y = ein.slice %x {offsets = #ein.sizes<"0, 2">, sizes = #ein.sizes<"2, 1">, dropped = array<i64: 1>}
      : tensor<2x3xf32> -> tensor<2xf32>)mlir"),
                                 {{"x", x}}),
                          floats({2}, {2, 5})));
}

TEST_F(ReferenceEvaluatorTest, UnaryFunctions) {
  Tensor x = floats({5}, {-2, -0.5, 0, 1, 3});
  auto apply = [&](const std::string &kind) {
    return runOne(unaryFunction("tensor<5xf32>", "tensor<5xf32>", "  %y = ein.unary " + kind + " %x : tensor<5xf32>"),
                  {{"x", x}});
  };
  auto each = [&](double (*f)(double)) {
    std::vector<double> values;
    for (double v : x.values) values.push_back(f(v));
    return floats({5}, values);
  };
  EXPECT_TRUE(tensorsNear(apply("neg"), floats({5}, {2, 0.5, 0, -1, -3})));
  EXPECT_TRUE(tensorsNear(apply("abs"), floats({5}, {2, 0.5, 0, 1, 3})));
  EXPECT_TRUE(tensorsNear(apply("relu"), floats({5}, {0, 0, 0, 1, 3})));
  EXPECT_TRUE(tensorsNear(apply("exp"), each([](double v) { return std::exp(v); })));
  EXPECT_TRUE(tensorsNear(apply("tanh"), each([](double v) { return std::tanh(v); })));
  // Values of the defining formulas in float64 (Python's math.erf and math.tanh);
  // gelu(1) is the normal CDF at 1, 0.8413447460685429, and the tanh form
  // differs from it in the fourth digit.
  EXPECT_TRUE(tensorsNear(apply("gelu"), floats({5}, {-0.04550026389635842, -0.15426876936299344, 0,
                                                      0.8413447460685429, 2.99595030590511})));
  EXPECT_TRUE(tensorsNear(apply("gelu_tanh"), floats({5}, {-0.04540230591222494, -0.15428599017485606, 0,
                                                           0.8411919906082768, 2.996362607918227})));
  EXPECT_TRUE(tensorsNear(apply("sigmoid"), floats({5}, {0.11920292202211755, 0.3775406687981454, 0.5,
                                                         0.7310585786300049, 0.9525741268224334})));
  EXPECT_TRUE(tensorsNear(apply("silu"), floats({5}, {-0.2384058440442351, -0.1887703343990727, 0,
                                                      0.7310585786300049, 2.8577223804673})));
  // Python's math.sin and math.cos.
  EXPECT_TRUE(tensorsNear(apply("sin"), floats({5}, {-0.9092974268256817, -0.479425538604203, 0.0,
                                                     0.8414709848078965, 0.1411200080598672})));
  EXPECT_TRUE(tensorsNear(apply("cos"), floats({5}, {-0.4161468365471424, 0.8775825618903728, 1.0,
                                                     0.5403023058681398, -0.9899924966004454})));
  // Python's math.log1p(math.exp(x)), as torch.nn.functional.softplus in float64.
  EXPECT_TRUE(tensorsNear(apply("softplus"), floats({5}, {0.1269280110429725, 0.4740769841801067,
                                                          0.6931471805599453, 1.3132616875182228,
                                                          3.048587351573742})));

  Tensor positive = floats({3}, {4, 1, 0.25});
  auto applyPositive = [&](const std::string &kind) {
    return runOne(unaryFunction("tensor<3xf32>", "tensor<3xf32>", "  %y = ein.unary " + kind + " %x : tensor<3xf32>"),
                  {{"x", positive}});
  };
  EXPECT_TRUE(tensorsNear(applyPositive("sqrt"), floats({3}, {2, 1, 0.5})));
  EXPECT_TRUE(tensorsNear(applyPositive("rsqrt"), floats({3}, {0.5, 1, 2})));
  EXPECT_TRUE(tensorsNear(applyPositive("log"), floats({3}, {std::log(4.0), 0, std::log(0.25)})));
}

TEST_F(ReferenceEvaluatorTest, SigmoidOfLargeMagnitudesIsFinite) {
  Tensor y = runOne(unaryFunction("tensor<2xf32>", "tensor<2xf32>", "  %y = ein.unary sigmoid %x : tensor<2xf32>"),
                    {{"x", floats({2}, {-1000, 1000})}});
  EXPECT_TRUE(tensorsNear(y, floats({2}, {0, 1})));
}

TEST_F(ReferenceEvaluatorTest, LogicalNot) {
  Tensor y = runOne(unaryFunction("tensor<3xi1>", "tensor<3xi1>", "  %y = ein.unary logical_not %x : tensor<3xi1>"),
                    {{"x", bools({3}, {1, 0, 1})}});
  EXPECT_TRUE(tensorsNear(y, bools({3}, {0, 1, 0})));
}

TEST_F(ReferenceEvaluatorTest, BinaryBroadcasts) {
  Tensor y = runOne(binaryFunction("tensor<2x3xf32>", "tensor<3xf32>", "tensor<2x3xf32>", R"mlir(
  %y = ein.binary sub %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>)mlir"),
                    {{"x", floats({2, 3}, {1, 2, 3, 4, 5, 6})}, {"w", floats({3}, {1, 10, 100})}});
  EXPECT_TRUE(tensorsNear(y, floats({2, 3}, {0, -8, -97, 3, -5, -94})));

  // [2, 1] * [1, 3] -> [2, 3]: both sides stretch.
  Tensor outer = runOne(binaryFunction("tensor<2x1xf32>", "tensor<1x3xf32>", "tensor<2x3xf32>", R"mlir(
  %y = ein.binary mul %x, %w : (tensor<2x1xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>)mlir"),
                        {{"x", floats({2, 1}, {1, 2})}, {"w", floats({1, 3}, {3, 4, 5})}});
  EXPECT_TRUE(tensorsNear(outer, floats({2, 3}, {3, 4, 5, 6, 8, 10})));
}

TEST_F(ReferenceEvaluatorTest, BinaryArithmetic) {
  Tensor x = floats({4}, {2, -3, 0.5, NAN}), w = floats({4}, {3, 2, -1, 1});
  auto apply = [&](const std::string &kind) {
    return runOne(binaryFunction("tensor<4xf32>", "tensor<4xf32>", "tensor<4xf32>",
                                 "  %y = ein.binary " + kind +
                                     " %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>"),
                  {{"x", x}, {"w", w}});
  };
  EXPECT_TRUE(tensorsNear(apply("add"), floats({4}, {5, -1, -0.5, NAN})));
  EXPECT_TRUE(tensorsNear(apply("div"), floats({4}, {2.0 / 3, -1.5, -0.5, NAN})));
  EXPECT_TRUE(tensorsNear(apply("pow"), floats({4}, {8, 9, 2, NAN})));
  // torch.maximum and torch.minimum propagate NaN.
  EXPECT_TRUE(tensorsNear(apply("maximum"), floats({4}, {3, 2, 0.5, NAN})));
  EXPECT_TRUE(tensorsNear(apply("minimum"), floats({4}, {2, -3, -1, NAN})));
}

TEST_F(ReferenceEvaluatorTest, ComparisonsGiveBools) {
  Tensor x = floats({4}, {1, 2, 3, NAN});
  auto compare = [&](const std::string &kind) {
    return runOne(binaryFunction("tensor<4xf32>", "tensor<f32>", "tensor<4xi1>",
                                 "  %y = ein.binary " + kind + " %x, %w : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>"),
                  {{"x", x}, {"w", floats({}, {2})}});
  };
  EXPECT_TRUE(tensorsNear(compare("lt"), bools({4}, {1, 0, 0, 0})));
  EXPECT_TRUE(tensorsNear(compare("le"), bools({4}, {1, 1, 0, 0})));
  EXPECT_TRUE(tensorsNear(compare("gt"), bools({4}, {0, 0, 1, 0})));
  EXPECT_TRUE(tensorsNear(compare("ge"), bools({4}, {0, 1, 1, 0})));
  EXPECT_TRUE(tensorsNear(compare("eq"), bools({4}, {0, 1, 0, 0})));
  EXPECT_TRUE(tensorsNear(compare("ne"), bools({4}, {1, 0, 1, 1})));
}

TEST_F(ReferenceEvaluatorTest, IntegerArithmeticWrapsToTheWidth) {
  Tensor y = runOne(binaryFunction("tensor<2xi32>", "tensor<2xi32>", "tensor<2xi32>", R"mlir(
  %y = ein.binary add %x, %w : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>)mlir"),
                    {{"x", ints({2}, {2147483647, -5})}, {"w", ints({2}, {1, 3})}});
  EXPECT_TRUE(tensorsNear(y, ints({2}, {-2147483648.0, -2})));
}

TEST_F(ReferenceEvaluatorTest, IntegerDivisionIsAnError) {
  std::string error = runError(binaryFunction("tensor<2xi32>", "tensor<2xi32>", "tensor<2xi32>", R"mlir(
  %y = ein.binary div %x, %w : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>)mlir"),
                               {{"x", ints({2}, {1, 2})}, {"w", ints({2}, {1, 0})}});
  EXPECT_NE(error.find("test.mlir:3:8: ein.binary: integer division is not defined"), std::string::npos) << error;
}

// Python's (and torch's) // and %: the quotient rounds towards -inf, the
// remainder takes the divisor's sign; the same on integers and floats.
TEST_F(ReferenceEvaluatorTest, FloorDivisionAndRemainder) {
  auto apply = [&](const std::string &kind, const std::string &type, const Tensor &x, const Tensor &w) {
    std::string t = "tensor<4x" + type + ">";
    return runOne(binaryFunction(t, t, t, "  %y = ein.binary " + kind + " %x, %w : (" + t + ", " + t + ") -> " + t),
                  {{"x", x}, {"w", w}});
  };
  Tensor xi = ints({4}, {-7, 7, -7, 6}), wi = ints({4}, {2, -2, -2, 3});
  EXPECT_TRUE(tensorsNear(apply("floordiv", "i64", xi, wi), ints({4}, {-4, -4, 3, 2})));
  EXPECT_TRUE(tensorsNear(apply("mod", "i64", xi, wi), ints({4}, {1, -1, -1, 0})));
  // Python: -7.5 // 2 == -4.0, 7.5 % -2 == -0.5, 1 // 0.0 is inf in torch.
  Tensor xf = floats({4}, {-7.5, 7.5, 1, -5.25}), wf = floats({4}, {2, -2, 0, 0.5});
  EXPECT_TRUE(tensorsNear(apply("floordiv", "f32", xf, wf), floats({4}, {-4, -4, kInf, -11})));
  Tensor remainder = apply("mod", "f32", xf, wf);
  EXPECT_EQ(remainder.values[0], 0.5);
  EXPECT_EQ(remainder.values[1], -0.5);
  EXPECT_TRUE(std::isnan(remainder.values[2]));
  EXPECT_EQ(remainder.values[3], 0.25);
}

TEST_F(ReferenceEvaluatorTest, IntegerFloorDivisionByZeroIsAnError) {
  std::string error = runError(binaryFunction("tensor<2xi64>", "tensor<2xi64>", "tensor<2xi64>", R"mlir(
  %y = ein.binary mod %x, %w : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>)mlir"),
                               {{"x", ints({2}, {1, 2})}, {"w", ints({2}, {1, 0})}});
  EXPECT_NE(error.find("test.mlir:3:8: ein.binary: integer division by zero"), std::string::npos) << error;
}

TEST_F(ReferenceEvaluatorTest, WhereBroadcastsAllThreeOperands) {
  // masked_fill(s, mask, -inf): where(mask, -inf, s).
  std::string source = R"mlir(
func.func @main(%s: tensor<2x2xf32> {ein.name = "s"}, %mask: tensor<2xi1> {ein.name = "mask"})
    -> (tensor<2x2xf32> {ein.name = "y"}) {
  %inf = ein.constant dense<0xFF800000> : tensor<f32>
  %y = ein.where %mask, %inf, %s : (tensor<2xi1>, tensor<f32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
})mlir";
  Tensor y = runOne(source, {{"s", floats({2, 2}, {1, 2, 3, 4})}, {"mask", bools({2}, {0, 1})}});
  EXPECT_TRUE(tensorsNear(y, floats({2, 2}, {1, -kInf, 3, -kInf})));
}

TEST_F(ReferenceEvaluatorTest, Casts) {
  EXPECT_TRUE(tensorsNear(runOne(unaryFunction("tensor<3xi1>", "tensor<3xf32>",
                                               "  %y = ein.cast %x : tensor<3xi1> -> tensor<3xf32>"),
                                 {{"x", bools({3}, {1, 0, 1})}}),
                          floats({3}, {1, 0, 1})));
  // Toward zero, as torch's .to(torch.int32).
  EXPECT_TRUE(tensorsNear(runOne(unaryFunction("tensor<3xf32>", "tensor<3xi32>",
                                               "  %y = ein.cast %x : tensor<3xf32> -> tensor<3xi32>"),
                                 {{"x", floats({3}, {-1.7, 2.9, 0.2})}}),
                          ints({3}, {-1, 2, 0})));
  EXPECT_TRUE(tensorsNear(runOne(unaryFunction("tensor<3xf32>", "tensor<3xi1>",
                                               "  %y = ein.cast %x : tensor<3xf32> -> tensor<3xi1>"),
                                 {{"x", floats({3}, {0, -0.5, NAN})}}),
                          bools({3}, {0, 1, 1})));
  // Beyond the type's range it saturates and NaN is 0, as the runtime's conversion does
  // (torch leaves these undefined), so log(0) converted and then discarded by where() folds.
  EXPECT_TRUE(tensorsNear(runOne(unaryFunction("tensor<4xf32>", "tensor<4xi32>",
                                               "  %y = ein.cast %x : tensor<4xf32> -> tensor<4xi32>"),
                                 {{"x", floats({4}, {NAN, -INFINITY, INFINITY, 3e9})}}),
                          ints({4}, {0, -2147483648.0, 2147483647, 2147483647})));
  EXPECT_TRUE(tensorsNear(runOne(unaryFunction("tensor<2xf32>", "tensor<2xi64>",
                                               "  %y = ein.cast %x : tensor<2xf32> -> tensor<2xi64>"),
                                 {{"x", floats({2}, {-INFINITY, -1e30})}}),
                          ints({2}, {-0x1p63, -0x1p63})));
}

// ---------------------------------------------------------------------------
// softmax, reduce, matmul, linear, layernorm, embedding, concat, constant

TEST_F(ReferenceEvaluatorTest, Softmax) {
  Tensor y = runOne(unaryFunction("tensor<2x3xf32>", "tensor<2x3xf32>",
                                  "  %y = ein.softmax %x, axis = 1 : tensor<2x3xf32>"),
                    {{"x", floats({2, 3}, {0, 1, 2, 1000, 1000, 1000})}});
  double sum = 1 + std::exp(1.0) + std::exp(2.0);
  EXPECT_TRUE(tensorsNear(y, floats({2, 3}, {1 / sum, std::exp(1.0) / sum, std::exp(2.0) / sum, 1.0 / 3, 1.0 / 3,
                                             1.0 / 3})));

  // Along axis 0 of the same input.
  Tensor columns = runOne(unaryFunction("tensor<2x2xf32>", "tensor<2x2xf32>",
                                        "  %y = ein.softmax %x, axis = 0 : tensor<2x2xf32>"),
                          {{"x", floats({2, 2}, {0, 5, 0, 5})}});
  EXPECT_TRUE(tensorsNear(columns, floats({2, 2}, {0.5, 0.5, 0.5, 0.5})));
}

TEST_F(ReferenceEvaluatorTest, SoftmaxMasksMinusInfinity) {
  // A masked entry gets probability 0; a fully masked row is NaN, as torch.softmax.
  Tensor y = runOne(unaryFunction("tensor<2x2xf32>", "tensor<2x2xf32>",
                                  "  %y = ein.softmax %x, axis = 1 : tensor<2x2xf32>"),
                    {{"x", floats({2, 2}, {3, -kInf, -kInf, -kInf})}});
  EXPECT_TRUE(tensorsNear(y, floats({2, 2}, {1, 0, NAN, NAN})));
}

TEST_F(ReferenceEvaluatorTest, Reduce) {
  Tensor x = floats({2, 3}, {1, 2, 6, -1, 4, 3});
  auto reduce = [&](const std::string &kind, const std::string &axes, bool keepdim, const std::string &yType,
                    int correction = 0) {
    std::string attrs = "{keepdim = " + std::string(keepdim ? "true" : "false") +
                        (correction ? ", correction = " + std::to_string(correction) + " : i64" : "") + "}";
    return runOne(unaryFunction("tensor<2x3xf32>", yType, "  %y = ein.reduce " + kind + " %x, axes = [" + axes + "] " +
                                                              attrs + " : tensor<2x3xf32> -> " + yType),
                  {{"x", x}});
  };
  EXPECT_TRUE(tensorsNear(reduce("sum", "0", false, "tensor<3xf32>"), floats({3}, {0, 6, 9})));
  EXPECT_TRUE(tensorsNear(reduce("mean", "1", true, "tensor<2x1xf32>"), floats({2, 1}, {3, 2})));
  EXPECT_TRUE(tensorsNear(reduce("max", "1", false, "tensor<2xf32>"), floats({2}, {6, 4})));
  EXPECT_TRUE(tensorsNear(reduce("min", "0, 1", false, "tensor<f32>"), floats({}, {-1})));
  EXPECT_TRUE(tensorsNear(reduce("prod", "1", false, "tensor<2xf32>"), floats({2}, {12, -12})));
  // Row 0: mean 3, squared deviations 4 + 1 + 9 = 14; row 1: mean 2, 9 + 4 + 1 = 14.
  EXPECT_TRUE(tensorsNear(reduce("var", "1", false, "tensor<2xf32>"), floats({2}, {14.0 / 3, 14.0 / 3})));
  EXPECT_TRUE(tensorsNear(reduce("var", "1", false, "tensor<2xf32>", 1), floats({2}, {7, 7})));
  EXPECT_TRUE(tensorsNear(reduce("std", "1", true, "tensor<2x1xf32>", 1),
                          floats({2, 1}, {std::sqrt(7.0), std::sqrt(7.0)})));
  // torch.var divides by max(0, n - correction): with correction = n, by zero.
  EXPECT_TRUE(tensorsNear(reduce("var", "0, 1", false, "tensor<f32>", 6), floats({}, {INFINITY})));
}

TEST_F(ReferenceEvaluatorTest, MatmulFollowsNumPy) {
  Tensor a = floats({2, 3}, {1, 2, 3, 4, 5, 6}), v3 = floats({3}, {1, 0, -1}), v2 = floats({2}, {1, 1});
  auto matmul = [&](const std::string &xType, const std::string &wType, const std::string &yType, const Tensor &x,
                    const Tensor &w) {
    return runOne(binaryFunction(xType, wType, yType,
                                 "  %y = ein.matmul %x, %w : (" + xType + ", " + wType + ") -> " + yType),
                  {{"x", x}, {"w", w}});
  };
  // matrix @ vector and vector @ matrix drop the promoted axis.
  EXPECT_TRUE(tensorsNear(matmul("tensor<2x3xf32>", "tensor<3xf32>", "tensor<2xf32>", a, v3), floats({2}, {-2, -2})));
  EXPECT_TRUE(tensorsNear(matmul("tensor<2xf32>", "tensor<2x3xf32>", "tensor<3xf32>", v2, a), floats({3}, {5, 7, 9})));
  EXPECT_TRUE(tensorsNear(matmul("tensor<3xf32>", "tensor<3xf32>", "tensor<f32>", v3, v3), floats({}, {2})));

  // [2, 1, 1, 2] @ [3, 2, 1]: the batch axes [2, 1] and [3] broadcast to [2, 3].
  Tensor x = floats({2, 1, 2}, {1, 2, 3, 4});
  Tensor w = floats({3, 2, 1}, {1, 0, 0, 1, 1, 1});
  EXPECT_TRUE(tensorsNear(matmul("tensor<2x1x1x2xf32>", "tensor<3x2x1xf32>", "tensor<2x3x1x1xf32>",
                                 floats({2, 1, 1, 2}, x.values), w),
                          floats({2, 3, 1, 1}, {1, 2, 3, 3, 4, 7})));
  // A matrix on the right is shared by every batch.
  EXPECT_TRUE(tensorsNear(matmul("tensor<2x1x2xf32>", "tensor<2x3xf32>", "tensor<2x1x3xf32>", x,
                                 floats({2, 3}, {1, 0, 1, 0, 1, 1})),
                          floats({2, 1, 3}, {1, 2, 3, 3, 4, 7})));
}

TEST_F(ReferenceEvaluatorTest, Linear) {
  std::string source = R"mlir(
func.func @main(%x: tensor<2x1x3xf32> {ein.name = "x"}, %w: tensor<2x3xf32> {ein.name = "w"},
                %b: tensor<2xf32> {ein.name = "b"}) -> (tensor<2x1x2xf32> {ein.name = "y"},
                                                       tensor<2x1x2xf32> {ein.name = "no_bias"}) {
  %y = ein.linear %x, %w, %b : (tensor<2x1x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x1x2xf32>
  %n = ein.linear %x, %w : (tensor<2x1x3xf32>, tensor<2x3xf32>) -> tensor<2x1x2xf32>
  return %y, %n : tensor<2x1x2xf32>, tensor<2x1x2xf32>
})mlir";
  auto results = run(source, {{"x", floats({2, 1, 3}, {1, 2, 3, 4, 5, 6})},
                              {"w", floats({2, 3}, {1, 0, 0, 1, 1, 1})},
                              {"b", floats({2}, {10, 20})}});
  ASSERT_TRUE(static_cast<bool>(results)) << llvm::toString(results.takeError());
  EXPECT_TRUE(tensorsNear(results->at("no_bias"), floats({2, 1, 2}, {1, 6, 4, 15})));
  EXPECT_TRUE(tensorsNear(results->at("y"), floats({2, 1, 2}, {11, 26, 14, 35})));
}

TEST_F(ReferenceEvaluatorTest, LayerNorm) {
  std::string source = R"mlir(
func.func @main(%x: tensor<2x2xf32> {ein.name = "x"}, %w: tensor<2xf32> {ein.name = "w"},
                %b: tensor<2xf32> {ein.name = "b"}) -> (tensor<2x2xf32> {ein.name = "y"},
                                                       tensor<2x2xf32> {ein.name = "plain"}) {
  %y = ein.layernorm %x weight %w bias %b eps = 1.0 : (tensor<2x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %p = ein.layernorm %x eps = 0.0 : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y, %p : tensor<2x2xf32>, tensor<2x2xf32>
})mlir";
  // Row [1, 3]: mean 2, biased variance 1; row [5, 5]: variance 0.
  auto results = run(source, {{"x", floats({2, 2}, {1, 3, 5, 5})},
                              {"w", floats({2}, {2, 3})},
                              {"b", floats({2}, {0.5, -0.5})}});
  ASSERT_TRUE(static_cast<bool>(results)) << llvm::toString(results.takeError());
  double scale = 1 / std::sqrt(2.0);  // eps = 1 inside the square root
  EXPECT_TRUE(tensorsNear(results->at("y"), floats({2, 2}, {-2 * scale + 0.5, 3 * scale - 0.5, 0.5, -0.5})));
  EXPECT_TRUE(tensorsNear(results->at("plain"), floats({2, 2}, {-1, 1, NAN, NAN})));
}

// RMSNorm: x / sqrt(mean(x^2) + eps) * w, no centring (LlamaRMSNorm), of
// x + residual when one is given.
TEST_F(ReferenceEvaluatorTest, RmsNorm) {
  std::string source = R"mlir(
func.func @main(%x: tensor<2x2xf32> {ein.name = "x"}, %w: tensor<2xf32> {ein.name = "w"},
                %r: tensor<2x2xf32> {ein.name = "r"}) -> (tensor<2x2xf32> {ein.name = "y"},
                                                         tensor<2x2xf32> {ein.name = "plain"}) {
  %y = ein.layernorm %x weight %w eps = 1.0 {variant = #ein<layernorm_variant rms>} : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %p = ein.layernorm %x residual %r eps = 0.0 {variant = #ein<layernorm_variant rms>} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y, %p : tensor<2x2xf32>, tensor<2x2xf32>
})mlir";
  // Row [1, 3]: mean square 5; row [5, 5]: 25. x + r: rows [2, 4] (mean
  // square 10) and [0, 0] (0 / 0 with eps 0).
  auto results = run(source, {{"x", floats({2, 2}, {1, 3, 5, 5})},
                              {"w", floats({2}, {2, 3})},
                              {"r", floats({2, 2}, {1, 1, -5, -5})}});
  ASSERT_TRUE(static_cast<bool>(results)) << llvm::toString(results.takeError());
  double first = 1 / std::sqrt(6.0), second = 1 / std::sqrt(26.0), third = 1 / std::sqrt(10.0);
  EXPECT_TRUE(tensorsNear(results->at("y"), floats({2, 2}, {2 * first, 9 * first, 10 * second, 15 * second})));
  EXPECT_TRUE(tensorsNear(results->at("plain"), floats({2, 2}, {2 * third, 4 * third, NAN, NAN})));
}

TEST_F(ReferenceEvaluatorTest, Embedding) {
  std::string source = binaryFunction("tensor<2x2xi32>", "tensor<3x2xf32>", "tensor<2x2x2xf32>", R"mlir(
  %y = ein.embedding %x, %w : (tensor<2x2xi32>, tensor<3x2xf32>) -> tensor<2x2x2xf32>)mlir");
  Tensor table = floats({3, 2}, {0, 1, 10, 11, 20, 21});
  EXPECT_TRUE(tensorsNear(runOne(source, {{"x", ints({2, 2}, {2, 0, 1, 2})}, {"w", table}}),
                          floats({2, 2, 2}, {20, 21, 0, 1, 10, 11, 20, 21})));

  EXPECT_EQ(runError(source, {{"x", ints({2, 2}, {2, 0, 3, 1})}, {"w", table}}),
            "test.mlir:3:8: ein.embedding: id 3 at [1, 0] is out of range for a table of 3 rows");
  EXPECT_EQ(runError(source, {{"x", ints({2, 2}, {-1, 0, 0, 0})}, {"w", table}}),
            "test.mlir:3:8: ein.embedding: id -1 at [0, 0] is out of range for a table of 3 rows");
}

TEST_F(ReferenceEvaluatorTest, Concat) {
  // In the generic form: the custom form "$inputs `,` `axis` ..." cannot be
  // parsed, since the operand list swallows the comma before `axis`.
  Tensor y = runOne(binaryFunction("tensor<2x1xf32>", "tensor<2x2xf32>", "tensor<2x3xf32>", R"mlir(
  %y = "ein.concat"(%x, %w) {axis = 1 : i64} : (tensor<2x1xf32>, tensor<2x2xf32>) -> tensor<2x3xf32>)mlir"),
                    {{"x", floats({2, 1}, {1, 2})}, {"w", floats({2, 2}, {3, 4, 5, 6})}});
  EXPECT_TRUE(tensorsNear(y, floats({2, 3}, {1, 3, 4, 2, 5, 6})));
}

TEST_F(ReferenceEvaluatorTest, Constants) {
  std::string source = R"mlir(
func.func @main() -> (tensor<2x2xf32> {ein.name = "splat"}, tensor<3xf32> {ein.name = "dense"},
                      tensor<2xi1> {ein.name = "bools"}, tensor<2xi64> {ein.name = "ints"}) {
  %s = ein.constant dense<0.5> : tensor<2x2xf32>
  %d = ein.constant dense<[1.0, -2.5, 0x7F800000]> : tensor<3xf32>
  %b = ein.constant dense<[true, false]> : tensor<2xi1>
  %i = ein.constant dense<[-3, 9000000000]> : tensor<2xi64>
  return %s, %d, %b, %i : tensor<2x2xf32>, tensor<3xf32>, tensor<2xi1>, tensor<2xi64>
})mlir";
  auto results = run(source);
  ASSERT_TRUE(static_cast<bool>(results)) << llvm::toString(results.takeError());
  EXPECT_TRUE(tensorsNear(results->at("splat"), floats({2, 2}, {0.5, 0.5, 0.5, 0.5})));
  EXPECT_TRUE(tensorsNear(results->at("dense"), floats({3}, {1, -2.5, INFINITY})));
  EXPECT_TRUE(tensorsNear(results->at("bools"), bools({2}, {1, 0})));
  EXPECT_TRUE(tensorsNear(results->at("ints"), ints({2}, {-3, 9000000000.0})));
}

// ---------------------------------------------------------------------------
// Parameters, inputs and errors

TEST_F(ReferenceEvaluatorTest, ParamsComeFromTheProviderOnce) {
  std::string source = unaryFunction("tensor<2xf32>", "tensor<2xf32>", R"mlir(
  %p = ein.param "scale" : tensor<2xf32>
  %q = ein.param "scale" : tensor<2xf32>
  %m = ein.binary mul %x, %p : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %y = ein.binary add %m, %q : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>)mlir");
  int calls = 0;
  ParamProvider params = [&](llvm::StringRef name, mlir::RankedTensorType type) -> llvm::Expected<Tensor> {
    ++calls;
    EXPECT_EQ(name, "scale");
    EXPECT_EQ(type.getShape(), llvm::ArrayRef<int64_t>{2});
    return floats({2}, {3, 4});
  };
  EXPECT_TRUE(tensorsNear(runOne(source, {{"x", floats({2}, {1, 2})}}, params), floats({2}, {6, 12})));
  EXPECT_EQ(calls, 1);

  ParamProvider wrongShape = [](llvm::StringRef, mlir::RankedTensorType) -> llvm::Expected<Tensor> {
    return floats({3}, {1, 2, 3});
  };
  EXPECT_EQ(runError(source, {{"x", floats({2}, {1, 2})}}, wrongShape),
            "test.mlir:3:8: ein.param: parameter \"scale\" was provided with shape [3] but is declared f32[2]");
  EXPECT_EQ(runError(source, {{"x", floats({2}, {1, 2})}}), "no parameter scale");
}

TEST_F(ReferenceEvaluatorTest, InputsAreChecked) {
  std::string source = unaryFunction("tensor<2xi32>", "tensor<2xi32>", "  %y = ein.unary neg %x : tensor<2xi32>");
  EXPECT_EQ(runError(source), "@main: missing input \"x\"");
  EXPECT_EQ(runError(source, {{"x", ints({3}, {1, 2, 3})}}),
            "@main: input \"x\" has shape [3] with 3 values but the function takes [2]");
  EXPECT_EQ(runError(source, {{"x", floats({2}, {1, 2})}}), "@main: input \"x\" has the wrong element kind for i32[2]");
  EXPECT_EQ(runError(source, {{"x", ints({2}, {1, 2.5})}}), "@main: input \"x\" holds 2.5, not an integer of its type");
  EXPECT_EQ(runError(source, {{"x", ints({2}, {1, 4294967296.0})}}),
            "@main: input \"x\" holds 4294967296, not an integer of its type");
  EXPECT_EQ(runError(source, {{"x", ints({2}, {1, 2})}, {"z", ints({1}, {0})}}), "@main: no argument is named \"z\"");
  EXPECT_TRUE(tensorsNear(runOne(source, {{"x", ints({2}, {1, -2147483648.0})}}), ints({2}, {-1, -2147483648.0})));
}

TEST_F(ReferenceEvaluatorTest, UnknownOpsAreNamedWithTheirLocation) {
  std::string source = unaryFunction("tensor<2xf32>", "tensor<2xf32>", R"mlir(
  %y = "mystery.op"(%x) : (tensor<2xf32>) -> tensor<2xf32>)mlir");
  EXPECT_EQ(runError(source, {{"x", floats({2}, {1, 2})}}),
            "test.mlir:3:8: the reference evaluator does not support 'mystery.op'");
}

TEST_F(ReferenceEvaluatorTest, UnverifiedIrIsAnError) {
  context.printOpOnDiagnostic(false);
  std::string source = unaryFunction("tensor<2xf32>", "tensor<2xf32>", "  %y = ein.unary neg %x : tensor<2xf32>");
  mlir::ParserConfig config(&context, /*verifyAfterParse=*/false);
  module = mlir::parseSourceString<mlir::ModuleOp>(source, config, "test.mlir");
  ASSERT_TRUE(module);
  auto main = module->lookupSymbol<mlir::func::FuncOp>("main");
  // Break the function: the softmax axis is out of range.
  mlir::OpBuilder builder(&context);
  builder.setInsertionPointToStart(&main.getBody().front());
  builder.create<ein::ir::SoftmaxOp>(mlir::FileLineColLoc::get(&context, "test.mlir", 9, 9),
                                     main.getArgument(0), builder.getI64IntegerAttr(3));
  auto results = ein::reference::evaluate(main, {{"x", floats({2}, {1, 2})}}, noParams());
  ASSERT_FALSE(static_cast<bool>(results));
  EXPECT_EQ(llvm::toString(results.takeError()),
            "@main does not verify: test.mlir:9:9: 'ein.softmax' op axis 3 is out of range for rank 1");
}

TEST_F(ReferenceEvaluatorTest, SafetensorsParamsCheckTheDeclaration) {
  auto file = ein::weights::SafetensorsFile::open((kConformanceDir / "seed001_attention" / "weights.safetensors").string());
  ASSERT_TRUE(static_cast<bool>(file)) << llvm::toString(file.takeError());
  ParamProvider params = ein::reference::safetensorsParams(*file);
  auto type = [&](std::vector<int64_t> shape) { return mlir::RankedTensorType::get(shape, mlir::Float32Type::get(&context)); };

  llvm::Expected<Tensor> embed = params("embed", type({10, 16}));
  ASSERT_TRUE(static_cast<bool>(embed)) << llvm::toString(embed.takeError());
  EXPECT_EQ(embed->shape, (std::vector<int64_t>{10, 16}));
  EXPECT_EQ(embed->values.front(), static_cast<double>(-1.2154461145401f));

  std::string path = file->path().str();
  llvm::Expected<Tensor> misshapen = params("embed", type({10, 15}));
  ASSERT_FALSE(static_cast<bool>(misshapen));
  EXPECT_EQ(llvm::toString(misshapen.takeError()),
            path + ": parameter \"embed\" is f32[10, 16] in the file and f32[10, 15] in the model");
  llvm::Expected<Tensor> missing = params("head.bias", type({10}));
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_EQ(llvm::toString(missing.takeError()), path + ": missing parameter \"head.bias\"");
}

// ---------------------------------------------------------------------------
// The seed001 conformance models, written by hand in the ein dialect.

// Reads a little-endian, C-order .npy file of f4, f8, i4, i8 or b1.
std::optional<Tensor> readNpy(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return std::nullopt;
  bool version1 = bytes[6] == 1;
  size_t headerStart = version1 ? 10 : 12;
  size_t headerLength = static_cast<uint8_t>(bytes[8]) | static_cast<uint8_t>(bytes[9]) << 8;
  if (!version1) headerLength |= static_cast<size_t>(static_cast<uint8_t>(bytes[10])) << 16 |
                                 static_cast<size_t>(static_cast<uint8_t>(bytes[11])) << 24;
  std::string header = bytes.substr(headerStart, headerLength);
  std::smatch descr, shapeText;
  if (!std::regex_search(header, descr, std::regex(R"('descr':\s*'([<|])([fib])(\d)')")) ||
      !std::regex_search(header, shapeText, std::regex(R"('shape':\s*\(([^)]*)\))")) ||
      header.find("'fortran_order': False") == std::string::npos)
    return std::nullopt;
  Tensor tensor;
  std::string sizes = shapeText[1];
  std::regex number(R"(\d+)");
  for (std::sregex_iterator it(sizes.begin(), sizes.end(), number), end; it != end; ++it)
    tensor.shape.push_back(std::stoll(it->str()));
  char kind = descr[2].str()[0];
  int width = std::stoi(descr[3]);
  tensor.kind = kind == 'f' ? ElementKind::Float : kind == 'i' ? ElementKind::Int : ElementKind::Bool;
  const char *data = bytes.data() + headerStart + headerLength;
  int64_t count = tensor.numElements();
  if (bytes.size() != headerStart + headerLength + count * width) return std::nullopt;
  for (int64_t i = 0; i < count; ++i) {
    const char *at = data + i * width;
    if (kind == 'f' && width == 4) tensor.values.push_back(*reinterpret_cast<const float *>(at));
    else if (kind == 'f' && width == 8) tensor.values.push_back(*reinterpret_cast<const double *>(at));
    else if (kind == 'i' && width == 4) tensor.values.push_back(*reinterpret_cast<const int32_t *>(at));
    else if (kind == 'i' && width == 8) tensor.values.push_back(static_cast<double>(*reinterpret_cast<const int64_t *>(at)));
    else if (kind == 'b' && width == 1) tensor.values.push_back(*at != 0);
    else return std::nullopt;
  }
  return tensor;
}

// The case's rule: |got - expected| <= atol + rtol * |expected| everywhere.
::testing::AssertionResult withinTolerance(const Tensor &got, const Tensor &expected, double atol, double rtol) {
  if (got.shape != expected.shape)
    return ::testing::AssertionFailure() << "shape " << ::testing::PrintToString(got.shape) << " != "
                                         << ::testing::PrintToString(expected.shape);
  for (size_t i = 0; i < got.values.size(); ++i)
    if (!(std::abs(got.values[i] - expected.values[i]) <= atol + rtol * std::abs(expected.values[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << got.values[i] << " vs "
                                           << expected.values[i];
  return ::testing::AssertionSuccess();
}

class ConformanceTest : public ReferenceEvaluatorTest {
protected:
  // Evaluates `source` on the case's inputs and weights and compares each
  // named output with expected/NAME.npy.
  void checkCase(const std::string &caseName, const std::string &source, const std::vector<std::string> &inputNames,
                 const std::vector<std::string> &outputNames) {
    fs::path caseDir = kConformanceDir / caseName;
    auto file = ein::weights::SafetensorsFile::open((caseDir / "weights.safetensors").string());
    ASSERT_TRUE(static_cast<bool>(file)) << llvm::toString(file.takeError());
    std::map<std::string, Tensor> inputs;
    for (const std::string &name : inputNames) {
      std::optional<Tensor> input = readNpy(caseDir / (name + ".npy"));
      ASSERT_TRUE(input) << name;
      inputs[name] = *input;
    }
    auto results = run(source, inputs, ein::reference::safetensorsParams(*file));
    ASSERT_TRUE(static_cast<bool>(results)) << llvm::toString(results.takeError());
    for (const std::string &name : outputNames) {
      std::optional<Tensor> expected = readNpy(caseDir / "expected" / (name + ".npy"));
      ASSERT_TRUE(expected) << name;
      ASSERT_TRUE(results->count(name)) << name;
      // seed001's case.json: atol 1e-4, rtol 1e-3.
      EXPECT_TRUE(withinTolerance(results->at(name), *expected, 1e-4, 1e-3)) << name;
      // The oracle computes in double from f32 weights; it should be far closer than the tolerance.
      EXPECT_TRUE(withinTolerance(results->at(name), *expected, 1e-5, 1e-5)) << name;
    }
  }
};

TEST_F(ConformanceTest, Seed001Attention) {
  std::string source = R"mlir(
func.func @main(%tokens: tensor<5xi32> {ein.name = "tokens"})
    -> (tensor<5x28xf32> {ein.name = "z"}, tensor<5x5xf32> {ein.name = "attn"}) {
  %embed = ein.param "embed" : tensor<10x16xf32>
  %w_q = ein.param "w_q" : tensor<16x24xf32>
  %w_k = ein.param "w_k" : tensor<16x24xf32>
  %w_v = ein.param "w_v" : tensor<16x28xf32>
  %x = ein.embedding %tokens, %embed : (tensor<5xi32>, tensor<10x16xf32>) -> tensor<5x16xf32>
  %q = ein.matmul %x, %w_q : (tensor<5x16xf32>, tensor<16x24xf32>) -> tensor<5x24xf32>
  %k = ein.matmul %x, %w_k : (tensor<5x16xf32>, tensor<16x24xf32>) -> tensor<5x24xf32>
  %v = ein.matmul %x, %w_v : (tensor<5x16xf32>, tensor<16x28xf32>) -> tensor<5x28xf32>
  %s = ein.einsum "i e, j e -> i j" (%q, %k) : (tensor<5x24xf32>, tensor<5x24xf32>) -> tensor<5x5xf32>
  %sqrt_dk = ein.constant dense<4.898979485566356> : tensor<f32>
  %scores = ein.binary div %s, %sqrt_dk : (tensor<5x5xf32>, tensor<f32>) -> tensor<5x5xf32>
  %attn = ein.softmax %scores, axis = 1 : tensor<5x5xf32>
  %z = ein.matmul %attn, %v : (tensor<5x5xf32>, tensor<5x28xf32>) -> tensor<5x28xf32>
  return %z, %attn : tensor<5x28xf32>, tensor<5x5xf32>
})mlir";
  checkCase("seed001_attention", source, {"tokens"}, {"z", "attn"});
}

TEST_F(ConformanceTest, Seed001MultiHeadSelfAttention) {
  std::string source = R"mlir(
func.func @main(%x: tensor<5x16xf32> {ein.name = "x"}) -> (tensor<5x16xf32> {ein.name = "y"}) {
  %w_query = ein.param "w_query" : tensor<4x16x4xf32>
  %w_key = ein.param "w_key" : tensor<4x16x4xf32>
  %w_value = ein.param "w_value" : tensor<4x16x4xf32>
  %w_output = ein.param "w_output" : tensor<16x16xf32>
  %q = ein.einsum "s d, h d e -> h s e" (%x, %w_query) : (tensor<5x16xf32>, tensor<4x16x4xf32>) -> tensor<4x5x4xf32>
  %k = ein.einsum "s d, h d e -> h s e" (%x, %w_key) : (tensor<5x16xf32>, tensor<4x16x4xf32>) -> tensor<4x5x4xf32>
  %v = ein.einsum "s d, h d e -> h s e" (%x, %w_value) : (tensor<5x16xf32>, tensor<4x16x4xf32>) -> tensor<4x5x4xf32>
  %s = ein.einsum "h s e, h t e -> h s t" (%q, %k) : (tensor<4x5x4xf32>, tensor<4x5x4xf32>) -> tensor<4x5x5xf32>
  %sqrt_e = ein.constant dense<2.0> : tensor<f32>
  %scores = ein.binary div %s, %sqrt_e : (tensor<4x5x5xf32>, tensor<f32>) -> tensor<4x5x5xf32>
  %attn = ein.softmax %scores, axis = 2 : tensor<4x5x5xf32>
  %z = ein.einsum "h s t, h t e -> h s e" (%attn, %v) : (tensor<4x5x5xf32>, tensor<4x5x4xf32>) -> tensor<4x5x4xf32>
  %merged = ein.rearrange "h s e -> s (h e)" %z {sizes = {}} : tensor<4x5x4xf32> -> tensor<5x16xf32>
  %y = ein.matmul %merged, %w_output : (tensor<5x16xf32>, tensor<16x16xf32>) -> tensor<5x16xf32>
  return %y : tensor<5x16xf32>
})mlir";
  checkCase("seed001_mhsa", source, {"x"}, {"y"});
}

}  // namespace
