// PASSES: canonicalize
// canonicalize is MLIR's canonicalizer as jaxlib ships it. On StableHLO it erases pure ops
// nothing reads and uniques constants (hoisting them to the function's entry block); it
// does not fold arithmetic nor merge equal non-constant ops (that is cse's job), and it
// never erases an op with side effects.

// Dead pure ops go; a side-effecting custom-call whose result nothing reads stays.
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %dead = stablehlo.sine %arg0 : tensor<4xf32>
    %0 = stablehlo.cosine %arg0 : tensor<4xf32>
    %effect = stablehlo.custom_call @keep_me(%0) {has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.sine
// CHECK: %[[COS:.*]] = stablehlo.cosine %arg0
// CHECK: stablehlo.custom_call @keep_me(%[[COS]]) {{.*}}has_side_effect = true
// CHECK: return %[[COS]]

// -----

// Two equal constants become one, defined in the entry block and read by every user,
// including the one inside a stablehlo.if branch; the two equal adds are both kept.
module {
  func.func @main(%arg0: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
    %one = stablehlo.constant dense<1.0> : tensor<4xf32>
    %0 = stablehlo.add %arg0, %one : tensor<4xf32>
    %2 = "stablehlo.if"(%p) ({
      %one_again = stablehlo.constant dense<1.0> : tensor<4xf32>
      %i = stablehlo.multiply %0, %one_again : tensor<4xf32>
      stablehlo.return %i : tensor<4xf32>
    }, {
      stablehlo.return %0 : tensor<4xf32>
    }) : (tensor<i1>) -> tensor<4xf32>
    %3 = stablehlo.add %2, %2 : tensor<4xf32>
    %4 = stablehlo.add %2, %2 : tensor<4xf32>
    %5 = stablehlo.subtract %3, %4 : tensor<4xf32>
    return %5 : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[ONE:.*]] = stablehlo.constant dense<1.000000e+00>
// CHECK-NOT: stablehlo.constant
// CHECK: %[[ADD:.*]] = stablehlo.add %arg0, %[[ONE]]
// CHECK: "stablehlo.if"
// CHECK: stablehlo.multiply %[[ADD]], %[[ONE]]
// CHECK: %[[A:.*]] = stablehlo.add %[[IF:.*]], %[[IF]]
// CHECK: %[[B:.*]] = stablehlo.add %[[IF]], %[[IF]]
// CHECK: stablehlo.subtract %[[A]], %[[B]]
