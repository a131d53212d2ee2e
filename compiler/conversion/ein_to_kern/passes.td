// The lowering from the ein dialect to the kern dialect.
#ifndef EIN_CONVERSION_EIN_TO_KERN_PASSES_TD
#define EIN_CONVERSION_EIN_TO_KERN_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertEinToKern : Pass<"convert-ein-to-kern", "mlir::func::FuncOp"> {
  let summary = "Lower ein ops to kernel calls with strided views";
  let description = [{
    Tracks every ein value as a strided view of a buffer, so rearranges, slices
    and broadcasts cost nothing; contractions become batched GEMMs whose
    permutations live in the views' strides, and a copy is inserted only where
    a view cannot be expressed (axes that do not merge).
  }];
  let dependentDialects = ["::ein::kern::KernDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

#endif // EIN_CONVERSION_EIN_TO_KERN_PASSES_TD
