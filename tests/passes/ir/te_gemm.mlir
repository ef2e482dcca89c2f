// PASSES: te-gemm
// te-gemm rewrites Transformer Engine's GEMM calls (te_gemm_v2_ffi: lhs, lhs_scale_inv, rhs,
// rhs_scale_inv, bias, alpha, beta -> output, workspace; te_gemm_ffi: the same plus
// gelu_input -> output, bias_grad, pre_gelu_out, workspace) as a dot_general in f32 (cuBLAS's
// compute type): each operand collapsed to 2-D at its axis boundary, the contracting
// dimension chosen by lhs_transposed / rhs_transposed, times both inverse scales for
// tensor-scaled fp8, plus the bias, gelu (tanh form) under fuse_gelu, converted to the
// output type.  The workspace is dropped.  MXFP8 and NVFP4 are converted (tested in
// tests/passes/te); collective GEMMs and NVFP4 outside TE's TN form are refused by name.

// bf16, no scaling, with a bias: lhs [4, 8] . rhs [8, 3] contracting [1] x [0] in f32, the
// bias broadcast along the rows and added, the sum converted to bf16.
module {
  func.func @main(%lhs: tensor<4x8xbf16>, %lsinv: tensor<1xf32>, %rhs: tensor<8x3xbf16>, %rsinv: tensor<1xf32>, %bias: tensor<3xbf16>, %alpha: tensor<1xf32>, %beta: tensor<1xf32>) -> tensor<4x3xbf16> {
    %0:2 = stablehlo.custom_call @te_gemm_v2_ffi(%lhs, %lsinv, %rhs, %rsinv, %bias, %alpha, %beta) {api_version = 4 : i32, mhlo.backend_config = {config = {collective_op = 0 : i64, lhs_axis_boundary = 1 : i64, lhs_transposed = false, rhs_axis_boundary = 1 : i64, rhs_transposed = false, scaling_mode = 0 : i64, use_split_accumulator = false}}} : (tensor<4x8xbf16>, tensor<1xf32>, tensor<8x3xbf16>, tensor<1xf32>, tensor<3xbf16>, tensor<1xf32>, tensor<1xf32>) -> (tensor<4x3xbf16>, tensor<256xui8>)
    return %0#0 : tensor<4x3xbf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[A:.+]] = stablehlo.convert %arg0 : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK-NEXT:  %[[B:.+]] = stablehlo.convert %arg2 : (tensor<8x3xbf16>) -> tensor<8x3xf32>
// CHECK-NEXT:  %[[DOT:.+]] = stablehlo.dot_general %[[A]], %[[B]], contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:  %[[BIAS:.+]] = stablehlo.convert %arg4 : (tensor<3xbf16>) -> tensor<3xf32>
// CHECK-NEXT:  %[[ROWS:.+]] = stablehlo.broadcast_in_dim %[[BIAS]], dims = [1] : (tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:  %[[SUM:.+]] = stablehlo.add %[[DOT]], %[[ROWS]]
// CHECK-NEXT:  %[[OUT:.+]] = stablehlo.convert %[[SUM]] : (tensor<4x3xf32>) -> tensor<4x3xbf16>
// CHECK-NEXT:  return %[[OUT]]

// -----

// fp8 tensor scaling (scaling_mode 1) with rhs transposed ([N, K]) and a 3-D lhs collapsed at
// boundary 2 to [6, 16]: contracting [1] x [1], the product times lhs_scale_inv x
// rhs_scale_inv; an empty bias adds nothing.
module {
  func.func @main(%lhs: tensor<2x3x16xf8E4M3FN>, %lsinv: tensor<1xf32>, %rhs: tensor<5x16xf8E4M3FN>, %rsinv: tensor<1xf32>, %bias: tensor<0xbf16>, %alpha: tensor<1xf32>, %beta: tensor<1xf32>) -> tensor<2x3x5xbf16> {
    %0:2 = stablehlo.custom_call @te_gemm_v2_ffi(%lhs, %lsinv, %rhs, %rsinv, %bias, %alpha, %beta) {api_version = 4 : i32, mhlo.backend_config = {config = {collective_op = 0 : i64, lhs_axis_boundary = 2 : i64, lhs_transposed = false, rhs_axis_boundary = 1 : i64, rhs_transposed = true, scaling_mode = 1 : i64, use_split_accumulator = false}}} : (tensor<2x3x16xf8E4M3FN>, tensor<1xf32>, tensor<5x16xf8E4M3FN>, tensor<1xf32>, tensor<0xbf16>, tensor<1xf32>, tensor<1xf32>) -> (tensor<2x3x5xbf16>, tensor<256xui8>)
    return %0#0 : tensor<2x3x5xbf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[FLAT:.+]] = stablehlo.reshape %arg0 : (tensor<2x3x16xf8E4M3FN>) -> tensor<6x16xf8E4M3FN>
// CHECK:       %[[DOT:.+]] = stablehlo.dot_general {{.*}}, contracting_dims = [1] x [1] : (tensor<6x16xf32>, tensor<5x16xf32>) -> tensor<6x5xf32>
// CHECK:       %[[SCALE:.+]] = stablehlo.multiply {{.*}} : tensor<f32>
// CHECK-NEXT:  %[[SCALES:.+]] = stablehlo.broadcast_in_dim %[[SCALE]], dims = [] : (tensor<f32>) -> tensor<6x5xf32>
// CHECK-NEXT:  %[[SCALED:.+]] = stablehlo.multiply %[[DOT]], %[[SCALES]]
// CHECK-NEXT:  %[[SHAPED:.+]] = stablehlo.reshape %[[SCALED]] : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT:  %[[OUT:.+]] = stablehlo.convert %[[SHAPED]] : (tensor<2x3x5xf32>) -> tensor<2x3x5xbf16>
// CHECK-NEXT:  return %[[OUT]]

// -----

// te_gemm_ffi (TE <= 2.9) with fuse_gelu: the output is gelu (tanh form) of the product and
// pre_gelu_out the product itself.
module {
  func.func @main(%lhs: tensor<4x8xf32>, %lsinv: tensor<1xf32>, %rhs: tensor<8x8xf32>, %rsinv: tensor<1xf32>, %bias: tensor<0xf32>, %gelu_in: tensor<0xf32>, %alpha: tensor<1xf32>, %beta: tensor<1xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
    %0:4 = stablehlo.custom_call @te_gemm_ffi(%lhs, %lsinv, %rhs, %rsinv, %bias, %gelu_in, %alpha, %beta) {api_version = 4 : i32, mhlo.backend_config = {collective_op = 0 : i64, fuse_bias = false, fuse_gelu = true, grad = false, lhs_axis_boundary = 1 : i64, lhs_transposed = false, rhs_axis_boundary = 1 : i64, rhs_transposed = false, scaling_mode = 0 : i64, use_split_accumulator = false}} : (tensor<4x8xf32>, tensor<1xf32>, tensor<8x8xf32>, tensor<1xf32>, tensor<0xf32>, tensor<0xf32>, tensor<1xf32>, tensor<1xf32>) -> (tensor<4x8xf32>, tensor<0xf32>, tensor<4x8xf32>, tensor<256xui8>)
    return %0#0, %0#2 : tensor<4x8xf32>, tensor<4x8xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[PRE:.+]] = stablehlo.dot_general %arg0, %arg2, contracting_dims = [1] x [0]
// CHECK-DAG:   stablehlo.constant dense<0.79788{{[0-9]*}}> : tensor<4x8xf32>
// CHECK-DAG:   stablehlo.constant dense<4.471500e-02> : tensor<4x8xf32>
// CHECK:       %[[TANH:.+]] = stablehlo.tanh
// CHECK-NEXT:  %[[ONEPLUS:.+]] = stablehlo.add {{%[a-z_0-9]+}}, %[[TANH]] :
// CHECK-NEXT:  %[[GELU:.+]] = stablehlo.multiply {{%[a-z_0-9]+}}, %[[ONEPLUS]] :
// CHECK-NEXT:  return %[[GELU]], %[[PRE]]

// -----

// Refused: an NVFP4 GEMM whose lhs is not rowwise (gemm.cpp requires both rowwise).
module {
  func.func @main(%lhs: tensor<4x32xf8E4M3FN>, %lsinv: tensor<4x1xf8E8M0FNU>, %rhs: tensor<8x32xf8E4M3FN>, %rsinv: tensor<8x1xf8E8M0FNU>, %bias: tensor<0xbf16>, %alpha: tensor<1xf32>, %beta: tensor<1xf32>) -> tensor<4x8xbf16> {
    %0:2 = stablehlo.custom_call @te_gemm_v2_ffi(%lhs, %lsinv, %rhs, %rsinv, %bias, %alpha, %beta) {api_version = 4 : i32, mhlo.backend_config = {config = {collective_op = 0 : i64, lhs_axis_boundary = 1 : i64, lhs_transposed = true, rhs_axis_boundary = 1 : i64, rhs_transposed = true, scaling_mode = 4 : i64, use_split_accumulator = false}}} : (tensor<4x32xf8E4M3FN>, tensor<4x1xf8E8M0FNU>, tensor<8x32xf8E4M3FN>, tensor<8x1xf8E8M0FNU>, tensor<0xbf16>, tensor<1xf32>, tensor<1xf32>) -> (tensor<4x8xbf16>, tensor<256xui8>)
    return %0#0 : tensor<4x8xbf16>
  }
}
// ERROR: te_gemm_v2_ffi
// ERROR: NVFP4 GEMM needs alpha (TE ≥ 2.9's operands) and both operands rowwise

// -----

// Refused: a communication-overlapped GEMM (collective_op 1, all-gather).
module {
  func.func @main(%lhs: tensor<4x8xbf16>, %lsinv: tensor<1xf32>, %rhs: tensor<8x3xbf16>, %rsinv: tensor<1xf32>, %bias: tensor<0xbf16>, %alpha: tensor<1xf32>, %beta: tensor<1xf32>) -> tensor<4x3xbf16> {
    %0:2 = stablehlo.custom_call @te_gemm_v2_ffi(%lhs, %lsinv, %rhs, %rsinv, %bias, %alpha, %beta) {api_version = 4 : i32, mhlo.backend_config = {config = {collective_op = 1 : i64, lhs_axis_boundary = 1 : i64, lhs_transposed = false, rhs_axis_boundary = 1 : i64, rhs_transposed = false, scaling_mode = 0 : i64, use_split_accumulator = false}}} : (tensor<4x8xbf16>, tensor<1xf32>, tensor<8x3xbf16>, tensor<1xf32>, tensor<0xbf16>, tensor<1xf32>, tensor<1xf32>) -> (tensor<4x3xbf16>, tensor<256xui8>)
    return %0#0 : tensor<4x3xbf16>
  }
}
// ERROR: collective_op 1 (ALL_GATHER)
// ERROR: not converted (run the model with collective GEMM off)
