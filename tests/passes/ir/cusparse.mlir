// PASSES: cusparse
// cusparse lowers jaxlib's GPU cuSPARSE calls. The tridiagonal solve (gtsv2) becomes the call
// JAX's CPU lowering writes, lapack_?gtsv_ffi, with the solution NaN where it reports a
// singular system. jax.experimental.sparse's CSR/COO calls (sizes in the opaque descriptor:
// value type, index type, rows, cols, nnz, batch count, batch stride as native i32) become plain
// StableHLO: todense a scatter-add of the data at (row, col) into zeros, entries out of bounds
// dropped. Batched calls and a used workspace result are refused.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// gtsv2 on f32 [4] diagonals and b [4, 2]: lapack_sgtsv_ffi of the same four operands; the
// returned x is its fourth result where its info is 0, NaN elsewhere.
module {
  func.func @main(%dl: tensor<4xf32>, %d: tensor<4xf32>, %du: tensor<4xf32>, %b: tensor<4x2xf32>) -> tensor<4x2xf32> {
    %0 = stablehlo.custom_call @cusparse_gtsv2_ffi(%dl, %d, %du, %b) {api_version = 4 : i32} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    return %0 : tensor<4x2xf32>
  }
}
// CHECK-NOT: cusparse
// CHECK: %[[G:.*]]:5 = stablehlo.custom_call @lapack_sgtsv_ffi(%arg0, %arg1, %arg2, %arg3)
// CHECK-SAME: -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x2xf32>, tensor<i32>)
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK: %[[OK:.*]] = stablehlo.compare EQ, %[[G]]#4, %[[ZERO]], SIGNED
// CHECK: %[[NAN:.*]] = stablehlo.constant dense<0x7FC00000> : tensor<4x2xf32>
// CHECK: %[[OKS:.*]] = stablehlo.broadcast_in_dim %[[OK]], dims = [] : (tensor<i1>) -> tensor<4x2xi1>
// CHECK: %[[X:.*]] = stablehlo.select %[[OKS]], %[[G]]#3, %[[NAN]]
// CHECK: return %[[X]]

// -----

// COO todense of a 3x4 matrix with 5 stored entries: the (row, col) pairs, zeroed where out of
// bounds, concatenated into [5, 2] indices; a scatter with add into a 3x4 zero matrix is the
// result; the workspace goes.
module {
  func.func @main(%data: tensor<5xf32>, %row: tensor<5xi32>, %col: tensor<5xi32>) -> tensor<3x4xf32> {
    %0:2 = stablehlo.custom_call @cusparse_coo_todense_ffi(%data, %row, %col) {api_version = 4 : i32, mhlo.backend_config = {opaque = "\00\00\00\00\00\00\00\00\03\00\00\00\04\00\00\00\05\00\00\00\01\00\00\00\00\00\00\00"}} : (tensor<5xf32>, tensor<5xi32>, tensor<5xi32>) -> (tensor<3x4xf32>, tensor<16xi8>)
    return %0#0 : tensor<3x4xf32>
  }
}
// CHECK-NOT: cusparse
// CHECK: %[[R:.*]] = stablehlo.select %[[VALID:.*]], %arg1, %{{.*}}
// CHECK: %[[R1:.*]] = stablehlo.reshape %[[R]]
// CHECK: %[[C:.*]] = stablehlo.select %[[VALID]], %arg2, %{{.*}}
// CHECK: %[[C1:.*]] = stablehlo.reshape %[[C]]
// CHECK: %[[IDX:.*]] = stablehlo.concatenate %[[R1]], %[[C1]], dim = 1 : (tensor<5x1xi32>, tensor<5x1xi32>) -> tensor<5x2xi32>
// CHECK: %[[UPD:.*]] = stablehlo.select %{{.*}}, %arg0, %{{.*}}
// CHECK: %[[ZEROS:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<3x4xf32>
// CHECK: %[[DENSE:.*]] = "stablehlo.scatter"(%[[ZEROS]], %[[IDX]], %[[UPD]])
// CHECK-SAME: inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1
// CHECK: stablehlo.add
// CHECK: return %[[DENSE]]

// -----

// Refused: a batched call (batch count 2 in the descriptor).
module {
  func.func @main(%data: tensor<5xf32>, %row: tensor<5xi32>, %col: tensor<5xi32>) -> tensor<3x4xf32> {
    %0:2 = stablehlo.custom_call @cusparse_coo_todense_ffi(%data, %row, %col) {api_version = 4 : i32, mhlo.backend_config = {opaque = "\00\00\00\00\00\00\00\00\03\00\00\00\04\00\00\00\05\00\00\00\02\00\00\00\00\00\00\00"}} : (tensor<5xf32>, tensor<5xi32>, tensor<5xi32>) -> (tensor<3x4xf32>, tensor<16xi8>)
    return %0#0 : tensor<3x4xf32>
  }
}
// ERROR: :57:
// ERROR: custom-call cusparse_coo_todense_ffi
// ERROR: batched cuSPARSE calls (batch count 2) are not supported
