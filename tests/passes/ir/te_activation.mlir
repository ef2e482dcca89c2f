// PASSES: te-activation
// te-activation rewrites Transformer Engine's activation calls in f32.  te_act_lu_ffi
// (x [..., act_len, n], scale, amax) -> (output [..., n], colwise_output, scale_inv,
// colwise_scale_inv, updated_amax): the activation of x[..., 0, :], times the gate's
// function of x[..., 1, :] for gated kinds (act_enum 4 SWIGLU: silu(a) * b).
// te_dact_dbias_quantize_ffi (dz, x, scale, amax) -> (dx [..., act_len, n], ..., dbias,
// workspace): the derivative times dz, dbias the f32 sum over rows.  An act_enum TE does not
// define, or an input whose act_len does not fit it, is refused.

// SWIGLU (act_enum 4) of a bf16 [3, 2, 8]: x split into its two halves along act_len, the
// first through silu (x * sigmoid(x), sigmoid written 1 / (1 + exp(-x)) as in TE's math.h),
// times the second, in bf16 [3, 8].
module {
  func.func @main(%x: tensor<3x2x8xbf16>, %scale: tensor<1xf32>, %amax: tensor<1xf32>) -> tensor<3x8xbf16> {
    %0:5 = stablehlo.custom_call @te_act_lu_ffi(%x, %scale, %amax) {api_version = 4 : i32, mhlo.backend_config = {act_enum = 4 : i64, act_params = {clamped_swiglu = {alpha = 1.702000e+00 : f32, glu_linear_offset = 1.000000e+00 : f32, limit = 7.000000e+00 : f32}}, output_amax_when_no_scaling = false, quantize_layout = 0 : i64, scaling_mode = 0 : i64}} : (tensor<3x2x8xbf16>, tensor<1xf32>, tensor<1xf32>) -> (tensor<3x8xbf16>, tensor<1xbf16>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>)
    return %0#0 : tensor<3x8xbf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[X:.+]] = stablehlo.convert {{.*}} : (tensor<3x2x8xbf16>) -> tensor<3x2x8xf32>
// CHECK-NEXT:  %[[S0:.+]] = stablehlo.slice %[[X]] [0:3, 0:1, 0:8]
// CHECK-NEXT:  %[[A:.+]] = stablehlo.reshape %[[S0]] : (tensor<3x1x8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT:  %[[S1:.+]] = stablehlo.slice %[[X]] [0:3, 1:2, 0:8]
// CHECK-NEXT:  %[[B:.+]] = stablehlo.reshape %[[S1]] : (tensor<3x1x8xf32>) -> tensor<3x8xf32>
// CHECK:       %[[NEG:.+]] = stablehlo.negate %[[A]]
// CHECK-NEXT:  %[[EXP:.+]] = stablehlo.exponential %[[NEG]]
// CHECK-NEXT:  %[[DEN:.+]] = stablehlo.add {{%[a-z_0-9]+}}, %[[EXP]]
// CHECK-NEXT:  %[[SIG:.+]] = stablehlo.divide {{%[a-z_0-9]+}}, %[[DEN]]
// CHECK-NEXT:  %[[SILU:.+]] = stablehlo.multiply %[[A]], %[[SIG]]
// CHECK-NEXT:  %[[Y:.+]] = stablehlo.multiply %[[SILU]], %[[B]]
// CHECK-NEXT:  %[[OUT:.+]] = stablehlo.convert %[[Y]] : (tensor<3x8xf32>) -> tensor<3x8xbf16>
// CHECK:       return {{%[0-9]+}}

// -----

// RELU (act_enum 5) backward with dbias: dx = dz * (x > 0), dbias = the f32 row sum of dx.
module {
  func.func @main(%dz: tensor<4x8xf32>, %x: tensor<4x1x8xf32>, %scale: tensor<1xf32>, %amax: tensor<1xf32>) -> (tensor<4x1x8xf32>, tensor<1x8xf32>) {
    %0:7 = stablehlo.custom_call @te_dact_dbias_quantize_ffi(%dz, %x, %scale, %amax) {api_version = 4 : i32, mhlo.backend_config = {act_enum = 5 : i64, act_params = {clamped_swiglu = {alpha = 1.702000e+00 : f32, glu_linear_offset = 1.000000e+00 : f32, limit = 7.000000e+00 : f32}}, is_dbias = true, output_amax_when_no_scaling = false, quantize_layout = 0 : i64, scaling_mode = 0 : i64}} : (tensor<4x8xf32>, tensor<4x1x8xf32>, tensor<1xf32>, tensor<1xf32>) -> (tensor<4x1x8xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1x8xf32>, tensor<64xui8>)
    return %0#0, %0#5 : tensor<4x1x8xf32>, tensor<1x8xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[X:.+]] = stablehlo.reshape {{.*}} : (tensor<4x1x8xf32>) -> tensor<4x8xf32>
// CHECK:       %[[POSITIVE:.+]] = stablehlo.compare GT, %[[X]], {{.*}}
// CHECK:       %[[STEP:.+]] = stablehlo.select %[[POSITIVE]], {{.*}}
// CHECK-NEXT:  %[[DX:.+]] = stablehlo.multiply %arg0, %[[STEP]] : tensor<4x8xf32>
// CHECK:       %[[SUM:.+]] = stablehlo.reduce(%[[DX]] init: {{.*}}) applies stablehlo.add across dimensions = [0]
// CHECK-NEXT:  %[[DBIAS:.+]] = stablehlo.reshape %[[SUM]] : (tensor<8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT:  return {{%[0-9]+}}, %[[DBIAS]]

// -----

// Refused: act_enum 12 is no NVTE_Activation_Type TE's JAX side writes.
module {
  func.func @main(%x: tensor<3x2x8xbf16>, %scale: tensor<1xf32>, %amax: tensor<1xf32>) -> tensor<3x8xbf16> {
    %0:5 = stablehlo.custom_call @te_act_lu_ffi(%x, %scale, %amax) {api_version = 4 : i32, mhlo.backend_config = {act_enum = 12 : i64, output_amax_when_no_scaling = false, quantize_layout = 0 : i64, scaling_mode = 0 : i64}} : (tensor<3x2x8xbf16>, tensor<1xf32>, tensor<1xf32>) -> (tensor<3x8xbf16>, tensor<1xbf16>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>)
    return %0#0 : tensor<3x8xbf16>
  }
}
// ERROR: te_act_lu_ffi
// ERROR: act_enum 12: NVTE_Activation_Type values converted are

// -----

// Refused: a gated kind (SWIGLU) needs act_len 2; this input has 1.
module {
  func.func @main(%x: tensor<3x1x8xbf16>, %scale: tensor<1xf32>, %amax: tensor<1xf32>) -> tensor<3x8xbf16> {
    %0:5 = stablehlo.custom_call @te_act_lu_ffi(%x, %scale, %amax) {api_version = 4 : i32, mhlo.backend_config = {act_enum = 4 : i64, output_amax_when_no_scaling = false, quantize_layout = 0 : i64, scaling_mode = 0 : i64}} : (tensor<3x1x8xbf16>, tensor<1xf32>, tensor<1xf32>) -> (tensor<3x8xbf16>, tensor<1xbf16>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>)
    return %0#0 : tensor<3x8xbf16>
  }
}
// ERROR: input [3, 1, 8]: expected [..., 2, n] for this act_enum
