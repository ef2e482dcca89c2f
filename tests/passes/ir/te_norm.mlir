// PASSES: te-norm
// te-norm rewrites Transformer Engine's norm calls in f32 over rows (x collapsed to
// [x.size / gamma.size, gamma.size]).  te_norm_forward_ffi (x, scale, amax, gamma, beta) ->
// (output, colwise_output, scale_inv, colwise_scale_inv, updated_amax, mu, rsigma,
// workspace): LayerNorm (norm_type 0) y = gamma * (x - mu) * rsigma + beta, RMSNorm (1)
// y = gamma * x * rsigma, rsigma = rsqrt(mean of squares + epsilon), gamma + 1 when
// zero_centered_gamma.  te_norm_backward_ffi (dz, x, mu, rsigma, gamma) -> (dx, dgamma,
// dbeta, workspace).  Block-scaled fused norms and unknown norm types are refused.

// LayerNorm of a bf16 [2, 3, 8] with gamma [8]: rows [6, 8] in f32, the row mean
// subtracted, rsigma = rsqrt(mean((x - mu)^2) + 1e-5), times gamma, plus beta, in bf16;
// mu and rsigma are returned per row.
module {
  func.func @main(%x: tensor<2x3x8xbf16>, %scale: tensor<1xf32>, %amax: tensor<1xf32>, %gamma: tensor<8xbf16>, %beta: tensor<8xbf16>) -> (tensor<2x3x8xbf16>, tensor<6xf32>, tensor<2x3xf32>) {
    %0:8 = stablehlo.custom_call @te_norm_forward_ffi(%x, %scale, %amax, %gamma, %beta) {api_version = 4 : i32, mhlo.backend_config = {epsilon = 1.000000e-05 : f64, norm_type = 0 : i64, output_amax_when_no_scaling = false, quantize_layout = 0 : i64, scaling_mode = 0 : i64, sm_margin = 0 : i64, zero_centered_gamma = false}} : (tensor<2x3x8xbf16>, tensor<1xf32>, tensor<1xf32>, tensor<8xbf16>, tensor<8xbf16>) -> (tensor<2x3x8xbf16>, tensor<1xbf16>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<6xf32>, tensor<2x3xf32>, tensor<256xui8>)
    return %0#0, %0#5, %0#6 : tensor<2x3x8xbf16>, tensor<6xf32>, tensor<2x3xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[ROWS:.+]] = stablehlo.reshape %arg0 : (tensor<2x3x8xbf16>) -> tensor<6x8xbf16>
// CHECK-NEXT:  %[[X:.+]] = stablehlo.convert %[[ROWS]] : (tensor<6x8xbf16>) -> tensor<6x8xf32>
// CHECK:       stablehlo.reduce(%[[X]] init: {{.*}}) applies stablehlo.add across dimensions = [1]
// CHECK:       %[[MU:.+]] = stablehlo.divide {{.*}} : tensor<6xf32>
// CHECK-NEXT:  %[[MUS:.+]] = stablehlo.broadcast_in_dim %[[MU]], dims = [0] : (tensor<6xf32>) -> tensor<6x8xf32>
// CHECK-NEXT:  %[[CENTERED:.+]] = stablehlo.subtract %[[X]], %[[MUS]]
// CHECK-NEXT:  %[[SQ:.+]] = stablehlo.multiply %[[CENTERED]], %[[CENTERED]]
// CHECK:       %[[EPS:.+]] = stablehlo.constant dense<9.99999974E-6> : tensor<6xf32>
// CHECK-NEXT:  %[[VAR:.+]] = stablehlo.add {{.*}}, %[[EPS]]
// CHECK-NEXT:  %[[RSIGMA:.+]] = stablehlo.rsqrt %[[VAR]]
// CHECK-NEXT:  %[[RS:.+]] = stablehlo.broadcast_in_dim %[[RSIGMA]], dims = [0]
// CHECK-NEXT:  %[[NORMED:.+]] = stablehlo.multiply %[[RS]], %[[CENTERED]]
// CHECK:       %[[SCALED:.+]] = stablehlo.multiply {{.*}}, %[[NORMED]]
// CHECK:       %[[Y:.+]] = stablehlo.add %[[SCALED]], {{.*}}
// CHECK-NEXT:  stablehlo.convert %[[Y]] : (tensor<6x8xf32>) -> tensor<6x8xbf16>
// CHECK:       %[[RSIGMA_OUT:.+]] = stablehlo.reshape %[[RSIGMA]] : (tensor<6xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:  return {{%[0-9]+}}, %[[MU]], %[[RSIGMA_OUT]]

// -----

// RMSNorm with zero-centered gamma: no mean subtracted (the squares are of x itself), no beta,
// gamma + 1.
module {
  func.func @main(%x: tensor<4x8xf32>, %scale: tensor<1xf32>, %amax: tensor<1xf32>, %gamma: tensor<8xf32>, %beta: tensor<8xf32>) -> tensor<4x8xf32> {
    %0:8 = stablehlo.custom_call @te_norm_forward_ffi(%x, %scale, %amax, %gamma, %beta) {api_version = 4 : i32, mhlo.backend_config = {epsilon = 1.000000e-06 : f64, norm_type = 1 : i64, output_amax_when_no_scaling = false, quantize_layout = 0 : i64, scaling_mode = 0 : i64, sm_margin = 0 : i64, zero_centered_gamma = true}} : (tensor<4x8xf32>, tensor<1xf32>, tensor<1xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<4xf32>, tensor<4xf32>, tensor<256xui8>)
    return %0#0 : tensor<4x8xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK-NOT:   stablehlo.subtract
// CHECK:       %[[SQ:.+]] = stablehlo.multiply %arg0, %arg0
// CHECK:       %[[RSIGMA:.+]] = stablehlo.rsqrt
// CHECK:       %[[NORMED:.+]] = stablehlo.multiply {{.*}}, %arg0 :
// CHECK:       %[[ONE:.+]] = stablehlo.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK-NEXT:  %[[G1:.+]] = stablehlo.add %arg3, %[[ONE]]
// CHECK-NEXT:  %[[G:.+]] = stablehlo.broadcast_in_dim %[[G1]], dims = [1]
// CHECK-NEXT:  %[[Y:.+]] = stablehlo.multiply %[[G]], %[[NORMED]]
// CHECK-NOT:   stablehlo.add
// CHECK:       return %[[Y]]

// -----

// Refused: an MXFP8 fused norm (block scales).
module {
  func.func @main(%x: tensor<4x32xbf16>, %scale: tensor<1xf32>, %amax: tensor<1xf32>, %gamma: tensor<32xbf16>, %beta: tensor<32xbf16>) -> tensor<4x32xf8E4M3FN> {
    %0:8 = stablehlo.custom_call @te_norm_forward_ffi(%x, %scale, %amax, %gamma, %beta) {api_version = 4 : i32, mhlo.backend_config = {epsilon = 1.000000e-06 : f64, norm_type = 1 : i64, output_amax_when_no_scaling = false, quantize_layout = 0 : i64, scaling_mode = 2 : i64, sm_margin = 0 : i64, zero_centered_gamma = false}} : (tensor<4x32xbf16>, tensor<1xf32>, tensor<1xf32>, tensor<32xbf16>, tensor<32xbf16>) -> (tensor<4x32xf8E4M3FN>, tensor<1xf8E4M3FN>, tensor<4x1xf8E8M0FNU>, tensor<1xf8E8M0FNU>, tensor<1xf32>, tensor<4xf32>, tensor<4xf32>, tensor<256xui8>)
    return %0#0 : tensor<4x32xf8E4M3FN>
  }
}
// ERROR: te_norm_forward_ffi
// ERROR: scaling_mode MXFP8_1D_SCALING: fused norm + quantize is converted for NO_SCALING and DELAYED_TENSOR_SCALING
