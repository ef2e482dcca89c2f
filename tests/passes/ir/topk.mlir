// PASSES: topk
// topk rewrites XLA's TopK / __gpu$TopK custom-calls (one operand; results values[..., k] and
// i32 indices[..., k]) as XLA's TopkDecomposer does: a stable sort of (x, iota along the last
// dimension) by the dump's own comparator, then slices of the first k along that dimension.
// A __gpu$TopK without a comparator sorts by "greater than" in total order when its
// backend_config says {is_stable = true, order = "TOTAL"}; any other order is refused.

// The comparator is the dump's (here "less than": the k smallest), cloned into the sort's
// region; the comparator function, now unused, is removed.
module {
  func.func @main(%arg0: tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x3xi32>) {
    %0:2 = stablehlo.custom_call @TopK(%arg0) {called_computations = [@cmp]} : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x3xi32>)
    return %0#0, %0#1 : tensor<2x3xf32>, tensor<2x3xi32>
  }
  func.func private @cmp(%a: tensor<f32>, %b: tensor<f32>, %ia: tensor<i32>, %ib: tensor<i32>) -> tensor<i1> {
    %0 = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    return %0 : tensor<i1>
  }
}
// CHECK-LABEL: func.func {{.*}}@main
// CHECK-NOT:   custom_call
// CHECK:       %[[IOTA:.+]] = stablehlo.iota dim = 1 : tensor<2x8xi32>
// CHECK-NEXT:  %[[SORTED:.+]]:2 = "stablehlo.sort"(%arg0, %[[IOTA]]) <{dimension = 1 : i64, is_stable = true}>
// CHECK-NEXT:  ^bb0(%[[A:.+]]: tensor<f32>, %[[B:.+]]: tensor<f32>, {{.*}}: tensor<i32>, {{.*}}: tensor<i32>):
// CHECK-NEXT:  %[[LESS:.+]] = stablehlo.compare LT, %[[A]], %[[B]], TOTALORDER
// CHECK-NEXT:  stablehlo.return %[[LESS]]
// CHECK:       %[[VALUES:.+]] = stablehlo.slice %[[SORTED]]#0 [0:2, 0:3]
// CHECK-NEXT:  %[[INDICES:.+]] = stablehlo.slice %[[SORTED]]#1 [0:2, 0:3]
// CHECK-NEXT:  return %[[VALUES]], %[[INDICES]]
// CHECK-NOT:   @cmp

// -----

// jax 0.12's __gpu$TopK: no comparator, backend_config {is_stable = true, order = "TOTAL"}:
// "greater than" in IEEE total order for floats, SIGNED order for signed integers.
module {
  func.func @main(%arg0: tensor<16xbf16>, %arg1: tensor<4x8xi32>) -> (tensor<4xbf16>, tensor<4xi32>, tensor<4x2xi32>, tensor<4x2xi32>) {
    %0:2 = stablehlo.custom_call @__gpu$TopK(%arg0) {api_version = 4 : i32, backend_config = {is_stable = true, order = "TOTAL"}} : (tensor<16xbf16>) -> (tensor<4xbf16>, tensor<4xi32>)
    %1:2 = stablehlo.custom_call @__gpu$TopK(%arg1) {api_version = 4 : i32, backend_config = {is_stable = true, order = "TOTAL"}} : (tensor<4x8xi32>) -> (tensor<4x2xi32>, tensor<4x2xi32>)
    return %0#0, %0#1, %1#0, %1#1 : tensor<4xbf16>, tensor<4xi32>, tensor<4x2xi32>, tensor<4x2xi32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       "stablehlo.sort"(%arg0, {{.*}}) <{dimension = 0 : i64, is_stable = true}>
// CHECK:       stablehlo.compare GT, {{.*}}, TOTALORDER : (tensor<bf16>, tensor<bf16>)
// CHECK:       stablehlo.slice {{.*}} [0:4]
// CHECK:       "stablehlo.sort"(%arg1, {{.*}}) <{dimension = 1 : i64, is_stable = true}>
// CHECK:       stablehlo.compare GT, {{.*}}, SIGNED : (tensor<i32>, tensor<i32>)
// CHECK:       stablehlo.slice {{.*}} [0:4, 0:2]

// -----

// Refused: an unstable TopK without a comparator: its order among ties is not lax.top_k's.
module {
  func.func @main(%arg0: tensor<16xf32>) -> (tensor<4xf32>, tensor<4xi32>) {
    %0:2 = stablehlo.custom_call @__gpu$TopK(%arg0) {api_version = 4 : i32, backend_config = {is_stable = false, order = "TOTAL"}} : (tensor<16xf32>) -> (tensor<4xf32>, tensor<4xi32>)
    return %0#0, %0#1 : tensor<4xf32>, tensor<4xi32>
  }
}
// ERROR: __gpu$TopK
// ERROR: has no comparator (called_computations) and its backend_config is not {is_stable = true, order = "TOTAL"}
