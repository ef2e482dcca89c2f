// PASSES: cub-scan
// cub-scan lowers XLA GPU's CUB inclusive-sum scan (xla.gpu.ext.cub_scan) to a cumulative sum:
// the operand viewed in its physical order as column_length rows of row_length contiguous
// elements, each row summed by a reduce_window of the whole row padded by row - 1 on the left.
// The scratch result, where read, is zeros. Forms the kernel's source does not define
// (is_reverse, an init operand, kinds other than SUM) are refused.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// Row-major s32[2,3,4], rows of 4 (column_length 6): the operand viewed as 6x4, a [1, 4]
// window with padding [[0, 0], [3, 0]] summing with add from 0 along each row, and the sums
// reshaped back; that value replaces the call's first result.
module {
  func.func @main(%x: tensor<2x3x4xi32>) -> tensor<2x3x4xi32> {
    %0:2 = stablehlo.custom_call @xla.gpu.ext.cub_scan(%x) {mhlo.backend_config = {column_length = 6 : i64, is_reverse = false, kind = 1 : i32, row_length = 4 : i64, vector_length = 1 : i64}} : (tensor<2x3x4xi32>) -> (tensor<2x3x4xi32>, tensor<767xui8>)
    return %0#0 : tensor<2x3x4xi32>
  }
}
// CHECK-NOT: cub_scan
// CHECK-DAG: %[[ROWS:.*]] = stablehlo.reshape %arg0 : (tensor<2x3x4xi32>) -> tensor<6x4xi32>
// CHECK-DAG: %[[ZERO:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK: %[[SUM:.*]] = "stablehlo.reduce_window"(%[[ROWS]], %[[ZERO]])
// CHECK-SAME: padding = dense<{{\[\[}}0, 0], [3, 0]]>
// CHECK-SAME: window_dimensions = array<i64: 1, 4>
// CHECK: stablehlo.add
// CHECK: %[[OUT:.*]] = stablehlo.reshape %[[SUM]] : (tensor<6x4xi32>) -> tensor<2x3x4xi32>
// CHECK: return %[[OUT]]

// -----

// Column-major f32[4,6]{0,1} (dimension 0 contiguous): the scan runs along dimension 0, so
// the operand is transposed to its physical order first (6 rows of 4) and the sums transposed
// back.
module {
  func.func @main(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
    %0:2 = stablehlo.custom_call @xla.gpu.ext.cub_scan(%x) {hlo.operand_layouts = [dense<[0, 1]> : tensor<2xindex>], hlo.result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>], mhlo.backend_config = {column_length = 6 : i64, is_reverse = false, kind = 1 : i32, row_length = 4 : i64, vector_length = 1 : i64}} : (tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<767xui8>)
    return %0#0 : tensor<4x6xf32>
  }
}
// CHECK: %[[T:.*]] = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x6xf32>) -> tensor<6x4xf32>
// CHECK: %[[SUM:.*]] = "stablehlo.reduce_window"(%[[T]], %{{.*}})
// CHECK-SAME: padding = dense<{{\[\[}}0, 0], [3, 0]]>
// CHECK-SAME: window_dimensions = array<i64: 1, 4>
// CHECK: %[[OUT:.*]] = stablehlo.transpose %[[SUM]], dims = [1, 0] : (tensor<6x4xf32>) -> tensor<4x6xf32>
// CHECK: return %[[OUT]]

// -----

// Refused: a reversed scan (XLA's CUB scan handler runs forward scans only).
module {
  func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0:2 = stablehlo.custom_call @xla.gpu.ext.cub_scan(%x) {mhlo.backend_config = {column_length = 1 : i64, is_reverse = true, kind = 1 : i32, row_length = 8 : i64, vector_length = 1 : i64}} : (tensor<8xf32>) -> (tensor<8xf32>, tensor<767xui8>)
    return %0#0 : tensor<8xf32>
  }
}
// ERROR: :51:
// ERROR: custom-call xla.gpu.ext.cub_scan
// ERROR: backend_config.is_reverse=true: XLA's CUB scan handler
