// PASSES: cudnn-conv-reorder
// cudnn-conv-reorder replaces cuDNN's int8x32 filter (and bias) reorder calls by the
// reshape / transpose / reshape XLA itself writes for them (cudnn_support_utils.cc):
// filter [O, I/32, H, W, 32] → [O/8, 4, 2, I/32, H, W, 8, 4] → transpose
// [3, 4, 5, 0, 2, 6, 1, 7] → back to [O, I/32, H, W, 32]; bias [O] → [O/32, 4, 2, 4] →
// transpose [0, 2, 1, 3] → [O]. The reorder permutes the row-major buffer, so an operand with
// another layout is refused, as is a filter that is not [O, I/32, H, W, 32] with 32 | O.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// Filter and bias: each result is its own operand's permutation.
module {
  func.func @main(%w: tensor<32x1x1x1x32xi8>, %b: tensor<32xf32>) -> (tensor<32x1x1x1x32xi8>, tensor<32xf32>) {
    %0:2 = stablehlo.custom_call @"__cudnn$convReorderFilterAndBias"(%w, %b) : (tensor<32x1x1x1x32xi8>, tensor<32xf32>) -> (tensor<32x1x1x1x32xi8>, tensor<32xf32>)
    return %0#0, %0#1 : tensor<32x1x1x1x32xi8>, tensor<32xf32>
  }
}
// CHECK-NOT: convReorder
// CHECK: %[[WS:.*]] = stablehlo.reshape %arg0 : (tensor<32x1x1x1x32xi8>) -> tensor<4x4x2x1x1x1x8x4xi8>
// CHECK: %[[WT:.*]] = stablehlo.transpose %[[WS]], dims = [3, 4, 5, 0, 2, 6, 1, 7]
// CHECK: %[[W:.*]] = stablehlo.reshape %[[WT]] : {{.*}} -> tensor<32x1x1x1x32xi8>
// CHECK: %[[BS:.*]] = stablehlo.reshape %arg1 : (tensor<32xf32>) -> tensor<1x4x2x4xf32>
// CHECK: %[[BT:.*]] = stablehlo.transpose %[[BS]], dims = [0, 2, 1, 3]
// CHECK: %[[B:.*]] = stablehlo.reshape %[[BT]] : {{.*}} -> tensor<32xf32>
// CHECK: return %[[W]], %[[B]]

// -----

// Refused: the dump gave the filter a column-major layout (minor_to_major 0..4).
module {
  func.func @main(%w: tensor<32x1x1x1x32xi8>) -> tensor<32x1x1x1x32xi8> {
    %0 = stablehlo.custom_call @"__cudnn$convReorderFilter"(%w) {hlo.operand_layouts = [dense<[0, 1, 2, 3, 4]> : tensor<5xindex>]} : (tensor<32x1x1x1x32xi8>) -> tensor<32x1x1x1x32xi8>
    return %0 : tensor<32x1x1x1x32xi8>
  }
}
// ERROR: :31:
// ERROR: custom-call __cudnn$convReorderFilter
// ERROR: operand 0 has layout [0, 1, 2, 3, 4]: the reorder permutes the row-major buffer

// -----

// Refused: O = 16 is not a multiple of 32.
module {
  func.func @main(%w: tensor<16x1x1x1x32xi8>) -> tensor<16x1x1x1x32xi8> {
    %0 = stablehlo.custom_call @"__cudnn$convReorderFilter"(%w) : (tensor<16x1x1x1x32xi8>) -> tensor<16x1x1x1x32xi8>
    return %0 : tensor<16x1x1x1x32xi8>
  }
}
// ERROR: :44:
// ERROR: filter shape [16, 1, 1, 1, 32]: cuDNN's reorder takes [O, I/32, H, W, 32] with O a multiple of 32
