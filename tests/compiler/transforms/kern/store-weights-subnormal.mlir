// RUN: ein-opt %s --kern-store-weights="precision=int8" | FileCheck %s --check-prefix=INT8
// RUN: ein-opt %s --kern-store-weights="precision=int8 group-size=32" | FileCheck %s --check-prefix=INT8G
// RUN: ein-opt %s --kern-store-weights="precision=int4" | FileCheck %s --check-prefix=INT4

// A column of subnormal weights (1e-42 x [1, -2, 0, 3]) beside a column of
// zeros: the inverse of the column's or group's scale overflows f32, so the
// values are quantized by the quotient itself (an infinite product would be
// an out-of-range conversion, which stops the sanitizer build's lit run) and
// zeros stay zero. The scale is subnormal (17 x 2^-149 for int8: q 42, -84,
// 0, 126, coarse as the scale is) or 0 in f16 (-0 for int4's negative d).
// INT8: stored: "0x010000002A00AC0000007E00"
// INT8: scales: "0x040000001100000000000000"
// INT8G: stored: "0x010000002A00AC0000007E00"
// INT8G: scales: "0x0200000000000000"
// INT4: stored: "0x010000000D050008"
// INT4: scales: "0x0200000000800080"
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x2xf32> {
  %w = ein.param "w" {value = dense<[[1.0e-42, 0.0], [-2.0e-42, 0.0], [0.0, 0.0], [3.0e-42, 0.0]]> : tensor<4x2xf32>} : tensor<4x2xf32>
  %y = kern.gemm %x, %w {a_view = #kern.view<0, [4, 1]>, b_view = #kern.view<0, [2, 1]>, batch = #ein.sizes<"">, c_view = #kern.view<0, [2, 1]>, k = #ein.sizes<"4">, m = #ein.sizes<"2">, n = #ein.sizes<"2">} : (tensor<2x4xf32>, tensor<4x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
