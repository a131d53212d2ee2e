// RUN: ein-opt %s --ein-fold-constants --split-input-file | FileCheck %s

// Ops of constants become constants (Python's // and %).
// CHECK-LABEL: func.func @integer_index_arithmetic
func.func @integer_index_arithmetic() -> tensor<6xi64> {
  // CHECK-NEXT: %[[C:.*]] = ein.constant dense<[-2, -3, -2, 0, -2, 0]> : tensor<6xi64>
  // CHECK-NEXT: return %[[C]]
  %a = ein.constant dense<[-7, -6, -5, -4, -3, -2]> : tensor<6xi64>
  %two = ein.constant dense<2> : tensor<i64>
  %three = ein.constant dense<3> : tensor<i64>
  %q = ein.binary floordiv %a, %two : (tensor<6xi64>, tensor<i64>) -> tensor<6xi64>
  %r = ein.binary mod %a, %three : (tensor<6xi64>, tensor<i64>) -> tensor<6xi64>
  %s = ein.binary add %q, %r : (tensor<6xi64>, tensor<6xi64>) -> tensor<6xi64>
  return %s : tensor<6xi64>
}

// -----

// What the evaluator rejects (an integer division by zero) stays for run time.
// CHECK-LABEL: func.func @division_by_zero_left
func.func @division_by_zero_left() -> tensor<2xi64> {
  // CHECK: ein.binary floordiv
  %a = ein.constant dense<[4, 5]> : tensor<2xi64>
  %b = ein.constant dense<[2, 0]> : tensor<2xi64>
  %q = ein.binary floordiv %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %q : tensor<2xi64>
}

// -----

// A rearrange of a gather by constant ids that keeps the width axis last
// moves into the ids, which fold: one gather writes the partitioned windows.
// CHECK-LABEL: func.func @partition_after_gather
func.func @partition_after_gather(%x: tensor<4x4x3xf32>) -> tensor<4x4x3xf32> {
  // CHECK-DAG: %[[IDS:.*]] = ein.constant dense<{{\[\[}}1, 2, 5, 6], [3, 0, 7, 4], [9, 10, 13, 14], [11, 8, 15, 12]]> : tensor<4x4xi64>
  // CHECK-DAG: %[[ROWS:.*]] = ein.rearrange "... c -> (...) c" %arg0
  // CHECK: %[[G:.*]] = ein.embedding %[[IDS]], %[[ROWS]] : (tensor<4x4xi64>, tensor<16x3xf32>) -> tensor<4x4x3xf32>
  // CHECK-NEXT: return %[[G]]
  %ids = ein.constant dense<[[1, 2, 3, 0], [5, 6, 7, 4], [9, 10, 11, 8], [13, 14, 15, 12]]> : tensor<4x4xi64>
  %rows = ein.rearrange "... c -> (...) c" %x {sizes = {}} : tensor<4x4x3xf32> -> tensor<16x3xf32>
  %rolled = ein.embedding %ids, %rows : (tensor<4x4xi64>, tensor<16x3xf32>) -> tensor<4x4x3xf32>
  %windows = ein.rearrange "(nh wh) (nw ww) c -> (nh nw) (wh ww) c" %rolled {sizes = {wh = 2 : i64, ww = 2 : i64}} : tensor<4x4x3xf32> -> tensor<4x4x3xf32>
  return %windows : tensor<4x4x3xf32>
}

// -----

// A gather from the rows of a rearranged tensor (a window merge, then a roll)
// gathers from the rows of the tensor itself, by ids that fold.
// CHECK-LABEL: func.func @merge_before_gather
func.func @merge_before_gather(%w: tensor<4x4x3xf32>) -> tensor<4x4x3xf32> {
  // CHECK-DAG: %[[IDS:.*]] = ein.constant dense<{{\[\[}}1, 4, 5, 0], [3, 6, 7, 2], [9, 12, 13, 8], [11, 14, 15, 10]]> : tensor<4x4xi64>
  // CHECK-DAG: %[[ROWS:.*]] = ein.rearrange "... c -> (...) c" %arg0
  // CHECK: %[[G:.*]] = ein.embedding %[[IDS]], %[[ROWS]]
  // CHECK-NEXT: return %[[G]]
  %merged = ein.rearrange "(nh nw) (wh ww) c -> (nh wh) (nw ww) c" %w {sizes = {nh = 2 : i64, wh = 2 : i64}} : tensor<4x4x3xf32> -> tensor<4x4x3xf32>
  %rows = ein.rearrange "... c -> (...) c" %merged {sizes = {}} : tensor<4x4x3xf32> -> tensor<16x3xf32>
  %ids = ein.constant dense<[[1, 2, 3, 0], [5, 6, 7, 4], [9, 10, 11, 8], [13, 14, 15, 12]]> : tensor<4x4xi64>
  %rolled = ein.embedding %ids, %rows : (tensor<4x4xi64>, tensor<16x3xf32>) -> tensor<4x4x3xf32>
  return %rolled : tensor<4x4x3xf32>
}

// -----

// A slice of a constant at an offset over ranged dims has a fixed shape but
// no value until the dims are known: it stays (it folded as if t were -1).
// CHECK-LABEL: func.func @slice_at_a_ranged_offset
func.func @slice_at_a_ranged_offset(%x: tensor<?xf32, #ein.sizes<"t">>) -> tensor<1xi64> attributes {ein.dims = {t = array<i64: 1, 4>}} {
  // CHECK: %[[S:.*]] = ein.slice
  // CHECK-NEXT: return %[[S]]
  %c = ein.constant dense<[1, 2, 3, 4]> : tensor<4xi64>
  %s = ein.slice %c {dropped = array<i64>, offsets = #ein.sizes<"t - 1">, sizes = #ein.sizes<"1">} : tensor<4xi64> -> tensor<1xi64>
  return %s : tensor<1xi64>
}
