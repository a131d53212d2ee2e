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

// -----

// RMSNorm (LlamaRMSNorm), in the form ein-canonicalize-formulas leaves every
// spelling in: x / sqrt(mean(x * x) + eps), then the weight.
// CHECK-LABEL: func.func @rms
func.func @rms(%x: tensor<2x5x8xf32>, %w: tensor<8xf32>) -> tensor<2x5x8xf32> {
  // CHECK-NEXT: %[[N:.*]] = ein.layernorm %arg0 weight %arg1 eps = 9.9999999747524271E-7 {variant = #ein<layernorm_variant rms>} : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  // CHECK-NEXT: return %[[N]]
  %sq = ein.binary mul %x, %x : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %ms = ein.reduce mean %sq, axes = [2] {keepdim = true} : tensor<2x5x8xf32> -> tensor<2x5x1xf32>
  %eps = ein.constant dense<1.0e-6> : tensor<f32>
  %me = ein.binary add %ms, %eps : (tensor<2x5x1xf32>, tensor<f32>) -> tensor<2x5x1xf32>
  %s = ein.unary sqrt %me : tensor<2x5x1xf32>
  %n = ein.binary div %x, %s : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %y = ein.binary mul %w, %n : (tensor<8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// -----

// The weight on the numerator and eps first; RMSNorm has no shift, so a
// following `+ b` stays an add.
// CHECK-LABEL: func.func @rms_weighted_numerator
func.func @rms_weighted_numerator(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %[[N:.*]] = ein.layernorm %arg0 weight %arg1 eps = {{.*}} {variant = #ein<layernorm_variant rms>}
  // CHECK-NEXT: %[[Y:.*]] = ein.binary add %[[N]], %arg2
  // CHECK-NEXT: return %[[Y]]
  %sq = ein.binary mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ms = ein.reduce mean %sq, axes = [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %eps = ein.constant dense<1.0e-5> : tensor<f32>
  %me = ein.binary add %eps, %ms : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = ein.unary sqrt %me : tensor<4x1xf32>
  %wx = ein.binary mul %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %n = ein.binary div %wx, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %y = ein.binary add %n, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A Llama block: h = x + r is normalised and also kept (it stays an add);
// the last norm's sum is read by the norm alone and joins it as a residual.
// CHECK-LABEL: func.func @rms_residual
func.func @rms_residual(%x: tensor<4x8xf32>, %r: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK-NEXT: %[[H:.*]] = ein.binary add %arg0, %arg1
  // CHECK-NEXT: %[[N1:.*]] = ein.layernorm %[[H]] weight %arg2 eps = {{.*}} {variant = #ein<layernorm_variant rms>}
  // CHECK-NEXT: %[[N2:.*]] = ein.layernorm %[[H]] residual %[[N1]] eps = {{.*}} {variant = #ein<layernorm_variant rms>}
  // CHECK-NEXT: return %[[H]], %[[N2]]
  %h = ein.binary add %x, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n1 = ein.layernorm %h weight %w eps = 1.000000e-06 {variant = #ein<layernorm_variant rms>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %h2 = ein.binary add %h, %n1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sq = ein.binary mul %h2, %h2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ms = ein.reduce mean %sq, axes = [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %eps = ein.constant dense<1.0e-6> : tensor<f32>
  %me = ein.binary add %ms, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = ein.unary sqrt %me : tensor<4x1xf32>
  %n2 = ein.binary div %h2, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %h, %n2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Not RMSNorms: the mean square over the first axis, a mean of x * y, a
// mean square of another tensor than the numerator, and no square root.
// CHECK-LABEL: func.func @rms_negatives
func.func @rms_negatives(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK-NOT: ein.layernorm
  %eps = ein.constant dense<1.0e-6> : tensor<f32>
  %sq = ein.binary mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ms0 = ein.reduce mean %sq, axes = [0] {keepdim = true} : tensor<4x8xf32> -> tensor<1x8xf32>
  %me0 = ein.binary add %ms0, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s0 = ein.unary sqrt %me0 : tensor<1x8xf32>
  %a = ein.binary div %x, %s0 : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %xz = ein.binary mul %x, %z : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %msxz = ein.reduce mean %xz, axes = [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %mexz = ein.binary add %msxz, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %sxz = ein.unary sqrt %mexz : tensor<4x1xf32>
  %b = ein.binary div %x, %sxz : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %ms = ein.reduce mean %sq, axes = [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %me = ein.binary add %ms, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = ein.unary sqrt %me : tensor<4x1xf32>
  %c = ein.binary div %z, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %d = ein.binary div %x, %me : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %a, %b, %c, %d : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
