// PASSES: matmul-convolutions
// matmul-convolutions rewrites a convolution whose window is one element everywhere (stride 1,
// no padding or dilation, one group: how the TPU compiler writes a matmul) as a dot_general
// contracting the input feature dimension with the kernel's input feature dimension.  Any
// other convolution stays.  Elementwise ops whose operands are all reshapes of one shape then
// run in that shape, with one reshape after them.

// A 2-D matmul written as a convolution with no spatial dimensions: a dot_general of the same
// operands, contracting input features [1] with the kernel's [i] dimension [0].
module {
  func.func @main(%arg0: tensor<2x5xf32>, %arg1: tensor<5x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f]x[i, o]->[b, f], window = {stride = [], pad = [], lhs_dilate = [], rhs_dilate = [], reverse = []} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   stablehlo.convolution
// CHECK:       %[[DOT:.+]] = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:  return %[[DOT]]

// -----

// Features minor in a rank-3 input: the input flattened to [rows, in] = 24x5, the kernel's
// window dimension (size 1) reshaped away to [o, i] = 3x5, a 2-D dot contracting [1] x [1],
// and the result reshaped back to the convolution's 6x4x3.  Convolutions with a stride of 2
// or a window of 2 elements are not matmuls and stay.
module {
  func.func @main(%arg0: tensor<6x4x5xf32>, %arg1: tensor<3x5x1xf32>, %arg2: tensor<3x5x2xf32>) -> (tensor<6x4x3xf32>, tensor<3x4x3xf32>, tensor<5x4x3xf32>) {
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [0, b, f]x[o, i, 0]->[0, b, f], window = {stride = [1], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [1], reverse = [false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<6x4x5xf32>, tensor<3x5x1xf32>) -> tensor<6x4x3xf32>
    %1 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [0, b, f]x[o, i, 0]->[0, b, f], window = {stride = [2], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [1], reverse = [false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<6x4x5xf32>, tensor<3x5x1xf32>) -> tensor<3x4x3xf32>
    %2 = stablehlo.convolution(%arg0, %arg2) dim_numbers = [0, b, f]x[o, i, 0]->[0, b, f], window = {stride = [1], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [1], reverse = [false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<6x4x5xf32>, tensor<3x5x2xf32>) -> tensor<5x4x3xf32>
    return %0, %1, %2 : tensor<6x4x3xf32>, tensor<3x4x3xf32>, tensor<5x4x3xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-DAG:   %[[KERNEL:.+]] = stablehlo.reshape %arg1 : (tensor<3x5x1xf32>) -> tensor<3x5xf32>
// CHECK-DAG:   %[[ROWS:.+]] = stablehlo.reshape %arg0 : (tensor<6x4x5xf32>) -> tensor<24x5xf32>
// CHECK:       %[[DOT:.+]] = stablehlo.dot_general %[[ROWS]], %[[KERNEL]], contracting_dims = [1] x [1] : (tensor<24x5xf32>, tensor<3x5xf32>) -> tensor<24x3xf32>
// CHECK:       %[[POINTWISE:.+]] = stablehlo.reshape %[[DOT]] : (tensor<24x3xf32>) -> tensor<6x4x3xf32>
// CHECK:       %[[STRIDED:.+]] = stablehlo.convolution(%arg0, %arg1) {{.*}}stride = [2]
// CHECK:       %[[WIDE:.+]] = stablehlo.convolution(%arg0, %arg2)
// CHECK:       return %[[POINTWISE]], %[[STRIDED]], %[[WIDE]]

// -----

// Features first in the input ([f, b] -> [b, f]): the dot_general's dimensions come out as
// [batch, out feature] in the input's order, and a transpose puts them in the output's order.
module {
  func.func @main(%arg0: tensor<5x2xf32>, %arg1: tensor<5x3xf32>) -> tensor<3x2xf32> {
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [f, b]x[i, o]->[f, b], window = {stride = [], pad = [], lhs_dilate = [], rhs_dilate = [], reverse = []} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<5x2xf32>, tensor<5x3xf32>) -> tensor<3x2xf32>
    return %0 : tensor<3x2xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK:       %[[DOT:.+]] = stablehlo.dot_general %arg0, %arg1, contracting_dims = [0] x [0] : (tensor<5x2xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:  %[[T:.+]] = stablehlo.transpose %[[DOT]], dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT:  return %[[T]]

// -----

// Two matmuls feeding a multiply: the multiply runs on the two dots' 24x3 results and one
// reshape after it gives the 6x4x3 result.
module {
  func.func @main(%arg0: tensor<6x4x5xf32>, %arg1: tensor<3x5x1xf32>, %arg2: tensor<3x5x1xf32>) -> tensor<6x4x3xf32> {
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [0, b, f]x[o, i, 0]->[0, b, f], window = {stride = [1], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [1], reverse = [false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<6x4x5xf32>, tensor<3x5x1xf32>) -> tensor<6x4x3xf32>
    %1 = stablehlo.convolution(%arg0, %arg2) dim_numbers = [0, b, f]x[o, i, 0]->[0, b, f], window = {stride = [1], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [1], reverse = [false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<6x4x5xf32>, tensor<3x5x1xf32>) -> tensor<6x4x3xf32>
    %2 = stablehlo.multiply %0, %1 : tensor<6x4x3xf32>
    return %2 : tensor<6x4x3xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK:       %[[DOT1:.+]] = stablehlo.dot_general {{.*}} -> tensor<24x3xf32>
// CHECK:       %[[DOT2:.+]] = stablehlo.dot_general {{.*}} -> tensor<24x3xf32>
// CHECK:       %[[PRODUCT:.+]] = stablehlo.multiply %[[DOT1]], %[[DOT2]] : tensor<24x3xf32>
// CHECK-NEXT:  %[[OUT:.+]] = stablehlo.reshape %[[PRODUCT]] : (tensor<24x3xf32>) -> tensor<6x4x3xf32>
// CHECK-NEXT:  return %[[OUT]]
