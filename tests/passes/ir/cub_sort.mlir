// PASSES: cub-sort
// cub-sort lowers XLA's CUB radix-sort calls (__cub$DeviceRadixSort, xla.gpu.ext.cub_sort_keys
// / cub_sort_pairs) to a stable stablehlo.sort of each row ([batch_size, n], row-major) in
// CUB's key order: integers by value (SIGNED / UNSIGNED), floats by TOTALORDER with -0 read as
// +0; LT ascending, GT descending. Values follow their keys. The scratch result must be unused.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// Pairs: f32 keys and i32 values in two rows of 4 (batch_size 2), ascending. One stable sort
// along dimension 1 of both; the comparator reads the keys only (block arguments 0 and 1),
// maps -0 to +0 (select on compare EQ 0), then compares LT in TOTALORDER; the sorted keys and
// values replace the call's first two results.
module {
  func.func @main(%k: tensor<2x4xf32>, %v: tensor<2x4xi32>) -> (tensor<2x4xf32>, tensor<2x4xi32>) {
    %0:3 = stablehlo.custom_call @xla.gpu.ext.cub_sort_pairs(%k, %v) {mhlo.backend_config = {batch_size = 2 : i64, descending = false}} : (tensor<2x4xf32>, tensor<2x4xi32>) -> (tensor<2x4xf32>, tensor<2x4xi32>, tensor<256xui8>)
    return %0#0, %0#1 : tensor<2x4xf32>, tensor<2x4xi32>
  }
}
// CHECK-NOT: cub_sort
// CHECK: %[[S:.*]]:2 = "stablehlo.sort"(%arg0, %arg1) <{dimension = 1 : i64, is_stable = true}>
// CHECK: ^bb0(%[[L:.*]]: tensor<f32>, %[[R:.*]]: tensor<f32>, %{{.*}}: tensor<i32>, %{{.*}}: tensor<i32>):
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[LZ:.*]] = stablehlo.compare EQ, %[[L]], %[[ZERO]], FLOAT
// CHECK: %[[LC:.*]] = stablehlo.select %[[LZ]], %[[ZERO]], %[[L]]
// CHECK: %[[RZ:.*]] = stablehlo.compare EQ, %[[R]], %[[ZERO]], FLOAT
// CHECK: %[[RC:.*]] = stablehlo.select %[[RZ]], %[[ZERO]], %[[R]]
// CHECK: %[[LESS:.*]] = stablehlo.compare LT, %[[LC]], %[[RC]], TOTALORDER
// CHECK: stablehlo.return %[[LESS]]
// CHECK: return %[[S]]#0, %[[S]]#1

// -----

// The legacy form, keys only, descending (the SortOptions JSON {"descending":true}) on s32:
// a GT SIGNED comparison of the keys; 6 keys in one row are sorted as a 1x6 view.
module {
  func.func @main(%k: tensor<6xi32>) -> tensor<6xi32> {
    %0:2 = stablehlo.custom_call @"__cub$DeviceRadixSort"(%k) {backend_config = "{\"descending\":true}"} : (tensor<6xi32>) -> (tensor<6xi32>, tensor<64xui8>)
    return %0#0 : tensor<6xi32>
  }
}
// CHECK-NOT: DeviceRadixSort
// CHECK: %[[ROW:.*]] = stablehlo.reshape %arg0 : (tensor<6xi32>) -> tensor<1x6xi32>
// CHECK: %[[S:.*]] = "stablehlo.sort"(%[[ROW]]) <{dimension = 1 : i64, is_stable = true}>
// CHECK: ^bb0(%[[L:.*]]: tensor<i32>, %[[R:.*]]: tensor<i32>):
// CHECK: %[[GT:.*]] = stablehlo.compare GT, %[[L]], %[[R]], SIGNED
// CHECK: stablehlo.return %[[GT]]
// CHECK: %[[OUT:.*]] = stablehlo.reshape %[[S]] : (tensor<1x6xi32>) -> tensor<6xi32>
// CHECK: return %[[OUT]]

// -----

// Refused: something reads the scratch result (it has no portable meaning).
module {
  func.func @main(%k: tensor<6xi32>) -> tensor<64xui8> {
    %0:2 = stablehlo.custom_call @xla.gpu.ext.cub_sort_keys(%k) {mhlo.backend_config = {batch_size = 1 : i64, descending = false}} : (tensor<6xi32>) -> (tensor<6xi32>, tensor<64xui8>)
    return %0#1 : tensor<64xui8>
  }
}
// ERROR: :54:
// ERROR: custom-call xla.gpu.ext.cub_sort_keys
// ERROR: its scratch result (the last) is used
