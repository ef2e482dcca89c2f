// PASSES: te-refused
// te-refused fails on the Transformer Engine calls that are not converted (expert-parallel
// te_ep_*, grouped MXFP8 quantize v2, NVFP4's RHT amax), naming the call and the
// reason, so a TE dump stops at the first such call with what the user can do.  A module
// without them passes through unchanged, TE calls other passes own included.

// An expert-parallel token dispatch: refused with the reason (routing state lives in TE's
// process, not in the dump) and its location.
module {
  func.func @main(%arg0: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
    %0 = stablehlo.custom_call @te_ep_dispatch_ffi(%arg0) {api_version = 4 : i32} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
    return %0 : tensor<4x8xbf16>
  }
}
// ERROR: 11:10
// ERROR: te_ep_dispatch_ffi
// ERROR: not converted: expert-parallel token exchange

// -----

// Grouped MXFP8 quantize v2: refused (its scales are written pre-swizzled for cuBLAS),
// pointing at the grouped quantize that is converted.
module {
  func.func @main(%arg0: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
    %0 = stablehlo.custom_call @te_grouped_quantize_v2_ffi(%arg0) {api_version = 4 : i32} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
    return %0 : tensor<4x8xbf16>
  }
}
// ERROR: te_grouped_quantize_v2_ffi
// ERROR: not converted: grouped MXFP8 quantize v2
// ERROR: te_grouped_quantize_ffi with delayed or current tensor scaling is

// -----

// NVFP4's random-Hadamard-transform amax.
module {
  func.func @main(%arg0: tensor<4x8xbf16>) -> tensor<f32> {
    %0 = stablehlo.custom_call @te_rht_amax_ffi(%arg0) {api_version = 4 : i32} : (tensor<4x8xbf16>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
// ERROR: te_rht_amax_ffi
// ERROR: the random Hadamard transform is not converted

// -----

// A TE call another pass converts (te_gemm_ffi) is not this pass's: the module is unchanged.
module {
  func.func @main(%arg0: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
    %0 = stablehlo.custom_call @te_gemm_ffi(%arg0) {api_version = 4 : i32} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
    return %0 : tensor<4x8xbf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NEXT:  %[[GEMM:.+]] = stablehlo.custom_call @te_gemm_ffi(%arg0)
// CHECK-NEXT:  return %[[GEMM]]
