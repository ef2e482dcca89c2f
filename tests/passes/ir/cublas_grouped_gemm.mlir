// PASSES: cublas-grouped-gemm
// cublas-grouped-gemm lowers XLA GPU's cuBLASLt grouped GEMM (a ragged-dot: MoE experts) to
// the ragged-dot it replaced: the lhs masked per group (row r belongs to group g when
// start[g] <= r < start[g] + group_sizes[g], start the exclusive running sum), one
// dot_general with the group as the batch dimension paired with rhs's group dimension, a sum
// over the groups, computed in f32 for bf16/f16 operands and rounded once to the output type.
// alpha != 1, beta != 0, epilogues and fp8 are refused.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// bf16 lhs [6 rows, 4] ragged along its rows, rhs [3 experts, 4, 5]: the rows are selected into a
// [3, 6, 4] stack (zeros outside each group's rows), both sides widened to f32, a dot_general
// with batching [0] x [0] and contracting [2] x [1], summed over dimension 0, then one convert
// to bf16 that the function returns.
module {
  func.func @main(%lhs: tensor<6x4xbf16>, %rhs: tensor<3x4x5xbf16>, %sizes: tensor<3xi32>) -> tensor<6x5xbf16> {
    %0:2 = stablehlo.custom_call @"__cublas$lt$groupedMatmul"(%lhs, %rhs, %sizes) {backend_config = "{\"grouped_gemm_backend_config\":{\"gemm_backend_config\":{\"alpha_real\":1,\"alpha_imag\":0,\"beta\":0,\"epilogue\":\"DEFAULT\",\"damax_output\":false},\"ragged_dot_dimension_numbers\":{\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"1\"],\"rhs_contracting_dimensions\":[\"1\"],\"lhs_batch_dimensions\":[],\"rhs_batch_dimensions\":[]},\"lhs_ragged_dimensions\":[\"0\"],\"rhs_group_dimensions\":[\"0\"]}}}"} : (tensor<6x4xbf16>, tensor<3x4x5xbf16>, tensor<3xi32>) -> (tensor<6x5xbf16>, tensor<4194304xi8>)
    return %0#0 : tensor<6x5xbf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT: groupedMatmul
// CHECK: %[[ROW:.*]] = stablehlo.iota dim = 1 : tensor<3x6x4xi64>
// CHECK: %[[AFTER_START:.*]] = stablehlo.compare LE, %{{.*}}, %[[ROW]], SIGNED
// CHECK: %[[BEFORE_END:.*]] = stablehlo.compare LT, %[[ROW]], %{{.*}}, SIGNED
// CHECK: %[[MASK:.*]] = stablehlo.and %[[AFTER_START]], %[[BEFORE_END]]
// CHECK: %[[STACK:.*]] = stablehlo.broadcast_in_dim %arg0, dims = [1, 2] : (tensor<6x4xbf16>) -> tensor<3x6x4xbf16>
// CHECK: %[[MASKED:.*]] = stablehlo.select %[[MASK]], %[[STACK]], %{{.*}}
// CHECK: %[[L32:.*]] = stablehlo.convert %[[MASKED]] : (tensor<3x6x4xbf16>) -> tensor<3x6x4xf32>
// CHECK: %[[R32:.*]] = stablehlo.convert %arg1 : (tensor<3x4x5xbf16>) -> tensor<3x4x5xf32>
// CHECK: %[[P:.*]] = stablehlo.dot_general %[[L32]], %[[R32]], batching_dims = [0] x [0], contracting_dims = [2] x [1]{{.*}} -> tensor<3x6x5xf32>
// CHECK: %[[SUM:.*]] = stablehlo.reduce(%[[P]] init: %{{.*}}) applies stablehlo.add across dimensions = [0]
// CHECK: %[[OUT:.*]] = stablehlo.convert %[[SUM]] : (tensor<6x5xf32>) -> tensor<6x5xbf16>
// CHECK: return %[[OUT]]

// -----

// Refused: alpha 2 (the pass writes the plain ragged-dot only; a scaled form is named, not guessed).
module {
  func.func @main(%lhs: tensor<6x4xf32>, %rhs: tensor<3x4x5xf32>, %sizes: tensor<3xi32>) -> tensor<6x5xf32> {
    %0:2 = stablehlo.custom_call @"__cublas$lt$groupedMatmul"(%lhs, %rhs, %sizes) {backend_config = "{\"grouped_gemm_backend_config\":{\"gemm_backend_config\":{\"alpha_real\":2,\"alpha_imag\":0,\"beta\":0,\"epilogue\":\"DEFAULT\"},\"ragged_dot_dimension_numbers\":{\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"1\"],\"rhs_contracting_dimensions\":[\"1\"],\"lhs_batch_dimensions\":[],\"rhs_batch_dimensions\":[]},\"lhs_ragged_dimensions\":[\"0\"],\"rhs_group_dimensions\":[\"0\"]}}}"} : (tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<3xi32>) -> (tensor<6x5xf32>, tensor<4194304xi8>)
    return %0#0 : tensor<6x5xf32>
  }
}
// ERROR: :40:
// ERROR: custom-call __cublas$lt$groupedMatmul
// ERROR: gemm_backend_config.alpha_real=2
// ERROR: a grouped GEMM with alpha ≠ 1 is not supported
