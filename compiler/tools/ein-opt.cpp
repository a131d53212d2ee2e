// ein-opt: runs ein's passes on a .mlir file (for lit tests and debugging).
#include "compiler/pipeline/pipeline.hpp"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  ein::registerEinDialects(registry);
  ein::registerEinPasses();
  // The generic passes einc's pipeline uses.
  mlir::registerCSEPass();
  mlir::registerCanonicalizerPass();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "ein optimizer driver\n", registry));
}
