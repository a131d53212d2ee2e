// The reference evaluator: the semantic oracle of the `ein` dialect.
//
// It interprets a `func.func` whose body is `ein` ops and a `func.return`, op
// by op, with plain loops over row-major buffers and double precision
// everywhere: every value is held as a double and every sum accumulates in
// double, so the result is the exact-as-practical meaning of the IR, not of
// any f32 kernel. Callers compare it with float expectations within a
// tolerance. The evaluator is deliberately simple and slow; fused and
// optimised paths are checked against it, never the other way round.
//
// Element types map to three kinds: floating point (f16/bf16/f32/f64, all
// computed in double without rounding to the narrower type), integers (exact
// in a double up to 2^53; results wrap to the declared width as two's
// complement) and bool (i1, held as 0 or 1).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"

namespace ein::weights {
class SafetensorsFile;
}

namespace ein::reference {

enum class ElementKind { Float, Int, Bool };

// The kind that holds values of `type` (an f*, i1 or iN element type).
ElementKind elementKindOf(mlir::Type elementType);

// A dense row-major tensor of doubles.
struct Tensor {
  std::vector<int64_t> shape;
  ElementKind kind = ElementKind::Float;
  std::vector<double> values;

  Tensor() = default;
  Tensor(std::vector<int64_t> shape, ElementKind kind, std::vector<double> values)
      : shape(std::move(shape)), kind(kind), values(std::move(values)) {}
  // A tensor of `shape` filled with zeros.
  static Tensor zeros(std::vector<int64_t> shape, ElementKind kind = ElementKind::Float);

  int64_t numElements() const;
};

// Returns the values of the parameter `name`, whose declared type is `type`.
// The evaluator checks the returned shape and kind against `type`.
using ParamProvider =
    std::function<llvm::Expected<Tensor>(llvm::StringRef name, mlir::RankedTensorType type)>;

// Evaluates `function`. Its arguments are bound from `inputs` by the
// `ein.name` attribute of each argument; the results are returned by the
// `ein.name` of each result. Parameters (`ein.param`) come from `params`.
// Every failure (a missing or misshapen input, an embedding id out of range,
// an op the evaluator does not know) is an error naming the op and its
// location; nothing is read out of bounds.
llvm::Expected<std::map<std::string, Tensor>> evaluate(mlir::func::FuncOp function,
                                                       const std::map<std::string, Tensor> &inputs,
                                                       const ParamProvider &params);

// The value of `op`, an ein op whose operands are all `ein.constant`s, as the
// evaluator computes it: compile-time constant folding (index tables, masks).
// An error where the op cannot be evaluated (an integer division by zero, an
// id out of range), which the caller then leaves to run time.
llvm::Expected<Tensor> foldConstantOp(mlir::Operation *op);

// A provider reading f32-convertible tensors from a safetensors file, which
// must outlive it. A missing name or a shape differing from the declaration
// is an error in the words of the model language:
//   weights.safetensors: parameter "w" is f32[4, 4] in the file and f32[4, 5] in the model
ParamProvider safetensorsParams(const weights::SafetensorsFile &file);

}  // namespace ein::reference
