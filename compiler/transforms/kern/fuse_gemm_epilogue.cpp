// Moves element-wise epilogues into the GEMM that produces their input:
// act(gemm + bias) + residual becomes one kern.gemm.
#include "compiler/transforms/kern/passes.hpp"
#include "ir/source_locations.hpp"

namespace ein {
#define GEN_PASS_DEF_FUSEGEMMEPILOGUE
#include "compiler/transforms/kern/passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::Shape;
using ein::Size;
using ein::kern::Activation;
using ein::kern::denseStrides;

namespace {

std::optional<SmallVector<int64_t>> constants(const Shape &sizes) {
  SmallVector<int64_t> values;
  for (const Size &size : sizes) {
    std::optional<int64_t> value = size.constant();
    if (!value) return std::nullopt;
    values.push_back(*value);
  }
  return values;
}

// The strides over the gemm's iteration space [batch.., m, n] of a view that
// reads the gemm's result buffer (dense over `shape`) with `strides`, given
// that the gemm writes iteration axis t at buffer stride cStrides[t]. Each
// iteration axis must cover consecutive result axes whose view strides merge
// like the buffer's; otherwise there is no such view.
std::optional<SmallVector<int64_t>> constantIterationStrides(ArrayRef<int64_t> shape, ArrayRef<int64_t> iterationSizes,
                                                             ArrayRef<int64_t> cStrides, ArrayRef<int64_t> strides) {
  Shape denseSizes = denseStrides(Shape(shape.begin(), shape.end()));
  SmallVector<int64_t> dense = *constants(denseSizes);
  SmallVector<int64_t> result;
  for (auto [size, cStride] : llvm::zip(iterationSizes, cStrides)) {
    if (size == 1) {
      result.push_back(0);
      continue;
    }
    // The result axes this one spans: buffer strides in [cStride, cStride * size).
    int64_t covered = 1, innermost = -1, merged = 0;
    bool first = true;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1 || dense[d] < cStride || dense[d] >= cStride * size) continue;
      if (!first && merged != strides[d] * shape[d]) return std::nullopt;
      merged = strides[d];
      covered *= shape[d];
      innermost = static_cast<int64_t>(d);
      first = false;
    }
    if (covered != size || innermost < 0 || dense[innermost] != cStride) return std::nullopt;
    result.push_back(strides[innermost]);
  }
  return result;
}

// The same where sizes are over ranged dims, for a gemm that writes its
// iteration space in row-major order: each iteration axis is then a run of
// consecutive result axes (unit axes skipped) whose sizes multiply to it, and
// whose view strides must merge.
std::optional<Shape> symbolicIterationStrides(const Shape &shape, const Shape &iterationSizes, const Shape &cStrides,
                                              const Shape &strides) {
  if (cStrides != denseStrides(iterationSizes)) return std::nullopt;
  Shape result;
  size_t d = 0;
  for (const Size &size : iterationSizes) {
    Shape sizes, runStrides;
    Size covered = 1;
    while (covered != size && d < shape.size()) {
      if (shape[d] != 1) {
        sizes.push_back(shape[d]);
        runStrides.push_back(strides[d]);
        covered *= shape[d];
      }
      ++d;
    }
    if (covered != size) return std::nullopt;
    if (size == 1) {
      result.push_back(0);
      continue;
    }
    Size merged = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (i > 0 && merged != runStrides[i] * sizes[i]) return std::nullopt;
      merged = runStrides[i];
    }
    result.push_back(merged);
  }
  for (; d < shape.size(); ++d)
    if (shape[d] != 1) return std::nullopt;
  return result;
}

std::optional<Shape> iterationStrides(const Shape &shape, const Shape &iterationSizes, const Shape &cStrides,
                                      const Shape &strides) {
  auto constantShape = constants(shape), constantSizes = constants(iterationSizes);
  auto constantC = constants(cStrides), constantStrides = constants(strides);
  if (!constantShape || !constantSizes || !constantC || !constantStrides)
    return symbolicIterationStrides(shape, iterationSizes, cStrides, strides);
  auto result = constantIterationStrides(*constantShape, *constantSizes, *constantC, *constantStrides);
  if (!result) return std::nullopt;
  return Shape(result->begin(), result->end());
}

