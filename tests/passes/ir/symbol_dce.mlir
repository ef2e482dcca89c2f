// PASSES: symbol-dce
// symbol-dce removes private functions nothing calls and keeps those something calls.

module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = func.call @used(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @used(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @unused(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    return %arg0 : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK: call @used
// CHECK: func.func private @used
// CHECK-NOT: @unused
