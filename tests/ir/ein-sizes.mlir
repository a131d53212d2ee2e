// RUN: ein-opt %s | FileCheck %s

// Tensors sized by ranged dims print and parse with their sizes; the shape
// rules see t + 1 and 1 + t as one size.

// CHECK-LABEL: func.func @encoder
// CHECK-SAME: (%arg0: tensor<?x?x384xf32, #ein.sizes<"b, t">>, %arg1: tensor<?x?x384xf32, #ein.sizes<"b, t">>)
func.func @encoder(%x: tensor<?x?x384xf32, #ein.sizes<"b, t">>, %y: tensor<?x?x384xf32, #ein.sizes<"b, t">>)
    -> tensor<?x8x?x?xf32, #ein.sizes<"b, t, t">> {
  // CHECK: ein.binary add {{.*}} : (tensor<?x?x384xf32, #ein.sizes<"b, t">>, tensor<?x?x384xf32, #ein.sizes<"b, t">>) -> tensor<?x?x384xf32, #ein.sizes<"b, t">>
  %s = ein.binary add %x, %y : (tensor<?x?x384xf32, #ein.sizes<"b, t">>, tensor<?x?x384xf32, #ein.sizes<"b, t">>) -> tensor<?x?x384xf32, #ein.sizes<"b, t">>
  // CHECK: ein.rearrange {{.*}} -> tensor<?x8x?x48xf32, #ein.sizes<"b, t">>
  %h = ein.rearrange "b t (h d) -> b h t d" %s {sizes = {h = 8 : i64}} : tensor<?x?x384xf32, #ein.sizes<"b, t">> -> tensor<?x8x?x48xf32, #ein.sizes<"b, t">>
  // CHECK: ein.einsum
  %scores = ein.einsum "b h i d, b h j d -> b h i j" (%h, %h) : (tensor<?x8x?x48xf32, #ein.sizes<"b, t">>, tensor<?x8x?x48xf32, #ein.sizes<"b, t">>) -> tensor<?x8x?x?xf32, #ein.sizes<"b, t, t">>
  return %scores : tensor<?x8x?x?xf32, #ein.sizes<"b, t, t">>
}
