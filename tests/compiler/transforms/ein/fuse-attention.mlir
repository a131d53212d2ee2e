// RUN: ein-opt %s --ein-fuse-attention --split-input-file | FileCheck %s

// timm's layout: heads split out of one qkv projection, scaled scores,
// softmax over the keys, values contracted over the keys.
// CHECK-LABEL: func.func @self_attention
func.func @self_attention(%q: tensor<2x4x17x16xf32>, %k: tensor<2x4x17x16xf32>, %v: tensor<2x4x17x16xf32>) -> tensor<2x17x64xf32> {
  // CHECK-NEXT: %[[A:.*]] = ein.attention %arg0, %arg1, %arg2 scale = 2.500000e-01 : (tensor<2x4x17x16xf32>, tensor<2x4x17x16xf32>, tensor<2x4x17x16xf32>) -> tensor<2x4x17x16xf32>
  // CHECK-NEXT: %[[O:.*]] = ein.rearrange "b h n d -> b n (h d)" %[[A]]
  // CHECK-NEXT: return %[[O]]
  %s = ein.einsum "b h i d, b h j d -> b h i j"(%q, %k) : (tensor<2x4x17x16xf32>, tensor<2x4x17x16xf32>) -> tensor<2x4x17x17xf32>
  %c = ein.constant dense<2.500000e-01> : tensor<f32>
  %t = ein.binary mul %s, %c : (tensor<2x4x17x17xf32>, tensor<f32>) -> tensor<2x4x17x17xf32>
  %p = ein.softmax %t, axis = 3 : tensor<2x4x17x17xf32>
  %o = ein.einsum "b h i j, b h j d -> b h i d"(%p, %v) : (tensor<2x4x17x17xf32>, tensor<2x4x17x16xf32>) -> tensor<2x4x17x16xf32>
  %r = ein.rearrange "b h n d -> b n (h d)" %o {sizes = {}} : tensor<2x4x17x16xf32> -> tensor<2x17x64xf32>
  return %r : tensor<2x17x64xf32>
}

// -----

// Cross-attention with the heads after the tokens, a division on the scores
// and a scale on Q; the boolean mask [t, s] broadcasts over batch and heads
// and masked_fill (-inf) drops. Operands are rearranged into [B.., I, D].
// CHECK-LABEL: func.func @cross_attention_masked
func.func @cross_attention_masked(%q: tensor<2x7x3x5xf32>, %k: tensor<2x11x3x5xf32>, %v: tensor<2x11x3x6xf32>, %mask: tensor<7x11xi1>) -> tensor<2x7x3x6xf32> {
  // CHECK-DAG: %[[Q:.*]] = ein.rearrange "b i h d -> b h i d" %arg0
  // CHECK-DAG: %[[K:.*]] = ein.rearrange "b j h d -> b h j d" %arg1
  // CHECK-DAG: %[[V:.*]] = ein.rearrange "b j h e -> b h j e" %arg2
  // CHECK-DAG: %[[M:.*]] = ein.rearrange "i j -> 1 1 i j" %arg3
  // CHECK: %[[A:.*]] = ein.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] scale = 1.000000e-01 {mask_fill = 0xFFF0000000000000 : f64, mask_kind = #ein<mask_kind drop>} : (tensor<2x3x7x5xf32>, tensor<2x3x11x5xf32>, tensor<2x3x11x6xf32>, tensor<1x1x7x11xi1>) -> tensor<2x3x7x6xf32>
  // CHECK-NEXT: %[[O:.*]] = ein.rearrange "b h i e -> b i h e" %[[A]]
  // CHECK-NEXT: return %[[O]]
  %half = ein.constant dense<5.000000e-01> : tensor<f32>
  %qs = ein.binary mul %q, %half : (tensor<2x7x3x5xf32>, tensor<f32>) -> tensor<2x7x3x5xf32>
  %s = ein.einsum "b i h d, b j h d -> b h i j"(%qs, %k) : (tensor<2x7x3x5xf32>, tensor<2x11x3x5xf32>) -> tensor<2x3x7x11xf32>
  %five = ein.constant dense<5.000000e+00> : tensor<f32>
  %t = ein.binary div %s, %five : (tensor<2x3x7x11xf32>, tensor<f32>) -> tensor<2x3x7x11xf32>
  %inf = ein.constant dense<0xFF800000> : tensor<f32>
  %m = ein.where %mask, %inf, %t : (tensor<7x11xi1>, tensor<f32>, tensor<2x3x7x11xf32>) -> tensor<2x3x7x11xf32>
  %p = ein.softmax %m, axis = 3 : tensor<2x3x7x11xf32>
  %o = ein.einsum "b h i j, b j h e -> b i h e"(%p, %v) : (tensor<2x3x7x11xf32>, tensor<2x11x3x6xf32>) -> tensor<2x7x3x6xf32>
  return %o : tensor<2x7x3x6xf32>
}

