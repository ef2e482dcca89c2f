// PASSES: inline
// inline replaces every func.call by the callee's body (fusions kept as functions by
// --keep-fusions, called computations), then removes the private functions nothing calls.

// A fusion kept as a private function: its body lands in @main, wired to @main's own
// arguments and result, and the function itself is gone.
module {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %0 = call @fused_square_plus(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @fused_square_plus(%p0: tensor<4xf32>, %p1: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.multiply %p0, %p0 : tensor<4xf32>
    %1 = stablehlo.add %0, %p1 : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>)
// CHECK-NOT:   call
// CHECK:       %[[SQ:.+]] = stablehlo.multiply %arg0, %arg0
// CHECK-NEXT:  %[[SUM:.+]] = stablehlo.add %[[SQ]], %arg1
// CHECK-NEXT:  return %[[SUM]]
// CHECK-NOT:   func.func private
// CHECK-NOT:   @fused_square_plus

// -----

// Calls nest: a called function that itself calls another is inlined all the way down,
// and a function called twice is copied at both calls.
module {
  func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = call @outer(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
    %1 = call @inner(%0) : (tensor<2xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
  func.func private @outer(%a: tensor<2xf32>) -> tensor<2xf32> {
    %0 = call @inner(%a) : (tensor<2xf32>) -> tensor<2xf32>
    %1 = stablehlo.negate %0 : tensor<2xf32>
    return %1 : tensor<2xf32>
  }
  func.func private @inner(%a: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.exponential %a : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   call
// CHECK:       %[[E1:.+]] = stablehlo.exponential %arg0
// CHECK-NEXT:  %[[N:.+]] = stablehlo.negate %[[E1]]
// CHECK-NEXT:  %[[E2:.+]] = stablehlo.exponential %[[N]]
// CHECK-NEXT:  return %[[E2]]
// CHECK-NOT:   func.func private

// -----

// A public function other than the entry is kept (only private functions are dropped).
module {
  func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    return %arg0 : tensor<2xf32>
  }
  func.func @exported(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.abs %arg0 : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK:       func.func @exported
// CHECK-NEXT:  stablehlo.abs
