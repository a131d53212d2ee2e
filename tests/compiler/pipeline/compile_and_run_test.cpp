// Differential tests of the whole compiler: a model is compiled with every
// pass and run by the runtime on random inputs and weights, and each output
// is compared with the reference evaluator's float64 result for the front
// end's (unoptimised) ein IR. Fusion and lowering must never change results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "compiler/artifact/artifact.hpp"
#include "compiler/mlirgen/mlirgen.hpp"
#include "compiler/pipeline/pipeline.hpp"
#include "compiler/reference/reference_evaluator.hpp"
#include "compiler/weights/param_sources.hpp"
#include "ein/half_float.hpp"
#include "ein/runtime.hpp"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

namespace {

using ein::reference::ElementKind;

struct Case {
  std::string name;
  std::string source;
  double atol = 1e-4, rtol = 1e-4;
  // Step ops the artifact must contain (a fusion that must happen) and must
  // not contain (what a fusion replaces, or one that must not happen).
  std::vector<std::string> present = {}, absent = {};
  // Pairs of outputs that two spellings of one function compute: equal within
  // atol + rtol * |value| in the reference's results (and so in the runtime's).
  std::vector<std::pair<std::string, std::string>> same = {};
};

// Deterministic parameter values: N(0, 0.5) from the name, so the runtime
// and the reference see the same numbers.
std::vector<double> paramValues(llvm::StringRef name, mlir::RankedTensorType type) {
  std::mt19937_64 generator(std::hash<std::string>{}(name.str()));
  std::normal_distribution<double> normal(0.0, 0.5);
  std::vector<double> values(type.getNumElements());
  for (double &value : values) {
    auto single = static_cast<float>(normal(generator));
    // A half parameter holds values of its type.
    if (type.getElementType().isF16()) single = ein::halfToFloat(ein::floatToHalf(single));
    if (type.getElementType().isBF16()) single = ein::bfloatToFloat(ein::floatToBfloat(single));
    value = single;
  }
  return values;
}

struct Outcome {
  std::vector<std::string> stepOps;
  std::map<std::string, ein::reference::Tensor> outputs, expected;
};

// Compiles `source`, runs it and the reference on the same random inputs.
::testing::AssertionResult compileAndRun(const Case &testCase, Outcome &run) {
  mlir::DialectRegistry registry;
  ein::registerEinDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diagnostic) {
    diagnostics += diagnostic.str() + "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = ein::mlirgen::generate(context, testCase.source, testCase.name + ".ein", {});
  if (!module) return ::testing::AssertionFailure() << "front end failed:\n" << diagnostics;
  mlir::OwningOpRef<mlir::ModuleOp> frontEnd = module->clone();

  ein::ParamProvider params = [](llvm::StringRef name, mlir::RankedTensorType type,
                                 mlir::Location) -> mlir::FailureOr<mlir::AsmResourceBlob> {
    mlir::Type element = type.getElementType();
    if (!element.isF32() && !element.isF16() && !element.isBF16()) return mlir::failure();
    std::vector<double> values = paramValues(name, type);
    const size_t width = element.isF32() ? 4 : 2;
    std::vector<uint8_t> bytes(values.size() * width);
    for (size_t i = 0; i < values.size(); ++i) {
      auto value = static_cast<float>(values[i]);
      uint16_t half = element.isF16() ? ein::floatToHalf(value) : ein::floatToBfloat(value);
      std::memcpy(bytes.data() + width * i, width == 4 ? static_cast<const void *>(&value) : &half, width);
    }
    return ein::ownedBlob(std::move(bytes));
  };
  if (mlir::failed(ein::bindParameters(*module, params)))
    return ::testing::AssertionFailure() << "parameters failed:\n" << diagnostics;
  mlir::PassManager manager(&context);
  ein::buildCompilerPipeline(manager);
  if (mlir::failed(manager.run(*module))) return ::testing::AssertionFailure() << "passes failed:\n" << diagnostics;
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  auto artifact = ein::writeArtifact(function, {testCase.name + ".ein"});
  if (mlir::failed(artifact)) return ::testing::AssertionFailure() << "artifact failed:\n" << diagnostics;

  auto model = ein::Model::loadFromMemory(artifact->data(), artifact->size(), testCase.name);
  if (!model.ok()) return ::testing::AssertionFailure() << model.status().toString();
  for (const ein::StepInfo &step : (*model)->steps()) run.stepOps.push_back(step.op);
  auto session = ein::Session::create(*model);
  if (!session.ok()) return ::testing::AssertionFailure() << session.status().toString();

  // Random inputs, given to both.
  std::mt19937_64 generator(42);
  std::map<std::string, ein::reference::Tensor> inputs;
  for (const ein::TensorInfo &info : (*model)->inputs()) {
    int64_t count = info.numElements();
    ein::reference::Tensor tensor;
    tensor.shape = info.shape;
    std::vector<uint8_t> bytes(info.byteSize());
    for (int64_t i = 0; i < count; ++i) {
      if (info.dtype == ein::DType::F32) {
        auto value = static_cast<float>(std::normal_distribution<double>(0.0, 1.0)(generator));
        std::memcpy(bytes.data() + 4 * i, &value, 4);
        tensor.values.push_back(value);
      } else if (info.dtype == ein::DType::Bool) {
        bool value = std::bernoulli_distribution(0.3)(generator);
        bytes[i] = value;
        tensor.values.push_back(value);
        tensor.kind = ElementKind::Bool;
      } else if (info.dtype == ein::DType::I32) {
        auto value = static_cast<int32_t>(
            std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(info.upperBound, 5) - 1)(generator));
        std::memcpy(bytes.data() + 4 * i, &value, 4);
        tensor.values.push_back(value);
        tensor.kind = ElementKind::Int;
      } else if (info.dtype == ein::DType::F16 || info.dtype == ein::DType::BF16) {
        // The reference sees exactly the value the model receives.
        auto value = static_cast<float>(std::normal_distribution<double>(0.0, 1.0)(generator));
        uint16_t bits = info.dtype == ein::DType::F16 ? ein::floatToHalf(value) : ein::floatToBfloat(value);
        std::memcpy(bytes.data() + 2 * i, &bits, 2);
        tensor.values.push_back(info.dtype == ein::DType::F16 ? ein::halfToFloat(bits) : ein::bfloatToFloat(bits));
      } else {
        return ::testing::AssertionFailure() << "no random values for input " << info.name;
      }
    }
    ein::Status status = (*session)->setInput(info.name, info.dtype, info.shape, bytes.data(), bytes.size());
    if (!status.ok()) return ::testing::AssertionFailure() << status.toString();
    inputs[info.name] = std::move(tensor);
  }
  if (ein::Status status = (*session)->run(); !status.ok()) return ::testing::AssertionFailure() << status.toString();
  for (const ein::TensorInfo &info : (*model)->outputs()) {
    auto output = (*session)->output(info.name);
    if (!output.ok()) return ::testing::AssertionFailure() << output.status().toString();
    ein::reference::Tensor tensor;
    tensor.shape = info.shape;
    for (int64_t i = 0; i < info.numElements(); ++i) {
      const auto *data = static_cast<const uint8_t *>(output->data);
      if (info.dtype == ein::DType::F32) {
        float value;
        std::memcpy(&value, data + 4 * i, 4);
        tensor.values.push_back(value);
      } else if (info.dtype == ein::DType::Bool) {
        tensor.values.push_back(data[i] ? 1.0 : 0.0);
        tensor.kind = ElementKind::Bool;
      } else if (info.dtype == ein::DType::I32 || info.dtype == ein::DType::I64) {
        int64_t value = 0;
        if (info.dtype == ein::DType::I32) {
          int32_t narrow;
          std::memcpy(&narrow, data + 4 * i, 4);
          value = narrow;
        } else {
          std::memcpy(&value, data + 8 * i, 8);
        }
        tensor.values.push_back(static_cast<double>(value));
        tensor.kind = ElementKind::Int;
      } else if (info.dtype == ein::DType::F16 || info.dtype == ein::DType::BF16) {
        uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        tensor.values.push_back(info.dtype == ein::DType::F16 ? ein::halfToFloat(bits) : ein::bfloatToFloat(bits));
      } else {
        return ::testing::AssertionFailure() << "cannot read output " << info.name;
      }
    }
    run.outputs[info.name] = std::move(tensor);
  }

