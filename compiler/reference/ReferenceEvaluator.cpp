#include "reference/ReferenceEvaluator.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <sstream>

#include "ein/IR/EinDialect.h"
#include "ein/IR/Equations.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FormatVariadic.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "weights/Safetensors.h"

namespace ein::reference {
namespace {

using llvm::ArrayRef;
using llvm::Expected;
using mlir::Operation;
using mlir::RankedTensorType;
using mlir::Value;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

// "file:line:col" where the location has one, else MLIR's spelling.
std::string formatLocation(mlir::Location loc) {
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
std::string formatNumber(double value) {
  std::ostringstream text;
  text.precision(17);
  text << value;
  return text.str();
}

int64_t product(ArrayRef<int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// "f32[4, 4]", "bool[2]": a tensor type as the model language writes it.
std::string modelTypeString(RankedTensorType type) {
  std::string element;
  llvm::raw_string_ostream os(element);
  if (type.getElementType().isInteger(1)) os << "bool";
  else os << type.getElementType();
  return element + ein::formatShape(ein::Shape(type.getShape().begin(), type.getShape().end()));
}

std::vector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
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
std::vector<int64_t> broadcastStrides(ArrayRef<int64_t> shape, ArrayRef<int64_t> target) {
  std::vector<int64_t> own = rowMajorStrides(shape);
  std::vector<int64_t> strides(target.size(), 0);
  size_t lead = target.size() - shape.size();
  for (size_t axis = 0; axis < shape.size(); ++axis)
    strides[lead + axis] = shape[axis] == 1 ? 0 : own[axis];
  return strides;
}

// Advances `index` through `shape` in row-major order; false once it wraps.
bool nextIndex(std::vector<int64_t> &index, ArrayRef<int64_t> shape) {
  for (size_t axis = index.size(); axis-- > 0;) {
    if (++index[axis] < shape[axis]) return true;
    index[axis] = 0;
  }
  return false;
}

int64_t dot(ArrayRef<int64_t> index, ArrayRef<int64_t> strides) {
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

ein::Shape toShape(ArrayRef<int64_t> shape) { return ein::Shape(shape.begin(), shape.end()); }

// The statistic of `kind` over `values`, as torch computes it: NaN propagates
// through max and min, var divides by max(0, n - correction). Max and min of
// nothing have no value.
std::optional<double> reduceValues(ir::ReduceKind kind, ArrayRef<double> values, int64_t correction) {
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

double sigmoid(double x) {
  // Written so that exp never overflows.
  if (x >= 0) return 1 / (1 + std::exp(-x));
  double e = std::exp(x);
  return e / (1 + e);
}

double applyUnary(ir::UnaryKind kind, double x) {
  switch (kind) {
  case ir::UnaryKind::neg: return -x;
  case ir::UnaryKind::exp: return std::exp(x);
  case ir::UnaryKind::log: return std::log(x);
  case ir::UnaryKind::sqrt: return std::sqrt(x);
  case ir::UnaryKind::rsqrt: return 1 / std::sqrt(x);
  case ir::UnaryKind::abs: return std::abs(x);
  case ir::UnaryKind::relu: return std::isnan(x) ? x : std::max(x, 0.0);  // torch.relu keeps NaN
  case ir::UnaryKind::gelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case ir::UnaryKind::gelu_tanh: {
    const double scale = std::sqrt(2 / M_PI);
    return 0.5 * x * (1 + std::tanh(scale * (x + 0.044715 * x * x * x)));
  }
  case ir::UnaryKind::silu: return x * sigmoid(x);
  case ir::UnaryKind::sigmoid: return sigmoid(x);
  case ir::UnaryKind::tanh: return std::tanh(x);
  case ir::UnaryKind::logical_not: return x == 0 ? 1 : 0;
  }
  llvm_unreachable("unknown unary kind");
}

double applyBinary(ir::BinaryKind kind, double a, double b) {
  switch (kind) {
  case ir::BinaryKind::add: return a + b;
  case ir::BinaryKind::sub: return a - b;
  case ir::BinaryKind::mul: return a * b;
  case ir::BinaryKind::div: return a / b;
  case ir::BinaryKind::pow: return std::pow(a, b);
  // torch.maximum/minimum propagate NaN from either side.
  case ir::BinaryKind::maximum: return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
  case ir::BinaryKind::minimum: return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b);
  case ir::BinaryKind::lt: return a < b;
  case ir::BinaryKind::le: return a <= b;
  case ir::BinaryKind::gt: return a > b;
  case ir::BinaryKind::ge: return a >= b;
  case ir::BinaryKind::eq: return a == b;
  case ir::BinaryKind::ne: return a != b;
  }
  llvm_unreachable("unknown binary kind");
}

// Interprets one function; holds the value of every SSA value computed so far.
class Evaluator {
public:
  explicit Evaluator(const ParamProvider &params) : params(params) {}

  Expected<std::map<std::string, Tensor>> run(mlir::func::FuncOp function,
                                              const std::map<std::string, Tensor> &inputs);

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

  const ParamProvider &params;
  llvm::DenseMap<Value, Tensor> values;
  // Each parameter is asked for once, however many ops declare it.
  llvm::StringMap<Tensor> paramCache;
};

llvm::Error Evaluator::bindInputs(mlir::func::FuncOp function, const std::map<std::string, Tensor> &inputs) {
  std::string where = "@" + function.getSymName().str();
  std::map<std::string, bool> used;
  for (const auto &entry : inputs) used[entry.first] = false;
  for (auto [index, argument] : llvm::enumerate(function.getArguments())) {
    auto name = function.getArgAttrOfType<mlir::StringAttr>(index, "ein.name");
    if (!name) return makeError(where + ": argument " + llvm::Twine(index) + " has no ein.name attribute");
    auto type = mlir::dyn_cast<RankedTensorType>(argument.getType());
    if (!type || !type.hasStaticShape())
      return makeError(where + ": input \"" + name.getValue() + "\" is not a statically shaped tensor");
    auto input = inputs.find(name.str());
    if (input == inputs.end()) return makeError(where + ": missing input \"" + name.getValue() + "\"");
    used[input->first] = true;
    const Tensor &tensor = input->second;
    if (ArrayRef<int64_t>(tensor.shape) != type.getShape() ||
        static_cast<int64_t>(tensor.values.size()) != product(type.getShape()))
      return makeError(where + ": input \"" + name.getValue() + "\" has shape " + ein::formatShape(tensor.shape) +
                       " with " + llvm::Twine(tensor.values.size()) + " values but the function takes " +
                       ein::formatShape(toShape(type.getShape())));
    ElementKind kind = elementKindOf(type.getElementType());
    if (tensor.kind != kind)
      return makeError(where + ": input \"" + name.getValue() + "\" has the wrong element kind for " +
                       modelTypeString(type));
    // Integers must fit the declared width: wrapping them here would hide a
    // caller's mistake.
    double limit = kind == ElementKind::Int ? std::ldexp(1.0, type.getElementType().getIntOrFloatBitWidth() - 1) : 0;
    for (double value : tensor.values)
      if ((kind == ElementKind::Int && (value != std::trunc(value) || value < -limit || value >= limit)) ||
          (kind == ElementKind::Bool && value != 0 && value != 1))
        return makeError(where + ": input \"" + name.getValue() + "\" holds " + formatNumber(value) + ", not " +
                         (kind == ElementKind::Bool ? "a bool" : "an integer of its type"));
    values[argument] = tensor;
  }
  for (const auto &[name, wasUsed] : used)
    if (!wasUsed) return makeError(where + ": no argument is named \"" + name + "\"");
  return llvm::Error::success();
}

Expected<std::map<std::string, Tensor>> Evaluator::run(mlir::func::FuncOp function,
                                                       const std::map<std::string, Tensor> &inputs) {
  std::string where = "@" + function.getSymName().str();
  // Op accessors assume verified IR; unverified IR is an error, not UB.
  std::string diagnostics;
  {
    mlir::ScopedDiagnosticHandler collect(function->getContext(), [&](mlir::Diagnostic &diagnostic) {
      diagnostics += (diagnostics.empty() ? "" : "\n") + formatLocation(diagnostic.getLocation()) + ": " +
                     diagnostic.str();
      return mlir::success();
    });
    if (mlir::failed(mlir::verify(function))) return makeError(where + " does not verify: " + diagnostics);
  }
  if (function.isExternal()) return makeError(where + " has no body");
  if (!function.getBody().hasOneBlock()) return makeError(where + " has more than one block");
  if (llvm::Error error = bindInputs(function, inputs)) return error;

  for (Operation &op : function.getBody().front()) {
    if (auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(op)) {
      std::map<std::string, Tensor> results;
      for (auto [index, operand] : llvm::enumerate(ret.getOperands())) {
        auto name = function.getResultAttrOfType<mlir::StringAttr>(index, "ein.name");
        if (!name) return makeError(where + ": result " + llvm::Twine(index) + " has no ein.name attribute");
        if (!results.emplace(name.str(), valueOf(operand)).second)
          return makeError(where + ": two results are named \"" + name.getValue() + "\"");
      }
      return results;
    }
    if (llvm::Error error = evaluate(&op)) return error;
  }
  return makeError(where + " ends without func.return");
}

llvm::Error Evaluator::evaluate(Operation *op) {
  Expected<Tensor> result =
      llvm::TypeSwitch<Operation *, Expected<Tensor>>(op)
          .Case<ir::ParamOp, ir::ConstantOp, ir::EinsumOp, ir::RearrangeOp, ir::SliceOp, ir::UnaryOp,
                ir::BinaryOp, ir::WhereOp, ir::CastOp, ir::SoftmaxOp, ir::ReduceOp, ir::MatmulOp, ir::LinearOp,
                ir::LayerNormOp, ir::EmbeddingOp, ir::ConcatOp>([&](auto einOp) { return evaluate(einOp); })
          .Default([&](Operation *unknown) -> Expected<Tensor> {
            return makeError(formatLocation(unknown->getLoc()) + ": the reference evaluator does not support '" +
                             unknown->getName().getStringRef() + "'");
          });
  if (!result) return result.takeError();
  Expected<Tensor> fitted = fitToResultType(op, std::move(*result));
  if (!fitted) return fitted.takeError();
  values[op->getResult(0)] = std::move(*fitted);
  return llvm::Error::success();
}

Expected<Tensor> Evaluator::fitToResultType(Operation *op, Tensor result) const {
  auto type = mlir::cast<RankedTensorType>(op->getResult(0).getType());
  // A mismatch here is a bug in this evaluator, since the IR verified.
  if (ArrayRef<int64_t>(result.shape) != type.getShape() ||
      static_cast<int64_t>(result.values.size()) != product(type.getShape()))
    return opError(op, "evaluated to shape " + ein::formatShape(result.shape) + " but the result type is " +
                           ein::formatShape(toShape(type.getShape())));
  result.kind = elementKindOf(type.getElementType());
  if (result.kind == ElementKind::Bool) {
    for (double &value : result.values) value = value != 0;
  } else if (result.kind == ElementKind::Int) {
    unsigned width = type.getElementType().getIntOrFloatBitWidth();
    for (double &value : result.values) {
      if (!std::isfinite(value) || std::abs(value) >= 0x1p63)
        return opError(op, "integer result " + formatNumber(value) + " is out of the range of i64");
      int64_t integer = static_cast<int64_t>(value);
      if (width < 64) {  // wrap to the width, as two's complement
        uint64_t mask = (uint64_t{1} << width) - 1, bits = static_cast<uint64_t>(integer) & mask;
        integer = bits >> (width - 1) ? static_cast<int64_t>(bits) - (int64_t{1} << width) : static_cast<int64_t>(bits);
      }
      value = static_cast<double>(integer);
    }
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::ParamOp op) {
  auto type = mlir::cast<RankedTensorType>(op.getType());
  auto cached = paramCache.find(op.getName());
  if (cached == paramCache.end()) {
    Expected<Tensor> loaded = params(op.getName(), type);
    if (!loaded) return loaded.takeError();
    cached = paramCache.try_emplace(op.getName(), std::move(*loaded)).first;
  }
  const Tensor &tensor = cached->second;
  if (ArrayRef<int64_t>(tensor.shape) != type.getShape() || tensor.kind != elementKindOf(type.getElementType()))
    return opError(op, "parameter \"" + op.getName() + "\" was provided with shape " +
                           ein::formatShape(tensor.shape) + " but is declared " + modelTypeString(type));
  return tensor;
}

Expected<Tensor> Evaluator::evaluate(ir::ConstantOp op) {
  auto type = mlir::cast<RankedTensorType>(op.getType());
  Tensor result(toShape(type.getShape()), elementKindOf(type.getElementType()), {});
  mlir::ElementsAttr attr = op.getValue();
  result.values.reserve(product(type.getShape()));
  if (auto floats = attr.tryGetValues<llvm::APFloat>(); floats) {
    for (const llvm::APFloat &value : *floats) result.values.push_back(value.convertToDouble());
  } else if (auto integers = attr.tryGetValues<llvm::APInt>(); integers) {
    // An i1 true is all ones: read it as 1, not as the sign-extended -1.
    for (const llvm::APInt &value : *integers)
      result.values.push_back(value.getBitWidth() == 1 ? value.getBoolValue()
                                                       : static_cast<double>(value.getSExtValue()));
  } else {
    return opError(op, "cannot read the elements of " + llvm::formatv("{0}", attr).str());
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::EinsumOp op) {
  std::vector<int64_t> ranks;
  std::vector<ein::Shape> shapes;
  for (Value input : op.getInputs()) {
    shapes.push_back(valueOf(input).shape);
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
  // A broadcast (ellipsis) label of size 1 in one operand takes the other
  // operands' size; inferShape has checked that the sizes agree otherwise.
  std::vector<std::vector<int64_t>> labelStrides;
  for (auto [operand, labels] : llvm::enumerate(equation.inputs)) {
    const ein::Shape &shape = shapes[operand];
    std::vector<int64_t> axisStrides = rowMajorStrides(shape);
    std::vector<size_t> ids;
    for (const std::string &label : labels) ids.push_back(labelId(label));
    labelStrides.emplace_back(labelSizes.size(), 0);
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      if (labelSizes[ids[axis]] == 1) labelSizes[ids[axis]] = shape[axis];
      // A label repeated within an operand adds up its strides: the diagonal.
      if (shape[axis] != 1) labelStrides.back()[ids[axis]] += axisStrides[axis];
    }
  }
  for (std::vector<int64_t> &strides : labelStrides) strides.resize(labelSizes.size(), 0);

  ArrayRef<int64_t> outputSizes = ArrayRef<int64_t>(labelSizes).take_front(outputLabels);
  ArrayRef<int64_t> summedSizes = ArrayRef<int64_t>(labelSizes).drop_front(outputLabels);
  Tensor result = Tensor::zeros(std::get<ein::Shape>(resultShape));
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
                              input.shape, op.getSizeMap());
  if (ein::failed(plan) && !reduction) {
    auto repeat = ein::planEinops(ein::EinopsKind::Repeat, op.getPattern(), input.shape, op.getSizeMap());
    if (!ein::failed(repeat)) plan = repeat;
  }
  if (ein::failed(plan)) return opError(op, std::get<ein::EquationError>(plan).message);
  const ein::EinopsPlan &steps = std::get<ein::EinopsPlan>(plan);
  ir::ReduceKind kind = reduction.value_or(ir::ReduceKind::sum);
  if (kind == ir::ReduceKind::var || kind == ir::ReduceKind::std)
    return opError(op, "'" + ir::stringifyReduceKind(kind) + "' is not an einops reduction (ein.reduce has it)");

  // The input, read as a row-major tensor of its elementary axes: composed
  // groups split in order and unit axes vanish without moving any element.
  std::vector<int64_t> inputStrides = rowMajorStrides(steps.inputAxisSizes);
  std::vector<int64_t> reducedSizes;
  for (int axis : steps.reducedAxes) reducedSizes.push_back(steps.inputAxisSizes[axis]);

  Tensor result = Tensor::zeros(steps.resultShape, input.kind);
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
    nextIndex(outputIndex, steps.outputAxisSizes);
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::SliceOp op) {
  const Tensor &input = valueOf(op.getInput());
  ArrayRef<int64_t> offsets = op.getOffsets(), sizes = op.getSizes();
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

Expected<Tensor> Evaluator::evaluate(ir::UnaryOp op) {
  Tensor result = valueOf(op.getInput());
  for (double &value : result.values) value = applyUnary(op.getKind(), value);
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::BinaryOp op) {
  const Tensor &lhs = valueOf(op.getLhs()), &rhs = valueOf(op.getRhs());
  ir::BinaryKind kind = op.getKind();
  auto shape = ein::broadcastShapes(lhs.shape, rhs.shape);
  if (ein::failed(shape)) return opError(op, std::get<ein::EquationError>(shape).message);
  if (lhs.kind == ElementKind::Int && kind == ir::BinaryKind::div)
    return opError(op, "integer division is not defined: PyTorch's '/' divides in floating point, so the "
                       "operands must be cast first");
  Tensor result = Tensor::zeros(std::get<ein::Shape>(shape));
  std::optional<std::string> failure;
  forEachBroadcast(result.shape, {&lhs, &rhs}, [&](int64_t out, ArrayRef<int64_t> in) {
    double a = lhs.values[in[0]], b = rhs.values[in[1]];
    if (lhs.kind == ElementKind::Int && kind == ir::BinaryKind::pow && b < 0 && !failure)
      failure = "integers to negative integer powers are not allowed (as in PyTorch)";
    result.values[out] = applyBinary(kind, a, b);
  });
  if (failure) return opError(op, *failure);
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::WhereOp op) {
  const Tensor &condition = valueOf(op.getCondition()), &onTrue = valueOf(op.getOnTrue()),
               &onFalse = valueOf(op.getOnFalse());
  auto shape = ein::broadcastShapes(condition.shape, onTrue.shape);
  if (!ein::failed(shape)) shape = ein::broadcastShapes(std::get<ein::Shape>(shape), onFalse.shape);
  if (ein::failed(shape)) return opError(op, std::get<ein::EquationError>(shape).message);
  Tensor result = Tensor::zeros(std::get<ein::Shape>(shape));
  forEachBroadcast(result.shape, {&condition, &onTrue, &onFalse}, [&](int64_t out, ArrayRef<int64_t> in) {
    result.values[out] = condition.values[in[0]] != 0 ? onTrue.values[in[1]] : onFalse.values[in[2]];
  });
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::CastOp op) {
  Tensor result = valueOf(op.getInput());
  ElementKind target = elementKindOf(mlir::cast<RankedTensorType>(op.getType()).getElementType());
  // Float to integer truncates toward zero, as torch's .to(int); the result
  // then wraps to the width in fitToResultType. NaN and inf have no integer.
  if (result.kind == ElementKind::Float && target == ElementKind::Int) {
    for (double &value : result.values) {
      if (!std::isfinite(value)) return opError(op, "cannot convert " + formatNumber(value) + " to an integer");
      value = std::trunc(value);
    }
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
      double *row = result.values.data() + o * length * inner + i;
      // exp(x - max) / sum: a row of only -inf gives exp(NaN), so NaN, as torch.softmax.
      // A NaN anywhere in the row makes max NaN, and so the whole row, as torch.
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < length; ++j)
        if (std::isnan(row[j * inner]) || row[j * inner] > max) max = std::isnan(max) ? max : row[j * inner];
      double sum = 0;
      for (int64_t j = 0; j < length; ++j) sum += row[j * inner] = std::exp(row[j * inner] - max);
      for (int64_t j = 0; j < length; ++j) row[j * inner] /= sum;
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
  ein::Shape lhsShape = lhs.shape, rhsShape = rhs.shape;
  if (lhsShape.size() == 1) lhsShape.insert(lhsShape.begin(), 1);
  if (rhsShape.size() == 1) rhsShape.push_back(1);
  int64_t rows = lhsShape[lhsShape.size() - 2], inner = lhsShape.back(), columns = rhsShape.back();
  ein::Shape lhsBatch(lhsShape.begin(), lhsShape.end() - 2), rhsBatch(rhsShape.begin(), rhsShape.end() - 2);
  auto batch = ein::broadcastShapes(lhsBatch, rhsBatch);
  if (ein::failed(batch)) return opError(op, std::get<ein::EquationError>(batch).message);
  const ein::Shape &batchShape = std::get<ein::Shape>(batch);
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
  ein::Shape shape = input.shape;
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
    double mean = std::accumulate(row, row + width, 0.0) / width;
    double squares = 0;
    for (int64_t i = 0; i < width; ++i) squares += (row[i] - mean) * (row[i] - mean);
    // torch's biased variance with eps inside the square root, or the
    // unbiased standard deviation with eps outside it.
    double scale = op.getVariant() == ir::LayerNormVariant::variance ? 1 / std::sqrt(squares / width + eps)
                                                                     : 1 / (std::sqrt(squares / (width - 1)) + eps);
    for (int64_t i = 0; i < width; ++i)
      row[i] = (row[i] - mean) * scale * (weight ? weight->values[i] : 1.0) + (bias ? bias->values[i] : 0.0);
  }
  return result;
}

Expected<Tensor> Evaluator::evaluate(ir::EmbeddingOp op) {
  const Tensor &ids = valueOf(op.getIds()), &table = valueOf(op.getTable());
  int64_t rows = table.shape[0], width = table.shape[1];
  ein::Shape shape = ids.shape;
  shape.push_back(width);
  Tensor result = Tensor::zeros(shape, table.kind);
  std::vector<int64_t> index(ids.shape.size(), 0);
  for (size_t position = 0; position < ids.values.size(); ++position) {
    double id = ids.values[position];
    if (!(id >= 0 && id < static_cast<double>(rows)))
      return opError(op, "id " + formatNumber(id) + " at " + ein::formatShape(index) +
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

}  // namespace

ElementKind elementKindOf(mlir::Type elementType) {
  if (elementType.isInteger(1)) return ElementKind::Bool;
  if (elementType.isIntOrIndex()) return ElementKind::Int;
  return ElementKind::Float;
}

Tensor Tensor::zeros(std::vector<int64_t> shape, ElementKind kind) {
  int64_t count = product(shape);
  return Tensor(std::move(shape), kind, std::vector<double>(count, 0.0));
}

int64_t Tensor::numElements() const { return product(shape); }

Expected<std::map<std::string, Tensor>> evaluate(mlir::func::FuncOp function,
                                                 const std::map<std::string, Tensor> &inputs,
                                                 const ParamProvider &params) {
  return Evaluator(params).run(function, inputs);
}

ParamProvider safetensorsParams(const weights::SafetensorsFile &file) {
  return [&file](llvm::StringRef name, RankedTensorType type) -> Expected<Tensor> {
    const weights::TensorEntry *entry = file.find(name);
    if (!entry) return makeError(file.path() + ": missing parameter \"" + name + "\"");
    mlir::Type element = type.getElementType();
    // Integer and bool parameters are read exactly as stored; floating-point
    // ones from any float encoding, through f32 as the compiler stores them.
    std::optional<weights::DType> exact;
    if (element.isInteger(1)) exact = weights::DType::Bool;
    else if (element.isSignlessInteger(32)) exact = weights::DType::I32;
    else if (element.isSignlessInteger(64)) exact = weights::DType::I64;
    bool fits = exact ? entry->dtype == *exact
                      : mlir::isa<mlir::FloatType>(element) && weights::isFloatingPoint(entry->dtype);
    if (ArrayRef<int64_t>(entry->shape) != type.getShape() || !fits)
      return makeError(file.path() + ": parameter \"" + name + "\" is " + entry->typeString() + " in the file and " +
                       modelTypeString(type) + " in the model");
    Tensor tensor(entry->shape, elementKindOf(element), {});
    if (!exact) {
      Expected<std::vector<float>> values = file.toF32(*entry);
      if (!values) return values.takeError();
      tensor.values.assign(values->begin(), values->end());
      return tensor;
    }
    llvm::ArrayRef<uint8_t> bytes = file.bytes(*entry);
    unsigned size = weights::dtypeSize(entry->dtype);
    for (size_t offset = 0; offset < bytes.size(); offset += size) {
      const uint8_t *at = bytes.data() + offset;
      switch (entry->dtype) {
      case weights::DType::Bool:
        tensor.values.push_back(*at != 0);
        break;
      case weights::DType::I32:
        tensor.values.push_back(static_cast<int32_t>(llvm::support::endian::read32le(at)));
        break;
      default:  // I64
        tensor.values.push_back(static_cast<double>(static_cast<int64_t>(llvm::support::endian::read64le(at))));
        break;
      }
    }
    return tensor;
  };
}

}  // namespace ein::reference
