// RUN: ein-opt %s -split-input-file -verify-diagnostics

func.func @attention_feature_sizes(%q: tensor<2x5x4xf32>, %k: tensor<2x7x3xf32>, %v: tensor<2x7x6xf32>) -> tensor<2x5x6xf32> {
  // expected-error @+1 {{query and key feature sizes differ: 4 and 3}}
  %a = ein.attention %q, %k, %v scale = 1.0 : (tensor<2x5x4xf32>, tensor<2x7x3xf32>, tensor<2x7x6xf32>) -> tensor<2x5x6xf32>
  return %a : tensor<2x5x6xf32>
}

// -----

func.func @attention_mask_kind_without_mask(%q: tensor<2x5x4xf32>, %v: tensor<2x5x4xf32>) -> tensor<2x5x4xf32> {
  // expected-error @+1 {{mask_kind drop without a mask}}
  %a = ein.attention %q, %q, %v scale = 1.0 {mask_kind = #ein<mask_kind drop>} : (tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  return %a : tensor<2x5x4xf32>
}

// -----

func.func @attention_mask_shape(%q: tensor<2x5x4xf32>, %m: tensor<3x5x5xi1>) -> tensor<2x5x4xf32> {
  // expected-error @+1 {{mask [3, 5, 5] does not broadcast to the scores [2, 5, 5]}}
  %a = ein.attention %q, %q, %q mask %m scale = 1.0 {mask_kind = #ein<mask_kind keep>} : (tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<3x5x5xi1>) -> tensor<2x5x4xf32>
  return %a : tensor<2x5x4xf32>
}

// -----

func.func @attention_add_mask_is_float(%q: tensor<2x5x4xf32>, %m: tensor<5x5xi1>) -> tensor<2x5x4xf32> {
  // expected-error @+1 {{a add mask must be f32}}
  %a = ein.attention %q, %q, %q mask %m scale = 1.0 {mask_kind = #ein<mask_kind add>} : (tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<5x5xi1>) -> tensor<2x5x4xf32>
  return %a : tensor<2x5x4xf32>
}

// -----

func.func @talking_heads_mix_shape(%q: tensor<2x3x5x4xf32>, %w: tensor<2x2xf32>) -> tensor<2x3x5x4xf32> {
  // expected-error @+1 {{pre_mix should be [3, 3], not [2, 2]}}
  %a = ein.talking_heads_attention %q, %q, %q pre_mix %w scale = 1.0 : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x2xf32>) -> tensor<2x3x5x4xf32>
  return %a : tensor<2x3x5x4xf32>
}

// -----

func.func @layernorm_residual_type(%x: tensor<5x8xf32>, %r: tensor<5x4xf32>) -> tensor<5x8xf32> {
  // expected-error @+1 {{residual must have the input's type}}
  %n = ein.layernorm %x residual %r eps = 1.0e-5 : (tensor<5x8xf32>, tensor<5x4xf32>) -> tensor<5x8xf32>
  return %n : tensor<5x8xf32>
}

// -----

func.func @kern_attention_out_of_bounds(%qkv: tensor<2x10x96xf32>) -> tensor<2x10x32xf32> {
  // expected-error @+1 {{v_view reaches elements}}
  %a = kern.attention %qkv, %qkv, %qkv {batch = #ein.sizes<"2, 4">, queries = #ein.sizes<"10">, keys = #ein.sizes<"10">, head_dim = #ein.sizes<"8">, value_dim = #ein.sizes<"8">, scale = 1.0 : f32, q_view = #kern.view<0, [960, 8, 96, 1]>, k_view = #kern.view<32, [960, 8, 96, 1]>, v_view = #kern.view<96, [960, 8, 96, 1]>, out_view = #kern.view<0, [320, 8, 32, 1]>} : (tensor<2x10x96xf32>, tensor<2x10x96xf32>, tensor<2x10x96xf32>) -> tensor<2x10x32xf32>
  return %a : tensor<2x10x32xf32>
}

// -----

func.func @kern_gemm_residual_without_view(%x: tensor<3x8xf32>) -> tensor<3x3xf32> {
  // expected-error @+1 {{residual has no view}}
  %p = kern.gemm %x, %x residual %x {batch = #ein.sizes<"">, m = #ein.sizes<"3">, n = #ein.sizes<"3">, k = #ein.sizes<"8">, a_view = #kern.view<0, [8, 1]>, b_view = #kern.view<0, [1, 8]>, c_view = #kern.view<0, [3, 1]>} : (tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x3xf32>
  return %p : tensor<3x3xf32>
}

// -----

func.func @kern_rmsnorm_beta(%x: tensor<3x8xf32>, %b: tensor<8xf32>) -> tensor<3x8xf32> {
  // expected-error @+1 {{variant rms takes no beta}}
  %n = kern.layernorm %x beta %b {shape = #ein.sizes<"3, 8">, x_view = #kern.view<0, [8, 1]>, beta_view = #kern.view<0, [1]>, epsilon = 1.0e-6 : f32, variant = #kern<layernorm_variant rms>} : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  return %n : tensor<3x8xf32>
}