  auto reference = ein::reference::evaluate(
      *frontEnd->getOps<mlir::func::FuncOp>().begin(), inputs,
      [](llvm::StringRef name, mlir::RankedTensorType type) -> llvm::Expected<ein::reference::Tensor> {
        std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
        return ein::reference::Tensor(shape, ElementKind::Float, paramValues(name, type));
      });
  if (!reference) return ::testing::AssertionFailure() << llvm::toString(reference.takeError());
  run.expected = std::move(*reference);
  return ::testing::AssertionSuccess();
}

// Every output within atol + rtol * |expected| of the reference (NaN only
// where the reference has NaN).
::testing::AssertionResult outputsMatch(const Case &testCase, const Outcome &run) {
  for (const auto &[name, expected] : run.expected) {
    auto found = run.outputs.find(name);
    if (found == run.outputs.end()) return ::testing::AssertionFailure() << "no output " << name;
    const ein::reference::Tensor &got = found->second;
    if (got.shape != expected.shape) return ::testing::AssertionFailure() << "output " << name << ": shapes differ";
    for (size_t i = 0; i < got.values.size(); ++i) {
      double g = got.values[i], e = expected.values[i];
      bool close = (std::isnan(g) && std::isnan(e)) || g == e ||
                   std::abs(g - e) <= testCase.atol + testCase.rtol * std::abs(e);
      if (!close)
        return ::testing::AssertionFailure() << "output " << name << " element " << i << ": got " << g
                                             << ", expected " << e;
    }
  }
  return ::testing::AssertionSuccess();
}

void PrintTo(const Case &testCase, std::ostream *out) { *out << testCase.name; }

class CompileAndRun : public ::testing::TestWithParam<Case> {};

TEST_P(CompileAndRun, MatchesTheReference) {
  Outcome run;
  ASSERT_TRUE(compileAndRun(GetParam(), run));
  EXPECT_TRUE(outputsMatch(GetParam(), run)) << "steps: " << ::testing::PrintToString(run.stepOps) << "\nmodel:\n"
                                             << GetParam().source;
  for (const std::string &op : GetParam().present)
    EXPECT_TRUE(llvm::is_contained(run.stepOps, op))
        << "no " << op << " step in " << ::testing::PrintToString(run.stepOps) << "\nmodel:\n" << GetParam().source;
  for (const std::string &op : GetParam().absent)
    EXPECT_FALSE(llvm::is_contained(run.stepOps, op)) << "a " << op << " step in " << ::testing::PrintToString(run.stepOps);
  for (const auto &[a, b] : GetParam().same) {
    const ein::reference::Tensor &x = run.expected.at(a), &y = run.expected.at(b);
    ASSERT_EQ(x.shape, y.shape) << a << " and " << b;
    for (size_t i = 0; i < x.values.size(); ++i)
      ASSERT_LE(std::abs(x.values[i] - y.values[i]), GetParam().atol + GetParam().rtol * std::abs(y.values[i]))
          << a << " and " << b << " differ at element " << i;
  }
}

