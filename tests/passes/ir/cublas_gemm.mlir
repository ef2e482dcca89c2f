// PASSES: cublas-gemm
// cublas-gemm lowers XLA GPU's cuBLAS / cuBLASLt GEMM calls to stablehlo.dot_general with the
// contracting and batch dimensions of gemm_backend_config.dot_dimension_numbers, then plain
// ops in cuBLAS's order: alpha * P, + beta * C (only when beta != 0), + bias (BIAS*
// epilogues, along the output's minor dimension), the activation (RELU: maximum with 0),
// then the conversion to D's type. The workspace result goes. A config that contradicts the
// call's operands is refused.

// cuBLASLt, BIAS_RELU, alpha 2.5, beta 0.5, B transposed (rhs contracting dimension 1):
// relu(2.5 * (A . B^T) + 0.5 * C + bias). Alpha scales the product only, not C nor the bias;
// the relu is applied to the sum that holds all three.
module {
  func.func @main(%a: tensor<3x4xf32>, %b: tensor<2x4xf32>, %c: tensor<3x2xf32>, %bias: tensor<2xf32>) -> tensor<3x2xf32> {
    %0:2 = stablehlo.custom_call @"__cublas$lt$matmul"(%a, %b, %c, %bias) {backend_config = "{\"gemm_backend_config\":{\"alpha_real\":2.5,\"alpha_imag\":0.0,\"beta\":0.5,\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"1\"],\"rhs_contracting_dimensions\":[\"1\"],\"lhs_batch_dimensions\":[],\"rhs_batch_dimensions\":[]},\"precision_config\":{\"operand_precision\":[\"DEFAULT\",\"DEFAULT\"],\"algorithm\":\"ALG_UNSET\"},\"epilogue\":\"BIAS_RELU\"}}"} : (tensor<3x4xf32>, tensor<2x4xf32>, tensor<3x2xf32>, tensor<2xf32>) -> (tensor<3x2xf32>, tensor<1024xi8>)
    return %0#0 : tensor<3x2xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT: __cublas
// CHECK: %[[P:.*]] = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [1]{{.*}} -> tensor<3x2xf32>
// CHECK: %[[ALPHA:.*]] = stablehlo.constant dense<2.500000e+00>
// CHECK: %[[SCALED:.*]] = stablehlo.multiply %[[P]], %[[ALPHA]]
// CHECK: %[[BETA:.*]] = stablehlo.constant dense<5.000000e-01>
// CHECK: %[[BC:.*]] = stablehlo.multiply %arg2, %[[BETA]]
// CHECK: %[[SUM:.*]] = stablehlo.add %[[SCALED]], %[[BC]]
// CHECK: %[[BIAS:.*]] = stablehlo.broadcast_in_dim %arg3, dims = [1] : (tensor<2xf32>) -> tensor<3x2xf32>
// CHECK: %[[BIASED:.*]] = stablehlo.add %[[SUM]], %[[BIAS]]
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00>
// CHECK: %[[RELU:.*]] = stablehlo.maximum %[[BIASED]], %[[ZERO]]
// CHECK: return %[[RELU]]

// -----

// Legacy cuBLAS, batched (batch dimension 0 of both, A's dimension 2 contracted with B's 1),
// alpha 1 and beta 0: the dot_general alone, no scaling and no addend; the workspace goes.
module {
  func.func @main(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
    %0:2 = stablehlo.custom_call @"__cublas$gemm"(%a, %b) {backend_config = "{\"gemm_backend_config\":{\"alpha_real\":1.0,\"alpha_imag\":0.0,\"beta\":0.0,\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"2\"],\"rhs_contracting_dimensions\":[\"1\"],\"lhs_batch_dimensions\":[\"0\"],\"rhs_batch_dimensions\":[\"0\"]},\"precision_config\":{\"operand_precision\":[\"DEFAULT\",\"DEFAULT\"],\"algorithm\":\"ALG_UNSET\"},\"epilogue\":\"DEFAULT\"}}"} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> (tensor<2x3x5xf32>, tensor<1024xi8>)
    return %0#0 : tensor<2x3x5xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[P:.*]] = stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], contracting_dims = [2] x [1]{{.*}} -> tensor<2x3x5xf32>
// CHECK-NEXT: return %[[P]]

// -----

// Refused: beta = 0.5 asks for an addend C, but the call has only A and B.
module {
  func.func @main(%a: tensor<3x4xf32>, %b: tensor<4x2xf32>) -> tensor<3x2xf32> {
    %0:2 = stablehlo.custom_call @"__cublas$lt$matmul"(%a, %b) {backend_config = "{\"gemm_backend_config\":{\"alpha_real\":1.0,\"alpha_imag\":0.0,\"beta\":0.5,\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"1\"],\"rhs_contracting_dimensions\":[\"0\"],\"lhs_batch_dimensions\":[],\"rhs_batch_dimensions\":[]},\"precision_config\":{\"operand_precision\":[\"DEFAULT\",\"DEFAULT\"],\"algorithm\":\"ALG_UNSET\"},\"epilogue\":\"DEFAULT\"}}"} : (tensor<3x4xf32>, tensor<4x2xf32>) -> (tensor<3x2xf32>, tensor<1024xi8>)
    return %0#0 : tensor<3x2xf32>
  }
}
// ERROR: (custom-call __cublas$lt$matmul): gemm_backend_config.beta=0.5 but the call has no addend operand C
