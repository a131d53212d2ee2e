// RUN: ein-opt %s --convert-ein-to-kern --kern-fuse-elementwise --split-input-file | FileCheck %s

// The integer mask arithmetic and its scaling fuse into one kernel (no i32
// intermediate is stored); relu fuses into the add. The [5] mask term is read
// broadcast over [4, 5], so it stays a kernel of its own rather than being
// recomputed per row.
// CHECK-LABEL: func.func @chain
func.func @chain(%x: tensor<4x5xf32>, %keep: tensor<5xi32>) -> tensor<4x5xf32> {
  %one = ein.constant dense<1> : tensor<i32>
  %big = ein.constant dense<-10000.0> : tensor<f32>
  // CHECK: %[[MASK:.*]] = kern.elementwise %arg1 {{.*}} : (tensor<5xi32>) -> tensor<5xf32>
  // CHECK:   arith.subf
  // CHECK:   arith.mulf
  // CHECK: kern.elementwise %[[MASK]], %arg0 {input_views = [#kern.view<0, [0, 1]>, #kern.view<0, [5, 1]>]}
  // CHECK:   kern.relu
  // CHECK:   arith.addf
  // CHECK-NOT: kern.elementwise
  %d = ein.binary sub %one, %keep : (tensor<i32>, tensor<5xi32>) -> tensor<5xi32>
  %c = ein.cast %d : tensor<5xi32> -> tensor<5xf32>
  %m = ein.binary mul %c, %big : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  %r = ein.unary relu %x : tensor<4x5xf32>
  %y = ein.binary add %r, %m : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// -----

// A value with two users is stored once, not recomputed.
// CHECK-LABEL: func.func @shared
func.func @shared(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // CHECK: %[[E:.*]] = kern.elementwise %arg0
  // CHECK:   math.exp
  // CHECK: kern.elementwise %[[E]]
  // CHECK: kern.elementwise %[[E]]
  %e = ein.unary exp %x : tensor<8xf32>
  %a = ein.unary neg %e : tensor<8xf32>
  %b = ein.unary relu %e : tensor<8xf32>
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

// Truncation to an integer changes values: the cast is not inlined.
// CHECK-LABEL: func.func @float_to_int
func.func @float_to_int(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: kern.elementwise %arg0 {{.*}} -> tensor<8xi32>
  // CHECK: kern.elementwise %{{.*}} : (tensor<8xi32>) -> tensor<8xf32>
  %i = ein.cast %x : tensor<8xf32> -> tensor<8xi32>
  %f = ein.cast %i : tensor<8xi32> -> tensor<8xf32>
  return %f : tensor<8xf32>
}

// -----

// A bool intermediate is normalised to 0/1 where it is inlined.
// CHECK-LABEL: func.func @bool_cast
func.func @bool_cast(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: kern.elementwise %arg0
  // CHECK:   %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
  // CHECK:   %[[NZ:.*]] = arith.cmpf une, %arg1, %[[ZERO]] : f32
  // CHECK:   %[[B:.*]] = arith.uitofp %[[NZ]] : i1 to f32
  // CHECK:   arith.mulf %[[B]], %arg1
  // CHECK-NOT: kern.elementwise
  %b = ein.cast %x : tensor<8xf32> -> tensor<8xi1>
  %f = ein.cast %b : tensor<8xi1> -> tensor<8xf32>
  %y = ein.binary mul %f, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// rotate_half (Llama's rotary embedding): the negation is computed into its
// part of the concat, and the element-wise step reading the concat is
// distributed over its parts, its other operands read through views shifted
// to each half. Two kernels, each writing its half of the result in place;
// no copy is left.
// CHECK-LABEL: func.func @rotary
func.func @rotary(%x: tensor<3x8xf32>, %cos: tensor<3x8xf32>, %sin: tensor<3x8xf32>) -> tensor<3x8xf32> {
  // CHECK-NOT: kern.elementwise
  // CHECK-NOT: kern.copy
  // CHECK: %[[R:.*]] = kern.concat %arg0, %arg2, %arg0, %arg1, %arg0, %arg2, %arg0, %arg1 {axis = 1 : i64,
  // CHECK-SAME: input_views = [#kern.view<4, [8, 1]>, #kern.view<0, [8, 1]>, #kern.view<0, [8, 1]>, #kern.view<0, [8, 1]>,
  // CHECK-SAME: #kern.view<0, [8, 1]>, #kern.view<4, [8, 1]>, #kern.view<4, [8, 1]>, #kern.view<4, [8, 1]>],
  // CHECK-SAME: part_inputs = array<i64: 4, 4>, sizes = #ein.sizes<"4, 4">}
  // CHECK-NEXT: ^bb0(%[[HI:.*]]: f32, %[[SIN0:.*]]: f32, %[[LO:.*]]: f32, %[[COS0:.*]]: f32):
  // CHECK-NEXT: %[[NEG:.*]] = arith.negf %[[HI]]
  // CHECK-NEXT: %[[A:.*]] = arith.mulf %[[NEG]], %[[SIN0]]
  // CHECK-NEXT: %[[B:.*]] = arith.mulf %[[LO]], %[[COS0]]
  // CHECK-NEXT: %[[Y0:.*]] = arith.addf %[[B]], %[[A]]
  // CHECK-NEXT: kern.yield %[[Y0]]
  // CHECK-NEXT: }, {
  // CHECK-NEXT: ^bb0(%[[LO1:.*]]: f32, %[[SIN1:.*]]: f32, %[[HI1:.*]]: f32, %[[COS1:.*]]: f32):
  // CHECK-NEXT: %[[C:.*]] = arith.mulf %[[LO1]], %[[SIN1]]
  // CHECK-NEXT: %[[D:.*]] = arith.mulf %[[HI1]], %[[COS1]]
  // CHECK-NEXT: %[[Y1:.*]] = arith.addf %[[D]], %[[C]]
  // CHECK-NEXT: kern.yield %[[Y1]]
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[R]]
  %hi = ein.slice %x {offsets = #ein.sizes<"0, 4">, sizes = #ein.sizes<"3, 4">, dropped = array<i64>} : tensor<3x8xf32> -> tensor<3x4xf32>
  %lo = ein.slice %x {offsets = #ein.sizes<"0, 0">, sizes = #ein.sizes<"3, 4">, dropped = array<i64>} : tensor<3x8xf32> -> tensor<3x4xf32>
  %neg = ein.unary neg %hi : tensor<3x4xf32>
  %rotated = ein.concat(%neg, %lo) axis = 1 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x8xf32>
  %a = ein.binary mul %x, %cos : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %b = ein.binary mul %rotated, %sin : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %y = ein.binary add %a, %b : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

// A concat of copies is distributed into each of its element-wise users
// (they read the parts' inputs; nothing is computed twice), so no copy is
// left. A computed part is not recomputed for a second user: that concat
// stays one kernel per part, read by both.
// CHECK-LABEL: func.func @concat_users
func.func @concat_users(%x: tensor<2x3xf32>, %y: tensor<2x5xf32>, %z: tensor<2x3xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  // CHECK: kern.concat %arg0, %arg1 {{.*}}part_inputs = array<i64: 1, 1>
  // CHECK: math.exp
  // CHECK: }, {
  // CHECK: math.exp
  // CHECK: kern.concat %arg0, %arg1 {{.*}}part_inputs = array<i64: 1, 1>
  // CHECK: math.sin
  // CHECK: }, {
  // CHECK: math.sin
  // CHECK: %[[C:.*]] = kern.concat %arg2, %arg1 {{.*}}part_inputs = array<i64: 1, 1>
  // CHECK: arith.negf
  // CHECK: }, {
  // CHECK-NEXT: ^bb0(%[[ARG:.*]]: f32):
  // CHECK-NEXT: kern.yield %[[ARG]]
  // CHECK: kern.elementwise %[[C]]
  // CHECK: kern.relu
  // CHECK: kern.elementwise %[[C]]
  // CHECK: math.tanh
  %c = ein.concat(%x, %y) axis = 1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %e = ein.unary exp %c : tensor<2x8xf32>
  %s = ein.unary sin %c : tensor<2x8xf32>
  %nz = ein.unary neg %z : tensor<2x3xf32>
  %d = ein.concat(%nz, %y) axis = 1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %r = ein.unary relu %d : tensor<2x8xf32>
  %t = ein.unary tanh %d : tensor<2x8xf32>
  return %e, %s, %r, %t : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}