// -----

// Class attention: one query without a query axis, an additive float mask,
// and matmul spellings are not needed: the query gets a unit axis.
// CHECK-LABEL: func.func @single_query_additive_mask
func.func @single_query_additive_mask(%q: tensor<2x8xf32>, %k: tensor<2x9x8xf32>, %bias: tensor<2x9xf32>) -> tensor<2x8xf32> {
  // CHECK-DAG: %[[Q:.*]] = ein.rearrange "b d -> b 1 d" %arg0
  // CHECK-DAG: %[[M:.*]] = ein.rearrange "b j -> b 1 j" %arg2
  // CHECK: %[[A:.*]] = ein.attention %[[Q]], %arg1, %arg1 mask %[[M]] scale = 1.000000e+00 {mask_kind = #ein<mask_kind add>}
  // CHECK-NEXT: ein.rearrange "b 1 x0 -> b x0" %[[A]]
  %s = ein.einsum "b d, b j d -> b j"(%q, %k) : (tensor<2x8xf32>, tensor<2x9x8xf32>) -> tensor<2x9xf32>
  %m = ein.binary add %s, %bias : (tensor<2x9xf32>, tensor<2x9xf32>) -> tensor<2x9xf32>
  %p = ein.softmax %m, axis = 1 : tensor<2x9xf32>
  %o = ein.einsum "b j, b j d -> b d"(%p, %k) : (tensor<2x9xf32>, tensor<2x9x8xf32>) -> tensor<2x8xf32>
  return %o : tensor<2x8xf32>
}

// -----

// q @ k^T / c, softmax, @ v with matmuls; where(keep, s, fill) keeps.
// CHECK-LABEL: func.func @matmul_spelling_keep_mask
func.func @matmul_spelling_keep_mask(%q: tensor<3x5x4xf32>, %kt: tensor<3x4x5xf32>, %v: tensor<3x5x2xf32>, %keep: tensor<3x5x5xi1>) -> tensor<3x5x2xf32> {
  // CHECK-DAG: %[[K:.*]] = ein.rearrange "x0 k n -> x0 n k" %arg1
  // CHECK: ein.attention %arg0, %[[K]], %arg2 mask %arg3 scale = 5.000000e-01 {mask_fill = -1.000000e+04 : f64, mask_kind = #ein<mask_kind keep>}
  %s = ein.matmul %q, %kt : (tensor<3x5x4xf32>, tensor<3x4x5xf32>) -> tensor<3x5x5xf32>
  %two = ein.constant dense<2.000000e+00> : tensor<f32>
  %t = ein.binary div %s, %two : (tensor<3x5x5xf32>, tensor<f32>) -> tensor<3x5x5xf32>
  %fill = ein.constant dense<-1.000000e+04> : tensor<f32>
  %m = ein.where %keep, %t, %fill : (tensor<3x5x5xi1>, tensor<3x5x5xf32>, tensor<f32>) -> tensor<3x5x5xf32>
  %p = ein.softmax %m, axis = 2 : tensor<3x5x5xf32>
  %o = ein.matmul %p, %v : (tensor<3x5x5xf32>, tensor<3x5x2xf32>) -> tensor<3x5x2xf32>
  return %o : tensor<3x5x2xf32>
}

// -----

