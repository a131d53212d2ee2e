// The reference evaluator's internals: the element-wise and indexing helpers
// and the Evaluator class, whose members are defined in ReferenceEvaluator.cpp
// (the walk, inputs, results, params and constants) and EvaluateOps.cpp (one
// `evaluate` per ein op).
#pragma once

#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <sstream>

#include "compiler/reference/reference_evaluator.hpp"
#include "ir/ein/ein_dialect.hpp"
#include "ir/ein/equations.hpp"
#include "ir/op_table.hpp"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Location.h"
#include "ops/scalar_functions.hpp"

namespace ein::reference::detail {

using llvm::ArrayRef;
using llvm::Expected;
using mlir::Operation;
using mlir::RankedTensorType;
using mlir::Value;

inline llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

// "file:line:col" where the location has one, else MLIR's spelling.
inline std::string formatLocation(mlir::Location loc) {
  if (auto fileLoc = mlir::dyn_cast<mlir::FileLineColLoc>(loc))
    return llvm::formatv("{0}:{1}:{2}", fileLoc.getFilename().getValue(), fileLoc.getLine(), fileLoc.getColumn());
  if (auto nameLoc = mlir::dyn_cast<mlir::NameLoc>(loc)) return formatLocation(nameLoc.getChildLoc());
  if (auto callSite = mlir::dyn_cast<mlir::CallSiteLoc>(loc)) return formatLocation(callSite.getCallee());
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc))
    for (mlir::Location inner : fused.getLocations())
      if (mlir::isa<mlir::FileLineColLoc, mlir::NameLoc, mlir::CallSiteLoc>(inner)) return formatLocation(inner);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << loc;
  return text;
}

// Shortest exact spelling: "12", "0.5", "-inf".
inline std::string formatNumber(double value) {
  std::ostringstream text;
  text.precision(17);
  text << value;
  return text.str();
}

inline int64_t product(ArrayRef<int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// "f32[4, 4]", "bool[2]": a tensor type as the model language writes it.
inline std::string modelTypeString(RankedTensorType type) {
  std::string element;
  llvm::raw_string_ostream os(element);
  if (type.getElementType().isInteger(1)) os << "bool";
  else os << type.getElementType();
  return element + ein::formatShape(ir::shapeOf(type));
}

inline std::vector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t axis = shape.size(); axis-- > 0;) {
    strides[axis] = stride;
    stride *= shape[axis];
  }
  return strides;
}

// Strides that read a tensor of `shape` as if broadcast to `target` (NumPy:
// aligned on the right; a size-1 axis repeats, so its stride is 0).
inline std::vector<int64_t> broadcastStrides(ArrayRef<int64_t> shape, ArrayRef<int64_t> target) {
  std::vector<int64_t> own = rowMajorStrides(shape);
  std::vector<int64_t> strides(target.size(), 0);
  size_t lead = target.size() - shape.size();
  for (size_t axis = 0; axis < shape.size(); ++axis)
    strides[lead + axis] = shape[axis] == 1 ? 0 : own[axis];
  return strides;
}

// Advances `index` through `shape` in row-major order; false once it wraps.
inline bool nextIndex(std::vector<int64_t> &index, ArrayRef<int64_t> shape) {
  for (size_t axis = index.size(); axis-- > 0;) {
    if (++index[axis] < shape[axis]) return true;
    index[axis] = 0;
  }
  return false;
}

inline int64_t dot(ArrayRef<int64_t> index, ArrayRef<int64_t> strides) {
  int64_t offset = 0;
  for (size_t axis = 0; axis < index.size(); ++axis) offset += index[axis] * strides[axis];
  return offset;
}

// Calls `visit(outputOffset, operandOffsets)` for every element of `shape`,
// with each operand read through broadcasting.
template <typename Visit>
void forEachBroadcast(ArrayRef<int64_t> shape, ArrayRef<const Tensor *> operands, Visit visit) {
  if (product(shape) == 0) return;
  std::vector<std::vector<int64_t>> strides;
  for (const Tensor *operand : operands) strides.push_back(broadcastStrides(operand->shape, shape));
  std::vector<int64_t> index(shape.size(), 0), offsets(operands.size());
  int64_t outputOffset = 0;
  do {
    for (size_t i = 0; i < operands.size(); ++i) offsets[i] = dot(index, strides[i]);
    visit(outputOffset++, ArrayRef<int64_t>(offsets));
  } while (nextIndex(index, shape));
}

// softmax over `length` elements `stride` apart, in place, as torch.softmax:
// exp(x - max) / sum; a row of only -inf gives exp(NaN), so NaN, and a NaN
// anywhere makes the max NaN, and so the whole row.
inline void softmaxInPlace(double *row, int64_t length, int64_t stride) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < length; ++j)
    if (std::isnan(row[j * stride]) || row[j * stride] > max) max = std::isnan(max) ? max : row[j * stride];
  double sum = 0;
  for (int64_t j = 0; j < length; ++j) sum += row[j * stride] = std::exp(row[j * stride] - max);
  for (int64_t j = 0; j < length; ++j) row[j * stride] /= sum;
}

