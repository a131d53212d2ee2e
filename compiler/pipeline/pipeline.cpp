#include "compiler/pipeline/pipeline.hpp"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

namespace ein {

void registerEinDialects(mlir::DialectRegistry &registry) {
  registry.insert<ir::EinDialect, kern::KernDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::math::MathDialect>();
}

void registerEinPasses() {
  registerEinTransformsPasses();
  registerEinToKernConversionPasses();
  registerKernTransformsPasses();
}

void buildCompilerPipeline(mlir::OpPassManager &manager, const CompilerPipelineOptions &options) {
  mlir::OpPassManager &function = manager.nest<mlir::func::FuncOp>();
  function.addPass(createWidenHalfFloats());
  function.addPass(createFoldConstants());
  function.addPass(mlir::createCSEPass());
  function.addPass(createCanonicalizeFormulas());
  function.addPass(mlir::createCSEPass());
  function.addPass(createFuseSoftmax());
  function.addPass(createFuseLayerNorm());
  function.addPass(createFuseAttention());
  if (options.fuseParallelLinears) function.addPass(createFuseParallelLinears());
  function.addPass(createPlanContractions());
  function.addPass(createConvertEinToKern());
  function.addPass(createFuseElementwise());
  function.addPass(createFuseGemmEpilogue());
  function.addPass(createStoreKernWeights({options.precision, options.target, options.groupSize}));
  function.addPass(createStoreKernState({options.precision, options.target}));
  function.addPass(createPlanFirstRun());
  function.addPass(createPlanSequences());
  function.addPass(createPlanMemory());
}

}  // namespace ein