// Talking heads (timm's TalkingHeadAttn): head mixes with biases before and
// after the softmax.
// CHECK-LABEL: func.func @talking_heads
func.func @talking_heads(%q: tensor<2x4x17x12xf32>, %k: tensor<2x4x17x12xf32>, %v: tensor<2x4x17x12xf32>, %wl: tensor<4x4xf32>, %bl: tensor<4x1x1xf32>, %ww: tensor<4x4xf32>, %bw: tensor<4x1x1xf32>) -> tensor<2x4x17x12xf32> {
  // CHECK-DAG: %[[BL:.*]] = ein.rearrange "g 1 1 -> g" %arg4
  // CHECK-DAG: %[[BW:.*]] = ein.rearrange "g 1 1 -> g" %arg6
  // CHECK: %[[A:.*]] = ein.talking_heads_attention %arg0, %arg1, %arg2 pre_mix %arg3 pre_bias %[[BL]] post_mix %arg5 post_bias %[[BW]] scale = 2.500000e-01
  // CHECK-NEXT: return %[[A]]
  %s = ein.einsum "b h i d, b h j d -> b h i j"(%q, %k) : (tensor<2x4x17x12xf32>, tensor<2x4x17x12xf32>) -> tensor<2x4x17x17xf32>
  %c = ein.constant dense<2.500000e-01> : tensor<f32>
  %t = ein.binary mul %c, %s : (tensor<f32>, tensor<2x4x17x17xf32>) -> tensor<2x4x17x17xf32>
  %l = ein.einsum "b h i j, g h -> b g i j"(%t, %wl) : (tensor<2x4x17x17xf32>, tensor<4x4xf32>) -> tensor<2x4x17x17xf32>
  %lb = ein.binary add %l, %bl : (tensor<2x4x17x17xf32>, tensor<4x1x1xf32>) -> tensor<2x4x17x17xf32>
  %p = ein.softmax %lb, axis = 3 : tensor<2x4x17x17xf32>
  %w = ein.einsum "b h i j, g h -> b g i j"(%p, %ww) : (tensor<2x4x17x17xf32>, tensor<4x4xf32>) -> tensor<2x4x17x17xf32>
  %wb = ein.binary add %w, %bw : (tensor<2x4x17x17xf32>, tensor<4x1x1xf32>) -> tensor<2x4x17x17xf32>
  %o = ein.einsum "b h i j, b h j d -> b h i d"(%wb, %v) : (tensor<2x4x17x17xf32>, tensor<2x4x17x12xf32>) -> tensor<2x4x17x12xf32>
  return %o : tensor<2x4x17x12xf32>
}

// -----

