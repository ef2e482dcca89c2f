// PASSES: cublas-gemm
// cublas-gemm lowers XLA GPU's cuBLAS / cuBLASLt GEMM calls to stablehlo.dot_general with the
// contracting and batch dimensions of gemm_backend_config.dot_dimension_numbers, then plain
// ops in cuBLAS's order: alpha * P, + beta * C (only when beta != 0), + bias (BIAS*
// epilogues, along the output's minor dimension), AUX = that value (*_AUX epilogues), the
// activation (RELU: maximum with 0; GELU: the tanh approximation), AMAX = max |x| (fp8 with
// damax_output), then for an fp8 D the d_scale and a saturating clamp, and the conversion to
// D's type; fp8 operands are widened to f32 and a_scale * b_scale multiplies the product.
// The workspace result goes. A config that contradicts the call's operands is refused.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

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

// fp8 with RELU, an fp8 D and AMAX: both fp8 operands widened to f32 (exact), the product
// times a_scale * b_scale, the relu of that; AMAX = max |relu| (before d_scale); D = the relu
// times d_scale, clamped to +-448 (f8e4m3fn's range) and converted.
module {
  func.func @main(%a: tensor<16x16xf8E4M3FN>, %b: tensor<16x16xf8E4M3FN>, %as: tensor<f32>, %bs: tensor<f32>, %ds: tensor<f32>) -> (tensor<16x16xf8E4M3FN>, tensor<f32>) {
    %0:3 = stablehlo.custom_call @"__cublas$lt$matmul$f8"(%a, %b, %as, %bs, %ds) {backend_config = "{\"gemm_backend_config\":{\"alpha_real\":1.0,\"alpha_imag\":0.0,\"beta\":0.0,\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"1\"],\"rhs_contracting_dimensions\":[\"1\"],\"lhs_batch_dimensions\":[],\"rhs_batch_dimensions\":[]},\"precision_config\":{\"operand_precision\":[\"DEFAULT\",\"DEFAULT\"],\"algorithm\":\"ALG_UNSET\"},\"epilogue\":\"RELU\",\"damax_output\":true}}"} : (tensor<16x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<16x16xf8E4M3FN>, tensor<f32>, tensor<1024xi8>)
    return %0#0, %0#1 : tensor<16x16xf8E4M3FN>, tensor<f32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK: %[[A:.*]] = stablehlo.convert %arg0 : (tensor<16x16xf8E4M3FN>) -> tensor<16x16xf32>
// CHECK: %[[B:.*]] = stablehlo.convert %arg1 : (tensor<16x16xf8E4M3FN>) -> tensor<16x16xf32>
// CHECK: %[[P:.*]] = stablehlo.dot_general %[[A]], %[[B]], contracting_dims = [1] x [1]
// CHECK: %[[AB:.*]] = stablehlo.multiply %arg2, %arg3 : tensor<f32>
// CHECK: %[[ABS_:.*]] = stablehlo.broadcast_in_dim %[[AB]], dims = []
// CHECK: %[[X:.*]] = stablehlo.multiply %[[P]], %[[ABS_]]
// CHECK: %[[RELU:.*]] = stablehlo.maximum %[[X]], %{{.*}}
// CHECK: %[[MAG:.*]] = stablehlo.abs %[[RELU]]
// CHECK: %[[AMAX:.*]] = stablehlo.reduce(%[[MAG]] init: %{{.*}}) applies stablehlo.maximum across dimensions = [0, 1]
// CHECK: %[[DS:.*]] = stablehlo.broadcast_in_dim %arg4, dims = []
// CHECK: %[[SCALED:.*]] = stablehlo.multiply %[[RELU]], %[[DS]]
// CHECK-DAG: %[[LO:.*]] = stablehlo.constant dense<-4.480000e+02>
// CHECK-DAG: %[[HI:.*]] = stablehlo.constant dense<4.480000e+02>
// CHECK: %[[SAT:.*]] = stablehlo.clamp %[[LO]], %[[SCALED]], %[[HI]]
// CHECK: %[[D:.*]] = stablehlo.convert %[[SAT]] : (tensor<16x16xf32>) -> tensor<16x16xf8E4M3FN>
// CHECK: return %[[D]], %[[AMAX]]

// -----

// BIAS_GELU_AUX: AUX (the second result) is the biased product before the activation; D is
// GELU's tanh approximation of that same value.
module {
  func.func @main(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %bias: tensor<5xf32>) -> (tensor<3x5xf32>, tensor<3x5xf32>) {
    %0:3 = stablehlo.custom_call @"__cublas$lt$matmul"(%a, %b, %bias) {backend_config = "{\"gemm_backend_config\":{\"alpha_real\":1.0,\"alpha_imag\":0.0,\"beta\":0.0,\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"1\"],\"rhs_contracting_dimensions\":[\"0\"],\"lhs_batch_dimensions\":[],\"rhs_batch_dimensions\":[]},\"precision_config\":{\"operand_precision\":[\"DEFAULT\",\"DEFAULT\"],\"algorithm\":\"ALG_UNSET\"},\"epilogue\":\"BIAS_GELU_AUX\"}}"} : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> (tensor<3x5xf32>, tensor<3x5xf32>, tensor<1024xi8>)
    return %0#0, %0#1 : tensor<3x5xf32>, tensor<3x5xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK: %[[P:.*]] = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0]
// CHECK: %[[BIAS:.*]] = stablehlo.broadcast_in_dim %arg2, dims = [1]
// CHECK: %[[PRE:.*]] = stablehlo.add %[[P]], %[[BIAS]]
// CHECK: stablehlo.tanh
// CHECK: %[[GELU:.*]] = stablehlo.multiply %{{.*}}, %{{.*}}
// CHECK: return %[[GELU]], %[[PRE]]

// -----

// Refused: beta = 0.5 asks for an addend C, but the call has only A and B.
module {
  func.func @main(%a: tensor<3x4xf32>, %b: tensor<4x2xf32>) -> tensor<3x2xf32> {
    %0:2 = stablehlo.custom_call @"__cublas$lt$matmul"(%a, %b) {backend_config = "{\"gemm_backend_config\":{\"alpha_real\":1.0,\"alpha_imag\":0.0,\"beta\":0.5,\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"1\"],\"rhs_contracting_dimensions\":[\"0\"],\"lhs_batch_dimensions\":[],\"rhs_batch_dimensions\":[]},\"precision_config\":{\"operand_precision\":[\"DEFAULT\",\"DEFAULT\"],\"algorithm\":\"ALG_UNSET\"},\"epilogue\":\"DEFAULT\"}}"} : (tensor<3x4xf32>, tensor<4x2xf32>) -> (tensor<3x2xf32>, tensor<1024xi8>)
    return %0#0 : tensor<3x2xf32>
  }
}
// ERROR: :101:
// ERROR: custom-call __cublas$lt$matmul
// ERROR: gemm_backend_config.beta=0.5 but the call has no addend operand C
