// RUN: ein-opt %s --ein-fuse-attention --split-input-file | FileCheck %s

// A constant mask that hides exactly the keys after each query (GPT-2's
// tril mask, folded from arange) becomes causal attention: no mask operand,
// and the kernels skip the key blocks above the diagonal.
// CHECK-LABEL: func.func @tril_keep_mask
func.func @tril_keep_mask(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // CHECK: ein.attention %arg0, %arg1, %arg2 scale = 1.000000e+00 {causal_positions = #ein.sizes<"4">} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK-NOT: ein.where
  %s = ein.einsum "h i d, h j d -> h i j"(%q, %k) : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %keep = ein.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %inf = ein.constant dense<0xFF800000> : tensor<f32>
  %m = ein.where %keep, %s, %inf : (tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %p = ein.softmax %m, axis = 2 : tensor<2x4x4xf32>
  %o = ein.einsum "h i j, h j d -> h i d"(%p, %v) : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// The same as masked_fill(scores, triu(ones, 1), finfo(float32).min): the
// fill is so low that it hides a key as -inf does.
// CHECK-LABEL: func.func @triu_drop_mask_lowest_fill
func.func @triu_drop_mask_lowest_fill(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: ein.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 {causal_positions = #ein.sizes<"4">}
  %s = ein.einsum "i d, j d -> i j"(%q, %k) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  %drop = ein.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %lowest = ein.constant dense<0xFF7FFFFF> : tensor<f32>
  %m = ein.where %drop, %lowest, %s : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %p = ein.softmax %m, axis = 1 : tensor<4x4xf32>
  %o = ein.einsum "i j, j d -> i d"(%p, %v) : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %o : tensor<4x8xf32>
}

// -----

// An added 0 / -inf mask for 2 queries after 2 cached keys: causal aligned
// bottom-right (query i sees keys up to i + 2), causal_positions 2.
// CHECK-LABEL: func.func @additive_chunk_mask
func.func @additive_chunk_mask(%q: tensor<2x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // CHECK: ein.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 {causal_positions = #ein.sizes<"2">}
  %s = ein.einsum "i d, j d -> i j"(%q, %k) : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %bias = ein.constant dense<[[0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<2x4xf32>
  %m = ein.binary add %s, %bias : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %p = ein.softmax %m, axis = 1 : tensor<2x4xf32>
  %o = ein.einsum "i j, j d -> i d"(%p, %v) : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return %o : tensor<2x8xf32>
}

// -----

// Negative: a fill of -1e4 leaves a trace of the hidden keys where scores
// are as low, so the mask stays a mask.
// CHECK-LABEL: func.func @tril_mask_finite_fill
func.func @tril_mask_finite_fill(%q: tensor<2x8xf32>, %k: tensor<2x8xf32>, %v: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // CHECK: ein.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} scale = 1.000000e+00 {mask_fill = -1.000000e+04 : f64, mask_kind = #ein<mask_kind keep>}
  %s = ein.einsum "i d, j d -> i j"(%q, %k) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x2xf32>
  %keep = ein.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
  %fill = ein.constant dense<-1.000000e+04> : tensor<f32>
  %m = ein.where %keep, %s, %fill : (tensor<2x2xi1>, tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  %p = ein.softmax %m, axis = 1 : tensor<2x2xf32>
  %o = ein.einsum "i j, j d -> i d"(%p, %v) : (tensor<2x2xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %o : tensor<2x8xf32>
}

// -----

// Negative: a query that does not see itself (strictly lower) is not causal.
// CHECK-LABEL: func.func @strictly_lower_mask
func.func @strictly_lower_mask(%q: tensor<3x8xf32>, %k: tensor<3x8xf32>, %v: tensor<3x8xf32>) -> tensor<3x8xf32> {
  // CHECK: ein.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} scale = 1.000000e+00 {mask_fill = 0xFFF0000000000000 : f64, mask_kind = #ein<mask_kind keep>}
  %s = ein.einsum "i d, j d -> i j"(%q, %k) : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x3xf32>
  %keep = ein.constant dense<[[false, false, false], [true, false, false], [true, true, false]]> : tensor<3x3xi1>
  %inf = ein.constant dense<0xFF800000> : tensor<f32>
  %m = ein.where %keep, %s, %inf : (tensor<3x3xi1>, tensor<3x3xf32>, tensor<f32>) -> tensor<3x3xf32>
  %p = ein.softmax %m, axis = 1 : tensor<3x3xf32>
  %o = ein.einsum "i j, j d -> i d"(%p, %v) : (tensor<3x3xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  return %o : tensor<3x8xf32>
}
