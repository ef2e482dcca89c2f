// PASSES: cudnn-graph-conv
// cudnn-graph-conv lowers XLA GPU's __cudnn$convForwardGraph (a convolution with a fused
// pointwise graph, serialized as "UID:[type]op(in-graph operands);...", written for fp8
// convolutions) to a stablehlo.convolution followed by the graph's ops in order: fp8 operands
// widened to f32, scale(a) = a * s with s the next external operand, relu = maximum with 0,
// amax = max |a| as an extra scalar result, and an fp8 type on an op a saturating cast
// (clamp to the finite range, then convert). Ops outside the list are refused by name.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// fp8 x and w; the conv result scaled by the third operand, then by the fourth; the amax of
// that value is the second result; its relu, saturated to f8e4m3fn (+-448), the first.
module {
  func.func @main(%x: tensor<1x4x4x16xf8E4M3FN>, %w: tensor<3x3x16x16xf8E4M3FN>, %sx: tensor<f32>, %sw: tensor<f32>) -> (tensor<1x4x4x16xf8E4M3FN>, tensor<f32>) {
    %0:3 = stablehlo.custom_call @"__cudnn$convForwardGraph"(%x, %w, %sx, %sw) {backend_config = "{\"cudnn_conv_backend_config\":{\"conv_result_scale\":1,\"activation_mode\":\"kNone\",\"serialized_graph\":\"1:[f32]conv();2:[f32]scale(1);3:[f32]scale(2);4:[f32]amax(3);5:[f8e4m3fn]relu(3);\"}}", hlo.dim_labels = "b01f_01io->b01f", hlo.window = "{size=3x3 pad=1_1x1_1}"} : (tensor<1x4x4x16xf8E4M3FN>, tensor<3x3x16x16xf8E4M3FN>, tensor<f32>, tensor<f32>) -> (tensor<1x4x4x16xf8E4M3FN>, tensor<f32>, tensor<0xui8>)
    return %0#0, %0#1 : tensor<1x4x4x16xf8E4M3FN>, tensor<f32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT: convForwardGraph
// CHECK: %[[X:.*]] = stablehlo.convert %arg0 : (tensor<1x4x4x16xf8E4M3FN>) -> tensor<1x4x4x16xf32>
// CHECK: %[[W:.*]] = stablehlo.convert %arg1 : (tensor<3x3x16x16xf8E4M3FN>) -> tensor<3x3x16x16xf32>
// CHECK: %[[CONV:.*]] = stablehlo.convolution(%[[X]], %[[W]]) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]
// CHECK-SAME: -> tensor<1x4x4x16xf32>
// CHECK: %[[SX:.*]] = stablehlo.broadcast_in_dim %arg2, dims = []
// CHECK: %[[A:.*]] = stablehlo.multiply %[[CONV]], %[[SX]]
// CHECK: %[[SW:.*]] = stablehlo.broadcast_in_dim %arg3, dims = []
// CHECK: %[[B:.*]] = stablehlo.multiply %[[A]], %[[SW]]
// CHECK: %[[ABS:.*]] = stablehlo.abs %[[B]]
// CHECK: %[[AMAX:.*]] = stablehlo.reduce(%[[ABS]] init: %{{.*}}) applies stablehlo.maximum across dimensions = [0, 1, 2, 3]
// CHECK: %[[RELU:.*]] = stablehlo.maximum %[[B]], %{{.*}}
// CHECK-DAG: %[[LO:.*]] = stablehlo.constant dense<-4.480000e+02>
// CHECK-DAG: %[[HI:.*]] = stablehlo.constant dense<4.480000e+02>
// CHECK: %[[SAT:.*]] = stablehlo.clamp %[[LO]], %[[RELU]], %[[HI]]
// CHECK: %[[Y:.*]] = stablehlo.convert %[[SAT]] : (tensor<1x4x4x16xf32>) -> tensor<1x4x4x16xf8E4M3FN>
// CHECK: return %[[Y]], %[[AMAX]]

// -----

// Refused by name: a graph op the pass does not know (tanh).
module {
  func.func @main(%x: tensor<1x4x4x16xf8E4M3FN>, %w: tensor<3x3x16x16xf8E4M3FN>) -> tensor<1x4x4x16xf32> {
    %0:2 = stablehlo.custom_call @"__cudnn$convForwardGraph"(%x, %w) {backend_config = "{\"cudnn_conv_backend_config\":{\"serialized_graph\":\"1:[f32]conv();2:[f32]tanh(1);\"}}", hlo.dim_labels = "b01f_01io->b01f", hlo.window = "{size=3x3 pad=1_1x1_1}"} : (tensor<1x4x4x16xf8E4M3FN>, tensor<3x3x16x16xf8E4M3FN>) -> (tensor<1x4x4x16xf32>, tensor<0xui8>)
    return %0#0 : tensor<1x4x4x16xf32>
  }
}
// ERROR: :42:
// ERROR: custom-call __cudnn$convForwardGraph
// ERROR: serialized_graph op 'tanh' (2:[f32]tanh(1)) is not supported
