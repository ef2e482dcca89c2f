// PASSES: cudnn-fmha
// cudnn-fmha lowers XLA's cuDNN flash-attention calls (__cudnn$fmha*, from
// jax.nn.dot_product_attention(implementation="cudnn")) to portable blockwise attention:
// loops over query and key blocks; per block S = Q . K^T (bmm1's contracting dims), times
// fmha_scale, masked to -inf where the mask excludes a key (CAUSAL: key position <= query
// position), an online softmax (running max, exp, running sum) and P . V; at the end O
// divided by the sum, in the call's logical [B, N, T, H] result. Mask types cuDNN has but the
// pass does not write, and fp8 attention, are refused by name.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// BTNH Q, K, V [1, 4 tokens, 2 heads, 8], fmha_scale 0.25, CAUSAL: the scores are the dot of
// the query and key blocks over H, scaled by 0.25 before the causal select puts -inf in
// them; the probabilities' dot with V contracts the key dimension; the result is the
// normalized O.
module {
  func.func @main(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x2x8xf32>, %v: tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32> {
    %0:2 = stablehlo.custom_call @"__cudnn$fmhaSoftmax"(%q, %k, %v) {backend_config = "{\"cudnn_fmha_backend_config\":{\"fmha_scale\":0.25,\"mask_type\":\"CAUSAL\",\"bmm1_dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"3\"],\"rhs_contracting_dimensions\":[\"3\"],\"lhs_batch_dimensions\":[\"0\",\"2\"],\"rhs_batch_dimensions\":[\"0\",\"2\"]},\"bmm2_dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"3\"],\"rhs_contracting_dimensions\":[\"1\"],\"lhs_batch_dimensions\":[\"0\",\"1\"],\"rhs_batch_dimensions\":[\"0\",\"2\"]},\"dropout_rate\":0,\"seed\":42}}"} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<0xui8>)
    return %0#0 : tensor<1x2x4x8xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT: __cudnn
// CHECK: stablehlo.while
// CHECK: stablehlo.while
// CHECK: %[[CAUSAL:.*]] = stablehlo.compare LE,
// CHECK: stablehlo.and %{{.*}}, %[[CAUSAL]]
// CHECK: %[[S:.*]] = stablehlo.dot_general %{{.*}}, %{{.*}}, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3]{{.*}} -> tensor<1x2x4x4xf32>
// CHECK: %[[SCALE:.*]] = stablehlo.constant dense<2.500000e-01>
// CHECK: %[[SS:.*]] = stablehlo.multiply %[[S]], %[[SCALE]]
// CHECK: %[[NEGINF:.*]] = stablehlo.constant dense<0xFF800000>
// CHECK: %[[MASKED:.*]] = stablehlo.select %{{.*}}, %[[SS]], %[[NEGINF]]
// CHECK: stablehlo.reduce(%[[MASKED]] init: %{{.*}}) applies stablehlo.maximum across dimensions = [3]
// CHECK: %[[SHIFTED:.*]] = stablehlo.subtract %[[MASKED]], %{{.*}}
// CHECK: %[[P:.*]] = stablehlo.exponential %[[SHIFTED]]
// CHECK: stablehlo.dot_general %[[P]], %{{.*}}, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2]{{.*}} -> tensor<1x2x4x8xf32>
// CHECK: stablehlo.divide
// CHECK: return %{{.*}} : tensor<1x2x4x8xf32>

// -----

// NO_MASK: the same scores and softmax, but no causal position comparison.
module {
  func.func @main(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x2x8xf32>, %v: tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32> {
    %0:2 = stablehlo.custom_call @"__cudnn$fmhaSoftmax"(%q, %k, %v) {backend_config = "{\"cudnn_fmha_backend_config\":{\"fmha_scale\":0.25,\"mask_type\":\"NO_MASK\",\"bmm1_dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"3\"],\"rhs_contracting_dimensions\":[\"3\"],\"lhs_batch_dimensions\":[\"0\",\"2\"],\"rhs_batch_dimensions\":[\"0\",\"2\"]},\"bmm2_dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"3\"],\"rhs_contracting_dimensions\":[\"1\"],\"lhs_batch_dimensions\":[\"0\",\"1\"],\"rhs_batch_dimensions\":[\"0\",\"2\"]},\"dropout_rate\":0,\"seed\":42}}"} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<0xui8>)
    return %0#0 : tensor<1x2x4x8xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT: __cudnn
// CHECK-NOT: stablehlo.compare LE
// CHECK: stablehlo.dot_general %{{.*}}, %{{.*}}, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3]
// CHECK-NOT: stablehlo.compare LE
// CHECK: stablehlo.exponential

// -----

// Refused by name: the ALIBI mask type, which the pass does not write.
module {
  func.func @main(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x2x8xf32>, %v: tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32> {
    %0:2 = stablehlo.custom_call @"__cudnn$fmhaSoftmax"(%q, %k, %v) {backend_config = "{\"cudnn_fmha_backend_config\":{\"fmha_scale\":0.25,\"mask_type\":\"ALIBI\",\"bmm1_dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"3\"],\"rhs_contracting_dimensions\":[\"3\"],\"lhs_batch_dimensions\":[\"0\",\"2\"],\"rhs_batch_dimensions\":[\"0\",\"2\"]},\"bmm2_dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"3\"],\"rhs_contracting_dimensions\":[\"1\"],\"lhs_batch_dimensions\":[\"0\",\"1\"],\"rhs_batch_dimensions\":[\"0\",\"2\"]},\"dropout_rate\":0,\"seed\":42}}"} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<0xui8>)
    return %0#0 : tensor<1x2x4x8xf32>
  }
}
// ERROR: :60:
// ERROR: custom-call __cudnn$fmhaSoftmax
// ERROR: mask_type ALIBI is not supported (NO_MASK, PADDING, CAUSAL, PADDING_CAUSAL are)
