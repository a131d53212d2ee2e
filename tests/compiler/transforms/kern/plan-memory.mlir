// RUN: ein-opt %s --kern-plan-memory | FileCheck %s

// Three chained kernels: the first buffer is dead once the second is written,
// so the third reuses its offset; the returned buffer is an output and takes
// no arena space.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: kern.arena_bytes = 128
func.func @chain(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // CHECK: kern.copy {{.*}}kern.arena_offset = 0
  %a = kern.copy %x {shape = #ein.sizes<"4, 4">, x_view = #kern.view<0, [4, 1]>} : tensor<4x4xf32> -> tensor<4x4xf32>
  // CHECK: kern.copy {{.*}}kern.arena_offset = 64
  %b = kern.copy %a {shape = #ein.sizes<"4, 4">, x_view = #kern.view<0, [1, 4]>} : tensor<4x4xf32> -> tensor<4x4xf32>
  // CHECK: kern.copy {{.*}}kern.arena_offset = 0
  %c = kern.copy %b {shape = #ein.sizes<"4, 4">, x_view = #kern.view<0, [4, 1]>} : tensor<4x4xf32> -> tensor<4x4xf32>
  // CHECK: kern.copy
  // CHECK-NOT: kern.arena_offset
  %d = kern.copy %c {shape = #ein.sizes<"4, 4">, x_view = #kern.view<0, [1, 4]>} : tensor<4x4xf32> -> tensor<4x4xf32>
  return %d : tensor<4x4xf32>
}

// A value read late stays live: nothing else may take its place meanwhile.
// CHECK-LABEL: func.func @long_lived
// CHECK-SAME: kern.arena_bytes = 192
func.func @long_lived(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // CHECK: kern.copy {{.*}}kern.arena_offset = [[A:[0-9]+]]
  %a = kern.copy %x {shape = #ein.sizes<"4, 4">, x_view = #kern.view<0, [4, 1]>} : tensor<4x4xf32> -> tensor<4x4xf32>
  %b = kern.copy %a {shape = #ein.sizes<"4, 4">, x_view = #kern.view<0, [1, 4]>} : tensor<4x4xf32> -> tensor<4x4xf32>
  %c = kern.copy %b {shape = #ein.sizes<"4, 4">, x_view = #kern.view<0, [4, 1]>} : tensor<4x4xf32> -> tensor<4x4xf32>
  %d = kern.elementwise %a, %c {input_views = [#kern.view<0, [4, 1]>, #kern.view<0, [4, 1]>]} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%l: f32, %r: f32):
    %s = arith.addf %l, %r : f32
    kern.yield %s
  }
  return %d : tensor<4x4xf32>
}
