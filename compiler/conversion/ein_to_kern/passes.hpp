// The lowering from the ein to the kern dialect (passes.td).
#pragma once

#include "ir/ein/ein_dialect.hpp"
#include "ir/kern/kern_dialect.hpp"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Pass/Pass.h"

namespace ein {

#define GEN_PASS_DECL
#include "compiler/conversion/ein_to_kern/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/conversion/ein_to_kern/passes.h.inc"

}  // namespace ein
