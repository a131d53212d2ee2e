// RUN: ein-opt %s --convert-ein-to-kern --kern-fuse-elementwise --kern-fuse-gemm-epilogue --split-input-file | FileCheck %s

// A transformer MLP: gelu of fc1 (its bias already in the gemm) and fc2
// plus the residual stream are each one gemm.
// CHECK-LABEL: func.func @mlp
func.func @mlp(%x: tensor<2x7x8xf32>, %w1: tensor<16x8xf32>, %b1: tensor<16xf32>, %w2: tensor<8x16xf32>, %b2: tensor<8xf32>) -> tensor<2x7x8xf32> {
  // CHECK: %[[H:.*]] = kern.gemm %arg0, %arg1 bias %arg2 {{{.*}}activation = #kern<activation gelu>
  // CHECK: %[[Y:.*]] = kern.gemm %[[H]], %arg3 bias %arg4 residual %arg0 {
  // CHECK-SAME: residual_view = #kern.view<0, [8, 1]>
  // CHECK-NOT: kern.elementwise
  // CHECK: return %[[Y]]
  %h = ein.linear %x, %w1, %b1 : (tensor<2x7x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x7x16xf32>
  %g = ein.unary gelu %h : tensor<2x7x16xf32>
  %y = ein.linear %g, %w2, %b2 : (tensor<2x7x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<2x7x8xf32>
  %r = ein.binary add %x, %y : (tensor<2x7x8xf32>, tensor<2x7x8xf32>) -> tensor<2x7x8xf32>
  return %r : tensor<2x7x8xf32>
}

// -----

// An einsum's bias added afterwards, then relu: bias and activation join;
// the [e] bias is read with stride 0 over the gemm's merged (b m) rows.
// CHECK-LABEL: func.func @bias_then_relu
func.func @bias_then_relu(%x: tensor<2x5x3xf32>, %w: tensor<4x3xf32>, %b: tensor<4xf32>) -> tensor<2x5x4xf32> {
  // CHECK: kern.gemm %arg0, %arg1 bias %arg2 {{{.*}}activation = #kern<activation relu>
  // CHECK-SAME: bias_view = #kern.view<0, [0, 1]>
  // CHECK-NOT: kern.elementwise
  %p = ein.einsum "b m c, e c -> b m e"(%x, %w) : (tensor<2x5x3xf32>, tensor<4x3xf32>) -> tensor<2x5x4xf32>
  %s = ein.binary add %p, %b : (tensor<2x5x4xf32>, tensor<4xf32>) -> tensor<2x5x4xf32>
  %r = ein.unary relu %s : tensor<2x5x4xf32>
  return %r : tensor<2x5x4xf32>
}

// -----

// Scores divided by a constant: the gemm's alpha (1 / 4).
// CHECK-LABEL: func.func @scaled_scores
func.func @scaled_scores(%q: tensor<5x8xf32>, %k: tensor<6x8xf32>) -> tensor<5x6xf32> {
  // CHECK: kern.gemm %arg0, %arg1 {a_view = #kern.view<0, [8, 1]>, alpha = 2.500000e-01 : f32
  // CHECK-NOT: kern.elementwise
  %s = ein.einsum "i d, j d -> i j"(%q, %k) : (tensor<5x8xf32>, tensor<6x8xf32>) -> tensor<5x6xf32>
  %c = ein.constant dense<4.000000e+00> : tensor<f32>
  %t = ein.binary div %s, %c : (tensor<5x6xf32>, tensor<f32>) -> tensor<5x6xf32>
  return %t : tensor<5x6xf32>
}

// -----

// Negatives: a product used twice stays stored; an epilogue with other
// arithmetic (a multiply) or a sigmoid (no gemm activation) stays separate.
// CHECK-LABEL: func.func @negatives
func.func @negatives(%x: tensor<4x3xf32>, %w: tensor<3x5xf32>, %r: tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>) {
  // CHECK: kern.gemm %arg0, %arg1 {a_view
  // CHECK: kern.elementwise
  // CHECK: kern.gemm %arg0, %arg1 {a_view
  // CHECK: kern.elementwise
  // CHECK: kern.gemm %arg0, %arg1 {a_view
  // CHECK: kern.elementwise
  %p = ein.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %twice = ein.binary add %p, %r : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %q = ein.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %scaled = ein.binary mul %q, %r : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %t = ein.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %sig = ein.unary sigmoid %t : tensor<4x5xf32>
  return %p, %twice, %scaled, %sig : tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>
}
