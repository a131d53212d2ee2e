// RUN: ein-opt %s --ein-plan-contractions --convert-ein-to-kern | FileCheck %s

// The planned intermediate's layout lets both contractions run as GEMMs
// reading their operands in place: no copies.
// CHECK-LABEL: func.func @no_copies
func.func @no_copies(%a: tensor<2x8x8xf32>, %b: tensor<8x64xf32>, %c: tensor<8x64xf32>) -> tensor<2xf32> {
  // CHECK-NOT: kern.copy
  // CHECK: kern.gemm
  // CHECK-NOT: kern.copy
  // CHECK: kern.gemm
  // CHECK-NOT: kern.copy
  %y = ein.einsum "i a b, b x, a x -> i" (%a, %b, %c) : (tensor<2x8x8xf32>, tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}
