// The `ein` dialect: the model language as tensor operations.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "llvm/ADT/StringMap.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TensorEncoding.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/ein/equations.hpp"
#include "ir/ein/size.hpp"

namespace ein::ir {

// A ranked tensor type whose dynamic axes (if any) a #ein.sizes encoding sizes.
bool isSizedTensor(mlir::Type type);
// The sizes of a sized tensor type, axis by axis (constants and sizes over dims).
ein::Shape shapeOf(mlir::Type type);
// The tensor type of `shape`: static where every size is a constant, else
// dynamic axes with a #ein.sizes encoding.
mlir::RankedTensorType sizedTensorType(const ein::Shape &shape, mlir::Type elementType);

// "model.ein:12:5": the innermost file location in `loc` (fused or named
// locations looked into), or `fallback` when it holds none.
std::string locationText(mlir::Location loc, const std::string &fallback = "");

// The ranges of the ranged dims of the function holding `op` (its `ein.dims`
// attribute: {t = array<i64: 1, 512>}); empty where there are none.
ein::DimRanges dimRangesOf(mlir::Operation *op);
// A size's value at the largest values of the dims (what costs and plans
// assume: the largest tensors the model makes).
int64_t largestValue(const ein::Size &size, const ein::DimRanges &ranges);

// A run-time condition on sizes as the `ein.checks` attribute of a function
// holds it: {kind = "equal" | "less_equal" | "divides", lhs, rhs (#ein.sizes
// of one size each), message, location}.
mlir::DictionaryAttr sizeCheckAttr(mlir::MLIRContext *context, const ein::SizeCheck &check, mlir::Location at);
// The check an `ein.checks` entry holds, or nullopt if it is malformed.
std::optional<std::pair<ein::SizeCheck, mlir::Location>> sizeCheckOf(mlir::Attribute attr);

}  // namespace ein::ir

#include "ir/ein/ein_ops_dialect.h.inc"
#include "ir/ein/ein_ops_enums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "ir/ein/ein_ops_attrs.h.inc"
#define GET_OP_CLASSES
#include "ir/ein/ein_ops.h.inc"