// Negative: the probabilities are a model output (seed002 returns `attn`).
// CHECK-LABEL: func.func @probabilities_are_an_output
func.func @probabilities_are_an_output(%q: tensor<2x5x4xf32>, %k: tensor<2x5x4xf32>) -> (tensor<2x5x4xf32>, tensor<2x5x5xf32>) {
  // CHECK-NOT: ein.attention
  // CHECK: ein.softmax
  %s = ein.einsum "b i d, b j d -> b i j"(%q, %k) : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x5xf32>
  %p = ein.softmax %s, axis = 2 : tensor<2x5x5xf32>
  %o = ein.einsum "b i j, b j d -> b i d"(%p, %k) : (tensor<2x5x5xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  return %o, %p : tensor<2x5x4xf32>, tensor<2x5x5xf32>
}

// -----

// Negative: the probabilities' one user is the return (nothing contracts them
// with V), here beside an attention that does fuse. Regression: the search
// for a head mix after the softmax took the return's result 0, which it
// does not have, and crashed.
// CHECK-LABEL: func.func @probabilities_only_returned
func.func @probabilities_only_returned(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x3x5x4xf32>) -> (tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>) {
  // CHECK: %[[P:.*]] = ein.softmax
  // CHECK: ein.attention
  // CHECK: return %[[P]],
  %s = ein.einsum "b h i d, b h j d -> b h i j"(%q, %k) : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x5xf32>
  %p = ein.softmax %s, axis = 3 : tensor<2x3x5x5xf32>
  %s2 = ein.einsum "b h i d, b h j d -> b h i j"(%k, %q) : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x5xf32>
  %p2 = ein.softmax %s2, axis = 3 : tensor<2x3x5x5xf32>
  %o = ein.einsum "b h i j, b h j d -> b h i d"(%p2, %v) : (tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  return %p, %o : tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>
}

// -----

// Negative: the scores are read elsewhere too.
// CHECK-LABEL: func.func @scores_read_twice
func.func @scores_read_twice(%q: tensor<2x5x4xf32>, %k: tensor<2x5x4xf32>) -> (tensor<2x5x4xf32>, tensor<2x5x5xf32>) {
  // CHECK-NOT: ein.attention
  %s = ein.einsum "b i d, b j d -> b i j"(%q, %k) : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x5xf32>
  %p = ein.softmax %s, axis = 2 : tensor<2x5x5xf32>
  %o = ein.einsum "b i j, b j d -> b i d"(%p, %k) : (tensor<2x5x5xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  return %o, %s : tensor<2x5x4xf32>, tensor<2x5x5xf32>
}

// -----

// Negative: softmax over the query axis is not attention over the keys.
// CHECK-LABEL: func.func @softmax_over_queries
func.func @softmax_over_queries(%q: tensor<2x5x4xf32>, %k: tensor<2x5x4xf32>) -> tensor<2x5x4xf32> {
  // CHECK-NOT: ein.attention
  %s = ein.einsum "b i d, b j d -> b i j"(%q, %k) : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x5xf32>
  %p = ein.softmax %s, axis = 1 : tensor<2x5x5xf32>
  %o = ein.einsum "b i j, b j d -> b i d"(%p, %k) : (tensor<2x5x5xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  return %o : tensor<2x5x4xf32>
}

// -----

// Negative: V is contracted over the queries, not the keys.
// CHECK-LABEL: func.func @values_over_the_wrong_axis
func.func @values_over_the_wrong_axis(%q: tensor<2x5x4xf32>, %k: tensor<2x5x4xf32>) -> tensor<2x5x4xf32> {
  // CHECK-NOT: ein.attention
  %s = ein.einsum "b i d, b j d -> b i j"(%q, %k) : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x5xf32>
  %p = ein.softmax %s, axis = 2 : tensor<2x5x5xf32>
  %o = ein.einsum "b i j, b i d -> b j d"(%p, %k) : (tensor<2x5x5xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  return %o : tensor<2x5x4xf32>
}

// -----

// Negative: the scale comes after an additive mask, which the fused op would
// not scale; left as written.
// CHECK-LABEL: func.func @scale_after_mask
func.func @scale_after_mask(%q: tensor<2x5x4xf32>, %k: tensor<2x5x4xf32>, %bias: tensor<5x5xf32>) -> tensor<2x5x4xf32> {
  // CHECK-NOT: ein.attention
  %s = ein.einsum "b i d, b j d -> b i j"(%q, %k) : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x5xf32>
  %m = ein.binary add %s, %bias : (tensor<2x5x5xf32>, tensor<5x5xf32>) -> tensor<2x5x5xf32>
  %c = ein.constant dense<5.000000e-01> : tensor<f32>
  %t = ein.binary mul %m, %c : (tensor<2x5x5xf32>, tensor<f32>) -> tensor<2x5x5xf32>
  %p = ein.softmax %t, axis = 2 : tensor<2x5x5xf32>
  %o = ein.einsum "b i j, b j d -> b i d"(%p, %k) : (tensor<2x5x5xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  return %o : tensor<2x5x4xf32>
}

// -----

// Negative: two feature axes are contracted (a layout the kernel does not take).
// CHECK-LABEL: func.func @two_feature_axes
func.func @two_feature_axes(%q: tensor<5x2x3xf32>, %k: tensor<6x2x3xf32>) -> tensor<5x3xf32> {
  // CHECK-NOT: ein.attention
  %s = ein.einsum "i a c, j a c -> i j"(%q, %k) : (tensor<5x2x3xf32>, tensor<6x2x3xf32>) -> tensor<5x6xf32>
  %p = ein.softmax %s, axis = 1 : tensor<5x6xf32>
  %v = ein.einsum "j a c -> j c"(%k) : (tensor<6x2x3xf32>) -> tensor<6x3xf32>
  %o = ein.einsum "i j, j c -> i c"(%p, %v) : (tensor<5x6xf32>, tensor<6x3xf32>) -> tensor<5x3xf32>
  return %o : tensor<5x3xf32>
}

// -----

// A scale after masked_fill: masked entries are fill * scale, so the fused op
// takes the scaled fill (-1e9 * 0.5).
// CHECK-LABEL: func.func @scale_after_bool_mask
func.func @scale_after_bool_mask(%q: tensor<2x5x4xf32>, %k: tensor<2x5x4xf32>, %drop: tensor<5x5xi1>) -> tensor<2x5x4xf32> {
  // CHECK: ein.attention %arg0, %arg1, %arg1 mask %{{.*}} scale = 5.000000e-01 {mask_fill = -5.000000e+08 : f64, mask_kind = #ein<mask_kind drop>}
  %s = ein.einsum "b i d, b j d -> b i j"(%q, %k) : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x5xf32>
  %fill = ein.constant dense<-1.000000e+09> : tensor<f32>
  %m = ein.where %drop, %fill, %s : (tensor<5x5xi1>, tensor<f32>, tensor<2x5x5xf32>) -> tensor<2x5x5xf32>
  %c = ein.constant dense<5.000000e-01> : tensor<f32>
  %t = ein.binary mul %m, %c : (tensor<2x5x5xf32>, tensor<f32>) -> tensor<2x5x5xf32>
  %p = ein.softmax %t, axis = 2 : tensor<2x5x5xf32>
  %o = ein.einsum "b i j, b j d -> b i d"(%p, %k) : (tensor<2x5x5xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  return %o : tensor<2x5x4xf32>
}

// -----

// Grouped-query attention: r queries per key/value group (a label in Q and
// the scores only, beside i) merge into the op's query axis; the [i, j] mask
// is repeated over r to index it.
// CHECK-LABEL: func.func @grouped_query
func.func @grouped_query(%q: tensor<2x2x3x7x4xf32>, %k: tensor<2x2x7x4xf32>, %drop: tensor<7x7xi1>) -> tensor<2x7x2x3x4xf32> {
  // CHECK-DAG: %[[Q:.*]] = ein.rearrange "b g r i d -> b g (r i) d" %arg0
  // CHECK-DAG: %[[M:.*]] = ein.rearrange "i j -> 1 1 (r i) j" %arg2 {sizes = {r = 3 : i64}} : tensor<7x7xi1> -> tensor<1x1x21x7xi1>
  // CHECK: %[[A:.*]] = ein.attention %[[Q]], %arg1, %arg1 mask %[[M]] {{.*}} -> tensor<2x2x21x4xf32>
  // CHECK-NEXT: ein.rearrange "b g (r i) e -> b i g r e" %[[A]] {sizes = {i = 7 : i64, r = 3 : i64}}
  %s = ein.einsum "b g r i d, b g j d -> b g r i j"(%q, %k) : (tensor<2x2x3x7x4xf32>, tensor<2x2x7x4xf32>) -> tensor<2x2x3x7x7xf32>
  %inf = ein.constant dense<0xFF800000> : tensor<f32>
  %m = ein.where %drop, %inf, %s : (tensor<7x7xi1>, tensor<f32>, tensor<2x2x3x7x7xf32>) -> tensor<2x2x3x7x7xf32>
  %p = ein.softmax %m, axis = 4 : tensor<2x2x3x7x7xf32>
  %o = ein.einsum "b g r i j, b g j e -> b i g r e"(%p, %k) : (tensor<2x2x3x7x7xf32>, tensor<2x2x7x4xf32>) -> tensor<2x7x2x3x4xf32>
  return %o : tensor<2x7x2x3x4xf32>
}

// -----

// Swin's window attention as timm writes it without fused attention: a scale,
// then the relative position bias [h, i, j], then the shifted-window mask
// [w, 1, i, j], each added on its own (two additive terms). They are summed
// into the one additive mask operand.
// CHECK-LABEL: func.func @two_additive_terms
func.func @two_additive_terms(%q: tensor<2x4x3x16x8xf32>, %k: tensor<2x4x3x16x8xf32>, %v: tensor<2x4x3x16x8xf32>, %bias: tensor<3x16x16xf32>, %mask: tensor<4x1x16x16xf32>) -> tensor<2x4x3x16x8xf32> {
  // CHECK: %[[SUM:.*]] = ein.binary add %arg4, %arg3 : (tensor<4x1x16x16xf32>, tensor<3x16x16xf32>) -> tensor<4x3x16x16xf32>
  // CHECK: %[[M:.*]] = ein.rearrange "w h i j -> 1 w h i j" %[[SUM]]
  // CHECK: ein.attention %arg0, %arg1, %arg2 mask %[[M]] scale = 2.500000e-01 {mask_kind = #ein<mask_kind add>}
  // CHECK-NOT: ein.softmax
  %s = ein.einsum "b w h i d, b w h j d -> b w h i j"(%q, %k) : (tensor<2x4x3x16x8xf32>, tensor<2x4x3x16x8xf32>) -> tensor<2x4x3x16x16xf32>
  %c = ein.constant dense<2.500000e-01> : tensor<f32>
  %t = ein.binary mul %s, %c : (tensor<2x4x3x16x16xf32>, tensor<f32>) -> tensor<2x4x3x16x16xf32>
  %tb = ein.binary add %t, %bias : (tensor<2x4x3x16x16xf32>, tensor<3x16x16xf32>) -> tensor<2x4x3x16x16xf32>
  %tm = ein.binary add %tb, %mask : (tensor<2x4x3x16x16xf32>, tensor<4x1x16x16xf32>) -> tensor<2x4x3x16x16xf32>
  %p = ein.softmax %tm, axis = 4 : tensor<2x4x3x16x16xf32>
  %o = ein.einsum "b w h i j, b w h j d -> b w h i d"(%p, %v) : (tensor<2x4x3x16x16xf32>, tensor<2x4x3x16x8xf32>) -> tensor<2x4x3x16x8xf32>
  return %o : tensor<2x4x3x16x8xf32>
}

// -----

// Three terms in any grouping, the scores in the middle: bias + (s + alibi) + mask.
// CHECK-LABEL: func.func @three_terms_any_grouping
func.func @three_terms_any_grouping(%q: tensor<2x5x8xf32>, %k: tensor<2x5x8xf32>, %bias: tensor<5x5xf32>, %alibi: tensor<2x1x5xf32>, %mask: tensor<2x5x5xf32>) -> tensor<2x5x8xf32> {
  // CHECK: ein.binary add
  // CHECK: ein.binary add
  // CHECK: ein.attention %arg0, %arg1, %arg1 mask
  // CHECK-NOT: ein.softmax
  %s = ein.einsum "b i d, b j d -> b i j"(%q, %k) : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x5xf32>
  %a = ein.binary add %s, %alibi : (tensor<2x5x5xf32>, tensor<2x1x5xf32>) -> tensor<2x5x5xf32>
  %b = ein.binary add %bias, %a : (tensor<5x5xf32>, tensor<2x5x5xf32>) -> tensor<2x5x5xf32>
  %m = ein.binary add %b, %mask : (tensor<2x5x5xf32>, tensor<2x5x5xf32>) -> tensor<2x5x5xf32>
  %p = ein.softmax %m, axis = 2 : tensor<2x5x5xf32>
  %o = ein.einsum "b i j, b j d -> b i d"(%p, %k) : (tensor<2x5x5xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  return %o : tensor<2x5x8xf32>
}

// -----

// A constant zero term (an unshifted block's window mask) adds nothing: the
// bias alone is the mask.
// CHECK-LABEL: func.func @zero_term_dropped
func.func @zero_term_dropped(%q: tensor<2x5x8xf32>, %k: tensor<2x5x8xf32>, %bias: tensor<5x5xf32>) -> tensor<2x5x8xf32> {
  // CHECK-NOT: ein.binary add
  // CHECK: ein.attention %arg0, %arg1, %arg1 mask %{{.*}} scale = 1.000000e+00 {mask_kind = #ein<mask_kind add>}
  %s = ein.einsum "b i d, b j d -> b i j"(%q, %k) : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x5xf32>
  %zero = ein.constant dense<0.000000e+00> : tensor<1x5x5xf32>
  %a = ein.binary add %s, %bias : (tensor<2x5x5xf32>, tensor<5x5xf32>) -> tensor<2x5x5xf32>
  %m = ein.binary add %a, %zero : (tensor<2x5x5xf32>, tensor<1x5x5xf32>) -> tensor<2x5x5xf32>
  %p = ein.softmax %m, axis = 2 : tensor<2x5x5xf32>
  %o = ein.einsum "b i j, b j d -> b i d"(%p, %k) : (tensor<2x5x5xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  return %o : tensor<2x5x8xf32>
}

// -----

// Hugging Face's repeat_kv (each key/value head repeated for its group of
// query heads) before causal attention is grouped-query attention: the key
// and value are read in place and each group of query heads becomes more
// queries of its key head; a per-head mask is grouped alike.
// CHECK-LABEL: func.func @repeat_kv
func.func @repeat_kv(%q: tensor<1x6x3x8xf32>, %k: tensor<1x2x9x8xf32>, %v: tensor<1x2x9x4xf32>, %m: tensor<1x6x3x9xf32>) -> tensor<1x6x3x4xf32> {
  // CHECK-NEXT: %[[Q:.*]] = ein.rearrange "a0 (h g) l a3 -> a0 h (g l) a3" %arg0 {sizes = {g = 3 : i64}} : tensor<1x6x3x8xf32> -> tensor<1x2x9x8xf32>
  // CHECK-NEXT: %[[M:.*]] = ein.rearrange "a0 (h g) l a3 -> a0 h (g l) a3" %arg3 {sizes = {g = 3 : i64}} : tensor<1x6x3x9xf32> -> tensor<1x2x9x9xf32>
  // CHECK-NEXT: %[[A:.*]] = ein.attention %[[Q]], %arg1, %arg2 mask %[[M]] scale = 5.000000e-01 {causal_positions = #ein.sizes<"3">, mask_kind = #ein<mask_kind add>} : (tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x4xf32>, tensor<1x2x9x9xf32>) -> tensor<1x2x9x4xf32>
  // CHECK-NEXT: %[[O:.*]] = ein.rearrange "a0 h (g l) a3 -> a0 (h g) l a3" %[[A]] {sizes = {g = 3 : i64}} : tensor<1x2x9x4xf32> -> tensor<1x6x3x4xf32>
  // CHECK-NEXT: return %[[O]]
  %rk = ein.rearrange "b h t d -> b (h g) t d" %k {sizes = {g = 3 : i64}} : tensor<1x2x9x8xf32> -> tensor<1x6x9x8xf32>
  %rv = ein.rearrange "b h t d -> b (h g) t d" %v {sizes = {g = 3 : i64}} : tensor<1x2x9x4xf32> -> tensor<1x6x9x4xf32>
  %a = ein.attention %q, %rk, %rv mask %m scale = 5.000000e-01 {causal_positions = #ein.sizes<"3">, mask_kind = #ein<mask_kind add>} : (tensor<1x6x3x8xf32>, tensor<1x6x9x8xf32>, tensor<1x6x9x4xf32>, tensor<1x6x3x9xf32>) -> tensor<1x6x3x4xf32>
  return %a : tensor<1x6x3x4xf32>
}

// -----

// Heads repeated cycling ((g h)) group the query heads the same way; a mask
// shared by the heads is stacked for each query head of a group.
// CHECK-LABEL: func.func @repeat_kv_cycled_shared_mask
func.func @repeat_kv_cycled_shared_mask(%q: tensor<4x3x8xf32>, %k: tensor<2x9x8xf32>, %v: tensor<2x9x8xf32>, %m: tensor<3x9xi1>) -> tensor<4x3x8xf32> {
  // CHECK-NEXT: %[[Q:.*]] = ein.rearrange "(g h) l a2 -> h (g l) a2" %arg0 {sizes = {g = 2 : i64}} : tensor<4x3x8xf32> -> tensor<2x6x8xf32>
  // CHECK-NEXT: %[[M:.*]] = ein.concat(%arg3, %arg3) axis = 0 : (tensor<3x9xi1>, tensor<3x9xi1>) -> tensor<6x9xi1>
  // CHECK-NEXT: %[[A:.*]] = ein.attention %[[Q]], %arg1, %arg2 mask %[[M]]
  // CHECK-NEXT: ein.rearrange "h (g l) a2 -> (g h) l a2" %[[A]]
  %rk = ein.rearrange "h t d -> (g h) t d" %k {sizes = {g = 2 : i64}} : tensor<2x9x8xf32> -> tensor<4x9x8xf32>
  %rv = ein.rearrange "h t d -> (g h) t d" %v {sizes = {g = 2 : i64}} : tensor<2x9x8xf32> -> tensor<4x9x8xf32>
  %a = ein.attention %q, %rk, %rv mask %m scale = 5.000000e-01 {mask_kind = #ein<mask_kind keep>} : (tensor<4x3x8xf32>, tensor<4x9x8xf32>, tensor<4x9x8xf32>, tensor<3x9xi1>) -> tensor<4x3x8xf32>
  return %a : tensor<4x3x8xf32>
}

// -----

// A softcap written out as Gemma 2's eager attention writes it: the scaled
// scores divided by the cap, tanh, times the cap, then an additive mask.
// c * tanh(a QK) is the fused op's c * tanh(s / c) with s = a c QK: scale
// 0.125 / 20 * 20.
// CHECK-LABEL: func.func @softcap_written_out
func.func @softcap_written_out(%q: tensor<2x4x7x16xf32>, %k: tensor<2x4x7x16xf32>, %v: tensor<2x4x7x16xf32>, %bias: tensor<7x7xf32>) -> tensor<2x4x7x16xf32> {
  // CHECK: ein.attention %arg0, %arg1, %arg2 mask %{{.*}} scale = 1.250000e-01 {mask_kind = #ein<mask_kind add>, softcap = 2.000000e+01 : f64}
  // CHECK-NOT: ein.unary
  %s = ein.einsum "b h i d, b h j d -> b h i j"(%q, %k) : (tensor<2x4x7x16xf32>, tensor<2x4x7x16xf32>) -> tensor<2x4x7x7xf32>
  %a = ein.constant dense<1.250000e-01> : tensor<f32>
  %t = ein.binary mul %s, %a : (tensor<2x4x7x7xf32>, tensor<f32>) -> tensor<2x4x7x7xf32>
  %c = ein.constant dense<2.000000e+01> : tensor<f32>
  %d = ein.binary div %t, %c : (tensor<2x4x7x7xf32>, tensor<f32>) -> tensor<2x4x7x7xf32>
  %h = ein.unary tanh %d : tensor<2x4x7x7xf32>
  %capped = ein.binary mul %h, %c : (tensor<2x4x7x7xf32>, tensor<f32>) -> tensor<2x4x7x7xf32>
  %m = ein.binary add %capped, %bias : (tensor<2x4x7x7xf32>, tensor<7x7xf32>) -> tensor<2x4x7x7xf32>
  %p = ein.softmax %m, axis = 3 : tensor<2x4x7x7xf32>
  %o = ein.einsum "b h i j, b h j d -> b h i d"(%p, %v) : (tensor<2x4x7x7xf32>, tensor<2x4x7x16xf32>) -> tensor<2x4x7x16xf32>
  return %o : tensor<2x4x7x16xf32>
}

// -----

// Negative: a scale after the cap scales the cap's output, which the fused op
// does not; and a negative "cap" is no softcap. Both left as written.
// CHECK-LABEL: func.func @softcap_scaled_after
func.func @softcap_scaled_after(%q: tensor<2x5x4xf32>, %k: tensor<2x5x4xf32>, %mask: tensor<5x5xi1>) -> tensor<2x5x4xf32> {
  // CHECK-NOT: ein.attention
  %s = ein.einsum "b i d, b j d -> b i j"(%q, %k) : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x5xf32>
  %h = ein.unary tanh %s : tensor<2x5x5xf32>
  %c = ein.constant dense<3.000000e+00> : tensor<f32>
  %capped = ein.binary mul %h, %c : (tensor<2x5x5xf32>, tensor<f32>) -> tensor<2x5x5xf32>
  %inf = ein.constant dense<0xFF800000> : tensor<f32>
  %m = ein.where %mask, %inf, %capped : (tensor<5x5xi1>, tensor<f32>, tensor<2x5x5xf32>) -> tensor<2x5x5xf32>
  %half = ein.constant dense<5.000000e-01> : tensor<f32>
  %t = ein.binary mul %m, %half : (tensor<2x5x5xf32>, tensor<f32>) -> tensor<2x5x5xf32>
  %p = ein.softmax %t, axis = 2 : tensor<2x5x5xf32>
  %o = ein.einsum "b i j, b j d -> b i d"(%p, %k) : (tensor<2x5x5xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  return %o : tensor<2x5x4xf32>
}

// CHECK-LABEL: func.func @negative_cap
func.func @negative_cap(%q: tensor<2x5x4xf32>, %k: tensor<2x5x4xf32>) -> tensor<2x5x4xf32> {
  // CHECK-NOT: ein.attention
  %s = ein.einsum "b i d, b j d -> b i j"(%q, %k) : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x5xf32>
  %h = ein.unary tanh %s : tensor<2x5x5xf32>
  %c = ein.constant dense<-3.000000e+00> : tensor<f32>
  %capped = ein.binary mul %h, %c : (tensor<2x5x5xf32>, tensor<f32>) -> tensor<2x5x5xf32>
  %p = ein.softmax %capped, axis = 2 : tensor<2x5x5xf32>
  %o = ein.einsum "b i j, b j d -> b i d"(%p, %k) : (tensor<2x5x5xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  return %o : tensor<2x5x4xf32>
}
