// PASSES: cudnn-block-scaled-dot
// cudnn-block-scaled-dot lowers XLA GPU's __cudnn$blockScaledDot (MXFP8 / NVFP4 on cuDNN) to a
// dequantize of each side and one f32 dot_general: each scale [B, R, C] is read back from
// cuDNN's 128x4 swizzle (reshape to [B, R/128, C/4, 32, 4, 4], transpose [0, 1, 4, 3, 2, 5],
// reshape back), sliced to the K/block scales the operand needs, and multiplies its block of
// the operand (widened to f32); then out = lhs . rhs^T per batch (batching [0] x [0],
// contracting [2] x [2]), rounded once to the output type. Pairs of operand and scale types
// that are not MXFP8 (f8 with f8e8m0fnu scales, blocks of 32) or NVFP4 (f4e2m1fn with
// f8e4m3fn scales, blocks of 16) are refused.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// MXFP8, K = 32 (one block): per side, unswizzle, slice [0:1, 0:128, 0:1], widen, multiply;
// the dot reads the two dequantized sides and its result is converted to bf16 and returned.
module {
  func.func @main(%lhs: tensor<1x128x32xf8E4M3FN>, %rhs: tensor<1x128x32xf8E4M3FN>, %ls: tensor<1x128x4xf8E8M0FNU>, %rs: tensor<1x128x4xf8E8M0FNU>) -> tensor<1x128x128xbf16> {
    %0:2 = stablehlo.custom_call @"__cudnn$blockScaledDot"(%lhs, %rhs, %ls, %rs) : (tensor<1x128x32xf8E4M3FN>, tensor<1x128x32xf8E4M3FN>, tensor<1x128x4xf8E8M0FNU>, tensor<1x128x4xf8E8M0FNU>) -> (tensor<1x128x128xbf16>, tensor<0xi8>)
    return %0#0 : tensor<1x128x128xbf16>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT: blockScaledDot
// CHECK: %[[LT:.*]] = stablehlo.reshape %arg2 : {{.*}} -> tensor<1x1x1x32x4x4xf8E8M0FNU>
// CHECK: %[[LS:.*]] = stablehlo.transpose %[[LT]], dims = [0, 1, 4, 3, 2, 5]
// CHECK: %[[LP:.*]] = stablehlo.reshape %[[LS]] : {{.*}} -> tensor<1x128x4xf8E8M0FNU>
// CHECK: stablehlo.slice %[[LP]] [0:1, 0:128, 0:1]
// CHECK: %[[L32:.*]] = stablehlo.convert %arg0 : (tensor<1x128x32xf8E4M3FN>) -> tensor<1x128x32xf32>
// CHECK: %[[LSCALE:.*]] = stablehlo.reshape %{{.*}} -> tensor<1x128x32xf32>
// CHECK: %[[LHS:.*]] = stablehlo.multiply %[[L32]], %[[LSCALE]]
// CHECK: %[[RT:.*]] = stablehlo.reshape %arg3 : {{.*}} -> tensor<1x1x1x32x4x4xf8E8M0FNU>
// CHECK: stablehlo.transpose %[[RT]], dims = [0, 1, 4, 3, 2, 5]
// CHECK: %[[R32:.*]] = stablehlo.convert %arg1 : (tensor<1x128x32xf8E4M3FN>) -> tensor<1x128x32xf32>
// CHECK: %[[RSCALE:.*]] = stablehlo.reshape %{{.*}} -> tensor<1x128x32xf32>
// CHECK: %[[RHS:.*]] = stablehlo.multiply %[[R32]], %[[RSCALE]]
// CHECK: %[[P:.*]] = stablehlo.dot_general %[[LHS]], %[[RHS]], batching_dims = [0] x [0], contracting_dims = [2] x [2]{{.*}} -> tensor<1x128x128xf32>
// CHECK: %[[OUT:.*]] = stablehlo.convert %[[P]] : (tensor<1x128x128xf32>) -> tensor<1x128x128xbf16>
// CHECK: return %[[OUT]]

// -----

// Refused: f8e4m3fn operands with f8e4m3fn scales are neither MXFP8 nor NVFP4.
module {
  func.func @main(%lhs: tensor<1x128x32xf8E4M3FN>, %rhs: tensor<1x128x32xf8E4M3FN>, %ls: tensor<1x128x4xf8E4M3FN>, %rs: tensor<1x128x4xf8E4M3FN>) -> tensor<1x128x128xf32> {
    %0:2 = stablehlo.custom_call @"__cudnn$blockScaledDot"(%lhs, %rhs, %ls, %rs) : (tensor<1x128x32xf8E4M3FN>, tensor<1x128x32xf8E4M3FN>, tensor<1x128x4xf8E4M3FN>, tensor<1x128x4xf8E4M3FN>) -> (tensor<1x128x128xf32>, tensor<0xi8>)
    return %0#0 : tensor<1x128x128xf32>
  }
}
// ERROR: :43:
// ERROR: custom-call __cudnn$blockScaledDot
// ERROR: lhs of type f8e4m3fn with scales of type f8e4m3fn is not a block-scaled format
