// PASSES: legalize-chlo
// legalize-chlo rewrites the CHLO ops still in a module (erf, top_k, acosh, ...) into
// StableHLO through MLIR's own chlo-legalize-to-stablehlo; StableHLO ops are left as they are.

// erf becomes a polynomial approximation in StableHLO: no chlo op remains, and the
// neighbouring StableHLO op is untouched and still consumes the rewritten value.
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = chlo.erf %arg0 : tensor<4xf32> -> tensor<4xf32>
    %1 = stablehlo.add %0, %arg0 : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   chlo.
// CHECK:       stablehlo.multiply
// CHECK:       %[[ERF:.+]] = stablehlo.clamp
// CHECK:       %[[SUM:.+]] = stablehlo.add %[[ERF]], %arg0
// CHECK-NEXT:  return %[[SUM]]
// CHECK-NOT:   chlo.

// -----

// top_k becomes a sort of the operand with an iota of indices, then slices of the first k.
module {
  func.func @main(%arg0: tensor<8xf32>) -> (tensor<3xf32>, tensor<3xi32>) {
    %values, %indices = chlo.top_k(%arg0, k = 3) : tensor<8xf32> -> (tensor<3xf32>, tensor<3xi32>)
    return %values, %indices : tensor<3xf32>, tensor<3xi32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   chlo.top_k
// CHECK:       %[[IOTA:.+]] = stablehlo.iota dim = 0 : tensor<8xi32>
// CHECK:       %[[SORTED:.+]]:2 = "stablehlo.sort"(%arg0, %[[IOTA]])
// CHECK:       stablehlo.compare GT
// CHECK:       stablehlo.slice %[[SORTED]]#0 [0:3]
// CHECK:       stablehlo.slice %[[SORTED]]#1 [0:3]

// -----

// A module with only StableHLO ops comes out unchanged.
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NEXT:  %[[T:.+]] = stablehlo.tanh %arg0 : tensor<4xf32>
// CHECK-NEXT:  return %[[T]]
