// PASSES: custom-call-policy
// OPTIONS: allow_custom_calls={'my_allowed_kernel'}
// custom-call-policy runs after the rewrites: a custom-call left must be one the user allowed
// (--allow-custom-call; kept untouched) or one jaxlib's CPU runtime runs (LAPACK, DUCC FFT;
// kept and marked hlo.cpu_only = true). Any other is an error naming each target, how many
// calls to it there are, and the fix.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// A LAPACK call jaxlib's CPU runtime runs is marked cpu_only; the allowed call is left
// exactly as it was (no mark); the plain ops around them are untouched.
module {
  func.func @main(%a: tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3x3xf32>) {
    %0:2 = stablehlo.custom_call @lapack_spotrf_ffi(%a) {mhlo.backend_config = {uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<i32>)
    %1 = stablehlo.custom_call @my_allowed_kernel(%a) : (tensor<3x3xf32>) -> tensor<3x3xf32>
    %2 = stablehlo.add %0#0, %1 : tensor<3x3xf32>
    return %2, %1 : tensor<3x3xf32>, tensor<3x3xf32>
  }
}
// CHECK: stablehlo.custom_call @lapack_spotrf_ffi(%arg0) {{{.*}}hlo.cpu_only = true
// CHECK: stablehlo.custom_call @my_allowed_kernel(%arg0) : (tensor<3x3xf32>) -> tensor<3x3xf32>
// CHECK: stablehlo.add

// -----

// A call no pass rewrote and nobody allowed (two calls to one target, one to another): an
// error line per target, the count of further calls, and the fix naming --allow-custom-call.
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @mystery_kernel(%x) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = stablehlo.custom_call @mystery_kernel(%0) : (tensor<4xf32>) -> tensor<4xf32>
    %2 = stablehlo.custom_call @other_kernel(%1) : (tensor<4xf32>) -> tensor<4xf32>
    %3 = stablehlo.custom_call @my_allowed_kernel(%2) : (tensor<4xf32>) -> tensor<4xf32>
    return %3 : tensor<4xf32>
  }
}
// ERROR: :29:
// ERROR: custom-call 'mystery_kernel' has no portable rewrite (and 1 more call(s) to it)
// ERROR: :31:
// ERROR: custom-call 'other_kernel' has no portable rewrite
// ERROR: fix: give it a CPU meaning with --custom-calls FILE.py
// ERROR: --allow-custom-call 'mystery_kernel' --allow-custom-call 'other_kernel'
