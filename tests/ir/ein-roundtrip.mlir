// RUN: ein-opt %s | ein-opt | FileCheck %s --strict-whitespace
// (--strict-whitespace: an enum operand follows its op after one space, `ein.binary mul`.)

// CHECK-LABEL: func.func @attention
func.func @attention(%x: tensor<2x10x96xf32>, %mask: tensor<10x10xi1>) -> tensor<2x4x10x8xf32> {
  // CHECK: ein.param "blocks.0.attn.qkv.weight" : tensor<96x32xf32>
  %w = ein.param "blocks.0.attn.qkv.weight" : tensor<96x32xf32>
  // CHECK: ein.rearrange "b t (k h d) -> k b h t d" %{{.*}} {sizes = {h = 4 : i64, k = 3 : i64}} : tensor<2x10x96xf32> -> tensor<3x2x4x10x8xf32>
  %qkv = ein.rearrange "b t (k h d) -> k b h t d" %x {sizes = {k = 3 : i64, h = 4 : i64}} : tensor<2x10x96xf32> -> tensor<3x2x4x10x8xf32>
  // CHECK: ein.slice %{{.*}} {dropped = array<i64: 0>, offsets = #ein.sizes<"0, 0, 0, 0, 0">, sizes = #ein.sizes<"1, 2, 4, 10, 8">}
  %q = ein.slice %qkv {offsets = #ein.sizes<"0, 0, 0, 0, 0">, sizes = #ein.sizes<"1, 2, 4, 10, 8">, dropped = array<i64: 0>} : tensor<3x2x4x10x8xf32> -> tensor<2x4x10x8xf32>
  %k = ein.slice %qkv {offsets = #ein.sizes<"1, 0, 0, 0, 0">, sizes = #ein.sizes<"1, 2, 4, 10, 8">, dropped = array<i64: 0>} : tensor<3x2x4x10x8xf32> -> tensor<2x4x10x8xf32>
  // CHECK: ein.einsum "b h i d, b h j d -> b h i j"
  %s = ein.einsum "b h i d, b h j d -> b h i j" (%q, %k) : (tensor<2x4x10x8xf32>, tensor<2x4x10x8xf32>) -> tensor<2x4x10x10xf32>
  // CHECK: ein.constant dense<0.353553385> : tensor<f32>
  %c = ein.constant dense<0.353553385> : tensor<f32>
  // CHECK: ein.binary mul
  %scaled = ein.binary mul %s, %c : (tensor<2x4x10x10xf32>, tensor<f32>) -> tensor<2x4x10x10xf32>
  %inf = ein.constant dense<0xFF800000> : tensor<f32>
  // CHECK: ein.where
  %masked = ein.where %mask, %inf, %scaled : (tensor<10x10xi1>, tensor<f32>, tensor<2x4x10x10xf32>) -> tensor<2x4x10x10xf32>
  // CHECK: ein.softmax %{{.*}}, axis = 3 : tensor<2x4x10x10xf32>
  %p = ein.softmax %masked, axis = 3 : tensor<2x4x10x10xf32>
  %o = ein.einsum "b h i j, b h j d -> b h i d" (%p, %k) : (tensor<2x4x10x10xf32>, tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  // CHECK: ein.unary gelu
  %g = ein.unary gelu %o : tensor<2x4x10x8xf32>
  return %g : tensor<2x4x10x8xf32>
}

// CHECK-LABEL: func.func @layers
func.func @layers(%x: tensor<3x5xf32>, %w: tensor<7x5xf32>, %b: tensor<7xf32>, %ids: tensor<4xi32>, %table: tensor<9x5xf32>) -> (tensor<3x7xf32>, tensor<4x5xf32>, tensor<3x1xf32>, tensor<3x5xf32>) {
  // CHECK: ein.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<3x5xf32>, tensor<7x5xf32>, tensor<7xf32>) -> tensor<3x7xf32>
  %y = ein.linear %x, %w, %b : (tensor<3x5xf32>, tensor<7x5xf32>, tensor<7xf32>) -> tensor<3x7xf32>
  // CHECK: ein.embedding
  %e = ein.embedding %ids, %table : (tensor<4xi32>, tensor<9x5xf32>) -> tensor<4x5xf32>
  // CHECK: ein.reduce std %{{.*}}, axes = [1] {correction = 1 : i64, keepdim = true}
  %s = ein.reduce std %x, axes = [1] {keepdim = true, correction = 1} : tensor<3x5xf32> -> tensor<3x1xf32>
  // CHECK: ein.layernorm %{{.*}} eps = 9.9999999999999995E-7
  %n = ein.layernorm %x eps = 1.0e-6 : (tensor<3x5xf32>) -> tensor<3x5xf32>
  return %y, %e, %s, %n : tensor<3x7xf32>, tensor<4x5xf32>, tensor<3x1xf32>, tensor<3x5xf32>
}

// Overlapping windows of the last two axes (kernel 3x2, strides 1 and 2, dilation 2 along the first).
// CHECK-LABEL: func.func @windows
func.func @windows(%x: tensor<2x4x9x8xf32>) -> tensor<2x4x5x4x3x2xf32> {
  // CHECK: ein.windows %{{.*}} {dilations = array<i64: 2, 1>, strides = array<i64: 1, 2>, window = array<i64: 3, 2>} : tensor<2x4x9x8xf32> -> tensor<2x4x5x4x3x2xf32>
  %y = ein.windows %x {window = array<i64: 3, 2>, strides = array<i64: 1, 2>, dilations = array<i64: 2, 1>} : tensor<2x4x9x8xf32> -> tensor<2x4x5x4x3x2xf32>
  return %y : tensor<2x4x5x4x3x2xf32>
}

// CHECK-LABEL: func.func @strided_slice
func.func @strided_slice(%x: tensor<7x6xf32>) -> tensor<4x3xf32> {
  // CHECK: ein.slice %{{.*}} {dropped = array<i64>, offsets = #ein.sizes<"0, 1">, sizes = #ein.sizes<"4, 3">, steps = array<i64: 2, 2>}
  %y = ein.slice %x {offsets = #ein.sizes<"0, 1">, sizes = #ein.sizes<"4, 3">, dropped = array<i64>, steps = array<i64: 2, 2>} : tensor<7x6xf32> -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}
