// PASSES: cudnn-norm
// cudnn-norm lowers XLA GPU's cuDNN layer norm (__cudnn$norm; the input reshaped so that
// dimension 0 holds the rows and dimensions 1.. the normalized elements) to plain ops:
// mean = E[x], var = E[(x - mean)^2], norm_factor = rsqrt(var + epsilon),
// y = (x - mean) * norm_factor * scale + bias, computed in f32 for bf16/f16 and rounded once;
// the training form also returns mean and norm_factor. A config without
// cudnn_norm_backend_config, or operand counts that do not fit the kind, are refused.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// LAYER_FWD_TRAIN on bf16 [4 rows, 8]: everything in f32; the mean and the rsqrt(var + 1e-3)
// are the second and third results, y (rounded to bf16) the first.
module {
  func.func @main(%x: tensor<4x8x1x1xbf16>, %s: tensor<1x8x1x1xbf16>, %b: tensor<1x8x1x1xbf16>) -> (tensor<4x8x1x1xbf16>, tensor<4x1x1x1xf32>, tensor<4x1x1x1xf32>) {
    %0:4 = stablehlo.custom_call @"__cudnn$norm"(%x, %s, %b) {backend_config = "{\"cudnn_norm_backend_config\":{\"epsilon\":0.001,\"kind\":\"LAYER_FWD_TRAIN\"}}"} : (tensor<4x8x1x1xbf16>, tensor<1x8x1x1xbf16>, tensor<1x8x1x1xbf16>) -> (tensor<4x8x1x1xbf16>, tensor<4x1x1x1xf32>, tensor<4x1x1x1xf32>, tensor<1096xui8>)
    return %0#0, %0#1, %0#2 : tensor<4x8x1x1xbf16>, tensor<4x1x1x1xf32>, tensor<4x1x1x1xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT: __cudnn
// CHECK: %[[X:.*]] = stablehlo.convert %arg0 : (tensor<4x8x1x1xbf16>) -> tensor<4x8x1x1xf32>
// CHECK: %[[S:.*]] = stablehlo.convert %arg1
// CHECK: %[[B:.*]] = stablehlo.convert %arg2
// CHECK: %[[XSUM:.*]] = stablehlo.reduce(%[[X]] init: %{{.*}}) applies stablehlo.add across dimensions = [1, 2, 3]
// CHECK: %[[MEAN:.*]] = stablehlo.divide %[[XSUM]], %{{.*}}
// CHECK: %[[MEANS:.*]] = stablehlo.broadcast_in_dim %[[MEAN]], dims = [0]
// CHECK: %[[XC:.*]] = stablehlo.subtract %[[X]], %[[MEANS]]
// CHECK: %[[SQ:.*]] = stablehlo.multiply %[[XC]], %[[XC]]
// CHECK: %[[SQSUM:.*]] = stablehlo.reduce(%[[SQ]] init: %{{.*}}) applies stablehlo.add across dimensions = [1, 2, 3]
// CHECK: %[[VAR:.*]] = stablehlo.divide %[[SQSUM]], %{{.*}}
// CHECK: %[[EPS:.*]] = stablehlo.constant dense<1.000000e-03>
// CHECK: %[[VE:.*]] = stablehlo.add %[[VAR]], %[[EPS]]
// CHECK: %[[NF:.*]] = stablehlo.rsqrt %[[VE]]
// CHECK: %[[NFS:.*]] = stablehlo.broadcast_in_dim %[[NF]], dims = [0]
// CHECK: %[[XN:.*]] = stablehlo.multiply %[[XC]], %[[NFS]]
// CHECK: %[[S8:.*]] = stablehlo.reshape %[[S]]
// CHECK: %[[SB:.*]] = stablehlo.broadcast_in_dim %[[S8]], dims = [1, 2, 3]
// CHECK: %[[XS:.*]] = stablehlo.multiply %[[XN]], %[[SB]]
// CHECK: %[[B8:.*]] = stablehlo.reshape %[[B]]
// CHECK: %[[BB:.*]] = stablehlo.broadcast_in_dim %[[B8]], dims = [1, 2, 3]
// CHECK: %[[Y:.*]] = stablehlo.add %[[XS]], %[[BB]]
// CHECK: %[[YB:.*]] = stablehlo.convert %[[Y]] : (tensor<4x8x1x1xf32>) -> tensor<4x8x1x1xbf16>
// CHECK: %[[M4:.*]] = stablehlo.reshape %[[MEAN]] : (tensor<4xf32>) -> tensor<4x1x1x1xf32>
// CHECK: %[[NF4:.*]] = stablehlo.reshape %[[NF]] : (tensor<4xf32>) -> tensor<4x1x1x1xf32>
// CHECK: return %[[YB]], %[[M4]], %[[NF4]]

// -----

// Refused: a LAYER_FWD_INFER norm takes (x, scale, bias); here the bias is missing.
module {
  func.func @main(%x: tensor<4x8x1x1xf32>, %s: tensor<1x8x1x1xf32>) -> tensor<4x8x1x1xf32> {
    %0:2 = stablehlo.custom_call @"__cudnn$norm"(%x, %s) {backend_config = "{\"cudnn_norm_backend_config\":{\"epsilon\":0.001,\"kind\":\"LAYER_FWD_INFER\"}}"} : (tensor<4x8x1x1xf32>, tensor<1x8x1x1xf32>) -> (tensor<4x8x1x1xf32>, tensor<1096xui8>)
    return %0#0 : tensor<4x8x1x1xf32>
  }
}
// ERROR: :51:
// ERROR: custom-call __cudnn$norm
// ERROR: a LAYER_FWD_INFER norm has 3 operands and 2 results
