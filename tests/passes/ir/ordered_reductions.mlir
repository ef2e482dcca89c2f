// PASSES: ordered-reductions
// ordered-reductions (run on every multi-device module) rewrites each float all_reduce /
// reduce_scatter whose combiner depends on the order (add, multiply; not max/min) as data
// movement (an all_gather, or an all_to_all of the blocks) followed by a fold in group
// order: ((x[g0] + x[g1]) + x[g2]) ...  Integer and max/min reductions stay native.  The
// module attribute hlo.ordered_reductions counts the folded ones; those it cannot fold stay
// native and are listed in hlo.unordered_reductions for the runner's warning.

// An f32 sum over the group {1, 0}: the operand gains a leading axis, is gathered along it in
// the group's order, and the two rows are added, row 0 (device 1's) first, with the
// all_reduce's own combiner (a stablehlo.map of its body).
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
// CHECK:       module attributes {hlo.ordered_reductions = 1 : i64
// CHECK-LABEL: func.func @main
// CHECK-NOT:   stablehlo.all_reduce
// CHECK:       %[[ROW:.+]] = stablehlo.reshape %arg0 : (tensor<8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT:  %[[ALL:.+]] = "stablehlo.all_gather"(%[[ROW]]) <{all_gather_dim = 0 : i64, replica_groups = dense<{{\[\[}}1, 0]]> {{.*}} -> tensor<2x8xf32>
// CHECK-NEXT:  %[[FIRST:.+]] = stablehlo.slice %[[ALL]] [0:1, 0:8]
// CHECK-NEXT:  %[[X0:.+]] = stablehlo.reshape %[[FIRST]]
// CHECK-NEXT:  %[[SECOND:.+]] = stablehlo.slice %[[ALL]] [1:2, 0:8]
// CHECK-NEXT:  %[[X1:.+]] = stablehlo.reshape %[[SECOND]]
// CHECK-NEXT:  %[[SUM:.+]] = "stablehlo.map"(%[[X0]], %[[X1]])
// CHECK:       stablehlo.add
// CHECK:       return %[[SUM]]
// CHECK-NOT:   stablehlo.all_reduce

// -----

// A reduce_scatter: the operand split into one block per participant, the blocks exchanged
// with an all_to_all over the same group (participant k receives every participant's block
// k), and the received blocks folded in group order.
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func @main(%arg0: tensor<8xf32>) -> tensor<4xf32> {
    %0 = "stablehlo.reduce_scatter"(%arg0) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, scatter_dimension = 0 : i64}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<8xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   stablehlo.reduce_scatter
// CHECK:       %[[BLOCKS:.+]] = stablehlo.reshape %arg0 : (tensor<8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:  %[[GOT:.+]] = "stablehlo.all_to_all"(%[[BLOCKS]]) {{.*}}split_count = 2 {{.*}} -> tensor<2x4xf32>
// CHECK:       stablehlo.slice %[[GOT]] [0:1, 0:4]
// CHECK:       stablehlo.slice %[[GOT]] [1:2, 0:4]
// CHECK:       %[[SUM:.+]] = "stablehlo.map"
// CHECK:       stablehlo.add
// CHECK:       return %[[SUM]]

// -----

// A float maximum (its result does not depend on the order) and an integer sum (exact in any
// order) stay native all_reduces, and nothing is counted.
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func @main(%arg0: tensor<8xf32>, %arg1: tensor<8xi32>) -> (tensor<8xf32>, tensor<8xi32>) {
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %m = stablehlo.maximum %a, %b : tensor<f32>
      stablehlo.return %m : tensor<f32>
    }) : (tensor<8xf32>) -> tensor<8xf32>
    %1 = "stablehlo.all_reduce"(%arg1) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<i32>, %b: tensor<i32>):
      %s = stablehlo.add %a, %b : tensor<i32>
      stablehlo.return %s : tensor<i32>
    }) : (tensor<8xi32>) -> tensor<8xi32>
    return %0, %1 : tensor<8xf32>, tensor<8xi32>
  }
}
// CHECK-NOT:   hlo.ordered_reductions
// CHECK-LABEL: func.func @main
// CHECK:       %[[MAX:.+]] = "stablehlo.all_reduce"(%arg0)
// CHECK:       stablehlo.maximum
// CHECK:       %[[COUNT:.+]] = "stablehlo.all_reduce"(%arg1)
// CHECK:       return %[[MAX]], %[[COUNT]]
// CHECK-NOT:   all_gather

// -----

// Replica groups of different sizes ({0, 1} and {2}) cannot be gathered as one array: the sum
// stays native and is reported, by kind and reason, in hlo.unordered_reductions.
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 3 : i32} {
  func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1], [2, -1]]> : tensor<2x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
// CHECK:       hlo.unordered_reductions = ["{{.*}}(all-reduce, replica groups of different sizes)"]
// CHECK-LABEL: func.func @main
// CHECK:       "stablehlo.all_reduce"(%arg0)
// CHECK-NOT:   all_gather