// The evaluator computes at concrete sizes: its shapes are integers, and the
// shape rules (ein::Shape, of sizes) see them as constant sizes.
using Dims = std::vector<int64_t>;
inline Dims toShape(ArrayRef<int64_t> shape) { return Dims(shape.begin(), shape.end()); }
inline ein::Shape sizesOf(const Dims &dims) { return ein::Shape(dims.begin(), dims.end()); }
// A shape rule's result at the evaluator's concrete sizes (every size a constant).
inline Dims dimsOf(const ein::Shape &shape) {
  Dims dims;
  for (const ein::Size &size : shape) dims.push_back(size.constant().value_or(-1));
  return dims;
}
inline std::string formatDims(const Dims &dims) { return ein::formatShape(sizesOf(dims)); }

// The statistic of `kind` over `values`, as torch computes it: NaN propagates
// through max and min, var divides by max(0, n - correction). Max and min of
// nothing have no value.
inline std::optional<double> reduceValues(ir::ReduceKind kind, ArrayRef<double> values, int64_t correction) {
  double n = static_cast<double>(values.size());
  switch (kind) {
  case ir::ReduceKind::sum:
    return std::accumulate(values.begin(), values.end(), 0.0);
  case ir::ReduceKind::mean:
    return std::accumulate(values.begin(), values.end(), 0.0) / n;
  case ir::ReduceKind::prod:
    return std::accumulate(values.begin(), values.end(), 1.0, std::multiplies<double>());
  case ir::ReduceKind::max:
  case ir::ReduceKind::min: {
    if (values.empty()) return std::nullopt;
    double best = values.front();
    for (double value : values) {
      if (std::isnan(value)) return value;
      best = kind == ir::ReduceKind::max ? std::max(best, value) : std::min(best, value);
    }
    return best;
  }
  case ir::ReduceKind::var:
  case ir::ReduceKind::std: {
    double mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
    double squares = 0;
    for (double value : values) squares += (value - mean) * (value - mean);
    double variance = squares / std::max(0.0, n - static_cast<double>(correction));
    return kind == ir::ReduceKind::var ? variance : std::sqrt(variance);
  }
  }
  llvm_unreachable("unknown reduce kind");
}

// An element-wise opcode by its scalar definition (ops/scalar_functions.hpp),
// in double, except that relu keeps NaN as torch.relu does (the kernels'
// relu gives 0, as their vector max does).
inline double applyUnary(ops::Opcode opcode, double x) {
  if (opcode == ops::Opcode::Relu && std::isnan(x)) return x;
  return ops::evaluate(opcode, x, 0.0, 0.0, 0.0);
}

inline double applyBinary(ops::Opcode opcode, double a, double b) { return ops::evaluate(opcode, a, b, 0.0, 0.0); }

// Interprets one function; holds the value of every SSA value computed so far.
class Evaluator {
public:
  explicit Evaluator(const ParamProvider &params) : params(params) {}

  Expected<std::map<std::string, Tensor>> run(mlir::func::FuncOp function,
                                              const std::map<std::string, Tensor> &inputs);

  // `op` of constant operands (see foldConstantOp).
  Expected<Tensor> fold(Operation *op);

private:
  llvm::Error opError(Operation *op, const llvm::Twine &message) const {
    return makeError(formatLocation(op->getLoc()) + ": " + op->getName().getStringRef() + ": " + message);
  }

  const Tensor &valueOf(Value value) const { return values.find(value)->second; }

  llvm::Error bindInputs(mlir::func::FuncOp function, const std::map<std::string, Tensor> &inputs);
  llvm::Error evaluate(Operation *op);
  // Checks `result` against the op's result type and rounds integers and
  // bools to what the type can hold.
  Expected<Tensor> fitToResultType(Operation *op, Tensor result) const;

  Expected<Tensor> evaluate(ir::ParamOp op);
  Expected<Tensor> evaluate(ir::ConstantOp op);
  Expected<Tensor> evaluate(ir::EinsumOp op);
  Expected<Tensor> evaluate(ir::RearrangeOp op);
  Expected<Tensor> evaluate(ir::SliceOp op);
  Expected<Tensor> evaluate(ir::WindowsOp op);
  Expected<Tensor> evaluate(ir::UnaryOp op);
  Expected<Tensor> evaluate(ir::BinaryOp op);
  Expected<Tensor> evaluate(ir::WhereOp op);
  Expected<Tensor> evaluate(ir::CastOp op);
  Expected<Tensor> evaluate(ir::SoftmaxOp op);
  Expected<Tensor> evaluate(ir::ReduceOp op);
  Expected<Tensor> evaluate(ir::MatmulOp op);
  Expected<Tensor> evaluate(ir::LinearOp op);
  Expected<Tensor> evaluate(ir::LayerNormOp op);
  Expected<Tensor> evaluate(ir::EmbeddingOp op);
  Expected<Tensor> evaluate(ir::ConcatOp op);
  Expected<Tensor> evaluate(ir::AttentionOp op);

  const ParamProvider &params;
  llvm::DenseMap<Value, Tensor> values;
  // Each parameter is asked for once, however many ops declare it.
  llvm::StringMap<Tensor> paramCache;
};

}  // namespace ein::reference::detail
