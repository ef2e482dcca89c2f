// PASSES: te-grouped-gemm
// te-grouped-gemm rewrites Transformer Engine's te_grouped_gemm_ffi (one GEMM per MoE
// expert; operands lhs, lhs_scale_inv, rhs, rhs_scale_inv, bias, lhs_first_dims,
// lhs_last_dims, rhs_first_dims, rhs_last_dims, out_first_dims, out_last_dims, group_offset)
// as a ragged dot in f32.  Forward (group sizes in lhs_first_dims): lhs [M, K] rows in
// consecutive groups, rhs G stacked [K, N]; out[r] = lhs[r] . rhs[g] for row r of group g.
// Block-scaled (MXFP8, NVFP4) GEMMs and the forward with lhs_is_trans are refused.

// Forward, two experts: rhs [8, 3] read as 2 stacked [4, 3]; each row of lhs masked to the
// group its index falls in (cumulative sums of the sizes in %arg5), a batched dot over the
// experts, the experts' products summed (each row has one non-zero), converted to bf16.
module {
  func.func @main(%lhs: tensor<6x4xbf16>, %lsinv: tensor<1xf32>, %rhs: tensor<8x3xbf16>, %rsinv: tensor<1xf32>, %bias: tensor<0xbf16>, %sizes: tensor<2xi32>) -> tensor<6x3xbf16> {
    %e = stablehlo.constant dense<> : tensor<0xi32>
    %offset = stablehlo.constant dense<0> : tensor<1xi32>
    %0:2 = stablehlo.custom_call @te_grouped_gemm_ffi(%lhs, %lsinv, %rhs, %rsinv, %bias, %sizes, %e, %e, %e, %e, %e, %offset) {api_version = 4 : i32, mhlo.backend_config = {has_bias = false, lhs_axis_boundary = 1 : i64, lhs_is_trans = false, lhs_left_size = 6 : i64, lhs_right_size = 4 : i64, rhs_axis_boundary = 1 : i64, rhs_is_trans = false, rhs_left_size = 8 : i64, rhs_right_size = 3 : i64, scaling_mode = 0 : i64, use_async_d2h_group_sizes = false}} : (tensor<6x4xbf16>, tensor<1xf32>, tensor<8x3xbf16>, tensor<1xf32>, tensor<0xbf16>, tensor<2xi32>, tensor<0xi32>, tensor<0xi32>, tensor<0xi32>, tensor<0xi32>, tensor<0xi32>, tensor<1xi32>) -> (tensor<6x3xbf16>, tensor<33554688xui8>)
    return %0#0 : tensor<6x3xbf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[LHS:.+]] = stablehlo.convert %arg0 : (tensor<6x4xbf16>) -> tensor<6x4xf32>
// CHECK:       %[[EXPERTS:.+]] = stablehlo.reshape {{.*}} : (tensor<8x3xf32>) -> tensor<2x4x3xf32>
// CHECK:       stablehlo.convert %arg5 : (tensor<2xi32>) -> tensor<2xi64>
// CHECK:       %[[ROWS:.+]] = stablehlo.broadcast_in_dim %[[LHS]], dims = [1, 2] : (tensor<6x4xf32>) -> tensor<2x6x4xf32>
// CHECK:       %[[MASKED:.+]] = stablehlo.select {{.*}}, %[[ROWS]], {{.*}}
// CHECK-NEXT:  %[[DOT:.+]] = stablehlo.dot_general %[[MASKED]], %[[EXPERTS]], batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x6x4xf32>, tensor<2x4x3xf32>) -> tensor<2x6x3xf32>
// CHECK:       %[[SUM:.+]] = stablehlo.reduce(%[[DOT]] init: {{.*}}) applies stablehlo.add across dimensions = [0]
// CHECK-NEXT:  %[[OUT:.+]] = stablehlo.convert %[[SUM]] : (tensor<6x3xf32>) -> tensor<6x3xbf16>
// CHECK-NEXT:  return %[[OUT]]

// -----

// Refused: MXFP8 block scaling (scales pre-swizzled for cuBLAS).
module {
  func.func @main(%lhs: tensor<6x32xf8E4M3FN>, %lsinv: tensor<6x1xf8E8M0FNU>, %rhs: tensor<64x3xf8E4M3FN>, %rsinv: tensor<2x3xf8E8M0FNU>, %bias: tensor<0xbf16>, %sizes: tensor<2xi32>) -> tensor<6x3xbf16> {
    %e = stablehlo.constant dense<> : tensor<0xi32>
    %offset = stablehlo.constant dense<0> : tensor<1xi32>
    %0:2 = stablehlo.custom_call @te_grouped_gemm_ffi(%lhs, %lsinv, %rhs, %rsinv, %bias, %sizes, %e, %e, %e, %e, %e, %offset) {api_version = 4 : i32, mhlo.backend_config = {has_bias = false, lhs_axis_boundary = 1 : i64, lhs_is_trans = false, lhs_left_size = 6 : i64, lhs_right_size = 32 : i64, rhs_axis_boundary = 1 : i64, rhs_is_trans = false, rhs_left_size = 64 : i64, rhs_right_size = 3 : i64, scaling_mode = 2 : i64, use_async_d2h_group_sizes = false}} : (tensor<6x32xf8E4M3FN>, tensor<6x1xf8E8M0FNU>, tensor<64x3xf8E4M3FN>, tensor<2x3xf8E8M0FNU>, tensor<0xbf16>, tensor<2xi32>, tensor<0xi32>, tensor<0xi32>, tensor<0xi32>, tensor<0xi32>, tensor<0xi32>, tensor<1xi32>) -> (tensor<6x3xbf16>, tensor<33554688xui8>)
    return %0#0 : tensor<6x3xbf16>
  }
}
// ERROR: te_grouped_gemm_ffi
// ERROR: scaling_mode MXFP8_1D_SCALING: block-scaled grouped GEMMs

// -----

// Refused: the forward (lhs-ragged) with lhs_is_trans.
module {
  func.func @main(%lhs: tensor<4x6xbf16>, %lsinv: tensor<1xf32>, %rhs: tensor<8x3xbf16>, %rsinv: tensor<1xf32>, %bias: tensor<0xbf16>, %sizes: tensor<2xi32>) -> tensor<6x3xbf16> {
    %e = stablehlo.constant dense<> : tensor<0xi32>
    %offset = stablehlo.constant dense<0> : tensor<1xi32>
    %0:2 = stablehlo.custom_call @te_grouped_gemm_ffi(%lhs, %lsinv, %rhs, %rsinv, %bias, %sizes, %e, %e, %e, %e, %e, %offset) {api_version = 4 : i32, mhlo.backend_config = {has_bias = false, lhs_axis_boundary = 1 : i64, lhs_is_trans = true, lhs_left_size = 4 : i64, lhs_right_size = 6 : i64, rhs_axis_boundary = 1 : i64, rhs_is_trans = false, rhs_left_size = 8 : i64, rhs_right_size = 3 : i64, scaling_mode = 0 : i64, use_async_d2h_group_sizes = false}} : (tensor<4x6xbf16>, tensor<1xf32>, tensor<8x3xbf16>, tensor<1xf32>, tensor<0xbf16>, tensor<2xi32>, tensor<0xi32>, tensor<0xi32>, tensor<0xi32>, tensor<0xi32>, tensor<0xi32>, tensor<1xi32>) -> (tensor<6x3xbf16>, tensor<33554688xui8>)
    return %0#0 : tensor<6x3xbf16>
  }
}
// ERROR: lhs_is_trans=true in the forward (lhs-ragged) grouped GEMM: not converted

// -----

// The async group-size copy: TE copies the sizes to its host buffer and writes nothing to
// the result XLA aliases to the operand, so the result is the operand.
module {
  func.func @main(%sizes: tensor<4xi32>) -> tensor<4xi32> {
    %0 = stablehlo.custom_call @te_grouped_gemm_d2h_group_sizes_ffi(%sizes) {api_version = 4 : i32, mhlo.backend_config = {num_gemms = 4 : i64}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<4xi32>) -> tensor<4xi32>
    return %0 : tensor<4xi32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NEXT:  return %arg0 : tensor<4xi32>