// Each case exercises one construct of the language (LANGUAGE.md) through
// every layer.
const Case kCases[] = {
    {"einsum_letters", R"ein(
dim s = 5, d = 7, h = 3, e = 4
input x: f32[s, d]
param w: f32[h, d, e]
output y = einsum("sd,hde->hse", x, w)
)ein"},
    {"einsum_words_ellipsis", R"ein(
input q: f32[2, 3, 5, 4]
input k: f32[2, 3, 6, 4]
output s = einsum("... i d, ... j d -> ... i j", q, k)
)ein"},
    {"einsum_ellipsis_broadcasts", R"ein(
input a: f32[2, 1, 3, 4]
input b: f32[5, 4, 6]
input c: f32[4, 1]
input d: f32[4]
input e: f32[1, 4, 3]
output y = einsum("...ij,...jk", a, b)
output outer = einsum("...,...->...", c, d)
output three = einsum("...i,...i,...i->...", a[..., 0], e, c)
)ein"},
    // Multi-query attention written with a broadcasting ellipsis: one key head.
    {"attention_ellipsis_broadcasts_key_heads", R"ein(
input q: f32[2, 4, 5, 8]
input k: f32[2, 1, 7, 8]
input v: f32[2, 1, 7, 8]
s = einsum("...id,...jd->...ij", q, k) / sqrt(8)
output y = einsum("...ij,...jd->...id", softmax(s, axis=-1), v)
)ein",
     1e-4, 1e-4, {"attention"}, {"softmax"}},
    // PyTorch's result types: i64 sums, integer max/min, bools as any/all.
    {"integer_and_bool_reductions", R"ein(
input ids: i32[3, 4]
input keep: bool[3, 4]
output count = sum(keep)
output total = sum(ids, axis=0) + 1
output top = max(ids, 0)
output some = max(keep)
output product = reduce(ids, "a b -> b", "prod")
output low = reduce(ids, "a b -> a", "min")
output average = mean(ids)
)ein"},
    {"argmax_and_argmin", R"ein(
input x: f32[3, 5, 7]
input ids: i32[4, 6]
output a = argmax(x)
output b = argmin(x, 0, keepdim=true)
output c = argmax(x, axis=1) + rearrange(argmin(ids, 1)[:3], "a -> a 1")
output d = argmax(x[0, 0])
)ein"},
    {"einsum_implicit_output", R"ein(
input a: f32[3, 4]
input b: f32[4, 5]
output c = einsum("ij,jk", a, b)
)ein"},
    {"einsum_diagonal_and_trace", R"ein(
input a: f32[4, 4]
input b: f32[2, 4, 4]
output d = einsum("ii->i", a)
output t = einsum("ii", a)
output bd = einsum("b i i -> b i", b)
)ein"},
    {"einsum_three_operands", R"ein(
input a: f32[6, 5]
input b: f32[5, 4]
input c: f32[4, 3]
output y = einsum("ij,jk,kl->il", a, b, c)
)ein"},
    {"einsum_four_operands_with_diagonal", R"ein(
input a: f32[5, 5]
input b: f32[5, 6]
input c: f32[2, 6, 7]
input d: f32[7]
output y = einsum("ii,ij,bjk,k->bi", a, b, c, d)
output z = einsum("b j k, b j k, k -> j", c, c, d)
)ein"},
    {"einsum_letters_ellipsis_and_masks", R"ein(
input a: f32[2, 3, 4, 5]
input b: f32[5, 6]
input m: bool[4, 6]
s = einsum("...ij,jk->...ik", a, b)
output y = masked_fill(s, m, -1e9) + where(m, 1.0, s)
output z = where(s > 0, s, 0) + masked_fill(s, s < -1, 2)
)ein"},
    {"einsum_outer_and_sum", R"ein(
input a: f32[3]
input b: f32[4]
input c: f32[2, 3, 4]
output outer = einsum("i,j->ij", a, b)
output total = einsum("b i j ->", c)
)ein"},
    {"rearrange_grammar", R"ein(
input x: f32[2, 12, 5]
output a = rearrange(x, "b (h d) t -> b h t d", h=3)
output b = rearrange(x, "b ... t -> t b ...")
output c = rearrange(x, "b c t -> b c t 1 ()")
output d = rearrange(x, "b c t -> (b t) c")
)ein"},
    {"reduce_and_repeat", R"ein(
input x: f32[2, 6, 4]
output m = reduce(x, "b (g c) t -> b g", "mean", g=2)
output mx = reduce(x, "b c t -> b t", "max")
output r = repeat(x, "b c t -> b c t k", k=3)
output p = reduce(x, "b c t -> c", "prod")
)ein"},
    {"reductions", R"ein(
input x: f32[3, 5, 7]
output s = sum(x, axis=-1)
output m = mean(x, axis=[0, 2], keepdim=true)
output v = var(x, axis=1)
output u = std(x, axis=1, unbiased=true, keepdim=true)
output mx = max(x, axis=0)
output mn = min(x, axis=2)
# Kept unit axes broadcast back over x (found by fuzz_einc: the var/std result
# once lost its unit axis and read its neighbours' values).
output n = (x - mean(x, axis=0, keepdim=true)) / (std(x, axis=-1, unbiased=true, keepdim=true) + 1e-6)
output w = x / var(x, axis=1, keepdim=true) + sum(x, axis=[0, 2], keepdim=true)
)ein"},
    {"elementwise_and_promotion", R"ein(
input x: f32[4, 5]
input keep: i32[5]
input m: bool[4, 1]
y = relu(x) + gelu(x) * gelu_tanh(x) - silu(x) / (1 + sigmoid(x)) + tanh(x) + exp(-abs(x))
output y1 = y + log(abs(x) + 1) + sqrt(abs(x)) * rsqrt(abs(x) + 1) + x ** 2
output y2 = (1 - keep) * -10000.0 + maximum(x, 0.5) - minimum(x, -0.5)
output y3 = where(m, x, -x) + masked_fill(x, x > 1, -inf)
output c = (x < 0) == m
output count = m + 1
output joined = concat([keep, x[0]], 0) + concat([m[:, 0], keep[:1], keep], 0)
)ein"},
    {"softplus_both_sides_of_its_threshold", R"ein(
input x: f32[4, 5]
output y = softplus(x) + softplus(x * 40.0) - softplus(2.0)
)ein"},
    // GPT-2's hand-written causal masks (folded from arange): the fused attention
    // becomes causal (no mask), also with PyTorch's finfo.min fill and as an
    // added 0 / -inf mask over queries after cached keys.
    {"hand_written_causal_masks", R"ein(
input x: f32[2, 9, 8]
input c: f32[2, 13, 8]
keep = rearrange(arange(9), "i -> i 1") >= arange(9)
s = einsum("h i d, h j d -> h i j", x, x) * 0.3
output a = einsum("h i j, h j d -> h i d", softmax(where(keep, s, -inf), axis=-1), x)
t = einsum("h i d, h j d -> h i j", x, x * 0.5)
output b = einsum("h i j, h j d -> h i d", softmax(masked_fill(t, ~keep, -3.4028234663852886e38), axis=-1), x)
bias = where(rearrange(arange(13), "j -> 1 j") <= rearrange(arange(9), "i -> i 1") + 4, 0.0, -inf)
output chunk = einsum("h i j, h j d -> h i d", softmax(einsum("h i d, h j d -> h i j", x, c) + bias, axis=-1), c)
)ein"},
    // Rounding, and casts between floats, integers and bool (a float becomes an integer
    // rounded towards zero); integer tensors stay integer through abs and unary minus.
    {"rounding_and_casts", R"ein(
input x: f32[4, 6]
input k: i32[6]
output rounded = floor(x * 3.0) + ceil(x) - trunc(x * 2.0) + round(x * 5.0)
output whole = i64(x * 4.0) + i32(x) + abs(k) - k
output flags = bool(relu(x)) == bool(k)
output back = f32(i64(x * 10.0)) / 10.0 + f32(bool(x))
)ein"},
    {"sin_cos_and_folded", R"ein(
input x: f32[4, 5]
output y = sin(x * 4.0) * cos(x) - cos(x * 30.0) + sin(2.0) * cos(-0.5)
)ein"},
    // Both branches numbers: f32 (i64 for two integers) of the condition's
    // shape; an integer condition is true where it is not 0.
    {"where_of_numbers", R"ein(
input x: f32[4, 5]
input m: bool[4, 5]
input k: i32[5]
output ones = where(m, 1.0, 0.0)
output ints = where(m, 3, -2)
output mixed = where(m, 1, 0.5) + where(m, x, 0.0) - where(m, 0.0, x) * where(x > 0, 2.0, -3.0)
output by_int = where(k, 2.0, -1.0) + where(k, x, -x)
)ein"},
    {"floor_division_remainder_and_folded_indices", R"ein(
input x: f32[4, 5]
# Integers from arange, // and % fold into constants; the float ones run.
i = arange(-6, 6)
output q = x // 0.7 + x % -0.6
output folded = rearrange(i, "(a b) -> a b", b=3) // 4 + rearrange(i % 5, "(b a) -> a b", b=3)
output ranged_free = arange(2, 14, 3) * x[0, :4]
)ein"},
    {"roll_pad_take_and_gathers_on_views", R"ein(
input x: f32[2, 6, 4, 3]
param table: f32[9, 5]
i = rearrange(arange(24) % 9, "(a b) -> a b", b=4)
output rolled = roll(x, [-2, 1], [1, 2])
output rolled_last = roll(x * 2.0, 1, -1)
output windows = rearrange(roll(x, [-1, -1], [1, 2]), "b (nh wh) (nw ww) c -> (b nh nw) (wh ww) c", wh=3, ww=2)
output padded = pad(x, [0, 0, 1, 0, 0, 2], value=0.5)
output taken = take(x, rearrange(i, "a b -> (a b)")[:5], axis=1)
output rows = embedding(rearrange(i, "a b -> (a b)"), table) + embedding(i[1:, 2], table)[0]
)ein",
     1e-4, 1e-4, {"gather"}},
    {"window_attention_bias_and_mask_terms", R"ein(
dim b = 2, w = 4, h = 2, n = 9, d = 8
input x: f32[b, w, n, 3*h*d]
param bias: f32[h, n, n]
param mask: f32[w, 1, n, n]
q, k, v = rearrange(x, "b w n (k h d) -> k b w h n d", k=3, h=h)
s = einsum("b w h i d, b w h j d -> b w h i j", q, k) * d ** -0.5 + bias + mask
output o = einsum("b w h i j, b w h j d -> b w h i d", softmax(s, axis=-1), v)
)ein",
     1e-4, 1e-4, {"attention"}, {"softmax"}},
    {"slicing_concat_transpose", R"ein(
input x: f32[2, 5, 8]
output a = x[:, 0]
output b = x[:, 1:]
output c = x[..., :3]
output d = concat([x[:, :2], x[:, 3:]], axis=1)
output e = transpose(x, 0, 2)
output f = concat([x, x * 2], axis=-1)
)ein"},
    {"matmul_linear_layernorm_softmax", R"ein(
dim n = 6, c = 8, f = 16
input x: f32[2, n, c]
param fc.weight: f32[f, c]
param fc.bias: f32[f]
param norm.weight: f32[f]
param norm.bias: f32[f]
param w: f32[c, c]
h = layernorm(linear(x, fc.weight, fc.bias), norm.weight, norm.bias, eps=1e-6)
output y = softmax(h, axis=-1) + layernorm(h)
output z = x @ w @ transpose(w, 0, 1)
output s = softmax(x, axis=1)
)ein"},
    {"embedding", R"ein(
dim t = 7, vocab = 11, d = 4
input ids: i32[t]
param table: f32[vocab, d]
output e = embedding(ids, table)
)ein"},
    {"blocks_loops_tuples", R"ein(
dim c = 8, f = 12
input x: f32[3, c]
def mlp(x, p) {
  param p.fc1.weight: f32[f, c]
  param p.fc1.bias: f32[f]
  param p.fc2.weight: f32[c, f]
  return linear(gelu(linear(x, p.fc1.weight, p.fc1.bias)), p.fc2.weight), x
}
for i in 0..3 {
  y, skip = mlp(x, blocks.{i}.mlp)
  x = y + skip
}
a, b = rearrange(x, "t (k d) -> k t d", k=2)
output x
output ab = a * b
)ein"},
    {"half_float_storage", R"ein(
input x: f16[3, 8]
input y: bf16[8]
param w: bf16[8, 5]
h = x @ w + 1.5
output z = softmax(h, axis=-1)
output hb = y * 2.0
output mixed = x + y
)ein", 4e-3, 1e-2},
    {"integer_arithmetic_and_reductions", R"ein(
input ids: i32[4, 6]
input keep: bool[4, 6]
output shifted = ids * 3 - 1
output biggest = max(ids, axis=-1)
output kept = where(keep, ids, 0)
output smallest = min(ids, axis=0, keepdim=true)
)ein"},
    {"einops_ellipsis_groups_and_anonymous_axes", R"ein(
input x: f32[2, 3, 4, 5]
input g: f32[6, 4]
output left_only = reduce(x, "b ... c -> b c", "mean")
output flat = rearrange(x, "b ... -> b (...)")
output flat_first = rearrange(x, "b ... c -> (... c) b")
output pool = reduce(g, "(h 2) w -> h w", "max")
output pool2 = reduce(g, "(h 2) (w 2) -> h w", "sum")
output tiled = repeat(g, "h w -> h w 3")
output widened = repeat(g, "h w -> h (w 2)")
)ein"},
    {"any_all_reductions", R"ein(
input m: bool[3, 4]
input x: f32[3, 4]
output a = any(m, axis=-1)
output b = all(x > 0, axis=0, keepdim=true)
output c = reduce(m, "h w -> h", "any")
output d = reduce(x > -0.5, "h (w 2) -> h w", "all")
output e = any(m, axis=[0, 1])
output f = all(x)
)ein"},
    {"step_slicing", R"ein(
input x: f32[7, 6, 5]
output every_other = x[::2]
output strided = x[1:6:2, ::3, -3:]
output picked = x[..., ::2][:, 0] * 2
output summed = sum(x[::3, 1::2], axis=0)
)ein"},
    // reshape is torch.reshape; conv2d is F.conv2d, here against the same sums written with step slices.
    {"reshape_and_patch_convolution", R"ein(
input x: f32[2, 3, 6, 7]
input img: f32[2, 3, 8, 9]
param w: f32[5, 3, 2, 2]
param bias: f32[5]
param w3: f32[4, 3, 2, 3]
output flat = reshape(x, [2, -1])
output heads = reshape(x, [6, 3, 14])
output heads_by_rearrange = rearrange(x, "b c (h two) w -> (b c) h (two w)", two=2)
output back = reshape(reshape(x, [-1]), [2, 3, 6, 7]) * 1.0
output x_again = x * 1.0
output patches = conv2d(img, w, bias, stride=2)
output by_slices = einsum("b c i j, o c -> b o i j", img[:, :, 0:8:2, 0:8:2], w[:, :, 0, 0]) + einsum("b c i j, o c -> b o i j", img[:, :, 0:8:2, 1:8:2], w[:, :, 0, 1]) + einsum("b c i j, o c -> b o i j", img[:, :, 1:8:2, 0:8:2], w[:, :, 1, 0]) + einsum("b c i j, o c -> b o i j", img[:, :, 1:8:2, 1:8:2], w[:, :, 1, 1]) + rearrange(bias, "o -> o 1 1")
output strided = conv2d(img, w3, stride=[2, 4])
output strided_by_slices = einsum("b c i j, o c -> b o i j", img[:, :, 0:7:2, 0:5:4], w3[:, :, 0, 0]) + einsum("b c i j, o c -> b o i j", img[:, :, 0:7:2, 1:6:4], w3[:, :, 0, 1]) + einsum("b c i j, o c -> b o i j", img[:, :, 0:7:2, 2:7:4], w3[:, :, 0, 2]) + einsum("b c i j, o c -> b o i j", img[:, :, 1:8:2, 0:5:4], w3[:, :, 1, 0]) + einsum("b c i j, o c -> b o i j", img[:, :, 1:8:2, 1:6:4], w3[:, :, 1, 1]) + einsum("b c i j, o c -> b o i j", img[:, :, 1:8:2, 2:7:4], w3[:, :, 1, 2])
)ein", 1e-4, 1e-4, {}, {}, {{"heads", "heads_by_rearrange"}, {"back", "x_again"}, {"patches", "by_slices"}, {"strided", "strided_by_slices"}}},
    // conv1d/conv2d with padding, strides, dilations and groups: the windows
    // of the padded input (a view) contracted with the weight, against the
    // same sums written with pad() and step slices.
    {"overlapping_padded_grouped_convolutions", R"ein(
input x: f32[2, 4, 11]
input img: f32[2, 6, 9, 8]
param w: f32[5, 4, 3]
param b: f32[5]
param g: f32[4, 3, 3, 2]
param dw: f32[6, 1, 3, 3]
output y = conv1d(x, w, b, stride=2, padding=1)
xp = pad(x, [1, 1])
output y_by_slices = einsum("b c t, o c -> b o t", xp[:, :, 0:11:2], w[:, :, 0]) + einsum("b c t, o c -> b o t", xp[:, :, 1:12:2], w[:, :, 1]) + einsum("b c t, o c -> b o t", xp[:, :, 2:13:2], w[:, :, 2]) + rearrange(b, "o -> o 1")
output dilated = conv1d(x, w, padding="same", dilation=2)
output grouped = conv2d(img, g, stride=[2, 1], padding=[2, 0], dilation=[1, 3], groups=2)
output depthwise = conv2d(img, dw, padding=1, groups=6)
ip = pad(img, [1, 1, 1, 1])
output depthwise_by_slices = ip[:, :, 0:9, 0:8] * rearrange(dw[:, 0, 0, 0], "c -> c 1 1") + ip[:, :, 0:9, 1:9] * rearrange(dw[:, 0, 0, 1], "c -> c 1 1") + ip[:, :, 0:9, 2:10] * rearrange(dw[:, 0, 0, 2], "c -> c 1 1") + ip[:, :, 1:10, 0:8] * rearrange(dw[:, 0, 1, 0], "c -> c 1 1") + ip[:, :, 1:10, 1:9] * rearrange(dw[:, 0, 1, 1], "c -> c 1 1") + ip[:, :, 1:10, 2:10] * rearrange(dw[:, 0, 1, 2], "c -> c 1 1") + ip[:, :, 2:11, 0:8] * rearrange(dw[:, 0, 2, 0], "c -> c 1 1") + ip[:, :, 2:11, 1:9] * rearrange(dw[:, 0, 2, 1], "c -> c 1 1") + ip[:, :, 2:11, 2:10] * rearrange(dw[:, 0, 2, 2], "c -> c 1 1")
)ein", 1e-4, 1e-4, {}, {}, {{"y", "y_by_slices"}, {"depthwise", "depthwise_by_slices"}}},
    {"hand_written_softmax_and_norms", R"ein(
input s: f32[2, 3, 9]
output p = exp(s - max(s, axis=-1, keepdim=true)) / sum(exp(s - max(s, axis=-1, keepdim=true)), axis=-1, keepdim=true)
mu = mean(s, axis=-1, keepdim=true)
output ln1 = (s - mu) / sqrt(var(s, axis=-1, keepdim=true) + 1e-5)
output ln2 = (s - mu) / (std(s, axis=-1, unbiased=true, keepdim=true) + 1e-6)
)ein"},
    {"sdpa_matches_the_written_out_formula", R"ein(
input q: f32[2, 3, 7, 8]
input k: f32[2, 3, 9, 8]
input v: f32[2, 3, 9, 5]
input keep: bool[2, 1, 7, 9]
input bias: f32[7, 9]
output y = scaled_dot_product_attention(q, k, v)
output y_formula = einsum("b h i j, b h j e -> b h i e", softmax(einsum("b h i d, b h j d -> b h i j", q, k) / sqrt(8), axis=-1), v)
output kept = scaled_dot_product_attention(q, k, v, mask=keep, scale=0.5)
output added = scaled_dot_product_attention(q, k, v, bias)
output added_formula = softmax(q @ transpose(k, -1, -2) / sqrt(8) + bias, axis=-1) @ v
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}, {{"y", "y_formula"}, {"added", "added_formula"}}},
    {"inputs_and_outputs_declared_per_layer_in_a_loop", R"ein(
dim t = 4, c = 8
input x: f32[t, c]
for i in 0..3 {
  input past.{i}.key: f32[5, c]
  output present.{i}.key = concat([past.{i}.key, x * (i + 1.0)], axis=0)
}
output last = present.2.key[-1] + past.0.key[0]
output present.1.key_again = present.1.key * 1.0
)ein", 1e-5, 1e-5, {}, {}, {{"present.1.key", "present.1.key_again"}}},
    {"sdpa_causal", R"ein(
input q: f32[2, 3, 7, 8]
input k: f32[2, 3, 7, 8]
input v: f32[2, 3, 7, 5]
output y = scaled_dot_product_attention(q, k, v, causal=true)
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}},
    {"sdpa_causal_chunk_after_cached_keys", R"ein(
input q: f32[1, 2, 3, 8]
input k: f32[1, 2, 10, 8]
input v: f32[1, 2, 10, 8]
output y = scaled_dot_product_attention(q, k, v, causal=true)
output one = scaled_dot_product_attention(q[:, :, -1:], k, v, causal=true)
output all_keys = scaled_dot_product_attention(q[:, :, -1:], k, v)
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}, {{"one", "all_keys"}}},
    {"sdpa_grouped_query_causal_with_masks", R"ein(
input q: f32[2, 6, 5, 8]
input k: f32[2, 2, 9, 8]
input v: f32[2, 2, 9, 4]
input shared: bool[2, 1, 5, 9]
input per_head: f32[2, 6, 5, 9]
output y = scaled_dot_product_attention(q, k, v, causal=true)
output shared_mask = scaled_dot_product_attention(q, k, v, mask=shared, causal=true)
output per_head_mask = scaled_dot_product_attention(q, k, v, mask=per_head)
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}},
    {"sdpa_grouped_query_causal_long", R"ein(
input q: f32[1, 4, 70, 16]
input k: f32[1, 2, 300, 16]
input v: f32[1, 2, 300, 16]
output y = scaled_dot_product_attention(q, k, v, causal=true)
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}},
};

