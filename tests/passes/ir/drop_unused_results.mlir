// PASSES: drop-unused-results
// drop-unused-results removes (1) the trailing 1-D i8/u8 workspace result of GPU library calls
// (__cublas$*, __cudnn$*, __cusolver$*, te_fused_attn_*) when nothing reads it, and (2) results
// of stablehlo.if / stablehlo.case nothing reads, together with what each branch returns for
// them. Read results, and calls of other targets, keep all their results.

// An unread workspace of a cuBLAS call goes (result_layouts follow); a read one stays; an
// unread trailing i8 result of a target the pass does not own stays.
module {
  func.func @main(%a: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<16xi8>, tensor<2x2xf32>) {
    %0:2 = stablehlo.custom_call @"__cublas$gemm"(%a, %a) {operand_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>]} : (tensor<2x2xf32>, tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<8xi8>)
    %1:2 = stablehlo.custom_call @"__cublas$gemm"(%a, %a) : (tensor<2x2xf32>, tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<16xi8>)
    %2:2 = stablehlo.custom_call @my_kernel(%a) : (tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<8xi8>)
    return %0#0, %1#0, %1#1, %2#0 : tensor<2x2xf32>, tensor<2x2xf32>, tensor<16xi8>, tensor<2x2xf32>
  }
}
// CHECK: %[[G0:.*]] = stablehlo.custom_call @{{"?}}__cublas$gemm{{"?}}(%arg0, %arg0)
// CHECK-SAME: result_layouts = [dense<[1, 0]> : tensor<2xindex>]
// CHECK-SAME: -> tensor<2x2xf32>
// CHECK: %[[G1:.*]]:2 = stablehlo.custom_call @{{"?}}__cublas$gemm{{"?}}(%arg0, %arg0)
// CHECK-SAME: -> (tensor<2x2xf32>, tensor<16xi8>)
// CHECK: %[[K:.*]]:2 = stablehlo.custom_call @my_kernel(%arg0)
// CHECK-SAME: -> (tensor<2x2xf32>, tensor<8xi8>)
// CHECK: return %[[G0]], %[[G1]]#0, %[[G1]]#1, %[[K]]#0

// -----

// Of a three-result stablehlo.if only result #1 is read: the if keeps one result and each
// branch returns only its second value (the multiply / the divide).
module {
  func.func @main(%p: tensor<i1>, %x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
    %0:3 = "stablehlo.if"(%p) ({
      %a = stablehlo.add %x, %y : tensor<4xf32>
      %m = stablehlo.multiply %x, %y : tensor<4xf32>
      %e = stablehlo.exponential %x : tensor<4xf32>
      stablehlo.return %a, %m, %e : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
    }, {
      %s = stablehlo.subtract %x, %y : tensor<4xf32>
      %d = stablehlo.divide %x, %y : tensor<4xf32>
      %n = stablehlo.negate %x : tensor<4xf32>
      stablehlo.return %s, %d, %n : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
    }) : (tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    return %0#1 : tensor<4xf32>
  }
}
// CHECK: %[[IF:.*]] = "stablehlo.if"(%arg0)
// CHECK: %[[M:.*]] = stablehlo.multiply %arg1, %arg2
// CHECK: stablehlo.return %[[M]] : tensor<4xf32>
// CHECK: %[[D:.*]] = stablehlo.divide %arg1, %arg2
// CHECK: stablehlo.return %[[D]] : tensor<4xf32>
// CHECK-NEXT: }) : (tensor<i1>) -> tensor<4xf32>
// CHECK: return %[[IF]] : tensor<4xf32>

// -----

// stablehlo.case likewise: result #0 is unread, so the case and its branches keep only #1.
module {
  func.func @main(%i: tensor<i32>, %x: tensor<4xf32>) -> tensor<4xf32> {
    %0:2 = "stablehlo.case"(%i) ({
      %a = stablehlo.abs %x : tensor<4xf32>
      %b = stablehlo.sine %x : tensor<4xf32>
      stablehlo.return %a, %b : tensor<4xf32>, tensor<4xf32>
    }, {
      %c = stablehlo.cosine %x : tensor<4xf32>
      %d = stablehlo.tanh %x : tensor<4xf32>
      stablehlo.return %c, %d : tensor<4xf32>, tensor<4xf32>
    }) : (tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>)
    return %0#1 : tensor<4xf32>
  }
}
// CHECK: %[[CASE:.*]] = "stablehlo.case"(%arg0)
// CHECK: %[[SIN:.*]] = stablehlo.sine %arg1
// CHECK: stablehlo.return %[[SIN]] : tensor<4xf32>
// CHECK: %[[TANH:.*]] = stablehlo.tanh %arg1
// CHECK: stablehlo.return %[[TANH]] : tensor<4xf32>
// CHECK-NEXT: }) : (tensor<i32>) -> tensor<4xf32>
// CHECK: return %[[CASE]]
