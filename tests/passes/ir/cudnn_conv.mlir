// PASSES: cudnn-conv
// cudnn-conv lowers XLA GPU's cuDNN convolution calls to stablehlo.convolution plus plain ops.
// The calls carry the forward convolution's window and dim_labels (the importer keeps them as
// hlo.window / hlo.dim_labels) and a cudnn_conv_backend_config. Forward: scale * conv(x, w);
// fused bias+activation: act(scale * conv + side_input_scale * side + bias), the bias along
// the output feature dimension; backward input: conv of dy with the filter's input and
// output features exchanged, the window reversed, dy dilated by the forward stride. The
// workspace result goes. Forms whose rounding is not in the dump are refused.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// Fused forward, NHWC with an HWIO filter, pad 1, conv_result_scale 0.5, kRelu, bias:
// relu(0.5 * conv(x, w) + broadcast(bias along dimension 3)).
module {
  func.func @main(%x: tensor<1x4x4x2xf32>, %w: tensor<3x3x2x3xf32>, %b: tensor<3xf32>) -> tensor<1x4x4x3xf32> {
    %0:2 = stablehlo.custom_call @"__cudnn$convBiasActivationForward"(%x, %w, %b) {backend_config = "{\"cudnn_conv_backend_config\":{\"conv_result_scale\":0.5,\"activation_mode\":\"kRelu\",\"side_input_scale\":0}}", hlo.dim_labels = "b01f_01io->b01f", hlo.window = "{size=3x3 pad=1_1x1_1}"} : (tensor<1x4x4x2xf32>, tensor<3x3x2x3xf32>, tensor<3xf32>) -> (tensor<1x4x4x3xf32>, tensor<0xui8>)
    return %0#0 : tensor<1x4x4x3xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT: __cudnn
// CHECK: %[[CONV:.*]] = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]
// CHECK-SAME: stride = [1, 1], pad = {{\[\[}}1, 1], [1, 1]]
// CHECK-SAME: feature_group_count = 1
// CHECK: %[[HALF:.*]] = stablehlo.constant dense<5.000000e-01>
// CHECK: %[[SCALED:.*]] = stablehlo.multiply %[[CONV]], %[[HALF]]
// CHECK: %[[BIAS:.*]] = stablehlo.broadcast_in_dim %arg2, dims = [3] : (tensor<3xf32>) -> tensor<1x4x4x3xf32>
// CHECK: %[[SUM:.*]] = stablehlo.add %[[SCALED]], %[[BIAS]]
// CHECK: %[[RELU:.*]] = stablehlo.maximum %[[SUM]], %{{.*}}
// CHECK: return %[[RELU]]

// -----

// Backward input of a stride-2, pad-1, 3x3 forward conv from x [1,5,5,2] to dy [1,3,3,3]: a
// conv of dy (the input now) with the filter's i/o exchanged, dy dilated by 2, unit strides,
// padding (3 - 1 - 1, 5 + 3 - 2 - 2*2 - 1) = (1, 1), the window reversed; no scaling.
module {
  func.func @main(%dy: tensor<1x3x3x3xf32>, %w: tensor<3x3x2x3xf32>) -> tensor<1x5x5x2xf32> {
    %0:2 = stablehlo.custom_call @"__cudnn$convBackwardInput"(%dy, %w) {backend_config = "{\"cudnn_conv_backend_config\":{\"conv_result_scale\":1}}", hlo.dim_labels = "b01f_01io->b01f", hlo.window = "{size=3x3 stride=2x2 pad=1_1x1_1}"} : (tensor<1x3x3x3xf32>, tensor<3x3x2x3xf32>) -> (tensor<1x5x5x2xf32>, tensor<0xui8>)
    return %0#0 : tensor<1x5x5x2xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[DX:.*]] = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, o, i]->[b, 0, 1, f]
// CHECK-SAME: stride = [1, 1], pad = {{\[\[}}1, 1], [1, 1]], lhs_dilate = [2, 2], rhs_dilate = [1, 1], reverse = [true, true]
// CHECK-SAME: -> tensor<1x5x5x2xf32>
// CHECK-NEXT: return %[[DX]]

// -----

// Refused: an activation mode the pass does not write (kBandPass).
module {
  func.func @main(%x: tensor<1x4x4x2xf32>, %w: tensor<3x3x2x3xf32>, %b: tensor<3xf32>) -> tensor<1x4x4x3xf32> {
    %0:2 = stablehlo.custom_call @"__cudnn$convBiasActivationForward"(%x, %w, %b) {backend_config = "{\"cudnn_conv_backend_config\":{\"conv_result_scale\":1,\"activation_mode\":\"kBandPass\"}}", hlo.dim_labels = "b01f_01io->b01f", hlo.window = "{size=3x3 pad=1_1x1_1}"} : (tensor<1x4x4x2xf32>, tensor<3x3x2x3xf32>, tensor<3xf32>) -> (tensor<1x4x4x3xf32>, tensor<0xui8>)
    return %0#0 : tensor<1x4x4x3xf32>
  }
}
// ERROR: :53:
// ERROR: custom-call __cudnn$convBiasActivationForward
// ERROR: activation_mode kBandPass is not supported