// Whether `view` reads a dense buffer of `shape` element for element (unit
// axes may have any stride).
bool readsDensely(ein::kern::ViewAttr view, const Shape &shape) {
  Shape dense = denseStrides(shape);
  if (view.getOffset() != 0) return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && view.getStrides()[d] != dense[d]) return false;
  return true;
}

// The epilogue activation an op of an element-wise body is: the kern op of
// the activation's name (kern.gelu is Activation::gelu).
std::optional<Activation> activationOf(Operation *op) {
  if (op->getName().getDialectNamespace() != ein::kern::KernDialect::getDialectNamespace()) return std::nullopt;
  std::optional<Activation> activation = ein::kern::symbolizeActivation(op->getName().stripDialect());
  if (activation == Activation::none) return std::nullopt;
  return activation;
}

// What an element-wise body computes from the gemm's element `product`:
// activation(scale * product + bias) + residual, each part optional; bias and
// residual are block arguments (inputs of the element-wise op), the scale a
// product of constants.
struct Epilogue {
  double scale = 1.0;
  BlockArgument bias, residual;
  Activation activation = Activation::none;
};

// The value of an arith.constant f32.
std::optional<double> constantValue(Value value) {
  auto constant = value.getDefiningOp<arith::ConstantOp>();
  auto attr = constant ? dyn_cast<FloatAttr>(constant.getValue()) : FloatAttr();
  return attr ? std::optional<double>(attr.getValueAsDouble()) : std::nullopt;
}

// The factor `op` multiplies `current` by: current * c, c * current, current / c.
std::optional<double> scaleFactor(Operation &op, Value current) {
  if (auto mul = dyn_cast<arith::MulFOp>(op)) {
    Value other = mul.getLhs() == current ? mul.getRhs() : mul.getLhs();
    if (other != current) return constantValue(other);
  }
  if (auto div = dyn_cast<arith::DivFOp>(op); div && div.getLhs() == current)
    if (auto c = constantValue(div.getRhs()); c && *c != 0.0) return 1.0 / *c;
  return std::nullopt;
}

// The other operand of `add` when one is `known` and the other a block argument.
BlockArgument addedArgument(arith::AddFOp add, Value known) {
  Value other = add.getLhs() == known ? add.getRhs() : add.getRhs() == known ? add.getLhs() : Value();
  return dyn_cast_or_null<BlockArgument>(other);
}

std::optional<Epilogue> matchEpilogue(Block &body, BlockArgument product, bool gemmHasBias) {
  // Walk forward from the product: every op must be the next link of the chain.
  Epilogue epilogue;
  Value current = product;
  enum { kBias, kActivation, kResidual, kDone } stage = kBias;
  for (Operation &op : body.without_terminator()) {
    if (isa<arith::ConstantOp>(op)) continue;  // read by a scale, or the match fails below
    if (!llvm::is_contained(op.getOperands(), current) || !op.getResult(0).hasOneUse()) return std::nullopt;
    if (auto factor = scaleFactor(op, current)) {
      // alpha scales the product alone: only before any bias.
      if (stage != kBias || gemmHasBias) return std::nullopt;
      epilogue.scale *= *factor;
    } else if (auto add = dyn_cast<arith::AddFOp>(op)) {
      BlockArgument argument = addedArgument(add, current);
      if (!argument || argument == product) return std::nullopt;
      if (stage == kBias && !gemmHasBias) {
        epilogue.bias = argument;
        stage = kActivation;
      } else if (stage <= kResidual) {
        epilogue.residual = argument;
        stage = kDone;
      } else {
        return std::nullopt;
      }
    } else if (auto activation = activationOf(&op); activation && stage <= kActivation) {
      epilogue.activation = *activation;
      stage = kResidual;
    } else {
      return std::nullopt;
    }
    current = op.getResult(0);
  }
  auto yield = cast<ein::kern::YieldOp>(body.getTerminator());
  if (yield.getValue() != current || current == product) return std::nullopt;
  return epilogue;
}

