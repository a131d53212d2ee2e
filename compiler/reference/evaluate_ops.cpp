// The reference semantics of each ein op, in float64: Evaluator::evaluate
// for einsum, rearrange, slice, the element-wise ops, softmax, reductions,
// matmul, linear, layer norm, embedding and concat.
#include "compiler/reference/evaluator.hpp"

#include <algorithm>
#include <cmath>

#include "llvm/ADT/STLExtras.h"

namespace ein::reference::detail {

Expected<Tensor> Evaluator::evaluate(ir::EinsumOp op) {
  std::vector<int64_t> ranks;
  std::vector<ein::Shape> shapes;
  for (Value input : op.getInputs()) {
    shapes.push_back(sizesOf(valueOf(input).shape));
    ranks.push_back(static_cast<int64_t>(shapes.back().size()));
  }
  auto parsed = ein::EinsumEquation::parse(op.getEquation(), ranks, /*canonical=*/true);
  if (ein::failed(parsed)) return opError(op, std::get<ein::EquationError>(parsed).message);
  const auto &equation = std::get<ein::EinsumEquation>(parsed);
  auto resultShape = equation.inferShape(shapes);
  if (ein::failed(resultShape)) return opError(op, std::get<ein::EquationError>(resultShape).message);

  // Number the labels: output labels first, in output order, then the summed ones.
  std::map<std::string, size_t> labelIds;
  std::vector<int64_t> labelSizes;
  auto labelId = [&](const std::string &label) {
    auto [it, inserted] = labelIds.try_emplace(label, labelSizes.size());
    if (inserted) labelSizes.push_back(1);
    return it->second;
  };
  for (const std::string &label : equation.output) labelId(label);
  size_t outputLabels = labelSizes.size();
  // inferShape has checked that each label has one size in every operand.
  std::vector<std::vector<int64_t>> labelStrides;
  for (auto [operand, labels] : llvm::enumerate(equation.inputs)) {
    const Dims &shape = valueOf(op.getInputs()[operand]).shape;
    std::vector<int64_t> axisStrides = rowMajorStrides(shape);
    std::vector<size_t> ids;
    for (const std::string &label : labels) ids.push_back(labelId(label));
    labelStrides.emplace_back(labelSizes.size(), 0);
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      labelSizes[ids[axis]] = shape[axis];
      // A label repeated within an operand adds up its strides: the diagonal.
      labelStrides.back()[ids[axis]] += axisStrides[axis];
    }
  }
  for (std::vector<int64_t> &strides : labelStrides) strides.resize(labelSizes.size(), 0);