INSTANTIATE_TEST_SUITE_P(Language, CompileAndRun, ::testing::ValuesIn(kCases),
                         [](const auto &info) { return info.param.name; });

// Fusion: each case is written the way models write it, with odd sizes
// (1, 7, 197), and must both fuse (or not) and keep the reference's result.
const Case kFusionCases[] = {
    {"attention_timm_layout", R"ein(
dim b = 2, t = 7, c = 24, h = 3
input x: f32[b, t, c]
param qkv.weight: f32[3*c, c]
q, k, v = rearrange(linear(x, qkv.weight), "b n (k h d) -> k b h n d", k=3, h=h)
s = einsum("b h i d, b h j d -> b h i j", q, k) * (c / h) ** -0.5
output y = rearrange(einsum("b h i j, b h j d -> b h i d", softmax(s, axis=-1), v), "b h n d -> b n (h d)")
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}},
    {"attention_cross_dkh_layout_additive_mask", R"ein(
dim b = 1, t = 7, s = 11, h = 2, d = 5
input x: f32[b, t, h*d]
input memory: f32[b, s, 2*h*d]
input bias: f32[b, 1, t, s]
param wq: f32[h*d, h*d]
q = rearrange(x @ wq, "b t (d h) -> b h t d", h=h)
k, v = rearrange(memory, "b s (d k h) -> k b h s d", k=2, h=h)
scores = einsum("b h i d, b h j d -> b h i j", q, k) / sqrt(d)
output y = einsum("b h i j, b h j d -> b i h d", softmax(scores + bias, axis=-1), v)
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}},
    {"attention_single_query", R"ein(
dim b = 2, n = 197, h = 2, d = 16
input cls: f32[b, h, d]
input tokens: f32[b, h, n, d]
s = einsum("b h d, b h j d -> b h j", cls, tokens) * d ** -0.5
output y = einsum("b h j, b h j e -> b h e", softmax(s, axis=-1), tokens)
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}},
    {"attention_matmul_keep_mask_empty_rows", R"ein(
dim t = 7, d = 4
input q: f32[2, t, d]
input k: f32[2, t, d]
input v: f32[2, t, 3]
input m: f32[t, t]
input gate: f32[t, 1]
# Rows whose gate is negative keep nothing: all -inf, NaN as in PyTorch.
keep = where(gate > 0.0, m > -0.5, gate > 99.0)
s = where(keep, q * 0.5 @ transpose(k, 1, 2), -inf)
output y = softmax(s, axis=-1) @ v
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}},
    {"attention_masked_fill_finite", R"ein(
dim t = 5, d = 4
input q: f32[3, t, d]
input k: f32[3, t, d]
input drop: bool[3, 1, t]
s = masked_fill(einsum("b i d, b j d -> b i j", q, k), drop, -1e9)
output y = einsum("b i j, b j d -> b i d", softmax(s, axis=2), k)
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}},
    {"attention_scaled_after_masked_fill", R"ein(
input q: f32[2, 7, 4]
input k: f32[2, 9, 4]
input v: f32[2, 9, 3]
input drop: bool[2, 1, 9]
s = masked_fill(q @ transpose(k, 1, 2), drop, -inf) / 2.0
output y = softmax(s, axis=-1) @ v
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}},
    {"grouped_query_attention_with_mask", R"ein(
dim b = 2, g = 2, r = 3, t = 7, d = 4
input q: f32[b, g, r, t, d]
input k: f32[b, g, t, d]
input v: f32[b, g, t, d]
input drop: bool[t, t]
s = masked_fill(einsum("b g r i d, b g j d -> b g r i j", q, k) * 0.5, drop, -inf)
output y = einsum("b g r i j, b g j e -> b i g r e", softmax(s, axis=-1), v)
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}},
    {"multi_query_attention_additive_mask", R"ein(
dim b = 2, t = 6, c = 8, h = 4, d = 2
input x: f32[b, t, c]
input bias: f32[b, 1, 1, t]
param wq: f32[c, h*d]
param wk: f32[c, d]
param wv: f32[c, d]
q = rearrange(x @ wq, "b i (h d) -> b h i d", h=h)
s = einsum("b h i d, b j d -> b h i j", q, x @ wk) * d ** -0.5 + bias
output y = rearrange(einsum("b h i j, b j d -> b h i d", softmax(s, axis=-1), x @ wv), "b h i d -> b i (h d)")
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}},
    {"talking_heads_both_mixes", R"ein(
dim b = 2, n = 7, h = 3, d = 4
input q: f32[b, h, n, d]
input k: f32[b, h, n, d]
input v: f32[b, h, n, d]
input keep: bool[b, 1, 1, n]
param l.weight: f32[h, h]
param l.bias: f32[h]
param w.weight: f32[h, h]
s = einsum("b h i d, b h j d -> b h i j", q, k) * 0.5
s = einsum("b h i j, g h -> b g i j", s, l.weight) + rearrange(l.bias, "g -> g 1 1")
p = softmax(where(keep, s, -inf), axis=-1)
p = einsum("b h i j, h g -> b g i j", p, w.weight)
output y = einsum("b h i j, b h j d -> b h i d", p, v)
)ein", 1e-4, 1e-4, {"talking_heads_attention"}, {"softmax"}},
    {"talking_heads_post_mix_only", R"ein(
dim b = 1, n = 6, h = 4, d = 3
input q: f32[b, n, h, d]
input k: f32[b, n, h, d]
input v: f32[b, n, h, d]
param w.weight: f32[h, h]
param w.bias: f32[h]
p = softmax(einsum("b i h d, b j h d -> b h i j", q, k), axis=-1)
p = einsum("b h i j, g h -> b g i j", p, w.weight) + rearrange(w.bias, "g -> 1 g 1 1")
output y = einsum("b h i j, b j h d -> b i h d", p, v)
)ein", 1e-4, 1e-4, {"talking_heads_attention"}, {"softmax"}},
    {"talking_heads_pre_mix_only_additive_mask", R"ein(
dim b = 2, n = 5, m = 7, h = 2, d = 3
input q: f32[b, n, h, d]
input k: f32[b, h, m, d]
input v: f32[b, m, h, d]
input bias: f32[b, 1, 1, m]
param l.weight: f32[h, h]
s = einsum("b i h d, b h j d -> b h i j", q, k) / 4.0
s = einsum("b h i j, h g -> b g i j", s, l.weight) + bias
output y = einsum("b h i j, b j h d -> b i h d", softmax(s, axis=-1), v)
)ein", 1e-4, 1e-4, {"talking_heads_attention"}, {"softmax"}},
    {"no_fusion_when_probabilities_are_an_output", R"ein(
input q: f32[2, 5, 4]
input k: f32[2, 5, 4]
output attn = softmax(einsum("b i d, b j d -> b i j", q, k), axis=-1)
output y = attn @ k
)ein", 1e-4, 1e-4, {"softmax"}, {"attention"}},
    {"no_fusion_when_scaled_after_the_mask", R"ein(
input q: f32[2, 5, 4]
input k: f32[2, 5, 4]
input bias: f32[5, 5]
s = (einsum("b i d, b j d -> b i j", q, k) + bias) * 0.5
output y = softmax(s, axis=-1) @ k
)ein", 1e-4, 1e-4, {"softmax"}, {"attention"}},
    {"gemm_epilogue_permuted_output", R"ein(
dim b = 1, m = 7, c = 5, e = 3
input x: f32[b, m, c]
input r: f32[b, e, m]
param w: f32[e, c]
param bias: f32[e, 1]
output y = gelu(einsum("b m c, e c -> b e m", x, w) + bias) + r
output z = silu(linear(x, w)) + x[:, :, 0:3]
)ein", 1e-4, 1e-4, {"gemm"}, {"elementwise"}},
    {"layernorm_with_residual", R"ein(
dim n = 197, c = 24
input x: f32[n, c]
input r: f32[n, c]
param g: f32[c]
param beta: f32[c]
output y = layernorm(x + r, g, beta, eps=1e-6)
mu = mean(x, axis=-1, keepdim=true)
output z = (x - mu) / (std(x, axis=-1, unbiased=true, keepdim=true) + 1e-6)
)ein", 1e-4, 1e-4, {"layernorm"}, {"elementwise", "reduce"}},
    // Every spelling of the variance and of the reciprocal square root is one layer norm.
    {"layernorm_spellings", R"ein(
input x: f32[5, 5, 24]
param w: f32[24]
param b: f32[24]
def squared(x) {
  mu = mean(x, axis=-1, keepdim=true)
  return (x - mu) / sqrt(mean((x - mu) * (x - mu), axis=-1, keepdim=true) + 1e-5) * w + b
}
def power(x) {
  mu = mean(x, axis=-1, keepdim=true)
  return (x - mu) / sqrt(mean((x - mu) ** 2, axis=-1, keepdim=true) + 1e-5) * w + b
}
def rsqrt_form(x) {
  return (x - mean(x, axis=-1, keepdim=true)) * rsqrt(var(x, axis=-1, keepdim=true) + 1e-5) * w + b
}
def power_form(x) {
  return (x - mean(x, axis=-1, keepdim=true)) * (var(x, axis=-1, keepdim=true) + 1e-5) ** -0.5 * w + b
}
def root_form(x) {
  return w * ((x - mean(x, axis=-1, keepdim=true)) / (var(x, axis=-1, keepdim=true) + 1e-5) ** 0.5) + b
}
# One norm per spelling, each of its own input row, so that none shares a value with another.
output a = squared(x[0])
output c = power(x[1])
output d = rsqrt_form(x[2])
output e = power_form(x[3])
output f = root_form(x[4])
)ein", 1e-4, 1e-4, {"layernorm"}, {"elementwise", "reduce"}},
    // rmsnorm (LlamaRMSNorm) with a residual add only the norm reads (it joins
    // the norm), and a sum a Llama block keeps (it stays an add).
    {"rmsnorm_with_residual", R"ein(
dim n = 197, c = 24
input x: f32[n, c]
input r: f32[n, c]
param g: f32[c]
h = x + r
output y = rmsnorm(h, g)
output z = rmsnorm(h + rmsnorm(x, eps=1e-5), g, eps=1e-6)
)ein", 1e-4, 1e-4, {"layernorm"}, {"reduce"}},
    // Every spelling of RMSNorm is one norm step, and each computes what the
    // built-in does (in the float64 reference).
    {"rmsnorm_spellings", R"ein(
input x: f32[7, 5, 24]
param w: f32[24]
def squared(x) {
  return x / sqrt(mean(x * x, -1, keepdim=true) + 1e-6) * w
}
def rsqrt_form(x) {
  return x * rsqrt(mean(x ** 2, axis=-1, keepdim=true) + 1e-6) * w
}
def llama(x) {
  return w * (x * rsqrt(mean(x ** 2, axis=-1, keepdim=true) + 1e-6))
}
def power_form(x) {
  return x * (mean(x ** 2, axis=-1, keepdim=true) + 1e-6) ** -0.5 * w
}
def shared(x) {
  squares = x * x
  ms = mean(squares, axis=-1, keepdim=true)
  inverse = (1e-6 + ms) ** -0.5
  return w * x * inverse
}
def root_form(x) {
  return x / (mean(x ** 2, axis=-1, keepdim=true) + 1e-6) ** 0.5
}
# One norm per spelling, each of its own input row, so that none shares a value with another.
output a = squared(x[0])
output b = rsqrt_form(x[1])
output c = llama(x[2])
output d = power_form(x[3])
output e = shared(x[4])
output f = root_form(x[5])
output builtin = rmsnorm(x[6], w)
output builtin_a = rmsnorm(x[0], w)
output builtin_e = rmsnorm(x[4], w, eps=1e-6)
output builtin_f = rmsnorm(x[5])
)ein", 1e-4, 1e-4, {"layernorm"}, {"elementwise", "reduce"},
     {{"a", "builtin_a"}, {"e", "builtin_e"}, {"f", "builtin_f"}}},
    // A Llama-style decoder block with every item of issue 22's language part:
    // rotary embeddings from sin/cos of the positions' angles, a causal bias
    // as where() of two numbers, the built-in rmsnorm, a hand-written one of
    // a kept residual sum, and the final norm (hand-written, HF's order) of a
    // sum only it reads, which joins it as its residual.
    {"llama_style_block", R"ein(
dim t = 6, d = 16, h = 2, e = 8, f = 24
input x: f32[t, d]
input pos: f32[t]
param inv_freq: f32[e / 2]
param attn_norm.weight: f32[d]
param mlp_norm.weight: f32[d]
param norm.weight: f32[d]
param wq: f32[d, h * e]
param wk: f32[d, h * e]
param wv: f32[d, h * e]
param wo: f32[h * e, d]
param w_gate: f32[d, f]
param w_up: f32[d, f]
param w_down: f32[f, d]
# Rotary embeddings (rotate_half), from the positions' angles.
freqs = einsum("t,k->tk", pos, inv_freq)
emb = concat([freqs, freqs], -1)
cos_t = cos(emb)
sin_t = sin(emb)
def rope(q) {
  rotated = concat([-q[..., e / 2:], q[..., :e / 2]], -1)
  return q * cos_t + rotated * sin_t
}
# Causal in the order of the positions (the diagonal always attends).
causal = rearrange(pos, "t -> t 1") >= pos
bias = where(causal, 0.0, -inf)
n = rmsnorm(x, attn_norm.weight, eps=1e-6)
q = rearrange(n @ wq, "t (h e) -> h t e", h=h)
k = rearrange(n @ wk, "t (h e) -> h t e", h=h)
v = rearrange(n @ wv, "t (h e) -> h t e", h=h)
s = einsum("h i e, h j e -> h i j", rope(q), rope(k)) * e ** -0.5 + bias
hh = x + rearrange(softmax(s, axis=-1) @ v, "h t e -> t (h e)") @ wo
m = hh * rsqrt(mean(hh ** 2, axis=-1, keepdim=true) + 1e-6) * mlp_norm.weight
out = hh + (silu(m @ w_gate) * (m @ w_up)) @ w_down
output y = norm.weight * (out * rsqrt(mean(out ** 2, axis=-1, keepdim=true) + 1e-6))
)ein", 1e-4, 1e-4, {"layernorm"}, {"reduce"}},
    // RMSNorm has no shift: a bias after it stays an element-wise add.
    {"rmsnorm_then_bias", R"ein(
input x: f32[3, 16]
param w: f32[16]
param b: f32[16]
output y = x * rsqrt(mean(x ** 2, axis=-1, keepdim=true) + 1e-5) * w + b
)ein", 1e-4, 1e-4, {"layernorm", "elementwise"}, {"reduce"}},
    // Constant folding (kern-plan-memory marks, einc computes): element-wise
    // kernels of parameters only are stored with the weights; no step left
    // but the gemm, also with a folded input read transposed and sliced.
    {"folded_weights", R"ein(
input x: f32[3, 8]
param w: f32[6, 8]
param pos: f32[10, 8]
scaled = w * 0.5 + exp(-w)
output y = x @ rearrange(scaled, "o i -> i o") + x @ rearrange(pos[2:8] * 0.125 - scaled, "o i -> i o")
)ein", 1e-5, 1e-5, {"gemm"}, {"elementwise", "copy"}},
    // Horizontal GEMM fusion: q/k/v linears with biases become one gemm,
    // `x @ gate` and `x @ up` another; the parts are strided views of it.
    {"parallel_projections", R"ein(
input x: f32[2, 5, 12]
param q.weight: f32[8, 12]
param q.bias: f32[8]
param k.weight: f32[4, 12]
param k.bias: f32[4]
param v.weight: f32[4, 12]
param v.bias: f32[4]
param gate: f32[12, 6]
param up: f32[12, 6]
q = linear(x, q.weight, q.bias)
k = linear(x, k.weight, k.bias)
v = linear(x, v.weight, v.bias)
output attended = q[..., 4:] * k + rearrange(v, "b t d -> b t d")
output swiglu = silu(x @ gate) * (x @ up)
)ein", 1e-4, 1e-4, {"gemm"}, {"copy"}},
    {"softmax_spellings", R"ein(
input s: f32[3, 7, 11]
e = exp(s - max(s, axis=-1, keepdim=true))
output reciprocal = e * (1 / sum(e, axis=-1, keepdim=true))
output power = e * sum(e, axis=-1, keepdim=true) ** -1
)ein", 1e-5, 1e-4, {"softmax"}, {"elementwise", "reduce"}},
    // Rotary embeddings written by hand (rotate_half: slices, a negation and
    // a concat): the element-wise step is distributed over the concat's parts,
    // each computing its slab in place, so no copy is left; q and k feed
    // grouped-query causal attention, whose result is written in place too.
    {"rotary_by_hand_without_copies", R"ein(
dim b = 2, t = 5, h = 4, kv = 2, d = 8
input x: f32[b, t, h * d]
input pos: f32[t]
param wq: f32[h * d, h * d]
param wk: f32[kv * d, h * d]
param wv: f32[kv * d, h * d]
inv_freq = 1.0 / 10000.0 ** (arange(0, d, 2) / d)
freqs = einsum("t, f -> t f", pos, inv_freq)
angles = concat([freqs, freqs], axis=-1)
def rotary(x) {
  rotated = concat([-x[..., d / 2:], x[..., :d / 2]], axis=-1)
  return x * cos(angles) + rotated * sin(angles)
}
q = rotary(rearrange(linear(x, wq), "b t (h d) -> b h t d", h=h))
k = rotary(rearrange(linear(x, wk), "b t (h d) -> b h t d", h=kv))
v = rearrange(linear(x, wv), "b t (h d) -> b h t d", h=kv)
output q_rotated = q * 1.0
output y = scaled_dot_product_attention(q, k, v, causal=true)
)ein", 1e-4, 1e-4, {"attention", "elementwise"}, {"copy"}},
    // The same rotation of one tensor as its own output, and with each half
    // computed further (a consumer of the concat with a broadcast operand).
    {"rotary_concat_parts_computed_in_place", R"ein(
input x: f32[3, 2, 6]
input c: f32[2, 6]
input s: f32[6]
rotated = concat([-x[..., 3:], x[..., :3]], axis=-1)
output y = x * c + rotated * s
output z = relu(concat([x[..., :2] * 2.0, exp(x[..., 2:])], axis=-1) - s)
)ein", 1e-5, 1e-5, {"elementwise"}, {"copy"}},
    // Hugging Face's repeat_kv written by hand (each key/value head repeated
    // for its group of query heads, adjacent or cycling) before causal
    // attention over a cache of earlier keys: grouped-query attention that
    // reads the keys and values in place, no repeat copies.
    {"repeat_kv_by_hand_is_grouped_query", R"ein(
input q: f32[2, 6, 3, 8]
input keys: f32[2, 2, 9, 8]
input values: f32[2, 2, 9, 4]
input mask: f32[2, 6, 3, 9]
def repeat_kv(x) { return repeat(x, "b h t d -> b (h g) t d", g=3) }
output y = scaled_dot_product_attention(q, repeat_kv(keys), repeat_kv(values), causal=true)
output masked = scaled_dot_product_attention(q, repeat_kv(keys), repeat_kv(values), mask=mask, causal=true)
output grouped = scaled_dot_product_attention(q, keys, values, causal=true)
s = einsum("b h i d, b h j d -> b h i j", q, repeat_kv(keys)) * 8 ** -0.5
output by_hand = einsum("b h i j, b h j e -> b h i e", softmax(s, axis=-1), repeat_kv(values))
)ein", 1e-4, 1e-4, {"attention"}, {"copy", "softmax"}, {{"y", "grouped"}}},
    // Heads repeated cycling ((g h), the whole axis over again) group the
    // query heads the same way; the queries and the result, whose grouped
    // heads are not adjacent, are copied (the kernel's one query axis would
    // need two strides), but the keys and values are still read in place.
    {"repeat_kv_cycled_is_grouped_query", R"ein(
input q: f32[2, 6, 3, 8]
input keys: f32[2, 2, 9, 8]
input values: f32[2, 2, 9, 4]
output y = scaled_dot_product_attention(q, repeat(keys, "b h t d -> b (g h) t d", g=3),
                                        repeat(values, "b h t d -> b (g h) t d", g=3))
)ein", 1e-4, 1e-4, {"attention"}, {"softmax"}},
    // One query per head (a decode step): grouped-query attention writes its
    // result straight into the layout of the head merge that follows.
    {"grouped_query_decode_head_merge_in_place", R"ein(
input q: f32[2, 6, 1, 8]
input keys: f32[2, 2, 9, 8]
input values: f32[2, 2, 9, 8]
a = scaled_dot_product_attention(q, repeat(keys, "b h t d -> b (h g) t d", g=3),
                                 repeat(values, "b h t d -> b (h g) t d", g=3), causal=true)
output merged = rearrange(a, "b h t d -> b t (h d)")
)ein", 1e-4, 1e-4, {"attention"}, {"copy"}},
};

