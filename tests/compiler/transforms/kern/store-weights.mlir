// RUN: ein-opt %s --kern-store-weights="precision=int8" | FileCheck %s --check-prefix=INT8
// RUN: ein-opt %s --kern-store-weights="precision=int8 group-size=32" | FileCheck %s --check-prefix=INT8G
// RUN: ein-opt %s --kern-store-weights="precision=bf16" | FileCheck %s --check-prefix=BF16
// RUN: ein-opt %s --kern-store-weights="precision=bf16 target=cuda" | FileCheck %s --check-prefix=BF16
// RUN: ein-opt %s --kern-store-weights="precision=int8 target=cuda" | FileCheck %s --check-prefix=F32
// RUN: ein-opt %s --kern-store-weights | FileCheck %s --check-prefix=F32

// A gemm weight [k = 4, n = 3] at int8: q = round_half_even(w * 127 / max_k |w|)
// per column (column maxima 1, 2 and 4: 63.5 rounds to 64, 31.75 to 32), at
// the weight's own places, and the scales max / 127 (0x3C010204 = 1/127),
// which the gemm reads as b_scale. At bf16 (either target) the values are
// exact in bf16. int8 on CUDA (no int8 kernels there), and fp32, keep the
// weight as bound.

// INT8: ein.param "w" : tensor<4x3xf32>
// INT8: %[[Q:.*]] = ein.constant {kern.stored_from = "w"} dense_resource<stored> : tensor<4x3xi8>
// INT8: %[[S:.*]] = ein.constant dense_resource<scales> : tensor<3xf32>
// INT8: kern.gemm %arg0, %[[Q]] scale %[[S]] {{.*}} : (tensor<2x4xf32>, tensor<4x3xi8>, tensor<3xf32>) -> tensor<2x3xf32>
// INT8: stored: "0x010000007F7F81400040814020208100"
// INT8: scales: "0x040000000402013C0402813C0402013D"

// With group-size=32 (llama.cpp's q8_0): the same q here (k = 4 is one
// group; 63.5 rounds away from zero), and the scales an f16 [1, 3] (max /
// 127 as f16: 0x2008, 0x2408, 0x2808) that the gemm reads per group.
// INT8G: %[[Q:.*]] = ein.constant {kern.stored_from = "w"} dense_resource<stored> : tensor<4x3xi8>
// INT8G: %[[S:.*]] = ein.constant dense_resource<scales> : tensor<1x3xf16>
// INT8G: kern.gemm %arg0, %[[Q]] scale %[[S]] {{.*}} : (tensor<2x4xf32>, tensor<4x3xi8>, tensor<1x3xf16>) -> tensor<2x3xf32>
// INT8G: stored: "0x010000007F7F81400040814020208100"
// INT8G: scales: "0x02000000082008240828"

// BF16: ein.param "w" : tensor<4x3xf32>
// BF16: %[[W:.*]] = ein.constant {kern.stored_from = "w"} dense_resource<stored> : tensor<4x3xbf16>
// BF16: kern.gemm %arg0, %[[W]] {{.*}} : (tensor<2x4xf32>, tensor<4x3xbf16>) -> tensor<2x3xf32>
// 1, 2, -4; 0.5, 0, 2; -1, 1, 1; 0.25, -2, 0 as bf16 (little-endian pairs):
// BF16: stored: "0x02000000803F004080C0003F0000004080BF803F803F803E00C00000"

// F32: ein.param "w" {value = dense<
// F32-NOT: ein.constant
// F32: kern.gemm %arg0, %0 {{.*}} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w = ein.param "w" {value = dense<[[1.0, 2.0, -4.0], [0.5, 0.0, 2.0], [-1.0, 1.0, 1.0], [0.25, -2.0, 0.0]]> : tensor<4x3xf32>} : tensor<4x3xf32>
  %y = kern.gemm %x, %w {a_view = #kern.view<0, [4, 1]>, b_view = #kern.view<0, [3, 1]>, batch = #ein.sizes<"">, c_view = #kern.view<0, [3, 1]>, k = #ein.sizes<"4">, m = #ein.sizes<"2">, n = #ein.sizes<"3">} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
