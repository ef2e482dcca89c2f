// PASSES: cusolver
// cusolver lowers jaxlib's GPU linear-algebra calls. Those whose operands, results and
// (column-major) layouts are LAPACK's become jaxlib's CPU LAPACK calls, as JAX's own CPU
// lowering writes them (typed FFI, attributes in mhlo.backend_config), e.g. getrf →
// lapack_sgetrf_ffi, gesvdj → lapack_sgesdd_ffi in mode 'A' / 'S' / 'N' with its V^H
// transposed back to cuSOLVER's V. The Cholesky factorization (potrf) becomes a loop over
// columns in plain ops (no stablehlo.cholesky, which not every compiler takes) and cuSOLVER's
// info. Shapes a kernel does not take are refused.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// A batch of LU factorizations: the same operand, results and layouts, the CPU target.
module {
  func.func @main(%a: tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>) {
    %0:3 = stablehlo.custom_call @cusolver_getrf_ffi(%a) {api_version = 4 : i32, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>)
    return %0#0, %0#1, %0#2 : tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>
  }
}
// CHECK-NOT: cusolver
// CHECK: %[[LU:.*]]:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%arg0)
// CHECK-SAME: operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>]
// CHECK-SAME: output_operand_aliases
// CHECK-SAME: -> (tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>)
// CHECK: return %[[LU]]#0, %[[LU]]#1, %[[LU]]#2

// -----

// Jacobi SVD with full matrices: lapack_sgesdd_ffi in mode 'A' (65); s, U and info are its
// results, and the V returned is the transpose of its fourth result (LAPACK gives V^H).
module {
  func.func @main(%a: tensor<3x3xf32>) -> (tensor<3xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<i32>) {
    %0:5 = stablehlo.custom_call @cusolver_gesvdj_ffi(%a) {api_version = 4 : i32, mhlo.backend_config = {compute_uv = true, full_matrices = true}} : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<i32>)
    return %0#1, %0#2, %0#3, %0#4 : tensor<3xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<i32>
  }
}
// CHECK-NOT: cusolver
// CHECK: %[[SVD:.*]]:5 = stablehlo.custom_call @lapack_sgesdd_ffi(%arg0)
// CHECK-SAME: mhlo.backend_config = {mode = 65 : ui8}
// CHECK: %[[V:.*]] = stablehlo.transpose %[[SVD]]#3, dims = [1, 0]
// CHECK: return %[[SVD]]#1, %[[SVD]]#2, %[[V]], %[[SVD]]#4

// -----

// Cholesky (lower): a loop over the columns taking square roots; info is 0 where the factor
// is finite, else (the other branch) the order of the first failing leading minor.
module {
  func.func @main(%a: tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<i32>) {
    %0:2 = stablehlo.custom_call @cusolver_potrf_ffi(%a) {api_version = 4 : i32, mhlo.backend_config = {lower = true}} : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<i32>)
    return %0#0, %0#1 : tensor<3x3xf32>, tensor<i32>
  }
}
// CHECK-NOT: custom_call
// CHECK-NOT: stablehlo.cholesky
// CHECK: %[[LOOP:.*]]:2 = stablehlo.while
// CHECK: stablehlo.sqrt
// CHECK: %[[OK:.*]] = stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.and
// CHECK: %[[INFO:.*]] = "stablehlo.if"(%[[OK]])
// CHECK: return %[[LOOP]]#1, %[[INFO]]

// -----

// Symmetric eigendecomposition of the upper triangle (lower = false): lapack_ssyevd_ffi with
// mode 'V' (86: cuSOLVER's syevd always computes vectors) and uplo 'U' (85).
module {
  func.func @main(%a: tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>, tensor<i32>) {
    %0:3 = stablehlo.custom_call @cusolver_syevd_ffi(%a) {api_version = 4 : i32, mhlo.backend_config = {algorithm = 0 : ui8, lower = false}} : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>, tensor<i32>)
    return %0#0, %0#1, %0#2 : tensor<3x3xf32>, tensor<3xf32>, tensor<i32>
  }
}
// CHECK-NOT: cusolver
// CHECK: %[[EIG:.*]]:3 = stablehlo.custom_call @lapack_ssyevd_ffi(%arg0)
// CHECK-SAME: mhlo.backend_config = {mode = 86 : ui8, uplo = 85 : ui8}
// CHECK: return %[[EIG]]#0, %[[EIG]]#1, %[[EIG]]#2

// -----

// Refused: the Cholesky rank-one update takes a square matrix and a vector of its order.
module {
  func.func @main(%r: tensor<3x3xf32>, %w: tensor<4xf32>) -> (tensor<3x3xf32>, tensor<4xf32>) {
    %0:2 = stablehlo.custom_call @cu_cholesky_update_ffi(%r, %w) {api_version = 4 : i32} : (tensor<3x3xf32>, tensor<4xf32>) -> (tensor<3x3xf32>, tensor<4xf32>)
    return %0#0, %0#1 : tensor<3x3xf32>, tensor<4xf32>
  }
}
// ERROR: :79:
// ERROR: custom-call cu_cholesky_update_ffi
// ERROR: expects an f32/f64 matrix [n,n] and vector [n], got tensor<3x3xf32> and tensor<4xf32>