  ArrayRef<int64_t> outputSizes = ArrayRef<int64_t>(labelSizes).take_front(outputLabels);
  ArrayRef<int64_t> summedSizes = ArrayRef<int64_t>(labelSizes).drop_front(outputLabels);
  Tensor result = Tensor::zeros(dimsOf(std::get<ein::Shape>(resultShape)));
  if (result.values.empty() || product(summedSizes) == 0) return result;
  std::vector<int64_t> index(labelSizes.size(), 0);
  for (double &out : result.values) {
    double sum = 0;
    std::fill(index.begin() + outputLabels, index.end(), 0);
    std::vector<int64_t> summedIndex(summedSizes.size(), 0);
    do {
      std::copy(summedIndex.begin(), summedIndex.end(), index.begin() + outputLabels);
      double term = 1;
      for (auto [operand, input] : llvm::enumerate(op.getInputs()))
        term *= valueOf(input).values[dot(index, labelStrides[operand])];
      sum += term;
    } while (nextIndex(summedIndex, summedSizes));
    out = sum;
    std::vector<int64_t> outputIndex(index.begin(), index.begin() + outputLabels);
    nextIndex(outputIndex, outputSizes);
    std::copy(outputIndex.begin(), outputIndex.end(), index.begin());
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::RearrangeOp op) {
  const Tensor &input = valueOf(op.getInput());
  std::optional<ir::ReduceKind> reduction = op.getReduction();
  // The verifier's reading: a reduction is einops.reduce; without one, a
  // pattern that fails as rearrange but has new axes on the right is repeat.
  auto plan = ein::planEinops(reduction ? ein::EinopsKind::Reduce : ein::EinopsKind::Rearrange, op.getPattern(),
                              sizesOf(input.shape), op.getSizeMap());
  if (ein::failed(plan) && !reduction) {
    auto repeat = ein::planEinops(ein::EinopsKind::Repeat, op.getPattern(), sizesOf(input.shape), op.getSizeMap());
    if (!ein::failed(repeat)) plan = repeat;
  }
  if (ein::failed(plan)) return opError(op, std::get<ein::EquationError>(plan).message);
  const ein::EinopsPlan &steps = std::get<ein::EinopsPlan>(plan);
  ir::ReduceKind kind = reduction.value_or(ir::ReduceKind::sum);
  if (kind == ir::ReduceKind::var || kind == ir::ReduceKind::std)
    return opError(op, "'" + ir::stringifyReduceKind(kind) + "' is not an einops reduction (ein.reduce has it)");

  // The input, read as a row-major tensor of its elementary axes: composed
  // groups split in order and unit axes vanish without moving any element.
  Dims inputAxisSizes = dimsOf(steps.inputAxisSizes), outputAxisSizes = dimsOf(steps.outputAxisSizes);
  std::vector<int64_t> inputStrides = rowMajorStrides(inputAxisSizes);
  std::vector<int64_t> reducedSizes;
  for (int axis : steps.reducedAxes) reducedSizes.push_back(inputAxisSizes[axis]);

  Tensor result = Tensor::zeros(dimsOf(steps.resultShape), input.kind);
  if (result.values.empty()) return result;
  // The output is likewise row-major over its elementary axes.
  std::vector<int64_t> outputIndex(steps.outputAxes.size(), 0);
  std::vector<double> group;
  for (double &out : result.values) {
    int64_t base = 0;
    for (size_t axis = 0; axis < outputIndex.size(); ++axis)
      if (int source = steps.outputSource[axis]; source >= 0)  // -1: a repeated new axis
        base += outputIndex[axis] * inputStrides[source];
    group.clear();
    if (product(reducedSizes) > 0) {
      std::vector<int64_t> reducedIndex(reducedSizes.size(), 0);
      do {
        int64_t offset = base;
        for (size_t i = 0; i < reducedIndex.size(); ++i)
          offset += reducedIndex[i] * inputStrides[steps.reducedAxes[i]];
        group.push_back(input.values[offset]);
      } while (nextIndex(reducedIndex, reducedSizes));
    }
    std::optional<double> value = reduceValues(kind, group, 0);
    if (!value) return opError(op, "reduces an empty axis with " + ir::stringifyReduceKind(kind));
    out = *value;
    nextIndex(outputIndex, outputAxisSizes);
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::SliceOp op) {
  const Tensor &input = valueOf(op.getInput());
  Dims offsets = dimsOf(op.getOffsets().sizes()), sizes = dimsOf(op.getSizes().sizes());
  for (size_t axis = 0; axis < offsets.size() && axis < sizes.size(); ++axis)
    if (offsets[axis] < 0 || sizes[axis] < 0 || axis >= input.shape.size() ||
        offsets[axis] + (sizes[axis] - 1) * op.stepOf(axis) >= std::max<int64_t>(input.shape[axis], 1))
      return opError(op, "slices axis " + llvm::Twine(axis) + " at sizes that depend on ranged dims or lie outside it");
  std::vector<int64_t> strides = rowMajorStrides(input.shape);
  auto type = mlir::cast<RankedTensorType>(op.getType());
  // Dropped axes have size 1, so iterating over `sizes` visits the output in order.
  Tensor result = Tensor::zeros(toShape(type.getShape()), input.kind);
  if (result.values.empty()) return result;
  std::vector<int64_t> index(sizes.size(), 0);
  for (double &out : result.values) {
    int64_t offset = 0;
    for (size_t axis = 0; axis < index.size(); ++axis)
      offset += (offsets[axis] + index[axis] * op.stepOf(axis)) * strides[axis];
    out = input.values[offset];
    nextIndex(index, sizes);
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::WindowsOp op) {
  const Tensor &input = valueOf(op.getInput());
  const size_t n = op.getWindow().size(), lead = input.shape.size() - n;
  auto type = mlir::cast<RankedTensorType>(op.getType());
  std::vector<int64_t> outShape = toShape(type.getShape());
  for (size_t i = 0; i < n; ++i)
    if (outShape[lead + i] < 1 || input.shape[lead + i] < ir::WindowsOp::span(op.getWindow()[i], op.getDilations()[i]))
      return opError(op, "takes windows of axis " + llvm::Twine(lead + i) + " at sizes that depend on ranged dims");
  std::vector<int64_t> strides = rowMajorStrides(input.shape);
  Tensor result = Tensor::zeros(outShape, input.kind);
  if (result.values.empty()) return result;
  std::vector<int64_t> index(outShape.size(), 0);
  for (double &out : result.values) {
    int64_t offset = 0;
    for (size_t axis = 0; axis < lead; ++axis) offset += index[axis] * strides[axis];
    for (size_t i = 0; i < n; ++i)
      offset += (index[lead + i] * op.getStrides()[i] + index[lead + n + i] * op.getDilations()[i]) * strides[lead + i];
    out = input.values[offset];
    nextIndex(index, outShape);
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::UnaryOp op) {
  Tensor result = valueOf(op.getInput());
  const ops::Opcode opcode = ir::opcodeOf(op.getKind());
  for (double &value : result.values) value = applyUnary(opcode, value);
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::BinaryOp op) {
  const Tensor &lhs = valueOf(op.getLhs()), &rhs = valueOf(op.getRhs());
  ir::BinaryKind kind = op.getKind();
  const ops::Opcode opcode = ir::opcodeOf(kind);
  auto shape = ein::broadcastShapes(sizesOf(lhs.shape), sizesOf(rhs.shape));
  if (ein::failed(shape)) return opError(op, std::get<ein::EquationError>(shape).message);
  if (lhs.kind == ElementKind::Int && kind == ir::BinaryKind::div)
    return opError(op, "integer division is not defined: PyTorch's '/' divides in floating point, so the "
                       "operands must be cast first");
  Tensor result = Tensor::zeros(dimsOf(std::get<ein::Shape>(shape)));
  std::optional<std::string> failure;
  forEachBroadcast(result.shape, {&lhs, &rhs}, [&](int64_t out, ArrayRef<int64_t> in) {
    double a = lhs.values[in[0]], b = rhs.values[in[1]];
    if (lhs.kind == ElementKind::Int && kind == ir::BinaryKind::pow && b < 0 && !failure)
      failure = "integers to negative integer powers are not allowed (as in PyTorch)";
    if (lhs.kind == ElementKind::Int && (kind == ir::BinaryKind::floordiv || kind == ir::BinaryKind::mod) && b == 0 &&
        !failure)
      failure = "integer division by zero (PyTorch raises ZeroDivisionError)";
    result.values[out] = applyBinary(opcode, a, b);
  });
  if (failure) return opError(op, *failure);
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::WhereOp op) {
  const Tensor &condition = valueOf(op.getCondition()), &onTrue = valueOf(op.getOnTrue()),
               &onFalse = valueOf(op.getOnFalse());
  auto shape = ein::broadcastShapes(sizesOf(condition.shape), sizesOf(onTrue.shape));
  if (!ein::failed(shape)) shape = ein::broadcastShapes(std::get<ein::Shape>(shape), sizesOf(onFalse.shape));
  if (ein::failed(shape)) return opError(op, std::get<ein::EquationError>(shape).message);
  Tensor result = Tensor::zeros(dimsOf(std::get<ein::Shape>(shape)));
  forEachBroadcast(result.shape, {&condition, &onTrue, &onFalse}, [&](int64_t out, ArrayRef<int64_t> in) {
    result.values[out] = condition.values[in[0]] != 0 ? onTrue.values[in[1]] : onFalse.values[in[2]];
  });
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::CastOp op) {
  Tensor result = valueOf(op.getInput());
  ElementKind target = elementKindOf(mlir::cast<RankedTensorType>(op.getType()).getElementType());
  // Float to integer truncates toward zero, as torch's .to(int). Beyond the
  // integer type's range it saturates and NaN becomes 0, as the runtime's
  // conversion does (torch leaves those undefined): code that converts
  // log(0) and then discards it with where() folds as it runs.
  if (result.kind == ElementKind::Float && target == ElementKind::Int) {
    const unsigned width = mlir::cast<RankedTensorType>(op.getType()).getElementType().getIntOrFloatBitWidth();
    const double lowest = -std::ldexp(1.0, int(width) - 1);
    const double highest = width == 64 ? std::nextafter(0x1p63, 0.0) : -lowest - 1;
    for (double &value : result.values)
      value = std::isnan(value) ? 0.0 : std::clamp(std::trunc(value), lowest, highest);
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::SoftmaxOp op) {
  Tensor result = valueOf(op.getInput());
  int64_t axis = op.getAxisAttr().getInt();
  int64_t length = result.shape[axis];
  int64_t inner = product(ArrayRef<int64_t>(result.shape).drop_front(axis + 1));
  int64_t outer = product(ArrayRef<int64_t>(result.shape).take_front(axis));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      softmaxInPlace(result.values.data() + o * length * inner + i, length, inner);
    }
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::ReduceOp op) {
  const Tensor &input = valueOf(op.getInput());
  std::vector<bool> reduced(input.shape.size(), false);
  for (int64_t axis : op.getAxes()) reduced[axis] = true;
  // Each input element goes to the output slot its kept axes name.
  std::vector<int64_t> keptSizes, keptStrides(input.shape.size(), 0);
  for (size_t axis = 0; axis < input.shape.size(); ++axis)
    if (!reduced[axis]) keptSizes.push_back(input.shape[axis]);
  std::vector<int64_t> slotStrides = rowMajorStrides(keptSizes);
  for (size_t axis = 0, kept = 0; axis < input.shape.size(); ++axis)
    if (!reduced[axis]) keptStrides[axis] = slotStrides[kept++];
  std::vector<std::vector<double>> groups(product(keptSizes));
  if (!input.values.empty()) {
    std::vector<int64_t> index(input.shape.size(), 0);
    for (double value : input.values) {
      groups[dot(index, keptStrides)].push_back(value);
      nextIndex(index, input.shape);
    }
  }
  auto type = mlir::cast<RankedTensorType>(op.getType());
  Tensor result = Tensor::zeros(toShape(type.getShape()), input.kind);
  for (auto [slot, group] : llvm::enumerate(groups)) {
    std::optional<double> value = reduceValues(op.getKind(), group, op.getCorrectionAttr().getInt());
    if (!value) return opError(op, "reduces an empty axis with " + ir::stringifyReduceKind(op.getKind()));
    result.values[slot] = *value;
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::MatmulOp op) {
  const Tensor &lhs = valueOf(op.getLhs()), &rhs = valueOf(op.getRhs());
  // NumPy: a 1-D lhs is a row [1, k], a 1-D rhs a column [k, 1]; the added
  // axis is not in the result, which leaves the row-major order unchanged.
  Dims lhsShape = lhs.shape, rhsShape = rhs.shape;
  if (lhsShape.size() == 1) lhsShape.insert(lhsShape.begin(), 1);
  if (rhsShape.size() == 1) rhsShape.push_back(1);
  int64_t rows = lhsShape[lhsShape.size() - 2], inner = lhsShape.back(), columns = rhsShape.back();
  Dims lhsBatch(lhsShape.begin(), lhsShape.end() - 2), rhsBatch(rhsShape.begin(), rhsShape.end() - 2);
  auto batch = ein::broadcastShapes(sizesOf(lhsBatch), sizesOf(rhsBatch));
  if (ein::failed(batch)) return opError(op, std::get<ein::EquationError>(batch).message);
  const Dims batchShape = dimsOf(std::get<ein::Shape>(batch));
  std::vector<int64_t> lhsBatchStrides = broadcastStrides(lhsBatch, batchShape);
  std::vector<int64_t> rhsBatchStrides = broadcastStrides(rhsBatch, batchShape);
  for (int64_t &stride : lhsBatchStrides) stride *= rows * inner;
  for (int64_t &stride : rhsBatchStrides) stride *= inner * columns;

  auto type = mlir::cast<RankedTensorType>(op.getType());
  Tensor result = Tensor::zeros(toShape(type.getShape()), lhs.kind);
  if (result.values.empty()) return result;
  std::vector<int64_t> index(batchShape.size(), 0);
  double *out = result.values.data();
  do {
    const double *a = lhs.values.data() + dot(index, lhsBatchStrides);
    const double *b = rhs.values.data() + dot(index, rhsBatchStrides);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < columns; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < inner; ++k) sum += a[i * inner + k] * b[k * columns + j];
        *out++ = sum;
      }
  } while (nextIndex(index, batchShape));
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::LinearOp op) {
  const Tensor &input = valueOf(op.getInput()), &weight = valueOf(op.getWeight());
  const Tensor *bias = op.getBias() ? &valueOf(op.getBias()) : nullptr;
  int64_t features = weight.shape[1], outputs = weight.shape[0];
  int64_t rows = product(ArrayRef<int64_t>(input.shape).drop_back());
  Dims shape = input.shape;
  shape.back() = outputs;
  Tensor result = Tensor::zeros(shape, input.kind);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < outputs; ++o) {
      double sum = 0;
      for (int64_t i = 0; i < features; ++i) sum += input.values[r * features + i] * weight.values[o * features + i];
      result.values[r * outputs + o] = sum + (bias ? bias->values[o] : 0.0);
    }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::LayerNormOp op) {
  Tensor result = valueOf(op.getInput());
  if (op.getResidual()) {
    const Tensor &residual = valueOf(op.getResidual());
    for (size_t i = 0; i < result.values.size(); ++i) result.values[i] += residual.values[i];
  }
  const Tensor *weight = op.getWeight() ? &valueOf(op.getWeight()) : nullptr;
  const Tensor *bias = op.getBias() ? &valueOf(op.getBias()) : nullptr;
  double eps = op.getEpsAttr().getValueAsDouble();
  int64_t width = result.shape.back();
  if (width == 0) return result;
  for (size_t start = 0; start < result.values.size(); start += width) {
    double *row = result.values.data() + start;
    // RMSNorm does not centre: its spread is the mean square about 0.
    bool rms = op.getVariant() == ir::LayerNormVariant::rms;
    double mean = rms ? 0.0 : std::accumulate(row, row + width, 0.0) / width;
    double squares = 0;
    for (int64_t i = 0; i < width; ++i) squares += (row[i] - mean) * (row[i] - mean);
    // torch's biased variance (or the mean square) with eps inside the square
    // root, or the unbiased standard deviation with eps outside it.
    double scale = op.getVariant() == ir::LayerNormVariant::unbiased_std ? 1 / (std::sqrt(squares / (width - 1)) + eps)
                                                                         : 1 / std::sqrt(squares / width + eps);
    for (int64_t i = 0; i < width; ++i)
      row[i] = (row[i] - mean) * scale * (weight ? weight->values[i] : 1.0) + (bias ? bias->values[i] : 0.0);
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::EmbeddingOp op) {
  const Tensor &ids = valueOf(op.getIds()), &table = valueOf(op.getTable());
  int64_t rows = table.shape[0], width = table.shape[1];
  Dims shape = ids.shape;
  shape.push_back(width);
  Tensor result = Tensor::zeros(shape, table.kind);
  std::vector<int64_t> index(ids.shape.size(), 0);
  for (size_t position = 0; position < ids.values.size(); ++position) {
    double id = ids.values[position];
    if (!(id >= 0 && id < static_cast<double>(rows)))
      return opError(op, "id " + formatNumber(id) + " at " + formatDims(index) +
                             " is out of range for a table of " + llvm::Twine(rows) + " rows");
    std::copy_n(table.values.begin() + static_cast<int64_t>(id) * width, width,
                result.values.begin() + static_cast<int64_t>(position) * width);
    nextIndex(index, ids.shape);
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::ConcatOp op) {
  int64_t axis = op.getAxisAttr().getInt();
  auto type = mlir::cast<RankedTensorType>(op.getType());
  Tensor result(toShape(type.getShape()), valueOf(op.getInputs().front()).kind, {});
  result.values.reserve(product(type.getShape()));
  // Row-major: for each index of the axes before `axis`, the inputs' blocks follow one another.
  int64_t outer = product(type.getShape().take_front(axis));
  for (int64_t o = 0; o < outer; ++o)
    for (Value input : op.getInputs()) {
      const Tensor &tensor = valueOf(input);
      int64_t block = product(ArrayRef<int64_t>(tensor.shape).drop_front(axis));
      result.values.insert(result.values.end(), tensor.values.begin() + o * block,
                           tensor.values.begin() + (o + 1) * block);
    }
  return result;
}

// Scaled dot-product attention in double: scores, the mask as its kind says,
// the causal limit, softmax over the keys (an all -inf row gives NaN), values.
Expected<Tensor> Evaluator::evaluate(ir::AttentionOp op) {
  const Tensor &q = valueOf(op.getQuery()), &k = valueOf(op.getKey()), &v = valueOf(op.getValue());
  const size_t rank = q.shape.size();
  const int64_t I = q.shape[rank - 2], D = q.shape[rank - 1], J = k.shape[rank - 2], E = v.shape[rank - 1];
  Dims batch(q.shape.begin(), q.shape.end() - 2), scoresShape = batch;
  scoresShape.insert(scoresShape.end(), {I, J});
  const Tensor *mask = op.getMask() ? &valueOf(op.getMask()) : nullptr;
  std::vector<int64_t> maskStrides = mask ? broadcastStrides(mask->shape, scoresShape) : std::vector<int64_t>();
  const int64_t positions = op.getCausalPositions() ? op.getCausalPositions()->sizes()[0].constant().value_or(I) : 0;
  const double scale = op.getScale().convertToDouble(), fill = op.getMaskFill().convertToDouble();
  const double softcap = op.getSoftcap().convertToDouble();
  Dims resultShape = batch;
  resultShape.insert(resultShape.end(), {I, E});
  Tensor result = Tensor::zeros(resultShape);
  std::vector<double> row(static_cast<size_t>(J));
  const int64_t batches = product(batch);
  std::vector<int64_t> index(batch.size(), 0);
  for (int64_t b = 0; b < batches; ++b, nextIndex(index, batch)) {
    const double *qb = q.values.data() + b * I * D, *kb = k.values.data() + b * J * D, *vb = v.values.data() + b * J * E;
    for (int64_t i = 0; i < I; ++i) {
      for (int64_t j = 0; j < J; ++j) {
        double score = 0;
        for (int64_t d = 0; d < D; ++d) score += qb[i * D + d] * kb[j * D + d];
        score *= scale;
        if (softcap > 0) score = softcap * std::tanh(score / softcap);
        if (mask) {
          std::vector<int64_t> at = index;
          at.insert(at.end(), {i, j});
          double m = mask->values[dot(at, maskStrides)];
          switch (op.getMaskKind()) {
          case ir::MaskKind::none: break;
          case ir::MaskKind::add: score += m; break;
          case ir::MaskKind::keep: score = m != 0 ? score : fill; break;
          case ir::MaskKind::drop: score = m != 0 ? fill : score; break;
          }
        }
        if (positions > 0 && j > i % positions + J - positions) score = -std::numeric_limits<double>::infinity();
        row[j] = score;
      }
      softmaxInPlace(row.data(), J, 1);
      for (int64_t e = 0; e < E; ++e) {
        double value = 0;
        for (int64_t j = 0; j < J; ++j) value += row[j] * vb[j * E + e];
        result.values[(b * I + i) * E + e] = J == 0 ? 0.0 : value;
      }
    }
  }
  return result;
}

}  // namespace ein::reference::detail