struct FuseGemmEpiloguePass : ein::impl::FuseGemmEpilogueBase<FuseGemmEpiloguePass> {
  void runOnOperation() override {
    SmallVector<ein::kern::ElementwiseOp> candidates;
    getOperation().walk([&](ein::kern::ElementwiseOp op) { candidates.push_back(op); });
    for (ein::kern::ElementwiseOp elementwise : candidates) tryFuse(elementwise);
  }

  void tryFuse(ein::kern::ElementwiseOp elementwise) {
    auto type = elementwise.getType();
    if (!type.getElementType().isF32()) return;
    for (auto [index, input] : llvm::enumerate(elementwise.getInputs())) {
      auto gemm = input.getDefiningOp<ein::kern::GemmOp>();
      if (!gemm || !input.hasOneUse() || gemm.getType() != type || gemm.getActivation() != Activation::none ||
          gemm.getResidual())
        continue;
      // The gemm's result must be read element for element.
      Shape shape = ein::ir::shapeOf(type);
      if (!readsDensely(cast<ein::kern::ViewAttr>(elementwise.getInputViews()[index]), shape)) continue;
      Block &body = elementwise.getBody().front();
      auto epilogue = matchEpilogue(body, body.getArgument(index), static_cast<bool>(gemm.getBias()));
      if (!epilogue) continue;
      // Bias and residual views over the gemm's iteration space.
      Shape sizes = gemm.getBatch().sizes();
      sizes.insert(sizes.end(), {ein::kern::sizeOf(gemm.getM()), ein::kern::sizeOf(gemm.getN())});
      auto iterationView = [&](BlockArgument argument) -> std::optional<ein::kern::ViewAttr> {
        auto inputView = cast<ein::kern::ViewAttr>(elementwise.getInputViews()[argument.getArgNumber()]);
        auto strides = iterationStrides(shape, sizes, gemm.getCView().getStrides(), inputView.getStrides());
        if (!strides) return std::nullopt;
        return ein::kern::ViewAttr::get(&getContext(), inputView.getOffset(), *strides);
      };
      Value bias = gemm.getBias(), residual;
      std::optional<ein::kern::ViewAttr> biasView = gemm.getBiasView(), residualView;
      if (epilogue->bias) {
        bias = elementwise.getInputs()[epilogue->bias.getArgNumber()];
        biasView = iterationView(epilogue->bias);
        if (!biasView) continue;
      }
      if (epilogue->residual) {
        residual = elementwise.getInputs()[epilogue->residual.getArgNumber()];
        residualView = iterationView(epilogue->residual);
        if (!residualView) continue;
      }
      OpBuilder builder(elementwise);
      auto fused = builder.create<ein::kern::GemmOp>(
          gemm.getLoc(), type, gemm.getA(), gemm.getB(), bias, residual, gemm.getBScale(), gemm.getBatchAttr(),
          gemm.getMAttr(),
          gemm.getNAttr(), gemm.getKAttr(), gemm.getAView(), gemm.getBView(), gemm.getCView(),
          biasView.value_or(ein::kern::ViewAttr()), residualView.value_or(ein::kern::ViewAttr()),
          builder.getF32FloatAttr(static_cast<float>(gemm.getAlpha().convertToDouble() * epilogue->scale)),
          ein::kern::ActivationAttr::get(&getContext(), epilogue->activation));
      fused->setLoc(ein::ir::fusedLocation(fused, {elementwise, gemm}, getArgument()));
      elementwise.replaceAllUsesWith(fused.getResult());
      elementwise.erase();
      gemm.erase();
      return;
    }
  }
};

}  // namespace