INSTANTIATE_TEST_SUITE_P(Fusion, CompileAndRun, ::testing::ValuesIn(kFusionCases),
                         [](const auto &info) { return info.param.name; });

// Random attention spellings: every axis order of Q, K, V, the scores and the
// output, einsum label names that differ between the two contractions, the
// scale on Q, K or the scores (multiplied or divided), each mask form with a
// random broadcast shape, a single query, grouped and multi-query heads,
// sizes of 1. Each must fuse into one
// attention step and match the reference.
std::vector<Case> randomAttentionCases(int count) {
  std::vector<Case> cases;
  std::mt19937 random(2026);
  auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  auto shuffled = [&](std::vector<std::string> labels) {
    std::shuffle(labels.begin(), labels.end(), random);
    return labels;
  };
  auto join = [](const std::vector<std::string> &labels) {
    std::string text;
    for (const std::string &label : labels) text += (text.empty() ? "" : " ") + label;
    return text;
  };
  for (int index = 0; index < count; ++index) {
    bool singleQuery = pick(4) == 0;
    std::map<std::string, int> sizes = {{"b", 1 + pick(2)}, {"h", 1 + pick(3)}, {"i", 1 + pick(7)},
                                        {"j", 1 + pick(9)}, {"d", 1 + pick(6)}, {"e", 1 + pick(5)}};
    auto shapeOf = [&](const std::vector<std::string> &labels) {
      std::string text;
      for (const std::string &label : labels) text += (text.empty() ? "" : ", ") + std::to_string(sizes[label]);
      return "[" + text + "]";
    };
    std::vector<std::string> qAxes{"b", "h", "d"}, sAxes{"b", "h", "j"}, oAxes{"b", "h", "e"};
    std::vector<std::string> kAxes{"b", "j", "d"}, vAxes{"b", "j", "e"};
    auto addQueryLabel = [&](const std::string &label) {
      qAxes.push_back(label);
      sAxes.push_back(label);
      oAxes.push_back(label);
    };
    if (!singleQuery) addQueryLabel("i");
    if (pick(4) == 0) addQueryLabel("r");  // grouped queries: r per key/value head
    if (pick(4) != 0) {  // else multi-query: one key/value head shared by all h
      kAxes.push_back("h");
      vAxes.push_back("h");
    }
    sizes["r"] = 1 + pick(3);
    std::vector<std::string> q = shuffled(qAxes), k = shuffled(kAxes), v = shuffled(vAxes), scores = shuffled(sAxes),
                             out = shuffled(oAxes);
    std::string source = "input q: f32" + shapeOf(q) + "\ninput k: f32" + shapeOf(k) + "\ninput v: f32" + shapeOf(v) + "\n";
    std::string qExpr = "q", kExpr = "k", scale;
    switch (pick(5)) {
      case 0: qExpr = "q * 0.5"; break;
      case 1: kExpr = "k / 3.0"; break;
      case 2: scale = " * 0.25"; break;
      case 3: scale = " / 2.0"; break;
      default: break;
    }
    source += "s = einsum(\"" + join(q) + ", " + join(k) + " -> " + join(scores) + "\", " + qExpr + ", " + kExpr +
              ")" + scale + "\n";
    // A mask over a random trailing part of the scores' axes, some of them 1.
    int maskKind = pick(4);
    if (maskKind != 0) {
      size_t rank = scores.size() - static_cast<size_t>(pick(static_cast<int>(scores.size())));
      std::string shape;
      for (size_t a = scores.size() - rank; a < scores.size(); ++a)
        shape += (shape.empty() ? "" : ", ") + (pick(3) == 0 ? std::string("1") : std::to_string(sizes[scores[a]]));
      source += std::string("input m: ") + (maskKind == 3 ? "f32" : "bool") + "[" + shape + "]\n";
      if (maskKind == 1) source += "s = masked_fill(s, m, -inf)\n";
      if (maskKind == 2) source += "s = where(m, s, -1e4)\n";
      if (maskKind == 3) source += "s = s + m\n";
    }
    int axis = static_cast<int>(std::find(scores.begin(), scores.end(), "j") - scores.begin());
    // The second contraction names its axes differently.
    std::map<std::string, std::string> rename = {{"b", "n"}, {"h", "g"}, {"i", "x"}, {"j", "y"}, {"e", "f"}, {"r", "s"}};
    auto renamed = [&](std::vector<std::string> labels) {
      for (std::string &label : labels) label = rename[label];
      return labels;
    };
    source += "output o = einsum(\"" + join(renamed(scores)) + ", " + join(renamed(v)) + " -> " + join(renamed(out)) +
              "\", softmax(s, axis=" + std::to_string(axis) + "), v)\n";
    cases.push_back(Case{"random_attention_" + std::to_string(index), source, 1e-4, 1e-4, {"attention"}, {"softmax"}});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(RandomAttention, CompileAndRun, ::testing::ValuesIn(randomAttentionCases(60)),
                         [](const auto &info) { return info.param.name; });

// Random einsums of one to four operands: labels repeated inside an operand
// (diagonals), labels summed, kept or broadcast (size 1 in some operands, as
// NumPy and torch allow), letters or words, an explicit or implicit output.
// The reference evaluates the front end's equation directly, so contraction
// planning and lowering are checked against it.
std::vector<Case> randomEinsumCases(int count) {
  std::vector<Case> cases;
  std::mt19937 random(1729);
  auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  const std::string letters = "abcde";
  for (int n = 0; n < count; ++n) {
    std::map<char, int> sizes;
    for (char label : letters) sizes[label] = 1 + pick(4);
    int operands = 1 + pick(4);
    std::vector<std::string> terms(operands);
    std::string source;
    std::set<char> used;
    for (int i = 0; i < operands; ++i) {
      int rank = 1 + pick(3);
      for (int axis = 0; axis < rank; ++axis) terms[i] += letters[pick(static_cast<int>(letters.size()))];
      std::string shape;
      for (char label : terms[i]) {
        used.insert(label);
        // A label once in its term may be 1 there while larger elsewhere: it broadcasts.
        // (A repeated label takes the diagonal, whose sizes must agree.)
        bool once = std::count(terms[i].begin(), terms[i].end(), label) == 1;
        int size = once && pick(4) == 0 ? 1 : sizes[label];
        shape += (shape.empty() ? "" : ", ") + std::to_string(size);
      }
      source += "input x" + std::to_string(i) + ": f32[" + shape + "]\n";
    }
    // Word labels are told from letters by a space inside a term.
    bool words = pick(2) == 0 && std::any_of(terms.begin(), terms.end(), [](auto &term) { return term.size() > 1; });
    auto spell = [&](const std::string &term) {
      if (!words) return term;
      std::string text;
      for (char label : term) text += (text.empty() ? "" : " ") + std::string("ax_") + label;
      return text;
    };
    std::string equation;
    for (int i = 0; i < operands; ++i) equation += (i ? (words ? ", " : ",") : "") + spell(terms[i]);
    if (pick(3) != 0) {
      std::string output;
      for (char label : used)
        if (pick(2) == 0) output += label;
      std::shuffle(output.begin(), output.end(), random);
      equation += (words ? " -> " : "->") + spell(output);
    }
    std::string call = "einsum(\"" + equation + "\"";
    for (int i = 0; i < operands; ++i) call += ", x" + std::to_string(i);
    source += "output y = " + call + ") * 1.0\n";
    cases.push_back(Case{"random_einsum_" + std::to_string(n), source});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(RandomEinsum, CompileAndRun, ::testing::ValuesIn(randomEinsumCases(60)),
                         [](const auto &info) { return info.param.name; });

}  // namespace
