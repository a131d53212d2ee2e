// RUN: ein-opt %s --ein-widen-half-floats | FileCheck %s

// Half inputs are widened where read, half params and constants become f32,
// everything in between is f32, and the half output is narrowed at the end.
// CHECK-LABEL: func.func @half
func.func @half(%x: tensor<4x8xbf16>, %mask: tensor<4x8xi1>) -> (tensor<4x8xbf16>, tensor<4x8xf32>) {
  // CHECK-NEXT: %[[X:.*]] = ein.cast %arg0 : tensor<4x8xbf16> -> tensor<4x8xf32>
  // CHECK-NEXT: %[[WF:.*]] = ein.param "w" : tensor<8x8xf32>
  // CHECK-NEXT: %[[C:.*]] = ein.constant dense<2.000000e+00> : tensor<f32>
  // Casts between the half types (and to f32) are now f32 to f32: gone.
  // CHECK-NEXT: %[[P:.*]] = ein.matmul %[[X]], %[[WF]] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[S:.*]] = ein.binary mul %[[P]], %[[C]] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[O:.*]] = ein.cast %[[S]] : tensor<4x8xf32> -> tensor<4x8xbf16>
  // CHECK-NEXT: return %[[O]], %[[S]]
  %w = ein.param "w" : tensor<8x8xf16>
  %c = ein.constant dense<2.0> : tensor<bf16>
  %wb = ein.cast %w : tensor<8x8xf16> -> tensor<8x8xbf16>
  %p = ein.matmul %x, %wb : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %s = ein.binary mul %p, %c : (tensor<4x8xbf16>, tensor<bf16>) -> tensor<4x8xbf16>
  %f = ein.cast %s : tensor<4x8xbf16> -> tensor<4x8xf32>
  return %s, %f : tensor<4x8xbf16>, tensor<4x8xf32>
}
