// RUN: ein-opt %s -split-input-file -verify-diagnostics

func.func @einsum_axis_conflict(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{axis 'j' is 3 in operand 1 and 4 in operand 2}}
  %c = ein.einsum "i j, j k -> i k" (%a, %b) : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %c : tensor<2x5xf32>
}

// -----

// In the IR an ellipsis axis has one size too: the front end leaves a
// broadcasting size-1 axis out of its operand's term.
func.func @einsum_ellipsis_axis_broadcasts(%a: tensor<2x1xf32>, %b: tensor<5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{broadcast axis 1 is 1 in operand 1 and 5 in operand 2}}
  %c = ein.einsum ".0 .1, .1 -> .0 .1" (%a, %b) : (tensor<2x1xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  return %c : tensor<2x5xf32>
}

// -----

func.func @einsum_rank(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{einsum operand 2 has 2 axes but "j k l" names 3}}
  %c = ein.einsum "i j, j k l -> i k" (%a, %b) : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return %c : tensor<2x5xf32>
}

// -----

// The IR's equations are canonical (space-separated word labels): "ij" is one label.
func.func @einsum_not_canonical(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{einsum operand 1 has 2 axes but "ij" names 1}}
  %c = ein.einsum "ij,jk->ik" (%a, %b) : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return %c : tensor<2x5xf32>
}

// -----

func.func @einsum_result(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{result shape [2, 6] should be [2, 5]}}
  %c = ein.einsum "i j, j k -> i k" (%a, %b) : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x6xf32>
  return %c : tensor<2x6xf32>
}

// -----

func.func @rearrange_indivisible(%x: tensor<2x10xf32>) -> tensor<2x3x3xf32> {
  // expected-error @+1 {{input axis 1 (size 10) does not split into (h d) with h=3: 10 is not divisible by 3}}
  %y = ein.rearrange "b (h d) -> b h d" %x {sizes = {h = 3 : i64}} : tensor<2x10xf32> -> tensor<2x3x3xf32>
  return %y : tensor<2x3x3xf32>
}

// -----

func.func @broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{shapes [2, 3] and [4] do not broadcast}}
  %c = ein.binary add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return %c : tensor<2x3xf32>
}

// -----

func.func @linear_features(%x: tensor<3x5xf32>, %w: tensor<7x6xf32>) -> tensor<3x7xf32> {
  // expected-error @+1 {{weight [7, 6] takes 6 input features but the input has 5}}
  %y = ein.linear %x, %w : (tensor<3x5xf32>, tensor<7x6xf32>) -> tensor<3x7xf32>
  return %y : tensor<3x7xf32>
}

// -----

func.func @matmul_inner(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{inner sizes differ: [2, 3] @ [4, 5]}}
  %c = ein.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %c : tensor<2x5xf32>
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = ein.softmax %x, axis = 2 : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

func.func @einsum_not_canonical_order(%a: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{equation is not canonical: expected "i j -> i"}}
  %c = ein.einsum "i  j -> i" (%a) : (tensor<2x3xf32>) -> tensor<2xf32>
  return %c : tensor<2xf32>
}

// -----

func.func @slice_step_past_the_end(%x: tensor<7x6xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{axis 1 takes 3 elements from 2 in steps of 2 out of 6}}
  %y = ein.slice %x {offsets = #ein.sizes<"0, 2">, sizes = #ein.sizes<"4, 3">, dropped = array<i64>, steps = array<i64: 2, 2>} : tensor<7x6xf32> -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

func.func @slice_step_zero(%x: tensor<7x6xf32>) -> tensor<7x6xf32> {
  // expected-error @+1 {{axis 0 has step 0; steps are positive}}
  %y = ein.slice %x {offsets = #ein.sizes<"0, 0">, sizes = #ein.sizes<"7, 6">, dropped = array<i64>, steps = array<i64: 0, 1>} : tensor<7x6xf32> -> tensor<7x6xf32>
  return %y : tensor<7x6xf32>
}

// -----

func.func @rmsnorm_bias(%x: tensor<5x8xf32>, %b: tensor<8xf32>) -> tensor<5x8xf32> {
  // expected-error @+1 {{variant rms takes no bias}}
  %n = ein.layernorm %x bias %b eps = 1.0e-5 {variant = #ein<layernorm_variant rms>} : (tensor<5x8xf32>, tensor<8xf32>) -> tensor<5x8xf32>
  return %n : tensor<5x8xf32>
}

// -----

func.func @windows_longer_than_the_axis(%x: tensor<2x6xf32>) -> tensor<2x1x3xf32> {
  // expected-error @+1 {{window axis 0 spans 7 elements of an axis of 6}}
  %y = ein.windows %x {window = array<i64: 3>, strides = array<i64: 1>, dilations = array<i64: 3>} : tensor<2x6xf32> -> tensor<2x1x3xf32>
  return %y : tensor<2x1x3xf32>
}

// -----

func.func @windows_without_a_stride_each(%x: tensor<2x6xf32>) -> tensor<2x4x3xf32> {
  // expected-error @+1 {{needs a stride and a dilation for each of the 1 window axes}}
  %y = ein.windows %x {window = array<i64: 3>, strides = array<i64: 1, 1>, dilations = array<i64: 1>} : tensor<2x6xf32> -> tensor<2x4x3xf32>
  return %y : tensor<2x4x3xf32>
}

// -----

func.func @windows_wrong_result(%x: tensor<2x6xf32>) -> tensor<2x3x3xf32> {
  // expected-error @+1 {{result shape [2, 3, 3] should be [2, 2, 3]}}
  %y = ein.windows %x {window = array<i64: 3>, strides = array<i64: 2>, dilations = array<i64: 1>} : tensor<2x6xf32> -> tensor<2x3x3xf32>
  return %y : tensor<2x3x3xf32>
}
