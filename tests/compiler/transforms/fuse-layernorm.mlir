// RUN: ein-opt %s --cse --ein-fuse-layernorm --split-input-file | FileCheck %s

// torch's formula with a scale and a shift.
// CHECK-LABEL: func.func @variance
func.func @variance(%x: tensor<2x5x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x5x8xf32> {
  // CHECK-NEXT: %[[N:.*]] = ein.layernorm %arg0 weight %arg1 bias %arg2 eps = 9.9999997473787516E-6 : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  // CHECK-NEXT: return %[[N]]
  %mu = ein.reduce mean %x, axes = [2] {keepdim = true} : tensor<2x5x8xf32> -> tensor<2x5x1xf32>
  %c = ein.binary sub %x, %mu : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %v = ein.reduce var %x, axes = [2] {keepdim = true, correction = 0 : i64} : tensor<2x5x8xf32> -> tensor<2x5x1xf32>
  %eps = ein.constant dense<1.0e-5> : tensor<f32>
  %ve = ein.binary add %v, %eps : (tensor<2x5x1xf32>, tensor<f32>) -> tensor<2x5x1xf32>
  %s = ein.unary sqrt %ve : tensor<2x5x1xf32>
  %n = ein.binary div %c, %s : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %nw = ein.binary mul %n, %w : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %y = ein.binary add %nw, %b : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// -----

// seed002's norm: gamma * (r - mu) / (std_unbiased + eps) + beta.
// CHECK-LABEL: func.func @unbiased_std
func.func @unbiased_std(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: ein.layernorm %arg0 weight %arg1 bias %arg2 eps = {{.*}} {variant = #ein<layernorm_variant unbiased_std>}
  // CHECK-NEXT: return
  %mu = ein.reduce mean %x, axes = [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %sd = ein.reduce std %x, axes = [1] {keepdim = true, correction = 1 : i64} : tensor<4x8xf32> -> tensor<4x1xf32>
  %c = ein.binary sub %x, %mu : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %gc = ein.binary mul %g, %c : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %eps = ein.constant dense<1.0e-6> : tensor<f32>
  %se = ein.binary add %sd, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %n = ein.binary div %gc, %se : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %y = ein.binary add %n, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Not a layer norm: the biased std with eps outside the root (neither
// variant), and statistics over the first axis.
// CHECK-LABEL: func.func @negatives
func.func @negatives(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK-NOT: ein.layernorm
  %mu = ein.reduce mean %x, axes = [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %c = ein.binary sub %x, %mu : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %sd = ein.reduce std %x, axes = [1] {keepdim = true, correction = 0 : i64} : tensor<4x8xf32> -> tensor<4x1xf32>
  %eps = ein.constant dense<1.0e-6> : tensor<f32>
  %se = ein.binary add %sd, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %a = ein.binary div %c, %se : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %mu0 = ein.reduce mean %x, axes = [0] {keepdim = true} : tensor<4x8xf32> -> tensor<1x8xf32>
  %c0 = ein.binary sub %x, %mu0 : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %v0 = ein.reduce var %x, axes = [0] {keepdim = true, correction = 0 : i64} : tensor<4x8xf32> -> tensor<1x8xf32>
  %ve = ein.binary add %v0, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s0 = ein.unary sqrt %ve : tensor<1x8xf32>
  %b = ein.binary div %c0, %s0 : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The normalised values are also an output: the scale and shift stay apart.
// CHECK-LABEL: func.func @normalised_is_an_output
func.func @normalised_is_an_output(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK-NEXT: %[[N:.*]] = ein.layernorm %arg0 eps
  // CHECK-NEXT: %[[Y:.*]] = ein.binary mul %[[N]], %arg1
  // CHECK-NEXT: return %[[N]], %[[Y]]
  %mu = ein.reduce mean %x, axes = [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %c = ein.binary sub %x, %mu : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %v = ein.reduce var %x, axes = [1] {keepdim = true, correction = 0 : i64} : tensor<4x8xf32> -> tensor<4x1xf32>
  %eps = ein.constant dense<1.0e-5> : tensor<f32>
  %ve = ein.binary add %v, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = ein.unary sqrt %ve : tensor<4x1xf32>
  %n = ein.binary div %c, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %y = ein.binary mul %n, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %n, %y : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A residual add that only the norm reads joins it; a sum that is also
// returned (pre-norm blocks keep it) stays an add.
// CHECK-LABEL: func.func @residual
func.func @residual(%x: tensor<4x8xf32>, %r: tensor<4x8xf32>, %g: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK-NEXT: %[[N1:.*]] = ein.layernorm %arg0 residual %arg1 weight %arg2 eps
  // CHECK-NEXT: %[[S:.*]] = ein.binary add %arg1, %arg0
  // CHECK-NEXT: %[[N2:.*]] = ein.layernorm %[[S]] weight %arg2 eps
  // CHECK-NEXT: return %[[N1]], %[[N2]], %[[S]]
  %s1 = ein.binary add %x, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n1 = ein.layernorm %s1 weight %g eps = 1.000000e-05 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s2 = ein.binary add %r, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n2 = ein.layernorm %s2 weight %g eps = 1.000000e-05 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %n1, %n2, %s2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
