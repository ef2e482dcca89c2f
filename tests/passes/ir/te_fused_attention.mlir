// PASSES: te-fused-attention
// te-fused-attention rewrites Transformer Engine's fused attention calls
// (te_fused_attn_forward_ffi / _backward_ffi; config in flat attributes: heads, GQA groups,
// layout, mask_type, bias_type, scaling_factor, window, dropout) as blockwise portable
// attention: a loop over query blocks, an inner loop over key blocks with an online softmax
// (running max, exp, running sum), softmax_aux = max + log(sum) per query.  Configurations
// outside TE's enums (mask, bias, layout) are refused by name.

// Causal (mask_type 2) forward, BSHD (qkv_layout 9), two query heads sharing one KV head:
// scores q.k^T contract the head dim, the causal mask compares query and key positions
// (key <= query), the probabilities contract with v over keys, and the output and the log-
// sum-exp aux come out of the outer loop.  The seed's words pass to the rng_state output
// (unused here).
module {
  func.func @main(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x1x8xf32>, %v: tensor<1x4x1x8xf32>, %bias: tensor<0xf32>, %qcu: tensor<2xi32>, %kvcu: tensor<2xi32>, %qoff: tensor<0xi32>, %koff: tensor<0xi32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4x1xf32>) {
    %seed = stablehlo.constant dense<[7, 11]> : tensor<2xui32>
    %e = stablehlo.constant dense<> : tensor<0xf32>
    %0:4 = stablehlo.custom_call @te_fused_attn_forward_ffi(%q, %k, %v, %bias, %seed, %qcu, %kvcu, %qoff, %koff, %e, %e, %e, %e) {api_version = 4 : i32, mhlo.backend_config = {attn_heads = 2 : i64, bias_batch = 0 : i64, bias_heads = 0 : i64, bias_type = 0 : i64, deterministic = false, dropout_probability = 0.000000e+00 : f64, input_batch = 1 : i64, is_training = true, kv_max_seqlen = 4 : i64, mask_type = 2 : i64, max_segments_per_seq = 1 : i64, num_gqa_groups = 1 : i64, q_max_seqlen = 4 : i64, qk_head_dim = 8 : i64, qkv_layout = 9 : i64, scaling_factor = 0.35355339059327373 : f64, v_head_dim = 8 : i64, window_size_left = -1 : i64, window_size_right = -1 : i64}} : (tensor<1x4x2x8xf32>, tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>, tensor<0xf32>, tensor<2xui32>, tensor<2xi32>, tensor<2xi32>, tensor<0xi32>, tensor<0xi32>, tensor<0xf32>, tensor<0xf32>, tensor<0xf32>, tensor<0xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4x1xf32>, tensor<2x4xui32>, tensor<1xui8>)
    return %0#0, %0#1 : tensor<1x4x2x8xf32>, tensor<1x2x4x1xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[QUERY_BLOCKS:.+]]:11 = stablehlo.while({{.*}} = %arg0, {{.*}} = %arg1, {{.*}} = %arg2,
// CHECK:       stablehlo.while
// CHECK:       stablehlo.compare LE, {{.*}} : (tensor<1x4x4xi32>, tensor<1x4x4xi32>)
// CHECK:       %[[SCORES:.+]] = stablehlo.dot_general {{.*}}, contracting_dims = [3] x [3] : (tensor<1x1x8x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x8x4xf32>
// CHECK:       stablehlo.reduce({{.*}}) applies stablehlo.maximum across dimensions = [3]
// CHECK:       %[[P:.+]] = stablehlo.exponential {{.*}} : tensor<1x1x8x4xf32>
// CHECK:       stablehlo.reduce(%[[P]] init: {{.*}}) applies stablehlo.add across dimensions = [3]
// CHECK:       stablehlo.dot_general %[[P]], {{.*}}, contracting_dims = [3] x [2] : (tensor<1x1x8x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x8x8xf32>
// CHECK:       stablehlo.log
// CHECK:       %[[AUX:.+]] = stablehlo.reshape %[[QUERY_BLOCKS]]#3 : (tensor<1x2x4xf32>) -> tensor<1x2x4x1xf32>
// CHECK:       return %[[QUERY_BLOCKS]]#2, %[[AUX]]

// -----

// Refused: mask_type 7 is no NVTE_Mask_Type.
module {
  func.func @main(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x1x8xf32>, %v: tensor<1x4x1x8xf32>, %bias: tensor<0xf32>, %qcu: tensor<2xi32>, %kvcu: tensor<2xi32>, %qoff: tensor<0xi32>, %koff: tensor<0xi32>) -> tensor<1x4x2x8xf32> {
    %seed = stablehlo.constant dense<[7, 11]> : tensor<2xui32>
    %e = stablehlo.constant dense<> : tensor<0xf32>
    %0:4 = stablehlo.custom_call @te_fused_attn_forward_ffi(%q, %k, %v, %bias, %seed, %qcu, %kvcu, %qoff, %koff, %e, %e, %e, %e) {api_version = 4 : i32, mhlo.backend_config = {attn_heads = 2 : i64, bias_batch = 0 : i64, bias_heads = 0 : i64, bias_type = 0 : i64, deterministic = false, dropout_probability = 0.000000e+00 : f64, input_batch = 1 : i64, is_training = true, kv_max_seqlen = 4 : i64, mask_type = 7 : i64, max_segments_per_seq = 1 : i64, num_gqa_groups = 1 : i64, q_max_seqlen = 4 : i64, qk_head_dim = 8 : i64, qkv_layout = 9 : i64, scaling_factor = 0.35355339059327373 : f64, v_head_dim = 8 : i64, window_size_left = -1 : i64, window_size_right = -1 : i64}} : (tensor<1x4x2x8xf32>, tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>, tensor<0xf32>, tensor<2xui32>, tensor<2xi32>, tensor<2xi32>, tensor<0xi32>, tensor<0xi32>, tensor<0xf32>, tensor<0xf32>, tensor<0xf32>, tensor<0xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4x1xf32>, tensor<2x4xui32>, tensor<1xui8>)
    return %0#0 : tensor<1x4x2x8xf32>
  }
}
// ERROR: te_fused_attn_forward_ffi
// ERROR: mask_type=7 is not an NVTE_Mask_Type (0-5)

// -----

// Refused: ALiBi bias (bias_type 3).
module {
  func.func @main(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x1x8xf32>, %v: tensor<1x4x1x8xf32>, %bias: tensor<0xf32>, %qcu: tensor<2xi32>, %kvcu: tensor<2xi32>, %qoff: tensor<0xi32>, %koff: tensor<0xi32>) -> tensor<1x4x2x8xf32> {
    %seed = stablehlo.constant dense<[7, 11]> : tensor<2xui32>
    %e = stablehlo.constant dense<> : tensor<0xf32>
    %0:4 = stablehlo.custom_call @te_fused_attn_forward_ffi(%q, %k, %v, %bias, %seed, %qcu, %kvcu, %qoff, %koff, %e, %e, %e, %e) {api_version = 4 : i32, mhlo.backend_config = {attn_heads = 2 : i64, bias_batch = 0 : i64, bias_heads = 0 : i64, bias_type = 3 : i64, deterministic = false, dropout_probability = 0.000000e+00 : f64, input_batch = 1 : i64, is_training = true, kv_max_seqlen = 4 : i64, mask_type = 0 : i64, max_segments_per_seq = 1 : i64, num_gqa_groups = 1 : i64, q_max_seqlen = 4 : i64, qk_head_dim = 8 : i64, qkv_layout = 9 : i64, scaling_factor = 0.35355339059327373 : f64, v_head_dim = 8 : i64, window_size_left = -1 : i64, window_size_right = -1 : i64}} : (tensor<1x4x2x8xf32>, tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>, tensor<0xf32>, tensor<2xui32>, tensor<2xi32>, tensor<2xi32>, tensor<0xi32>, tensor<0xi32>, tensor<0xf32>, tensor<0xf32>, tensor<0xf32>, tensor<0xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4x1xf32>, tensor<2x4xui32>, tensor<1xui8>)
    return %0#0 : tensor<1x4x2x8xf32>
  }
}
// ERROR: bias_type=3 (ALiBi) is not supported
