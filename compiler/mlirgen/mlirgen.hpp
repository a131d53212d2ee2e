// Builds the ein dialect from a parsed .ein model: resolves dims, params,
// blocks and loops, checks every shape, and reports errors at the source.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ir/ein/size.hpp"
#include "llvm/ADT/StringRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace ein::mlirgen {

// A config's value given from outside the model (einc --config NAME=VALUE,
// ein.compile's config=, a checkpoint's config.json), replacing the default
// of the `config` the model declares under that name: a scalar, or a list of
// them (config.json's per-layer "layer_types").
using ConfigScalar = std::variant<bool, int64_t, double, std::string>;
using ConfigValue = std::variant<bool, int64_t, double, std::string, std::vector<ConfigScalar>>;
using ConfigValues = std::map<std::string, ConfigValue>;

// A scalar as a config's value.
inline ConfigValue configValueOf(const ConfigScalar &scalar) {
  return std::visit([](const auto &item) { return ConfigValue(item); }, scalar);
}

// Parses `source` (the text of `filename`) and returns a module holding
// `func.func @main`, whose arguments are the model's inputs and results its
// outputs (named by `ein.name` attributes). `dimOverrides` replaces dims'
// values (einc --dim NAME=SIZE, min == max, or NAME=MIN..MAX, a range),
// `configOverrides` configs' values. A
// function with ranged dims carries their ranges in `ein.dims` and the
// conditions on sizes the runtime must check in `ein.checks`. Errors are
// emitted through the context's diagnostic engine with file:line:col
// locations; returns null on error.
mlir::OwningOpRef<mlir::ModuleOp> generate(mlir::MLIRContext &context, llvm::StringRef source,
                                           llvm::StringRef filename, const ein::DimRanges &dimOverrides,
                                           const ConfigValues &configOverrides = {});

}  // namespace ein::mlirgen
