// The compiler's pipeline: every pass, by dialect and phase, in the order einc
// runs them.
#pragma once

#include <string>

#include "compiler/conversion/ein_to_kern/passes.hpp"
#include "compiler/transforms/ein/passes.hpp"
#include "compiler/transforms/kern/passes.hpp"

namespace ein {

// Registers every dialect the compiler's IR may contain.
void registerEinDialects(mlir::DialectRegistry &registry);

// Registers every ein pass (ein-opt's command line).
void registerEinPasses();

// The artifact's precision and target (the passes that store weights need
// them), and what the pipeline may leave out, so that a test can compare a
// model compiled with and without a fusion.
struct CompilerPipelineOptions {
  bool fuseParallelLinears = true;  // ein-fuse-parallel-linears
  std::string precision = "fp32";   // fp32, bf16, fp16, int8 or int4
  std::string target = "cpu";       // cpu or cuda
  int64_t groupSize = 0;            // int8 weights' scales: 0 per column, 32 per group of 32 along k
};

// The pipeline einc runs after the front end: ein -> kern -> planned memory.
void buildCompilerPipeline(mlir::OpPassManager &manager, const CompilerPipelineOptions &options = {});

}  // namespace ein
