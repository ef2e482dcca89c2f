// PASSES: cse
// cse is MLIR's common subexpression elimination as jaxlib ships it: equal pure ops on
// the same operands become one, also into nested regions they dominate; ops with side
// effects are never merged.

// Two equal adds become one and its users read it; a different op on the same operands stays.
module {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<4xf32>
    %1 = stablehlo.add %arg0, %arg1 : tensor<4xf32>
    %2 = stablehlo.subtract %arg0, %arg1 : tensor<4xf32>
    %3 = stablehlo.multiply %0, %1 : tensor<4xf32>
    %4 = stablehlo.multiply %3, %2 : tensor<4xf32>
    return %4 : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK: %[[ADD:.*]] = stablehlo.add %arg0, %arg1
// CHECK-NOT: stablehlo.add
// CHECK: %[[SUB:.*]] = stablehlo.subtract %arg0, %arg1
// CHECK: %[[SQ:.*]] = stablehlo.multiply %[[ADD]], %[[ADD]]
// CHECK: stablehlo.multiply %[[SQ]], %[[SUB]]

// -----

// An op inside a stablehlo.if branch equal to one before the if is replaced by it.
module {
  func.func @main(%arg0: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
    %0 = stablehlo.exponential %arg0 : tensor<4xf32>
    %1 = "stablehlo.if"(%p) ({
      %e = stablehlo.exponential %arg0 : tensor<4xf32>
      %s = stablehlo.add %e, %0 : tensor<4xf32>
      stablehlo.return %s : tensor<4xf32>
    }, {
      stablehlo.return %0 : tensor<4xf32>
    }) : (tensor<i1>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
// CHECK: %[[EXP:.*]] = stablehlo.exponential %arg0
// CHECK-NOT: stablehlo.exponential
// CHECK: stablehlo.add %[[EXP]], %[[EXP]]

// -----

// Two equal custom-calls with side effects are both kept.
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @effect(%arg0) {has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = stablehlo.custom_call @effect(%arg0) {has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>
    %2 = stablehlo.add %0, %1 : tensor<4xf32>
    return %2 : tensor<4xf32>
  }
}
// CHECK: %[[A:.*]] = stablehlo.custom_call @effect(%arg0)
// CHECK: %[[B:.*]] = stablehlo.custom_call @effect(%arg0)
// CHECK: stablehlo.add %[[A]], %[[B]]
