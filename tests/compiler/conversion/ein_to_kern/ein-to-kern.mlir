// RUN: ein-opt %s --convert-ein-to-kern --split-input-file | FileCheck %s

// Head split by rearrange and slicing of the fused qkv are views: the score
// GEMM reads q and k through strides, with no copy.
// CHECK-LABEL: func.func @scores
func.func @scores(%qkv: tensor<2x10x96xf32>) -> tensor<2x4x10x10xf32> {
  %split = ein.rearrange "b t (k h d) -> k b h t d" %qkv {sizes = {k = 3 : i64, h = 4 : i64}} : tensor<2x10x96xf32> -> tensor<3x2x4x10x8xf32>
  %q = ein.slice %split {offsets = #ein.sizes<"0, 0, 0, 0, 0">, sizes = #ein.sizes<"1, 2, 4, 10, 8">, dropped = array<i64: 0>} : tensor<3x2x4x10x8xf32> -> tensor<2x4x10x8xf32>
  %k = ein.slice %split {offsets = #ein.sizes<"1, 0, 0, 0, 0">, sizes = #ein.sizes<"1, 2, 4, 10, 8">, dropped = array<i64: 0>} : tensor<3x2x4x10x8xf32> -> tensor<2x4x10x8xf32>
  // CHECK-NOT: kern.copy
  // CHECK: kern.gemm %arg0, %arg0 {a_view = #kern.view<0, [960, 8, 96, 1]>, b_view = #kern.view<32, [960, 8, 1, 96]>, batch = #ein.sizes<"2, 4">, c_view = #kern.view<0, [400, 100, 10, 1]>, k = #ein.sizes<"8">, m = #ein.sizes<"10">, n = #ein.sizes<"10">}
  %s = ein.einsum "b h i d, b h j d -> b h i j" (%q, %k) : (tensor<2x4x10x8xf32>, tensor<2x4x10x8xf32>) -> tensor<2x4x10x10xf32>
  return %s : tensor<2x4x10x10xf32>
}

// -----

// A merge of axes that are not adjacent in memory needs a copy.
// CHECK-LABEL: func.func @merge_heads
func.func @merge_heads(%o: tensor<2x4x10x8xf32>) -> tensor<2x10x32xf32> {
  // CHECK: kern.copy %arg0 {shape = #ein.sizes<"2, 10, 4, 8">, x_view = #kern.view<0, [320, 8, 80, 1]>} : tensor<2x4x10x8xf32> -> tensor<2x10x32xf32>
  %y = ein.rearrange "b h t d -> b t (h d)" %o {sizes = {}} : tensor<2x4x10x8xf32> -> tensor<2x10x32xf32>
  return %y : tensor<2x10x32xf32>
}

// -----

// linear: the weight is read transposed through strides, the bias fused.
// CHECK-LABEL: func.func @linear
func.func @linear(%x: tensor<2x10x32xf32>) -> tensor<2x10x64xf32> {
  %w = ein.param "fc.weight" : tensor<64x32xf32>
  %b = ein.param "fc.bias" : tensor<64xf32>
  // CHECK: kern.gemm %arg0, %{{.*}} bias %{{.*}} {a_view = #kern.view<0, [32, 1]>, b_view = #kern.view<0, [1, 32]>, batch = #ein.sizes<"">, bias_view = #kern.view<0, [0, 1]>, c_view = #kern.view<0, [64, 1]>, k = #ein.sizes<"32">, m = #ein.sizes<"20">, n = #ein.sizes<"64">}
  %y = ein.linear %x, %w, %b : (tensor<2x10x32xf32>, tensor<64x32xf32>, tensor<64xf32>) -> tensor<2x10x64xf32>
  return %y : tensor<2x10x64xf32>
}

// -----

// Stacked per-head weights: the head axis, absent from x, becomes a batch
// axis with stride 0 in x.
// CHECK-LABEL: func.func @per_head
func.func @per_head(%x: tensor<5x16xf32>, %w: tensor<4x16x4xf32>) -> tensor<4x5x4xf32> {
  // CHECK: kern.gemm %arg0, %arg1 {a_view = #kern.view<0, [0, 16, 1]>, b_view = #kern.view<0, [64, 4, 1]>, batch = #ein.sizes<"4">, c_view = #kern.view<0, [20, 4, 1]>, k = #ein.sizes<"16">, m = #ein.sizes<"5">, n = #ein.sizes<"4">}
  %q = ein.einsum "s d, h d e -> h s e" (%x, %w) : (tensor<5x16xf32>, tensor<4x16x4xf32>) -> tensor<4x5x4xf32>
  return %q : tensor<4x5x4xf32>
}

// -----

// A scalar constant becomes an immediate of the element-wise body; a boolean
// mask broadcasts with stride 0.
// CHECK-LABEL: func.func @masked_scale
func.func @masked_scale(%s: tensor<2x3x3xf32>, %mask: tensor<3x3xi1>) -> tensor<2x3x3xf32> {
  %c = ein.constant dense<0.5> : tensor<f32>
  %inf = ein.constant dense<0xFF800000> : tensor<f32>
  // CHECK: kern.elementwise %arg0 {input_views = [#kern.view<0, [9, 3, 1]>]}
  // CHECK:   arith.constant 5.000000e-01 : f32
  // CHECK:   arith.mulf
  %scaled = ein.binary mul %s, %c : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  // CHECK: kern.elementwise %arg1, %{{.*}} {input_views = [#kern.view<0, [0, 3, 1]>, #kern.view<0, [9, 3, 1]>]}
  // CHECK:   arith.cmpf une
  // CHECK:   arith.select
  %masked = ein.where %mask, %inf, %scaled : (tensor<3x3xi1>, tensor<f32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  // CHECK: kern.softmax %{{.*}} {shape = #ein.sizes<"2, 3, 3">, x_view = #kern.view<0, [9, 3, 1]>, y_view = #kern.view<0, [9, 3, 1]>}
  %p = ein.softmax %masked, axis = 2 : tensor<2x3x3xf32>
  return %p : tensor<2x3x3xf32>
}

// -----

// Softmax over a leading axis reads through permuted strides.
// CHECK-LABEL: func.func @softmax_axis0
func.func @softmax_axis0(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // CHECK: kern.softmax %arg0 {shape = #ein.sizes<"6, 4">, x_view = #kern.view<0, [1, 6]>, y_view = #kern.view<0, [1, 6]>}
  %p = ein.softmax %x, axis = 0 : tensor<4x6xf32>
  return %p : tensor<4x6xf32>
}

// -----

// An output that is only a view of an input is copied into its own buffer.
// CHECK-LABEL: func.func @output_view
func.func @output_view(%x: tensor<4x6xf32>) -> tensor<6x4xf32> {
  // CHECK: %[[T:.*]] = kern.copy %arg0 {shape = #ein.sizes<"6, 4">, x_view = #kern.view<0, [1, 6]>}
  // CHECK: return %[[T]]
  %t = ein.einsum "i j -> j i" (%x) : (tensor<4x6xf32>) -> tensor<6x4xf32>
  return %t : tensor<6x4xf32>
}

// -----

// concat reads each part through its view (here a broadcast class token and
// a transposed tensor) and writes it at its offset along the axis.
// CHECK-LABEL: func.func @concat
func.func @concat(%x: tensor<2x4x3xf32>) -> tensor<2x5x3xf32> {
  %cls = ein.param "cls_token" : tensor<1x1x3xf32>
  %tokens = ein.rearrange "1 1 e -> b 1 e" %cls {sizes = {b = 2 : i64}} : tensor<1x1x3xf32> -> tensor<2x1x3xf32>
  %t = ein.rearrange "b e m -> b m e" %x {sizes = {}} : tensor<2x4x3xf32> -> tensor<2x3x4xf32>
  %u = ein.rearrange "b m e -> b e m" %t {sizes = {}} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  // CHECK-NOT: kern.copy
  // CHECK: kern.concat %{{.*}}, %arg0 {axis = 1 : i64, input_views = [#kern.view<0, [0, 0, 1]>, #kern.view<0, [12, 3, 1]>], part_inputs = array<i64: 1, 1>, sizes = #ein.sizes<"1, 4">} : (tensor<1x1x3xf32>, tensor<2x4x3xf32>) -> tensor<2x5x3xf32> {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: f32):
  // CHECK-NEXT: kern.yield %[[A]]
  // CHECK-NEXT: }, {
  // CHECK-NEXT: ^bb0(%[[B:.*]]: f32):
  // CHECK-NEXT: kern.yield %[[B]]
  // CHECK-NEXT: }
  %y = ein.concat(%tokens, %u) axis = 1 : (tensor<2x1x3xf32>, tensor<2x4x3xf32>) -> tensor<2x5x3xf32>
  return %y : tensor<2x5x3xf32>
}

// -----

// Fused attention on heads split out of one qkv buffer: q, k and v are
// strided views of it, and the result is written straight into the merged
// "b n (h d)" layout, so neither side needs a copy.
// CHECK-LABEL: func.func @attention_views
func.func @attention_views(%qkv: tensor<2x10x96xf32>, %mask: tensor<10x10xi1>) -> tensor<2x10x32xf32> {
  %split = ein.rearrange "b t (k h d) -> k b h t d" %qkv {sizes = {k = 3 : i64, h = 4 : i64}} : tensor<2x10x96xf32> -> tensor<3x2x4x10x8xf32>
  %q = ein.slice %split {offsets = #ein.sizes<"0, 0, 0, 0, 0">, sizes = #ein.sizes<"1, 2, 4, 10, 8">, dropped = array<i64: 0>} : tensor<3x2x4x10x8xf32> -> tensor<2x4x10x8xf32>
  %k = ein.slice %split {offsets = #ein.sizes<"1, 0, 0, 0, 0">, sizes = #ein.sizes<"1, 2, 4, 10, 8">, dropped = array<i64: 0>} : tensor<3x2x4x10x8xf32> -> tensor<2x4x10x8xf32>
  %v = ein.slice %split {offsets = #ein.sizes<"2, 0, 0, 0, 0">, sizes = #ein.sizes<"1, 2, 4, 10, 8">, dropped = array<i64: 0>} : tensor<3x2x4x10x8xf32> -> tensor<2x4x10x8xf32>
  %m = ein.rearrange "a0 a1 -> 1 1 a0 a1" %mask {sizes = {}} : tensor<10x10xi1> -> tensor<1x1x10x10xi1>
  // CHECK-NOT: kern.copy
  // CHECK: %[[A:.*]] = kern.attention %arg0, %arg0, %arg0 mask %arg1 {batch = #ein.sizes<"2, 4">, head_dim = #ein.sizes<"8">, k_view = #kern.view<32, [960, 8, 96, 1]>, keys = #ein.sizes<"10">, mask_fill = 0xFF800000 : f32, mask_kind = #kern<mask_kind drop>, mask_view = #kern.view<0, [0, 0, 10, 1]>, out_view = #kern.view<0, [320, 8, 32, 1]>, q_view = #kern.view<0, [960, 8, 96, 1]>, queries = #ein.sizes<"10">, scale = 0.353553385 : f32, v_view = #kern.view<64, [960, 8, 96, 1]>, value_dim = #ein.sizes<"8">} : (tensor<2x10x96xf32>, tensor<2x10x96xf32>, tensor<2x10x96xf32>, tensor<10x10xi1>) -> tensor<2x10x32xf32>
  // CHECK-NEXT: return %[[A]]
  %a = ein.attention %q, %k, %v mask %m scale = 0.35355338454246521 {mask_fill = 0xFFF0000000000000 : f64, mask_kind = #ein<mask_kind drop>} : (tensor<2x4x10x8xf32>, tensor<2x4x10x8xf32>, tensor<2x4x10x8xf32>, tensor<1x1x10x10xi1>) -> tensor<2x4x10x8xf32>
  %o = ein.rearrange "b h t d -> b t (h d)" %a {sizes = {}} : tensor<2x4x10x8xf32> -> tensor<2x10x32xf32>
  return %o : tensor<2x10x32xf32>
}

// -----

// A layer norm is one kernel; its residual and affine vectors are views.
// CHECK-LABEL: func.func @layernorm
func.func @layernorm(%x: tensor<3x8xf32>, %r: tensor<8x3xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<3x8xf32> {
  %rt = ein.rearrange "a b -> b a" %r {sizes = {}} : tensor<8x3xf32> -> tensor<3x8xf32>
  // CHECK: kern.layernorm %arg0 residual %arg1 gamma %arg2 beta %arg3 {beta_view = #kern.view<0, [1]>, epsilon = 9.99999997E-7 : f32, gamma_view = #kern.view<0, [1]>, residual_view = #kern.view<0, [1, 3]>, shape = #ein.sizes<"3, 8">, variant = #kern<layernorm_variant unbiased_std>, x_view = #kern.view<0, [8, 1]>}
  %y = ein.layernorm %x residual %rt weight %g bias %b eps = 1.000000e-06 {variant = #ein<layernorm_variant unbiased_std>} : (tensor<3x8xf32>, tensor<3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

// RMSNorm is the layer norm kernel's variant rms.
// CHECK-LABEL: func.func @rmsnorm
func.func @rmsnorm(%x: tensor<3x8xf32>, %r: tensor<3x8xf32>, %g: tensor<8xf32>) -> tensor<3x8xf32> {
  // CHECK: kern.layernorm %arg0 residual %arg1 gamma %arg2 {epsilon = 9.99999997E-7 : f32, gamma_view = #kern.view<0, [1]>, residual_view = #kern.view<0, [8, 1]>, shape = #ein.sizes<"3, 8">, variant = #kern<layernorm_variant rms>, x_view = #kern.view<0, [8, 1]>}
  %y = ein.layernorm %x residual %r weight %g eps = 1.000000e-06 {variant = #ein<layernorm_variant rms>} : (tensor<3x8xf32>, tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

// Grouped-query attention (each group of query heads as more queries of its
// key head) with one query per head, a decode step: the result is written
// straight into the layout of the head merge that follows the regrouping of
// the heads, so neither rearrange copies.
// CHECK-LABEL: func.func @grouped_attention_merged_heads
func.func @grouped_attention_merged_heads(%q: tensor<1x6x1x8xf32>, %k: tensor<1x2x9x8xf32>, %v: tensor<1x2x9x8xf32>) -> tensor<1x1x48xf32> {
  // CHECK-NOT: kern.copy
  // CHECK: %[[A:.*]] = kern.attention %arg0, %arg1, %arg2 {{.*}}out_view = #kern.view<0, [0, 24, 8, 1]>{{.*}} -> tensor<1x1x48xf32>
  // CHECK-NEXT: return %[[A]]
  %gq = ein.rearrange "a0 (h g) l a3 -> a0 h (g l) a3" %q {sizes = {g = 3 : i64}} : tensor<1x6x1x8xf32> -> tensor<1x2x3x8xf32>
  %a = ein.attention %gq, %k, %v scale = 5.000000e-01 : (tensor<1x2x3x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>) -> tensor<1x2x3x8xf32>
  %r = ein.rearrange "a0 h (g l) a3 -> a0 (h g) l a3" %a {sizes = {g = 3 : i64}} : tensor<1x2x3x8xf32> -> tensor<1x6x1x8xf32>
  %o = ein.rearrange "b h t d -> b t (h d)" %r {sizes = {}} : tensor<1x6x1x8xf32> -> tensor<1x1x48xf32>
  return %o : tensor<1x1x48xf32>
}

// -----

// With two queries per head the merged layout would need two strides along
// the grouped queries: the op writes the regrouped heads densely, and the
// head merge copies.
// CHECK-LABEL: func.func @grouped_attention_two_queries
func.func @grouped_attention_two_queries(%q: tensor<1x6x2x8xf32>, %k: tensor<1x2x9x8xf32>, %v: tensor<1x2x9x8xf32>) -> tensor<1x2x48xf32> {
  // CHECK: %[[A:.*]] = kern.attention %arg0, %arg1, %arg2 {{.*}}out_view = #kern.view<0, [0, 48, 8, 1]>{{.*}} -> tensor<1x6x2x8xf32>
  // CHECK-NEXT: %[[C:.*]] = kern.copy %[[A]]
  // CHECK-NEXT: return %[[C]]
  %gq = ein.rearrange "a0 (h g) l a3 -> a0 h (g l) a3" %q {sizes = {g = 3 : i64}} : tensor<1x6x2x8xf32> -> tensor<1x2x6x8xf32>
  %a = ein.attention %gq, %k, %v scale = 5.000000e-01 : (tensor<1x2x6x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>) -> tensor<1x2x6x8xf32>
  %r = ein.rearrange "a0 h (g l) a3 -> a0 (h g) l a3" %a {sizes = {g = 3 : i64}} : tensor<1x2x6x8xf32> -> tensor<1x6x2x8xf32>
  %o = ein.rearrange "b h t d -> b t (h d)" %r {sizes = {}} : tensor<1x6x2x8xf32> -> tensor<1x2x48xf32>
  return %o : tensor<1x2x48xf32>
}
