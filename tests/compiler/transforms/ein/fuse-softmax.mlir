// RUN: ein-opt %s --cse --ein-fuse-softmax --split-input-file | FileCheck %s

// exp(x - max) / sum(exp(x - max)) over one axis is softmax.
// CHECK-LABEL: func.func @by_hand
func.func @by_hand(%x: tensor<2x3x9xf32>) -> tensor<2x3x9xf32> {
  // CHECK-NEXT: %[[S:.*]] = ein.softmax %arg0, axis = 2 : tensor<2x3x9xf32>
  // CHECK-NEXT: return %[[S]]
  %m = ein.reduce max %x, axes = [2] {keepdim = true} : tensor<2x3x9xf32> -> tensor<2x3x1xf32>
  %d = ein.binary sub %x, %m : (tensor<2x3x9xf32>, tensor<2x3x1xf32>) -> tensor<2x3x9xf32>
  %e = ein.unary exp %d : tensor<2x3x9xf32>
  %s = ein.reduce sum %e, axes = [2] {keepdim = true} : tensor<2x3x9xf32> -> tensor<2x3x1xf32>
  %p = ein.binary div %e, %s : (tensor<2x3x9xf32>, tensor<2x3x1xf32>) -> tensor<2x3x9xf32>
  return %p : tensor<2x3x9xf32>
}

// -----

// Written twice in one expression, over the first axis: CSE makes the two
// exponentials one value.
// CHECK-LABEL: func.func @spelled_twice
func.func @spelled_twice(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // CHECK-NEXT: ein.softmax %arg0, axis = 0
  // CHECK-NEXT: return
  %m1 = ein.reduce max %x, axes = [0] {keepdim = true} : tensor<4x5xf32> -> tensor<1x5xf32>
  %d1 = ein.binary sub %x, %m1 : (tensor<4x5xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
  %e1 = ein.unary exp %d1 : tensor<4x5xf32>
  %m2 = ein.reduce max %x, axes = [0] {keepdim = true} : tensor<4x5xf32> -> tensor<1x5xf32>
  %d2 = ein.binary sub %x, %m2 : (tensor<4x5xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
  %e2 = ein.unary exp %d2 : tensor<4x5xf32>
  %s = ein.reduce sum %e2, axes = [0] {keepdim = true} : tensor<4x5xf32> -> tensor<1x5xf32>
  %p = ein.binary div %e1, %s : (tensor<4x5xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
  return %p : tensor<4x5xf32>
}

// -----

// Without the max subtraction exp overflows where softmax does not: kept.
// CHECK-LABEL: func.func @no_max
func.func @no_max(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // CHECK-NOT: ein.softmax
  // CHECK: ein.unary exp
  // CHECK: ein.binary div
  %e = ein.unary exp %x : tensor<4x5xf32>
  %s = ein.reduce sum %e, axes = [1] {keepdim = true} : tensor<4x5xf32> -> tensor<4x1xf32>
  %p = ein.binary div %e, %s : (tensor<4x5xf32>, tensor<4x1xf32>) -> tensor<4x5xf32>
  return %p : tensor<4x5xf32>
}

// -----

// The max over one axis and the sum over another is not a softmax.
// CHECK-LABEL: func.func @mixed_axes
func.func @mixed_axes(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // CHECK-NOT: ein.softmax
  %m = ein.reduce max %x, axes = [0] {keepdim = true} : tensor<4x5xf32> -> tensor<1x5xf32>
  %d = ein.binary sub %x, %m : (tensor<4x5xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
  %e = ein.unary exp %d : tensor<4x5xf32>
  %s = ein.reduce sum %e, axes = [1] {keepdim = true} : tensor<4x5xf32> -> tensor<4x1xf32>
  %p = ein.binary div %e, %s : (tensor<4x5xf32>, tensor<4x1xf32>) -> tensor<4x5xf32>
  return %p : tensor<4x5xf32>
}

// -----

// The exponential is also an output: it stays, and the softmax still fuses.
// CHECK-LABEL: func.func @exp_is_an_output
func.func @exp_is_an_output(%x: tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>) {
  // CHECK: %[[E:.*]] = ein.unary exp
  // CHECK: %[[P:.*]] = ein.softmax %arg0, axis = 1
  // CHECK: return %[[P]], %[[E]]
  %m = ein.reduce max %x, axes = [1] {keepdim = true} : tensor<4x5xf32> -> tensor<4x1xf32>
  %d = ein.binary sub %x, %m : (tensor<4x5xf32>, tensor<4x1xf32>) -> tensor<4x5xf32>
  %e = ein.unary exp %d : tensor<4x5xf32>
  %s = ein.reduce sum %e, axes = [1] {keepdim = true} : tensor<4x5xf32> -> tensor<4x1xf32>
  %p = ein.binary div %e, %s : (tensor<4x5xf32>, tensor<4x1xf32>) -> tensor<4x5xf32>
  return %p, %e : tensor<4x5xf32>, tensor<4x5xf32>
}
