// PASSES: te-grouped-quantize
// te-grouped-quantize rewrites Transformer Engine's te_grouped_quantize_ffi (one fp8
// quantization per MoE expert's rows; operands x, scale [G], group_sizes [G]; results
// output, colwise_output, scale_inv, colwise_scale_inv, amax, unused) with tensor scaling:
// each row's group is found from the running sums of the sizes, x · scale[group] is
// saturated and cast to fp8, scale_inv and amax are written at each group's rank among the
// non-empty groups.  MXFP8 (pre-swizzled scales), NO_SCALING and NVFP4 are refused.

// Delayed scaling, rowwise only (q_layout 0), two experts over 4 rows of 3: the rows'
// scales picked from %arg1 by group, multiplied, clamped to ±448, converted to f8E4M3FN;
// the unrequested colwise output and the workspace are not used and disappear.
module {
  func.func @main(%x: tensor<4x3xbf16>, %scale: tensor<2xf32>, %sizes: tensor<2xi32>) -> (tensor<12xf8E4M3FN>, tensor<2xf32>, tensor<2xf32>) {
    %0:6 = stablehlo.custom_call @te_grouped_quantize_ffi(%x, %scale, %sizes) {api_version = 4 : i32, mhlo.backend_config = {flatten_axis = -1 : i64, q_layout = 0 : i64, scaling_mode = 1 : i64}} : (tensor<4x3xbf16>, tensor<2xf32>, tensor<2xi32>) -> (tensor<12xf8E4M3FN>, tensor<1xf8E4M3FN>, tensor<2xf32>, tensor<1xf32>, tensor<2xf32>, tensor<0xui8>)
    return %0#0, %0#2, %0#4 : tensor<12xf8E4M3FN>, tensor<2xf32>, tensor<2xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       stablehlo.convert %arg0 : (tensor<4x3xbf16>) -> tensor<4x3xf32>
// CHECK:       stablehlo.convert %arg2 : (tensor<2xi32>) -> tensor<2xi64>
// CHECK:       stablehlo.clamp
// CHECK-SAME:  tensor<4x3xf32>
// CHECK:       stablehlo.convert {{.*}} -> tensor<4x3xf8E4M3FN>
// CHECK:       stablehlo.divide
// CHECK:       return {{.*}} : tensor<12xf8E4M3FN>, tensor<2xf32>, tensor<2xf32>

// -----

// MXFP8: TE writes the grouped block scales pre-swizzled for cuBLAS; refused with the line.
module {
  func.func @main(%x: tensor<4x32xbf16>, %scale: tensor<2xf32>, %sizes: tensor<2xi32>) -> tensor<128xf8E4M3FN> {
    %0:6 = stablehlo.custom_call @te_grouped_quantize_ffi(%x, %scale, %sizes) {api_version = 4 : i32, mhlo.backend_config = {flatten_axis = -1 : i64, q_layout = 0 : i64, scaling_mode = 2 : i64}} : (tensor<4x32xbf16>, tensor<2xf32>, tensor<2xi32>) -> (tensor<128xf8E4M3FN>, tensor<1xf8E4M3FN>, tensor<128x4xui8>, tensor<1xui8>, tensor<2xf32>, tensor<0xui8>)
    return %0#0 : tensor<128xf8E4M3FN>
  }
}
// ERROR: 33:12
// ERROR: te_grouped_quantize_ffi
// ERROR: MXFP8_1D_SCALING
// ERROR: pre-swizzled
