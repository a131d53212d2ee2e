// Contractions: einsum, matmul and linear as strided batched GEMMs, with
// diagonals, sums and permutations around them.
#include "compiler/conversion/ein_to_kern/lowering.hpp"

namespace ein::conversion {

Lowering::Operand Lowering::takeDiagonals(Operand operand) {
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

Lowering::Operand Lowering::sumOut(Location loc, Operand operand, const std::set<std::string> &keep) {
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

Lowering::Operand Lowering::permuteDense(Location loc, const Operand &operand, ArrayRef<std::string> order) {
  Layout permuted{operand.layout.buffer, operand.layout.offset, {}, {}};
  for (const std::string &label : order) {
    size_t i = llvm::find(operand.labels, label) - operand.labels.begin();
    permuted.sizes.push_back(operand.layout.sizes[i]);
    permuted.strides.push_back(operand.layout.strides[i]);
  }
  return Operand{materialize(loc, permuted), SmallVector<std::string>(order)};
}

Size Lowering::strideOf(const Operand &operand, const std::string &label) {
  auto *found = llvm::find(operand.labels, label);
  return found == operand.labels.end() ? Size(0) : operand.layout.strides[found - operand.labels.begin()];
}

Lowering::Operand Lowering::atIndex(const Operand &operand, const std::string &label, int64_t index) {
  Operand result{Layout{operand.layout.buffer, operand.layout.offset, {}, {}}, {}};
  for (size_t i = 0; i < operand.labels.size(); ++i) {
    if (operand.labels[i] == label) {
      result.layout.offset += operand.layout.strides[i] * index;
      continue;
    }
    result.labels.push_back(operand.labels[i]);
    result.layout.sizes.push_back(operand.layout.sizes[i]);
    result.layout.strides.push_back(operand.layout.strides[i]);
  }
  return result;
}

std::optional<FailureOr<Value>> Lowering::buildContractionByParts(Location loc, const Operand &a, const Operand &b,
                                                                  ArrayRef<std::string> kLabels,
                                                                  ArrayRef<std::string> outLabels,
                                                                  RankedTensorType resultType,
                                                                  std::optional<Layout> bias) {
  auto sizeOf = [&](const std::string &label) -> std::optional<int64_t> {
    return a.layout.sizes[llvm::find(a.labels, label) - a.labels.begin()].constant();
  };
  // The GEMM's K: the largest label (the last of equals: a window's columns).
  std::string inner;
  int64_t innerSize = 0, parts = 1;
  for (const std::string &label : kLabels) {
    std::optional<int64_t> size = sizeOf(label);
    if (!size) return std::nullopt;
    parts *= *size;
    if (*size >= innerSize) {
      inner = label;
      innerSize = *size;
    }
  }
  if (innerSize == 0 || (parts /= innerSize) > kMaxContractionParts) return std::nullopt;
  SmallVector<std::string> outer;
  for (const std::string &label : kLabels)
    if (label != inner) outer.push_back(label);
  Value sum;
  for (int64_t part = 0; part < parts; ++part) {
    Operand aPart = a, bPart = b;
    for (int64_t rest = part, i = static_cast<int64_t>(outer.size()); i-- > 0;) {
      const int64_t size = *sizeOf(outer[i]);
      aPart = atIndex(aPart, outer[i], rest % size);
      bPart = atIndex(bPart, outer[i], rest % size);
      rest /= size;
    }
    FailureOr<Value> product =
        buildContraction(loc, aPart, bPart, outLabels, resultType, part == 0 ? bias : std::nullopt, sum);
    if (failed(product)) return product;
    sum = *product;
  }
  return FailureOr<Value>(sum);
}

FailureOr<Value> Lowering::buildContraction(Location loc, Operand a, Operand b, ArrayRef<std::string> outLabels,
                                            RankedTensorType resultType, std::optional<Layout> bias,
                                            Value residual) {
  // The gemm multiplies floats: an integer or bool contraction that runs
  // (one not folded from constants) is the model's to cast.
  if (!isa<mlir::FloatType>(resultType.getElementType()))
    return emitError(loc) << "a contraction (einsum, @, linear) of " << resultType.getElementType()
                          << " tensors runs only on floats; cast its operands with f32(...)";
  a = takeDiagonals(std::move(a));
  b = takeDiagonals(std::move(b));
  std::set<std::string> out(outLabels.begin(), outLabels.end());
  std::set<std::string> keepA = out, keepB = out;
  keepA.insert(b.labels.begin(), b.labels.end());
  keepB.insert(a.labels.begin(), a.labels.end());
  a = sumOut(loc, std::move(a), keepA);
  b = sumOut(loc, std::move(b), keepB);

  std::map<std::string, Size> sizes;
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

  Shape cStrides = denseStrides(ein::ir::shapeOf(resultType));
  auto strideC = [&](const std::string &label) {
    return cStrides[llvm::find(outLabels, label) - outLabels.begin()];
  };

  auto sizesOf = [&](ArrayRef<std::string> labels) {
    Shape result;
    for (const std::string &label : labels) result.push_back(sizes.at(label));
    return result;
  };
  auto stridesOf = [&](const Operand &operand, ArrayRef<std::string> labels) {
    Shape result;
    for (const std::string &label : labels) result.push_back(strideOf(operand, label));
    return result;
  };
  auto stridesInC = [&](ArrayRef<std::string> labels) {
    Shape result;
    for (const std::string &label : labels) result.push_back(strideC(label));
    return result;
  };

  // K must be one axis in both operands.
  auto kMerges = [&]() {
    return mergeAxes(sizesOf(kLabels), stridesOf(a, kLabels)) && mergeAxes(sizesOf(kLabels), stridesOf(b, kLabels));
  };
  const bool oneColumn = llvm::all_of(nLabels, [&](const std::string &label) { return sizes.at(label) == 1; });
  if (!kMerges() && oneColumn)
    if (auto parts = buildContractionByParts(loc, a, b, kLabels, outLabels, resultType, bias)) return *parts;
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

  auto merged = [&](ArrayRef<std::string> labels, ArrayRef<Size> strides) {
    auto axis = mergeAxes(sizesOf(labels), strides);
    return axis ? *axis : std::make_pair(Size(1), Size(0));
  };
  auto [m, aStrideM] = merged(mLabels, stridesOf(a, mLabels));
  Size cStrideM = merged(mLabels, stridesInC(mLabels)).second;
  auto [n, bStrideN] = merged(nLabels, stridesOf(b, nLabels));
  Size cStrideN = merged(nLabels, stridesInC(nLabels)).second;
  auto [k, aStrideK] = merged(kLabels, stridesOf(a, kLabels));
  Size bStrideK = merged(kLabels, stridesOf(b, kLabels)).second;

  Shape batchSizes = sizesOf(batch);
  Shape aView = stridesOf(a, batch), bView = stridesOf(b, batch), cView = stridesInC(batch);
  aView.insert(aView.end(), {aStrideM, aStrideK});
  bView.insert(bView.end(), {bStrideK, bStrideN});
  cView.insert(cView.end(), {cStrideM, cStrideN});

  Value biasBuffer;
  ein::kern::ViewAttr biasView;
  if (bias) {
    // `bias` is indexed by the output labels; it fuses when it merges like C.
    auto biasStride = [&](const std::string &label) {
      return bias->strides[llvm::find(outLabels, label) - outLabels.begin()];
    };
    auto biasStrides = [&](ArrayRef<std::string> labels) {
      Shape result;
      for (const std::string &label : labels) result.push_back(biasStride(label));
      return result;
    };
    auto biasM = mergeAxes(sizesOf(mLabels), biasStrides(mLabels));
    auto biasN = mergeAxes(sizesOf(nLabels), biasStrides(nLabels));
    if (!biasM || !biasN) return emitError(loc) << "bias layout does not fit the GEMM";
    Shape strides = biasStrides(batch);
    strides.insert(strides.end(), {mLabels.empty() ? Size(0) : biasM->second, nLabels.empty() ? Size(0) : biasN->second});
    biasBuffer = bias->buffer;
    biasView = viewOf(context(), bias->offset, strides);
  }
  auto gemm = builder.create<ein::kern::GemmOp>(
      loc, resultType, a.layout.buffer, b.layout.buffer, biasBuffer, residual, /*b_scale=*/Value(),
      sizesAttr(context(), batchSizes), sizeAttr(context(), m), sizeAttr(context(), n), sizeAttr(context(), k),
      viewOf(context(), a.layout.offset, aView),
      viewOf(context(), b.layout.offset, bView), viewOf(context(), 0, cView), biasView,
      residual ? viewOf(context(), 0, cView) : ein::kern::ViewAttr(), builder.getF32FloatAttr(1.0f),
      ein::kern::ActivationAttr::get(context(), ein::kern::Activation::none));
  return gemm.getResult();
}

LogicalResult Lowering::assignContraction(Operation *op, FailureOr<Value> result) {
  if (failed(result)) return failure();
  layouts[op->getResult(0)] = denseLayout(*result);
  return success();
}

std::string Lowering::axisLabel(size_t i) { return "d" + std::to_string(i); }

LogicalResult Lowering::lowerEinsum(ein::ir::EinsumOp einsum) {
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

LogicalResult Lowering::lowerMatmul(ein::ir::MatmulOp matmul) {
  Layout lhs = layouts.at(matmul.getLhs()), rhs = layouts.at(matmul.getRhs());
  bool lhsVector = lhs.sizes.size() == 1, rhsVector = rhs.sizes.size() == 1;
  // NumPy: batch axes broadcast; a vector operand has no M (or N) axis,
  // and no batch axes either (its only axis is K).
  size_t batchRank = std::max(lhs.sizes.size() - (lhsVector ? 1 : 2), rhs.sizes.size() - (rhsVector ? 1 : 2));
  Shape batchSizes(batchRank, 1);
  auto collect = [&](const Layout &layout, size_t matrixRank) {
    size_t own = layout.sizes.size() - matrixRank;
    for (size_t i = 0; i < own; ++i) {
      size_t slot = batchRank - own + i;
      if (batchSizes[slot] == 1) batchSizes[slot] = layout.sizes[i];  // the shape rule checked the others agree
    }
  };
  collect(lhs, lhsVector ? 1 : 2);
  collect(rhs, rhsVector ? 1 : 2);
  SmallVector<std::string> batchLabels;
  for (size_t i = 0; i < batchRank; ++i) batchLabels.push_back(axisLabel(i));

  auto withBatch = [&](const Layout &layout, ArrayRef<std::string> matrixLabels) {
    size_t matrixRank = matrixLabels.size();
    Shape sizes(batchSizes);
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

LogicalResult Lowering::lowerLinear(ein::ir::LinearOp linear) {
  const Layout &input = layouts.at(linear.getInput());
  SmallVector<std::string> inputLabels, outLabels;
  for (size_t i = 0; i + 1 < input.sizes.size(); ++i) inputLabels.push_back(axisLabel(i));
  outLabels = inputLabels;
  inputLabels.push_back("i");
  outLabels.push_back("o");
  std::optional<Layout> bias;
  if (linear.getBias()) bias = broadcastTo(layouts.at(linear.getBias()), shapeOf(linear));
  return assignContraction(linear, buildContraction(linear.getLoc(), Operand{input, inputLabels},
                                                    Operand{layouts.at(linear.getWeight()), {"o", "i"}}, outLabels,
                                                    linear.getType(), bias));
}

}  // namespace ein::conversion
