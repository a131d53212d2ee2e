// RUN: ein-opt %s | ein-opt | FileCheck %s

// The fused ops of both dialects print and parse back unchanged.
// CHECK-LABEL: func.func @ein_fused
func.func @ein_fused(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x7x4xf32>, %v: tensor<2x3x7x6xf32>, %m: tensor<1x1x5x7xi1>,
                     %w: tensor<3x3xf32>, %b: tensor<3xf32>, %x: tensor<5x8xf32>, %g: tensor<8xf32>)
    -> (tensor<2x3x5x6xf32>, tensor<2x3x5x6xf32>, tensor<5x8xf32>) {
  // CHECK: ein.attention %arg0, %arg1, %arg2 mask %arg3 scale = 5.000000e-01 {mask_fill = 0xFFF0000000000000 : f64, mask_kind = #ein<mask_kind drop>}
  %a = ein.attention %q, %k, %v mask %m scale = 0.5 {mask_fill = 0xFFF0000000000000 : f64, mask_kind = #ein<mask_kind drop>} : (tensor<2x3x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x3x7x6xf32>, tensor<1x1x5x7xi1>) -> tensor<2x3x5x6xf32>
  // CHECK: ein.talking_heads_attention %arg0, %arg1, %arg2 pre_mix %arg4 pre_bias %arg5 post_mix %arg4 scale = 2.500000e-01
  %t = ein.talking_heads_attention %q, %k, %v pre_mix %w pre_bias %b post_mix %w scale = 0.25 : (tensor<2x3x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x3x7x6xf32>, tensor<3x3xf32>, tensor<3xf32>, tensor<3x3xf32>) -> tensor<2x3x5x6xf32>
  // CHECK: ein.layernorm %arg6 residual %arg6 weight %arg7 eps = {{.*}} {variant = #ein<layernorm_variant unbiased_std>}
  %n = ein.layernorm %x residual %x weight %g eps = 1.0e-6 {variant = #ein<layernorm_variant unbiased_std>} : (tensor<5x8xf32>, tensor<5x8xf32>, tensor<8xf32>) -> tensor<5x8xf32>
  return %a, %t, %n : tensor<2x3x5x6xf32>, tensor<2x3x5x6xf32>, tensor<5x8xf32>
}

// CHECK-LABEL: func.func @kern_fused
func.func @kern_fused(%qkv: tensor<2x10x96xf32>, %mask: tensor<10x10xf32>, %w: tensor<4x4xf32>, %x: tensor<3x8xf32>,
                      %g: tensor<8xf32>, %r: tensor<3x8xf32>)
    -> (tensor<2x10x32xf32>, tensor<2x4x10x8xf32>, tensor<3x8xf32>, tensor<3x3xf32>) {
  // CHECK: kern.attention %arg0, %arg0, %arg0 mask %arg1 {batch = #ein.sizes<"2, 4">, {{.*}}mask_kind = #kern<mask_kind add>, mask_view = #kern.view<0, [0, 0, 10, 1]>, out_view = #kern.view<0, [320, 8, 32, 1]>
  %a = kern.attention %qkv, %qkv, %qkv mask %mask {batch = #ein.sizes<"2, 4">, queries = #ein.sizes<"10">, keys = #ein.sizes<"10">, head_dim = #ein.sizes<"8">, value_dim = #ein.sizes<"8">, scale = 0.35 : f32, q_view = #kern.view<0, [960, 8, 96, 1]>, k_view = #kern.view<32, [960, 8, 96, 1]>, v_view = #kern.view<64, [960, 8, 96, 1]>, out_view = #kern.view<0, [320, 8, 32, 1]>, mask_view = #kern.view<0, [0, 0, 10, 1]>, mask_kind = #kern<mask_kind add>} : (tensor<2x10x96xf32>, tensor<2x10x96xf32>, tensor<2x10x96xf32>, tensor<10x10xf32>) -> tensor<2x10x32xf32>
  // CHECK: kern.talking_heads_attention %arg0, %arg0, %arg0 pre_mix %arg2 post_mix %arg2 {batch = #ein.sizes<"2">, {{.*}}heads = #ein.sizes<"4">
  %t = kern.talking_heads_attention %qkv, %qkv, %qkv pre_mix %w post_mix %w {batch = #ein.sizes<"2">, heads = #ein.sizes<"4">, queries = #ein.sizes<"10">, keys = #ein.sizes<"10">, head_dim = #ein.sizes<"8">, value_dim = #ein.sizes<"8">, scale = 1.0 : f32, q_view = #kern.view<0, [960, 8, 96, 1]>, k_view = #kern.view<32, [960, 8, 96, 1]>, v_view = #kern.view<64, [960, 8, 96, 1]>, out_view = #kern.view<0, [320, 80, 8, 1]>, pre_mix_view = #kern.view<0, [4, 1]>, post_mix_view = #kern.view<0, [1, 4]>} : (tensor<2x10x96xf32>, tensor<2x10x96xf32>, tensor<2x10x96xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x10x8xf32>
  // CHECK: kern.layernorm %arg3 residual %arg5 gamma %arg4 {{.*}}variant = #kern<layernorm_variant unbiased_std>
  %n = kern.layernorm %x residual %r gamma %g {shape = #ein.sizes<"3, 8">, x_view = #kern.view<0, [8, 1]>, residual_view = #kern.view<0, [8, 1]>, gamma_view = #kern.view<0, [1]>, epsilon = 1.0e-6 : f32, variant = #kern<layernorm_variant unbiased_std>} : (tensor<3x8xf32>, tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  // CHECK: kern.gemm %arg3, %arg3 residual %arg5 {{.*}}alpha = 2.500000e-01 : f32
  %p = kern.gemm %x, %x residual %r {batch = #ein.sizes<"">, m = #ein.sizes<"3">, n = #ein.sizes<"3">, k = #ein.sizes<"8">, a_view = #kern.view<0, [8, 1]>, b_view = #kern.view<0, [1, 8]>, c_view = #kern.view<0, [3, 1]>, residual_view = #kern.view<0, [8, 1]>, alpha = 0.25 : f32} : (tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x3xf32>
  return %a, %t, %n, %p : tensor<2x10x32xf32>, tensor<2x4x10x8xf32>, tensor<3x8xf32>, tensor<3x3xf32>
}
