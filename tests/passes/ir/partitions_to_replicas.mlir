// PASSES: partitions-to-replicas
// partitions-to-replicas makes a module of R replicas x P partitions run as R*P replicas:
// device d = replica * P + partition.  partition_id becomes replica_id mod P and replica_id
// becomes replica_id / P; every collective gets the explicit groups of flattened ids it
// reached in the dump, with no channel_handle and no use_global_device_ids; mhlo.sharding on
// the entry's arguments moves to hlo.sharding; the module says R*P replicas, 1 partition.

// Two replicas x two partitions: the ids computed from replica_id, the device counts, and the
// sharding moved.
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32} {
  func.func @main(%arg0: tensor<4xf32> {mhlo.sharding = "{replicated}"}) -> (tensor<ui32>, tensor<ui32>) {
    %0 = stablehlo.partition_id : tensor<ui32>
    %1 = stablehlo.replica_id : tensor<ui32>
    return %0, %1 : tensor<ui32>, tensor<ui32>
  }
}
// CHECK:       module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32}
// CHECK-LABEL: func.func @main(%arg0: tensor<4xf32> {hlo.sharding = "{replicated}"})
// CHECK-NOT:   stablehlo.partition_id
// CHECK:       %[[R1:.+]] = stablehlo.replica_id
// CHECK-NEXT:  %[[P:.+]] = stablehlo.constant dense<2> : tensor<ui32>
// CHECK-NEXT:  %[[PARTITION:.+]] = stablehlo.remainder %[[R1]], %[[P]]
// CHECK:       %[[R2:.+]] = stablehlo.replica_id
// CHECK-NEXT:  %[[P2:.+]] = stablehlo.constant dense<2> : tensor<ui32>
// CHECK-NEXT:  %[[REPLICA:.+]] = stablehlo.divide %[[R2]], %[[P2]]
// CHECK:       return %[[PARTITION]], %[[REPLICA]]

// -----

// Each of XLA's group modes becomes explicit flattened groups:
// - no channel: cross-replica, {0, 1} = replicas 0 and 1 of each partition -> {0, 2}, {1, 3};
// - a channel: cross-partition, {0}, {1} -> each replica's own partitions -> {0, 1}, {2, 3};
// - use_global_device_ids: the ids are flattened already and stay {0, 3}, {1, 2};
// - a collective_permute on a channel: its pairs of partitions, in every replica.
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32} {
  func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0], [1]]> : tensor<2x1xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %2 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, replica_groups = dense<[[0, 3], [1, 2]]> : tensor<2x2xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %3 = "stablehlo.collective_permute"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 6, type = 1>, source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<4xf32>) -> tensor<4xf32>
    return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   channel_handle
// CHECK-NOT:   use_global_device_ids
// CHECK:       "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<{{\[\[}}0, 2], [1, 3]]> : tensor<2x2xi64>}>
// CHECK:       "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<{{\[\[}}0, 1], [2, 3]]> : tensor<2x2xi64>}>
// CHECK:       "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<{{\[\[}}0, 3], [1, 2]]> : tensor<2x2xi64>}>
// CHECK:       "stablehlo.collective_permute"(%arg0) <{source_target_pairs = dense<{{\[\[}}0, 1], [1, 0], [2, 3], [3, 2]]> : tensor<4x2xi64>}>
// CHECK-NOT:   channel_handle

// -----

// A replicas-only module: the groups are already flattened ids and stay as they are.
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<8xf32> {
    %0 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, replica_groups = dense<[[3, 1], [0, 2]]> : tensor<2x2xi64>}> : (tensor<4xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
// CHECK:       mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32
// CHECK:       "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, replica_groups = dense<{{\[\[}}3, 1], [0, 2]]> : tensor<2x2xi64>}>

// -----

// Refused: a send between devices (the importer turns matched send/recv pairs into a
// collective_permute; one left unmatched has no CPU form), named with its location.
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func @main(%arg0: tensor<4xf32>) -> !stablehlo.token {
    %0 = stablehlo.after_all : !stablehlo.token
    %1 = "stablehlo.send"(%arg0, %0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, is_host_transfer = false}> : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token
    return %1 : !stablehlo.token
  }
}
// ERROR: 84:10
// ERROR: send/recv between devices has no CPU form

// -----

// A group naming a replica the module does not have (replicas 2 and 3 of 2) is refused: flattened,
// it would silently name device 4 or 5 of another replica's partitions.
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32} {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// ERROR: :97:
// ERROR: its groups name replica id(s) [2, 3] but the module has 2 replicas

// -----

// A collective_permute pair naming a partition beyond the module's (partition 3 of 2).
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32} {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "stablehlo.collective_permute"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 3]]> : tensor<1x2xi64>}> : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// ERROR: its groups name partition id(s) [3] but the module has 2 partitions
