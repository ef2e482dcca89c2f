// PASSES: xla-builder-math
// xla-builder-math rewrites xla_builder.math.<Fn> custom-calls (XLA's client math library
// kept as named calls, as XLA's own HLO tests write them): a call carrying its computation
// (called_computations) is that computation, inlined; otherwise the function of the same
// definition: CHLO's op (legalized to StableHLO at once) or JAX's lowering of the lax
// function, cloned in.  A function it has neither for, with no computation, is refused.

// The call carries XLA's expansion: its body is inlined on the call's operands, and the
// computation's function is removed.
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @xla_builder.math.Square(%arg0) {called_computations = [@square]} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @square(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.multiply %x, %x : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[SQ:.+]] = stablehlo.multiply %arg0, %arg0 : tensor<4xf32>
// CHECK-NEXT:  return %[[SQ]]
// CHECK-NOT:   @square

// -----

// No computation: Tan is CHLO's tan, legalized at once (to stablehlo.tan: no chlo op remains);
// a custom-call outside xla_builder.math stays.
module {
  func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %0 = stablehlo.custom_call @xla_builder.math.Tan(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = stablehlo.custom_call @xla_builder.other.Tan(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    return %0, %1 : tensor<4xf32>, tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   chlo.
// CHECK:       %[[TAN:.+]] = stablehlo.tan %arg0 : tensor<4xf32>
// CHECK-NEXT:  %[[OTHER:.+]] = stablehlo.custom_call @xla_builder.other.Tan(%arg0)
// CHECK-NEXT:  return %[[TAN]], %[[OTHER]]

// -----

// No CHLO op: Igamma is JAX's lowering of lax.igamma, cloned in (its private helpers
// inlined, so no call and no new function).
module {
  func.func @main(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @xla_builder.math.Igamma(%arg0, %arg1) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK-NOT:   call @
// CHECK:       stablehlo.while
// CHECK-NOT:   func.func

// -----

// Refused: a function with no portable form here and no computation to inline.
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @xla_builder.math.Frobnicate(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// ERROR: no portable form of xla::Frobnicate
// ERROR: the call carries no computation (to_apply) to inline

// -----

// Refused: Zeta(x, q) with one operand.
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @xla_builder.math.Zeta(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// ERROR: xla::Zeta takes 2 operand(s), the call has 1
