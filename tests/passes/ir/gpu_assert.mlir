// PASSES: gpu-assert
// gpu-assert removes XLA's `__xla_gpu_assert(pred[]) -> token` runtime checks (portable
// StableHLO cannot stop a program; a warning names each one). A token result something
// takes becomes a fresh stablehlo.after_all; the computation around the check is untouched.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// A check nothing reads goes; the compare that computed its predicate is now dead but the
// pass leaves it (removing dead ops is canonicalize's job), and the result is unchanged.
module {
  func.func @main(%x: tensor<f32>) -> tensor<f32> {
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %ok = stablehlo.compare GE, %x, %zero : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %t = stablehlo.custom_call @__xla_gpu_assert(%ok) {has_side_effect = true, api_version = 4 : i32, backend_config = {error_msg = "x must be >= 0"}} : (tensor<i1>) -> !stablehlo.token
    %y = stablehlo.sqrt %x : tensor<f32>
    return %y : tensor<f32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT: __xla_gpu_assert
// CHECK: stablehlo.compare GE
// CHECK: %[[Y:.*]] = stablehlo.sqrt %arg0
// CHECK: return %[[Y]]

// -----

// A check whose token something takes: the token is a fresh after_all, and the user reads it.
module {
  func.func @main(%p: tensor<i1>) -> !stablehlo.token {
    %t = stablehlo.custom_call @__xla_gpu_assert(%p) {has_side_effect = true, backend_config = "{error_msg = \"p\"}"} : (tensor<i1>) -> !stablehlo.token
    %u = stablehlo.after_all %t : !stablehlo.token
    return %u : !stablehlo.token
  }
}
// CHECK-NOT: __xla_gpu_assert
// CHECK: %[[T:.*]] = stablehlo.after_all : !stablehlo.token
// CHECK: %[[U:.*]] = stablehlo.after_all %[[T]]
// CHECK: return %[[U]]

// -----

// Refused: the check's operand must be one pred[] (here a vector of them).
module {
  func.func @main(%p: tensor<4xi1>) {
    %t = stablehlo.custom_call @__xla_gpu_assert(%p) {has_side_effect = true} : (tensor<4xi1>) -> !stablehlo.token
    return
  }
}
// ERROR: :44:
// ERROR: custom-call __xla_gpu_assert
// ERROR: expects one pred[] operand, got ['tensor<4xi1>']
