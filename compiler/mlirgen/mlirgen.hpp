// Builds the ein dialect from a parsed .ein model: resolves dims, params,
// blocks and loops, checks every shape, and reports errors at the source.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ir/ein/size.hpp"
#include "llvm/ADT/StringRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace ein::mlirgen {

// Parses `source` (the text of `filename`) and returns a module holding
// `func.func @main`, whose arguments are the model's inputs and results its
// outputs (named by `ein.name` attributes). `dimOverrides` replaces dims'
// values (einc --dim NAME=SIZE, min == max, or NAME=MIN..MAX, a range). A
// function with ranged dims carries their ranges in `ein.dims` and the
// conditions on sizes the runtime must check in `ein.checks`. Errors are
// emitted through the context's diagnostic engine with file:line:col
// locations; returns null on error.
mlir::OwningOpRef<mlir::ModuleOp> generate(mlir::MLIRContext &context, llvm::StringRef source,
                                           llvm::StringRef filename, const ein::DimRanges &dimOverrides);

}  // namespace ein::mlirgen
