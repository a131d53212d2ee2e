// RUN: ein-opt %s --ein-canonicalize-formulas --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @powers
func.func @powers(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %two = ein.constant dense<2.0> : tensor<f32>
  %half = ein.constant dense<0.5> : tensor<f32>
  %minus_half = ein.constant dense<-0.5> : tensor<f32>
  %minus_one = ein.constant dense<-1.0> : tensor<f32>
  %three = ein.constant dense<3.0> : tensor<f32>
  // CHECK: %[[SQUARE:.*]] = ein.binary mul %arg0, %arg0
  %a = ein.binary pow %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  // CHECK: %[[ROOT:.*]] = ein.unary sqrt %arg0
  %b = ein.binary pow %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  // CHECK: %[[RSQRT:.*]] = ein.unary rsqrt %arg0
  %c = ein.binary pow %x, %minus_half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  // CHECK: %[[ONE:.*]] = ein.constant dense<1.000000e+00> : tensor<f32>
  // CHECK: %[[RECIPROCAL:.*]] = ein.binary div %[[ONE]], %arg0
  %d = ein.binary pow %x, %minus_one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  // Other exponents stay.
  // CHECK: %[[CUBE:.*]] = ein.binary pow %arg0, %{{.*}}
  %e = ein.binary pow %x, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  // CHECK: return %[[SQUARE]], %[[ROOT]], %[[RSQRT]], %[[RECIPROCAL]], %[[CUBE]]
  return %a, %b, %c, %d, %e : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A layer norm's hand-written variance and reciprocal root, in the form
// ein-fuse-layernorm matches; the parameter nothing reads stays.
// CHECK-LABEL: func.func @variance_and_rsqrt
func.func @variance_and_rsqrt(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: ein.param "unused"
  %unused = ein.param "unused" : tensor<8xf32>
  %eps = ein.constant dense<1.0e-05> : tensor<f32>
  // CHECK: %[[MU:.*]] = ein.reduce mean %arg0
  %mu = ein.reduce mean %x, axes = [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  // CHECK: %[[D:.*]] = ein.binary sub %arg0, %[[MU]]
  %d = ein.binary sub %x, %mu : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %dd = ein.binary mul %d, %d : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[VAR:.*]] = ein.reduce var %arg0, axes = [1] {keepdim = true}
  %v = ein.reduce mean %dd, axes = [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  // CHECK: %[[VE:.*]] = ein.binary add %[[VAR]]
  %ve = ein.binary add %v, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r = ein.unary rsqrt %ve : tensor<4x1xf32>
  // CHECK: %[[ROOT:.*]] = ein.unary sqrt %[[VE]]
  // CHECK: %[[Y:.*]] = ein.binary div %[[D]], %[[ROOT]]
  %y = ein.binary mul %r, %d : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<4x8xf32>
}

// -----

// The mean of squares over other axes than the centring mean's is no variance.
// CHECK-LABEL: func.func @other_axes
func.func @other_axes(%x: tensor<4x8xf32>) -> tensor<1x8xf32> {
  %mu = ein.reduce mean %x, axes = [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = ein.binary sub %x, %mu : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %dd = ein.binary mul %d, %d : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NOT: ein.reduce var
  // CHECK: ein.reduce mean %{{.*}}, axes = [0] {keepdim = true}
  %v = ein.reduce mean %dd, axes = [0] {keepdim = true} : tensor<4x8xf32> -> tensor<1x8xf32>
  return %v : tensor<1x8xf32>
}
