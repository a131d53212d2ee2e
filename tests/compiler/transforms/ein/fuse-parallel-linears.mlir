// RUN: ein-opt %s --ein-fuse-parallel-linears --split-input-file | FileCheck %s

// BERT's q, k and v: weights and biases concatenated in the linears' order,
// one linear, each part a slice of its columns; the consumers read the slices.
// CHECK-LABEL: func.func @qkv
func.func @qkv(%x: tensor<2x5x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>) {
  %wq = ein.param "q.weight" : tensor<8x8xf32>
  %bq = ein.param "q.bias" : tensor<8xf32>
  %wk = ein.param "k.weight" : tensor<4x8xf32>
  %bk = ein.param "k.bias" : tensor<4xf32>
  %wv = ein.param "v.weight" : tensor<4x8xf32>
  %bv = ein.param "v.bias" : tensor<4xf32>
  // CHECK: %[[W:.*]] = ein.concat(%[[WQ:.*]], %[[WK:.*]], %[[WV:.*]]) axis = 0 : (tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
  // CHECK-NEXT: %[[B:.*]] = ein.concat(%[[BQ:.*]], %[[BK:.*]], %[[BV:.*]]) axis = 0 : (tensor<8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<16xf32>
  // CHECK-NEXT: %[[L:.*]] = ein.linear %arg0, %[[W]], %[[B]] : (tensor<2x5x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  // CHECK-NEXT: %[[Q:.*]] = ein.slice %[[L]] {dropped = array<i64>, offsets = #ein.sizes<"0, 0, 0">, sizes = #ein.sizes<"2, 5, 8">} : tensor<2x5x16xf32> -> tensor<2x5x8xf32>
  // CHECK-NEXT: %[[K:.*]] = ein.slice %[[L]] {dropped = array<i64>, offsets = #ein.sizes<"0, 0, 8">, sizes = #ein.sizes<"2, 5, 4">} : tensor<2x5x16xf32> -> tensor<2x5x4xf32>
  // CHECK-NEXT: %[[V:.*]] = ein.slice %[[L]] {dropped = array<i64>, offsets = #ein.sizes<"0, 0, 12">, sizes = #ein.sizes<"2, 5, 4">} : tensor<2x5x16xf32> -> tensor<2x5x4xf32>
  // CHECK-NOT: ein.linear
  // CHECK: %[[E:.*]] = ein.unary exp %[[K]]
  // CHECK-NEXT: return %[[Q]], %[[E]], %[[V]]
  %q = ein.linear %x, %wq, %bq : (tensor<2x5x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %k = ein.linear %x, %wk, %bk : (tensor<2x5x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x5x4xf32>
  %e = ein.unary exp %k : tensor<2x5x4xf32>
  %v = ein.linear %x, %wv, %bv : (tensor<2x5x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x5x4xf32>
  return %q, %e, %v : tensor<2x5x8xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>
}

// -----

// Llama's SwiGLU over ranged dims: gate and up fuse without biases. silu
// feeds only element-wise ops (it merges with the product, not into a
// GEMM), so it is no epilogue and stays on its slice. A weight declared
// after the first linear moves up to it.
// CHECK-LABEL: func.func @swiglu
func.func @swiglu(%x: tensor<1x?x8xf32, #ein.sizes<"t">>) -> tensor<1x?x6xf32, #ein.sizes<"t">> attributes {ein.dims = {t = array<i64: 1, 16>}} {
  // CHECK: %[[WU:.*]] = ein.param "up.weight"
  // CHECK: %[[W:.*]] = ein.concat(%{{.*}}, %[[WU]]) axis = 0 : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<12x8xf32>
  // CHECK-NEXT: %[[L:.*]] = ein.linear %arg0, %[[W]] : (tensor<1x?x8xf32, #ein.sizes<"t">>, tensor<12x8xf32>) -> tensor<1x?x12xf32, #ein.sizes<"t">>
  // CHECK-NEXT: %[[G:.*]] = ein.slice %[[L]] {dropped = array<i64>, offsets = #ein.sizes<"0, 0, 0">, sizes = #ein.sizes<"1, t, 6">}
  // CHECK-NEXT: %[[U:.*]] = ein.slice %[[L]] {dropped = array<i64>, offsets = #ein.sizes<"0, 0, 6">, sizes = #ein.sizes<"1, t, 6">}
  // CHECK-NEXT: %[[S:.*]] = ein.unary silu %[[G]]
  // CHECK-NEXT: ein.binary mul %[[S]], %[[U]]
  %wg = ein.param "gate.weight" : tensor<6x8xf32>
  %g = ein.linear %x, %wg : (tensor<1x?x8xf32, #ein.sizes<"t">>, tensor<6x8xf32>) -> tensor<1x?x6xf32, #ein.sizes<"t">>
  %s = ein.unary silu %g : tensor<1x?x6xf32, #ein.sizes<"t">>
  %wu = ein.param "up.weight" : tensor<6x8xf32>
  %u = ein.linear %x, %wu : (tensor<1x?x8xf32, #ein.sizes<"t">>, tensor<6x8xf32>) -> tensor<1x?x6xf32, #ein.sizes<"t">>
  %y = ein.binary mul %s, %u : (tensor<1x?x6xf32, #ein.sizes<"t">>, tensor<1x?x6xf32, #ein.sizes<"t">>) -> tensor<1x?x6xf32, #ein.sizes<"t">>
  return %y : tensor<1x?x6xf32, #ein.sizes<"t">>
}

// -----

// The same epilogue activation on both parts: it applies to the fused
// result (and will join the fused GEMM), the parts are slices of it.
// CHECK-LABEL: func.func @same_activation
func.func @same_activation(%x: tensor<3x8xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  // CHECK: %[[L:.*]] = ein.linear %arg0, %{{.*}} : (tensor<3x8xf32>, tensor<8x8xf32>) -> tensor<3x8xf32>
  // CHECK-NEXT: %[[A:.*]] = ein.unary gelu %[[L]] : tensor<3x8xf32>
  // CHECK-NEXT: %[[P:.*]] = ein.slice %[[A]] {{.*}}offsets = #ein.sizes<"0, 0">, sizes = #ein.sizes<"3, 4">
  // CHECK-NEXT: %[[Q:.*]] = ein.slice %[[A]] {{.*}}offsets = #ein.sizes<"0, 4">, sizes = #ein.sizes<"3, 4">
  // CHECK-NOT: gelu
  // CHECK: ein.linear %[[P]]
  // CHECK: ein.linear %[[Q]]
  %w1 = ein.param "a.weight" : tensor<4x8xf32>
  %w2 = ein.param "b.weight" : tensor<4x8xf32>
  %w3 = ein.param "c.weight" : tensor<2x4xf32>
  %w4 = ein.param "d.weight" : tensor<2x4xf32>
  %a = ein.linear %x, %w1 : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  %ga = ein.unary gelu %a : tensor<3x4xf32>
  %b = ein.linear %x, %w2 : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  %gb = ein.unary gelu %b : tensor<3x4xf32>
  %c = ein.linear %ga, %w3 : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %d = ein.linear %gb, %w4 : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  return %c, %d : tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// An activation that is no GEMM epilogue (the op table's epilogue
// activations are relu, gelu, gelu_tanh, silu) on one part only does not
// keep the parts apart: it stays on its part's slice, an element-wise kernel
// either way.
// CHECK-LABEL: func.func @activation_not_an_epilogue
func.func @activation_not_an_epilogue(%x: tensor<3x8xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  // CHECK: %[[L:.*]] = ein.linear %arg0, %{{.*}} : (tensor<3x8xf32>, tensor<8x8xf32>) -> tensor<3x8xf32>
  // CHECK-NEXT: %[[P:.*]] = ein.slice %[[L]] {{.*}}offsets = #ein.sizes<"0, 0">, sizes = #ein.sizes<"3, 4">
  // CHECK-NEXT: %[[Q:.*]] = ein.slice %[[L]] {{.*}}offsets = #ein.sizes<"0, 4">, sizes = #ein.sizes<"3, 4">
  // CHECK: ein.unary sigmoid %[[P]]
  %w1 = ein.param "a.weight" : tensor<4x8xf32>
  %w2 = ein.param "b.weight" : tensor<4x8xf32>
  %w3 = ein.param "c.weight" : tensor<2x4xf32>
  %w4 = ein.param "d.weight" : tensor<2x4xf32>
  %a = ein.linear %x, %w1 : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  %sa = ein.unary sigmoid %a : tensor<3x4xf32>
  %b = ein.linear %x, %w2 : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  %c = ein.linear %sa, %w3 : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %d = ein.linear %b, %w4 : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  return %c, %d : tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// Left alone: an activation epilogue on one part only; a residual add (it
// joins its GEMM); a bias on one part only; a weight that is no parameter;
// and linears of different inputs.
// CHECK-LABEL: func.func @not_fused
func.func @not_fused(%x: tensor<3x8xf32>, %y: tensor<3x8xf32>, %r: tensor<3x4xf32>, %w: tensor<4x8xf32>)
    -> (tensor<3x2xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  // CHECK-NOT: ein.concat
  // CHECK-NOT: ein.slice
  %w1 = ein.param "a.weight" : tensor<4x8xf32>
  %w2 = ein.param "b.weight" : tensor<4x8xf32>
  %w3 = ein.param "c.weight" : tensor<2x4xf32>
  %w4 = ein.param "d.weight" : tensor<4x8xf32>
  %b4 = ein.param "d.bias" : tensor<4xf32>
  %w5 = ein.param "e.weight" : tensor<4x8xf32>
  %a = ein.linear %x, %w1 : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  %ga = ein.unary gelu %a : tensor<3x4xf32>
  %c = ein.linear %ga, %w3 : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %b = ein.linear %x, %w2 : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  %o = ein.linear %x, %w2 : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  %res = ein.binary add %o, %r : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %d = ein.linear %y, %w4, %b4 : (tensor<3x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %e = ein.linear %y, %w5 : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  %f = ein.linear %y, %w : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  return %c, %b, %res, %d, %e, %f : tensor<3x2xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// Matmuls by [k, n] parameters (`x @ w`) fuse along the weights' columns.
// A fused part's result read by two more projections: they fuse too.
// CHECK-LABEL: func.func @matmul
func.func @matmul(%x: tensor<5x8xf32>) -> (tensor<5x2xf32>, tensor<5x3xf32>, tensor<5x4xf32>) {
  // CHECK: %[[W:.*]] = ein.concat(%{{.*}}, %{{.*}}) axis = 1 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x8xf32>
  // CHECK-NEXT: %[[M:.*]] = ein.matmul %arg0, %[[W]] : (tensor<5x8xf32>, tensor<8x8xf32>) -> tensor<5x8xf32>
  // CHECK-NEXT: %[[A:.*]] = ein.slice %[[M]] {{.*}}offsets = #ein.sizes<"0, 0">, sizes = #ein.sizes<"5, 4">
  // CHECK-NEXT: %[[B:.*]] = ein.slice %[[M]] {{.*}}offsets = #ein.sizes<"0, 4">, sizes = #ein.sizes<"5, 4">
  // CHECK: %[[V:.*]] = ein.concat(%{{.*}}, %{{.*}}) axis = 1 : (tensor<4x2xf32>, tensor<4x3xf32>) -> tensor<4x5xf32>
  // CHECK-NEXT: %[[N:.*]] = ein.matmul %[[A]], %[[V]] : (tensor<5x4xf32>, tensor<4x5xf32>) -> tensor<5x5xf32>
  // CHECK-NEXT: %[[C:.*]] = ein.slice %[[N]] {{.*}}offsets = #ein.sizes<"0, 0">, sizes = #ein.sizes<"5, 2">
  // CHECK-NEXT: %[[D:.*]] = ein.slice %[[N]] {{.*}}offsets = #ein.sizes<"0, 2">, sizes = #ein.sizes<"5, 3">
  // CHECK: return %[[C]], %[[D]], %[[B]]
  %w1 = ein.param "a" : tensor<8x4xf32>
  %w2 = ein.param "b" : tensor<8x4xf32>
  %w3 = ein.param "c" : tensor<4x2xf32>
  %w4 = ein.param "d" : tensor<4x3xf32>
  %a = ein.matmul %x, %w1 : (tensor<5x8xf32>, tensor<8x4xf32>) -> tensor<5x4xf32>
  %b = ein.matmul %x, %w2 : (tensor<5x8xf32>, tensor<8x4xf32>) -> tensor<5x4xf32>
  %c = ein.matmul %a, %w3 : (tensor<5x4xf32>, tensor<4x2xf32>) -> tensor<5x2xf32>
  %d = ein.matmul %a, %w4 : (tensor<5x4xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
  return %c, %d, %b : tensor<5x2xf32>, tensor<5x3xf32>, tensor<5x4xf32>
}

// -----

// Einsums of one input by parameters: multi-head projections with stacked
// per-head weights fuse along the heads (the outermost weight axis the
// result keeps and the input lacks), also with fewer heads on one part (a
// grouped key); parts are slices of the heads. Left apart: a weight that
// differs on another axis (value width 3), a different equation, the
// weight as the other operand, and an einsum of two inputs.
// CHECK-LABEL: func.func @einsum_heads
func.func @einsum_heads(%x: tensor<5x8xf32>, %y: tensor<5x8xf32>)
    -> (tensor<4x5x2xf32>, tensor<2x5x2xf32>, tensor<4x5x3xf32>, tensor<5x4x2xf32>, tensor<4x5x2xf32>, tensor<5x5xf32>) {
  // CHECK: %[[W:.*]] = ein.concat(%{{.*}}, %{{.*}}) axis = 0 : (tensor<4x8x2xf32>, tensor<2x8x2xf32>) -> tensor<6x8x2xf32>
  // CHECK-NEXT: %[[E:.*]] = ein.einsum "s d, h d e -> h s e"(%arg0, %[[W]]) : (tensor<5x8xf32>, tensor<6x8x2xf32>) -> tensor<6x5x2xf32>
  // CHECK-NEXT: %[[Q:.*]] = ein.slice %[[E]] {{.*}}offsets = #ein.sizes<"0, 0, 0">, sizes = #ein.sizes<"4, 5, 2">
  // CHECK-NEXT: %[[K:.*]] = ein.slice %[[E]] {{.*}}offsets = #ein.sizes<"4, 0, 0">, sizes = #ein.sizes<"2, 5, 2">
  // CHECK-NOT: ein.concat
  // CHECK-NOT: ein.slice
  // CHECK: return %[[Q]], %[[K]]
  %wq = ein.param "q" : tensor<4x8x2xf32>
  %wk = ein.param "k" : tensor<2x8x2xf32>
  %wv = ein.param "v" : tensor<4x8x3xf32>
  %wo = ein.param "o" : tensor<4x8x2xf32>
  %wp = ein.param "p" : tensor<4x2x8xf32>
  %q = ein.einsum "s d, h d e -> h s e"(%x, %wq) : (tensor<5x8xf32>, tensor<4x8x2xf32>) -> tensor<4x5x2xf32>
  %k = ein.einsum "s d, h d e -> h s e"(%x, %wk) : (tensor<5x8xf32>, tensor<2x8x2xf32>) -> tensor<2x5x2xf32>
  %v = ein.einsum "s d, h d e -> h s e"(%x, %wv) : (tensor<5x8xf32>, tensor<4x8x3xf32>) -> tensor<4x5x3xf32>
  %o = ein.einsum "s d, h d e -> s h e"(%x, %wo) : (tensor<5x8xf32>, tensor<4x8x2xf32>) -> tensor<5x4x2xf32>
  %p = ein.einsum "h e d, s d -> h s e"(%wp, %x) : (tensor<4x2x8xf32>, tensor<5x8xf32>) -> tensor<4x5x2xf32>
  %z = ein.einsum "s d, t d -> s t"(%x, %y) : (tensor<5x8xf32>, tensor<5x8xf32>) -> tensor<5x5xf32>
  return %q, %k, %v, %o, %p, %z : tensor<4x5x2xf32>, tensor<2x5x2xf32>, tensor<4x5x3xf32>, tensor<5x4x2xf32>, tensor<4x5x2xf32>, tensor<5x5xf32>
}
