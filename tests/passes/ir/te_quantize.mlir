// PASSES: te-quantize
// te-quantize rewrites Transformer Engine's quantize and dequantize calls as casts.
// te_dbias_quantize_ffi (x, scale, amax, sr_rng_state, post_rht_amax, rht_matrix) ->
// (output, colwise_output, scale_inv, colwise_scale_inv, updated_amax, dbias, workspace):
// x collapsed to [m, n] at flatten_axis; tensor scaling writes saturate(x * scale) in fp8,
// scale_inv = 1 / scale, updated_amax = max(amax, max |x|), dbias = sum of rows in f32.
// te_dequantize_ffi (x, amax, scale, scale_inv) -> x * scale_inv.  NVFP4's stochastic
// rounding and Hadamard transform are refused by name.

// Delayed tensor scaling (scaling_mode 1) of a bf16 [2, 3, 8] at flatten_axis -1 with dbias:
// x collapsed to [6, 8] in f32, scaled, clamped to +-448 (e4m3's largest), cast to fp8;
// scale_inv = 1 / scale; the new amax is the max of the old and of |x|; dbias sums rows.
module {
  func.func @main(%x: tensor<2x3x8xbf16>, %scale: tensor<1xf32>, %amax: tensor<1xf32>, %sr: tensor<0xui32>, %ra: tensor<0xf32>, %rht: tensor<0xbf16>) -> (tensor<2x3x8xf8E4M3FN>, tensor<1xf32>, tensor<1xf32>, tensor<8xbf16>) {
    %0:7 = stablehlo.custom_call @te_dbias_quantize_ffi(%x, %scale, %amax, %sr, %ra, %rht) {api_version = 4 : i32, mhlo.backend_config = {flatten_axis = -1 : i64, is_dbias = true, q_layout = 0 : i64, scaling_mode = 1 : i64, stochastic_rounding = false, use_rht = false}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [4], operand_index = 2, operand_tuple_indices = []>]} : (tensor<2x3x8xbf16>, tensor<1xf32>, tensor<1xf32>, tensor<0xui32>, tensor<0xf32>, tensor<0xbf16>) -> (tensor<2x3x8xf8E4M3FN>, tensor<1xf8E4M3FN>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<8xbf16>, tensor<64xui8>)
    return %0#0, %0#2, %0#4, %0#5 : tensor<2x3x8xf8E4M3FN>, tensor<1xf32>, tensor<1xf32>, tensor<8xbf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[FLAT:.+]] = stablehlo.reshape %arg0 : (tensor<2x3x8xbf16>) -> tensor<6x8xbf16>
// CHECK-NEXT:  %[[X:.+]] = stablehlo.convert %[[FLAT]] : (tensor<6x8xbf16>) -> tensor<6x8xf32>
// CHECK:       %[[S:.+]] = stablehlo.reshape %arg1 : (tensor<1xf32>) -> tensor<f32>
// CHECK:       %[[SCALED:.+]] = stablehlo.multiply %[[X]], {{.*}}
// CHECK-NEXT:  %[[LOW:.+]] = stablehlo.constant dense<-4.480000e+02>
// CHECK-NEXT:  %[[HIGH:.+]] = stablehlo.constant dense<4.480000e+02>
// CHECK-NEXT:  %[[SAT:.+]] = stablehlo.clamp %[[LOW]], %[[SCALED]], %[[HIGH]]
// CHECK-NEXT:  %[[Q:.+]] = stablehlo.convert %[[SAT]] : (tensor<6x8xf32>) -> tensor<6x8xf8E4M3FN>
// CHECK-NEXT:  %[[OUT:.+]] = stablehlo.reshape %[[Q]] : (tensor<6x8xf8E4M3FN>) -> tensor<2x3x8xf8E4M3FN>
// CHECK:       %[[INV:.+]] = stablehlo.divide {{.*}}, %[[S]] : tensor<f32>
// CHECK-NEXT:  %[[SCALE_INV:.+]] = stablehlo.broadcast_in_dim %[[INV]]
// CHECK:       %[[OLD:.+]] = stablehlo.reshape %arg2
// CHECK-NEXT:  %[[ABS:.+]] = stablehlo.abs %[[X]]
// CHECK:       %[[MAX_ABS:.+]] = stablehlo.reduce(%[[ABS]] init: {{.*}}) applies stablehlo.maximum across dimensions = [0, 1]
// CHECK-NEXT:  %[[NEW:.+]] = stablehlo.maximum %[[OLD]], %[[MAX_ABS]]
// CHECK-NEXT:  %[[AMAX:.+]] = stablehlo.broadcast_in_dim %[[NEW]]
// CHECK:       %[[ROWSUM:.+]] = stablehlo.reduce(%[[X]] init: {{.*}}) applies stablehlo.add across dimensions = [0] : (tensor<6x8xf32>, tensor<f32>) -> tensor<8xf32>
// CHECK-NEXT:  %[[DBIAS:.+]] = stablehlo.convert %[[ROWSUM]] : (tensor<8xf32>) -> tensor<8xbf16>
// CHECK-NEXT:  return %[[OUT]], %[[SCALE_INV]], %[[AMAX]], %[[DBIAS]]

// -----

// Dequantize: the fp8 data in f32 times its one scale_inv, converted to the output type.
module {
  func.func @main(%q: tensor<4x8xf8E4M3FN>, %amax: tensor<1xf32>, %scale: tensor<1xf32>, %scale_inv: tensor<1xf32>) -> tensor<4x8xbf16> {
    %0 = stablehlo.custom_call @te_dequantize_ffi(%q, %amax, %scale, %scale_inv) {api_version = 4 : i32} : (tensor<4x8xf8E4M3FN>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x8xbf16>
    return %0 : tensor<4x8xbf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[Q:.+]] = stablehlo.convert %arg0 : (tensor<4x8xf8E4M3FN>) -> tensor<4x8xf32>
// CHECK-NEXT:  %[[INV:.+]] = stablehlo.reshape %arg3 : (tensor<1xf32>) -> tensor<f32>
// CHECK-NEXT:  %[[INVS:.+]] = stablehlo.broadcast_in_dim %[[INV]], dims = [] : (tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT:  %[[Y:.+]] = stablehlo.multiply %[[Q]], %[[INVS]]
// CHECK-NEXT:  %[[OUT:.+]] = stablehlo.convert %[[Y]] : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK-NEXT:  return %[[OUT]]

// -----

// Refused: stochastic rounding (NVFP4 only).
module {
  func.func @main(%x: tensor<4x32xbf16>, %scale: tensor<1xf32>, %amax: tensor<1xf32>, %sr: tensor<4xui32>, %ra: tensor<0xf32>, %rht: tensor<0xbf16>) -> tensor<4x32xbf16> {
    %0:7 = stablehlo.custom_call @te_dbias_quantize_ffi(%x, %scale, %amax, %sr, %ra, %rht) {api_version = 4 : i32, mhlo.backend_config = {flatten_axis = -1 : i64, is_dbias = false, q_layout = 0 : i64, scaling_mode = 4 : i64, stochastic_rounding = true, use_rht = false}} : (tensor<4x32xbf16>, tensor<1xf32>, tensor<1xf32>, tensor<4xui32>, tensor<0xf32>, tensor<0xbf16>) -> (tensor<4x32xbf16>, tensor<1xbf16>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xbf16>, tensor<64xui8>)
    return %0#0 : tensor<4x32xbf16>
  }
}
// ERROR: te_dbias_quantize_ffi
// ERROR: stochastic_rounding=true (NVFP4 only): not converted
