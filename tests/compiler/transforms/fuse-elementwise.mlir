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
