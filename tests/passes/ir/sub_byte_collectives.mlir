// PASSES: sub-byte-collectives
// sub-byte-collectives writes each collective on a sub-byte element type (i2, ui2, i4, ui4,
// f4...) as the same collective on a byte-wide type (i8 / ui8 / f32: exact for every value),
// since XLA's CPU runtime moves sub-byte arrays wrongly.  Data movement (all_gather,
// all_to_all, collective_permute, collective_broadcast) moves the widened values and converts
// back; all_reduce / reduce_scatter gather (or exchange) the widened operands and fold them
// with the op's own reducer in the narrow type, in group order.  Byte-wide collectives stay.

// An i4 all_gather and collective_permute: convert to i8, the same collective (same groups,
// same pairs) on i8, convert back to i4.  The i8 all_gather beside them is left as it is.
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func @main(%arg0: tensor<6xi4>, %arg1: tensor<6xi8>) -> (tensor<12xi4>, tensor<12xi8>, tensor<6xi4>) {
    %0 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> : (tensor<6xi4>) -> tensor<12xi4>
    %1 = "stablehlo.all_gather"(%arg1) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> : (tensor<6xi8>) -> tensor<12xi8>
    %2 = "stablehlo.collective_permute"(%arg0) <{source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<6xi4>) -> tensor<6xi4>
    return %0, %1, %2 : tensor<12xi4>, tensor<12xi8>, tensor<6xi4>
  }
}
// CHECK-LABEL: func.func @main
// CHECK:       %[[W:.+]] = stablehlo.convert %arg0 : (tensor<6xi4>) -> tensor<6xi8>
// CHECK-NEXT:  %[[G:.+]] = "stablehlo.all_gather"(%[[W]]) <{all_gather_dim = 0 : i64, replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>}> : (tensor<6xi8>) -> tensor<12xi8>
// CHECK-NEXT:  %[[GATHERED:.+]] = stablehlo.convert %[[G]] : (tensor<12xi8>) -> tensor<12xi4>
// CHECK-NEXT:  %[[BYTES:.+]] = "stablehlo.all_gather"(%arg1) {{.*}} : (tensor<6xi8>) -> tensor<12xi8>
// CHECK-NEXT:  %[[W2:.+]] = stablehlo.convert %arg0 : (tensor<6xi4>) -> tensor<6xi8>
// CHECK-NEXT:  %[[P:.+]] = "stablehlo.collective_permute"(%[[W2]]) <{source_target_pairs = dense<{{\[\[}}0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<6xi8>) -> tensor<6xi8>
// CHECK-NEXT:  %[[PERMUTED:.+]] = stablehlo.convert %[[P]] : (tensor<6xi8>) -> tensor<6xi4>
// CHECK-NEXT:  return %[[GATHERED]], %[[BYTES]], %[[PERMUTED]]

// -----

// An i4 sum: the widened operand gathered along a new leading axis, narrowed back, and the
// two participants' rows added in group order, in i4 (so the sum wraps as the i4 all_reduce
// would), by the all_reduce's own reducer.
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func @main(%arg0: tensor<6xi4>) -> tensor<6xi4> {
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<i4>, %b: tensor<i4>):
      %s = stablehlo.add %a, %b : tensor<i4>
      stablehlo.return %s : tensor<i4>
    }) : (tensor<6xi4>) -> tensor<6xi4>
    return %0 : tensor<6xi4>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   stablehlo.all_reduce
// CHECK:       %[[W:.+]] = stablehlo.convert %arg0 : (tensor<6xi4>) -> tensor<6xi8>
// CHECK-NEXT:  %[[ROW:.+]] = stablehlo.reshape %[[W]] : (tensor<6xi8>) -> tensor<1x6xi8>
// CHECK-NEXT:  %[[G:.+]] = "stablehlo.all_gather"(%[[ROW]]) {{.*}} : (tensor<1x6xi8>) -> tensor<2x6xi8>
// CHECK-NEXT:  %[[N:.+]] = stablehlo.convert %[[G]] : (tensor<2x6xi8>) -> tensor<2x6xi4>
// CHECK-NEXT:  stablehlo.slice %[[N]] [0:1, 0:6]
// CHECK:       stablehlo.slice %[[N]] [1:2, 0:6]
// CHECK:       %[[SUM:.+]] = "stablehlo.map"
// CHECK-NEXT:  ^bb0({{.*}}: tensor<i4>, {{.*}}: tensor<i4>):
// CHECK-NEXT:  stablehlo.add
// CHECK:       return %[[SUM]]

// -----

// A 4-bit float moves as f32; an unsigned 2-bit integer as ui8.
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func @main(%arg0: tensor<4xf4E2M1FN>, %arg1: tensor<4xui2>) -> (tensor<4xf4E2M1FN>, tensor<4xui2>) {
    %0 = "stablehlo.collective_permute"(%arg0) <{source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<4xf4E2M1FN>) -> tensor<4xf4E2M1FN>
    %1 = "stablehlo.collective_permute"(%arg1) <{source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<4xui2>) -> tensor<4xui2>
    return %0, %1 : tensor<4xf4E2M1FN>, tensor<4xui2>
  }
}
// CHECK-LABEL: func.func @main
// CHECK:       stablehlo.convert %arg0 : (tensor<4xf4E2M1FN>) -> tensor<4xf32>
// CHECK-NEXT:  "stablehlo.collective_permute"{{.*}} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:  stablehlo.convert {{.*}} : (tensor<4xf32>) -> tensor<4xf4E2M1FN>
// CHECK:       stablehlo.convert %arg1 : (tensor<4xui2>) -> tensor<4xui8>
// CHECK-NEXT:  "stablehlo.collective_permute"{{.*}} : (tensor<4xui8>) -> tensor<4xui8>
// CHECK-NEXT:  stablehlo.convert {{.*}} : (tensor<4xui8>) -> tensor<4xui2>
