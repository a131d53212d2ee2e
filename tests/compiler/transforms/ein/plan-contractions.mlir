// RUN: ein-opt %s --ein-plan-contractions --split-input-file | FileCheck %s

// A chain of matrix products is contracted in the cheapest order: b c first
// (100*100*2 + 100*100*2 multiply-adds), not a b first (100^3).
// CHECK-LABEL: func.func @chain
func.func @chain(%a: tensor<100x100xf32>, %b: tensor<100x100xf32>, %c: tensor<100x2xf32>) -> tensor<100x2xf32> {
  // CHECK: %[[BC:.*]] = ein.einsum "j k, k l -> j l"(%arg1, %arg2) : (tensor<100x100xf32>, tensor<100x2xf32>) -> tensor<100x2xf32>
  // CHECK: %[[Y:.*]] = ein.einsum "i j, j l -> i l"(%arg0, %[[BC]]) : (tensor<100x100xf32>, tensor<100x2xf32>) -> tensor<100x2xf32>
  // CHECK: return %[[Y]]
  %y = ein.einsum "i j, j k, k l -> i l" (%a, %b, %c) : (tensor<100x100xf32>, tensor<100x100xf32>, tensor<100x2xf32>) -> tensor<100x2xf32>
  return %y : tensor<100x2xf32>
}

// -----

// The same chain with the small matrix first goes left to right.
// CHECK-LABEL: func.func @chain_left
func.func @chain_left(%a: tensor<2x100xf32>, %b: tensor<100x100xf32>, %c: tensor<100x100xf32>) -> tensor<2x100xf32> {
  // CHECK: %[[AB:.*]] = ein.einsum "i j, j k -> i k"(%arg0, %arg1)
  // CHECK: ein.einsum "i k, k l -> i l"(%[[AB]], %arg2)
  %y = ein.einsum "i j, j k, k l -> i l" (%a, %b, %c) : (tensor<2x100xf32>, tensor<100x100xf32>, tensor<100x100xf32>) -> tensor<2x100xf32>
  return %y : tensor<2x100xf32>
}

// -----

// A label no other operand needs is summed in the first contraction that
// can drop it; intermediates keep only the labels still needed.
// CHECK-LABEL: func.func @sum_early
func.func @sum_early(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %v: tensor<32xf32>, %u: tensor<8xf32>) -> tensor<f32> {
  // CHECK: %[[WV:.*]] = ein.einsum "j k, k -> j"(%arg1, %arg2) : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16xf32>
  // CHECK: %[[XWV:.*]] = ein.einsum "i j, j -> i"(%arg0, %[[WV]]) : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8xf32>
  // CHECK: ein.einsum "i, i -> "(%[[XWV]], %arg3)
  // CHECK-NOT: ein.einsum
  %y = ein.einsum "i j, j k, k, i -> " (%x, %w, %v, %u) : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf32>, tensor<8xf32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

// Two-operand einsums are left alone.
// CHECK-LABEL: func.func @pair
func.func @pair(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) -> tensor<3x5xf32> {
  // CHECK: ein.einsum "i j, j k -> i k"(%arg0, %arg1)
  %y = ein.einsum "i j, j k -> i k" (%a, %b) : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

// Intermediates are laid out for the contraction that reads them: B C is
// contracted first, and its result keeps a and b in A's order, so A . (B C)
// sums (a b) as one axis of both operands (convert-ein-to-kern then needs no
// copy; see plan-contractions-layout.mlir).
// CHECK-LABEL: func.func @intermediate_layout
func.func @intermediate_layout(%a: tensor<2x8x8xf32>, %b: tensor<8x64xf32>, %c: tensor<8x64xf32>) -> tensor<2xf32> {
  // CHECK: %[[BC:.*]] = ein.einsum "b x, a x -> a b"(%arg1, %arg2)
  // CHECK: ein.einsum "i a b, a b -> i"(%arg0, %[[BC]])
  %y = ein.einsum "i a b, b x, a x -> i" (%a, %b, %c) : (tensor<2x8x8xf32>, tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// A diagonal operand beside an intermediate: the intermediate keeps the
// repeated label once (it had it twice, which no einsum output may).
// CHECK-LABEL: func.func @diagonal_beside_an_intermediate
func.func @diagonal_beside_an_intermediate(%a: tensor<3x4x4xf32>, %b: tensor<4x2xf32>, %c: tensor<2xf32>) -> tensor<3xf32> {
  // CHECK: %[[BC:.*]] = ein.einsum "i j, j -> i"(%arg1, %arg2) : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4xf32>
  // CHECK: ein.einsum "b i i, i -> b"(%arg0, %[[BC]]) : (tensor<3x4x4xf32>, tensor<4xf32>) -> tensor<3xf32>
  %y = ein.einsum "b i i, i j, j -> b" (%a, %b, %c) : (tensor<3x4x4xf32>, tensor<4x2xf32>, tensor<2xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}
