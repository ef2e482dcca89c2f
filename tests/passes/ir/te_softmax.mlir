// PASSES: te-softmax
// te-softmax rewrites Transformer Engine's scaled softmax calls (x [..., heads, s_q, s_k],
// {scale_factor}) as the kernels compute them, in f32: y = softmax(scale * x) along s_k;
// the masked form sets elements where mask == 1 to -10000 and writes zeros in a row that
// is all masked; the upper-triangular form masks j > i; backward
// dx = scale * y * (dy - sum(dy * y)).  An input of rank < 3 is refused.

// Forward, no mask: x in f32 times 0.5, minus its row max, exp, over its row sum, back to bf16.
module {
  func.func @main(%arg0: tensor<1x2x4x4xbf16>) -> tensor<1x2x4x4xbf16> {
    %0 = stablehlo.custom_call @te_scaled_softmax_forward_ffi(%arg0) {api_version = 4 : i32, mhlo.backend_config = {scale_factor = 5.000000e-01 : f64}} : (tensor<1x2x4x4xbf16>) -> tensor<1x2x4x4xbf16>
    return %0 : tensor<1x2x4x4xbf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[X:.+]] = stablehlo.convert {{.*}} -> tensor<1x2x4x4xf32>
// CHECK:       %[[HALF:.+]] = stablehlo.constant dense<5.000000e-01> : tensor<1x2x4x4xf32>
// CHECK-NEXT:  %[[S:.+]] = stablehlo.multiply %[[X]], %[[HALF]]
// CHECK:       stablehlo.reduce(%[[S]] init: {{.*}}) applies stablehlo.maximum across dimensions = [3]
// CHECK:       %[[SHIFTED:.+]] = stablehlo.subtract %[[S]], {{.*}}
// CHECK-NEXT:  %[[E:.+]] = stablehlo.exponential %[[SHIFTED]]
// CHECK:       stablehlo.reduce(%[[E]] init: {{.*}}) applies stablehlo.add across dimensions = [3]
// CHECK:       %[[Y:.+]] = stablehlo.divide %[[E]], {{.*}}
// CHECK:       stablehlo.convert {{.*}} -> tensor<1x2x4x4xbf16>

// -----

// Masked forward: mask == 1 selects -10000 before the softmax, and a row whose max is
// -10000 (all masked) gives zeros.
module {
  func.func @main(%arg0: tensor<1x2x4x4xf16>, %arg1: tensor<1x1x4x4xui8>) -> tensor<1x2x4x4xf16> {
    %0 = stablehlo.custom_call @te_scaled_masked_softmax_forward_ffi(%arg0, %arg1) {api_version = 4 : i32, mhlo.backend_config = {scale_factor = 1.000000e+00 : f64}} : (tensor<1x2x4x4xf16>, tensor<1x1x4x4xui8>) -> tensor<1x2x4x4xf16>
    return %0 : tensor<1x2x4x4xf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[IS_MASKED:.+]] = stablehlo.compare EQ, {{.*}} : (tensor<1x4x4xui8>, tensor<1x4x4xui8>)
// CHECK:       %[[MASK:.+]] = stablehlo.broadcast_in_dim {{.*}} -> tensor<1x2x4x4xi1>
// CHECK:       %[[LOW:.+]] = stablehlo.constant dense<-1.000000e+04> : tensor<1x2x4x4xf32>
// CHECK-NEXT:  %[[S:.+]] = stablehlo.select %[[MASK]], %[[LOW]], {{.*}}
// CHECK:       stablehlo.exponential
// CHECK:       %[[EMPTY:.+]] = stablehlo.compare EQ, {{.*}}, {{.*}} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>)
// CHECK:       stablehlo.select %[[EMPTY]], {{.*}}

// -----

// Upper-triangular mask: column index > row index (iotas along s_k and s_q) selects -inf.
module {
  func.func @main(%arg0: tensor<2x4x4xbf16>) -> tensor<2x4x4xbf16> {
    %0 = stablehlo.custom_call @te_scaled_upper_triang_masked_softmax_forward_ffi(%arg0) {api_version = 4 : i32, mhlo.backend_config = {scale_factor = 1.000000e+00 : f64}} : (tensor<2x4x4xbf16>) -> tensor<2x4x4xbf16>
    return %0 : tensor<2x4x4xbf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-DAG:   %[[ROWS:.+]] = stablehlo.iota dim = 2 : tensor<1x2x4x4xi32>
// CHECK-DAG:   %[[COLS:.+]] = stablehlo.iota dim = 3 : tensor<1x2x4x4xi32>
// CHECK:       %[[ABOVE:.+]] = stablehlo.compare GT, %[[COLS]], %[[ROWS]]
// CHECK-NEXT:  %[[NEG_INF:.+]] = stablehlo.constant dense<0xFF800000>
// CHECK-NEXT:  stablehlo.select %[[ABOVE]], %[[NEG_INF]], {{.*}}
// CHECK:       stablehlo.exponential

// -----

// Backward: dx = scale * (y * (dy - rowsum(dy * y))).
module {
  func.func @main(%dy: tensor<1x2x4x4xbf16>, %y: tensor<1x2x4x4xbf16>) -> tensor<1x2x4x4xbf16> {
    %0 = stablehlo.custom_call @te_scaled_softmax_backward_ffi(%dy, %y) {api_version = 4 : i32, mhlo.backend_config = {scale_factor = 2.500000e-01 : f64}} : (tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>) -> tensor<1x2x4x4xbf16>
    return %0 : tensor<1x2x4x4xbf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[DY:.+]] = stablehlo.convert {{.*}} -> tensor<1x2x4x4xf32>
// CHECK:       %[[Y:.+]] = stablehlo.convert {{.*}} -> tensor<1x2x4x4xf32>
// CHECK-NEXT:  %[[PROD:.+]] = stablehlo.multiply %[[DY]], %[[Y]]
// CHECK:       stablehlo.reduce(%[[PROD]] init: {{.*}}) applies stablehlo.add across dimensions = [3]
// CHECK:       %[[DOT:.+]] = stablehlo.broadcast_in_dim
// CHECK-NEXT:  %[[SCALE:.+]] = stablehlo.constant dense<2.500000e-01>
// CHECK-NEXT:  %[[DIFF:.+]] = stablehlo.subtract %[[DY]], %[[DOT]]
// CHECK-NEXT:  %[[YD:.+]] = stablehlo.multiply %[[Y]], %[[DIFF]]
// CHECK-NEXT:  %[[DX:.+]] = stablehlo.multiply %[[SCALE]], %[[YD]]

// -----

// Refused: a 2-D input has no [heads, s_q, s_k] shape.
module {
  func.func @main(%arg0: tensor<4x4xbf16>) -> tensor<4x4xbf16> {
    %0 = stablehlo.custom_call @te_scaled_softmax_forward_ffi(%arg0) {api_version = 4 : i32, mhlo.backend_config = {scale_factor = 1.000000e+00 : f64}} : (tensor<4x4xbf16>) -> tensor<4x4xbf16>
    return %0 : tensor<4x4xbf16>
  }
}
// ERROR: te_scaled_softmax_forward_ffi
// ERROR: the input must be [..., heads, s_q, s_k]
