// PASSES: collective-cleanup
// collective-cleanup erases collectives whose results nothing reads (then those that fed only
// them) and merges a collective into an earlier identical one (same op, operands, attributes
// and reduction body). MLIR's own DCE and CSE leave collectives alone because they
// communicate; a dump is an SPMD program, so the change happens on every device alike.

// An all_reduce nothing reads goes, and so does the all_gather that fed only it; the
// all_reduce the function returns stays.
module {
  func.func @main(%x: tensor<6xf32>) -> tensor<6xf32> {
    %g = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<6xf32>) -> tensor<24xf32>
    %dead = "stablehlo.all_reduce"(%g) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %m = stablehlo.multiply %a, %b : tensor<f32>
      stablehlo.return %m : tensor<f32>
    }) {replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<24xf32>) -> tensor<24xf32>
    %kept = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<6xf32>) -> tensor<6xf32>
    return %kept : tensor<6xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.all_gather
// CHECK: %[[KEPT:.*]] = "stablehlo.all_reduce"(%arg0)
// CHECK: stablehlo.add
// CHECK-NOT: stablehlo.all_reduce
// CHECK: return %[[KEPT]]

// -----

// Two identical all_reduces on the same operand become the first; one with other replica
// groups and one with another reduction body (multiply) stay apart.
module {
  func.func @main(%x: tensor<6xf32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) {
    %a = "stablehlo.all_reduce"(%x) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>} : (tensor<6xf32>) -> tensor<6xf32>
    %b = "stablehlo.all_reduce"(%x) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>} : (tensor<6xf32>) -> tensor<6xf32>
    %c = "stablehlo.all_reduce"(%x) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>} : (tensor<6xf32>) -> tensor<6xf32>
    %d = "stablehlo.all_reduce"(%x) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.multiply %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>} : (tensor<6xf32>) -> tensor<6xf32>
    return %a, %b, %c, %d : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK: %[[A:.*]] = "stablehlo.all_reduce"(%arg0)
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1], [2, 3]]>
// CHECK: stablehlo.add
// CHECK: %[[C:.*]] = "stablehlo.all_reduce"(%arg0)
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 2], [1, 3]]>
// CHECK: stablehlo.add
// CHECK: %[[D:.*]] = "stablehlo.all_reduce"(%arg0)
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1], [2, 3]]>
// CHECK: stablehlo.multiply
// CHECK-NOT: stablehlo.all_reduce
// CHECK: return %[[A]], %[[A]], %[[C]], %[[D]]

// -----

// Identical collective_permutes merge; one with other source-target pairs stays.
module {
  func.func @main(%x: tensor<6xf32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) {
    %p = "stablehlo.collective_permute"(%x) {source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>} : (tensor<6xf32>) -> tensor<6xf32>
    %q = "stablehlo.collective_permute"(%x) {source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>} : (tensor<6xf32>) -> tensor<6xf32>
    %r = "stablehlo.collective_permute"(%x) {source_target_pairs = dense<[[0, 0], [1, 1]]> : tensor<2x2xi64>} : (tensor<6xf32>) -> tensor<6xf32>
    return %p, %q, %r : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>
  }
}
// CHECK: %[[P:.*]] = "stablehlo.collective_permute"(%arg0)
// CHECK: %[[R:.*]] = "stablehlo.collective_permute"(%arg0)
// CHECK-NOT: stablehlo.collective_permute
// CHECK: return %[[P]], %[[P]], %[[R]]
