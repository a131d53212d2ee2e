// The compiler's passes, declared in Passes.td.
#pragma once

#include "ein/IR/EinDialect.h"
#include "ein/IR/KernDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Pass/Pass.h"

namespace ein {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

// Registers every dialect the compiler's IR may contain.
void registerEinDialects(mlir::DialectRegistry &registry);

// What the pipeline may leave out, so that a test can compare a model
// compiled with and without a fusion.
struct CompilerPipelineOptions {
  bool fuseParallelLinears = true;  // ein-fuse-parallel-linears
};

// The pipeline einc runs after the front end: ein -> kern -> planned memory.
void buildCompilerPipeline(mlir::OpPassManager &manager, const CompilerPipelineOptions &options = {});

}  // namespace ein
