// RUN: ein-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// A concat of one computed part (an element-wise program writing its slab)
// and one copy round-trips.
// CHECK-LABEL: func.func @parts
// CHECK: kern.concat %arg0, %arg1, %arg0 {axis = 1 : i64, input_views = [#kern.view<2, [4, 1]>, #kern.view<0, [0, 1]>, #kern.view<0, [4, 1]>], part_inputs = array<i64: 2, 1>, sizes = #ein.sizes<"2, 2">}
// CHECK: arith.negf
// CHECK: arith.mulf
// CHECK: }, {
// CHECK: kern.yield
func.func @parts(%x: tensor<3x4xf32>, %s: tensor<2xf32>) -> tensor<3x4xf32> {
  %y = kern.concat %x, %s, %x {axis = 1 : i64, input_views = [#kern.view<2, [4, 1]>, #kern.view<0, [0, 1]>, #kern.view<0, [4, 1]>], part_inputs = array<i64: 2, 1>, sizes = #ein.sizes<"2, 2">} : (tensor<3x4xf32>, tensor<2xf32>, tensor<3x4xf32>) -> tensor<3x4xf32> {
  ^bb0(%a: f32, %b: f32):
    %n = arith.negf %a : f32
    %m = arith.mulf %n, %b : f32
    kern.yield %m
  }, {
  ^bb0(%a: f32):
    kern.yield %a
  }
  return %y : tensor<3x4xf32>
}

// -----

func.func @counts(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{part input counts add up to 1 with 2 views, for 2 inputs}}
  %y = kern.concat %x, %x {axis = 1 : i64, input_views = [#kern.view<0, [4, 1]>, #kern.view<2, [4, 1]>], part_inputs = array<i64: 1, 0>, sizes = #ein.sizes<"2, 2">} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32> {
  ^bb0(%a: f32):
    kern.yield %a
  }, {
  ^bb0:
    %c = arith.constant 1.0 : f32
    kern.yield %c
  }
  return %y : tensor<3x4xf32>
}

// -----

func.func @part_view(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{part 1 input view 0 reaches elements [3, 12] of an operand with 12}}
  %y = kern.concat %x, %x {axis = 1 : i64, input_views = [#kern.view<0, [4, 1]>, #kern.view<3, [4, 1]>], part_inputs = array<i64: 1, 1>, sizes = #ein.sizes<"2, 2">} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32> {
  ^bb0(%a: f32):
    kern.yield %a
  }, {
  ^bb0(%a: f32):
    kern.yield %a
  }
  return %y : tensor<3x4xf32>
}

// -----

func.func @part_body(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{part 0 body has 2 arguments for 1 inputs}}
  %y = kern.concat %x, %x {axis = 1 : i64, input_views = [#kern.view<0, [4, 1]>, #kern.view<2, [4, 1]>], part_inputs = array<i64: 1, 1>, sizes = #ein.sizes<"2, 2">} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32> {
  ^bb0(%a: f32, %b: f32):
    kern.yield %a
  }, {
  ^bb0(%a: f32):
    kern.yield %a
  }
  return %y : tensor<3x4xf32>
}

// -----

func.func @sizes(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{parts add up to 3 along axis 1, the result has 4}}
  %y = kern.concat %x, %x {axis = 1 : i64, input_views = [#kern.view<0, [4, 1]>, #kern.view<2, [4, 1]>], part_inputs = array<i64: 1, 1>, sizes = #ein.sizes<"2, 1">} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32> {
  ^bb0(%a: f32):
    kern.yield %a
  }, {
  ^bb0(%a: f32):
    kern.yield %a
  }
  return %y : tensor<3x4xf32>
}
