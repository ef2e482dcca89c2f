// PASSES: tpu-async-collectives
// tpu-async-collectives turns the TPU backend's async collective chains (after the importer
// inlines the fusions: AsyncCollectiveStart(coll(x)) -> (x, buffer, flags...), compute,
// AsyncCollectiveDone(x, buffer, collectives carried..., flags...)) into one plain
// collective: Start's results become (x, coll(x)), its flags vanish, and Done's result is
// the collective of Start's chain (its chain_id) it carries, else Start's own collective.
// A flag read by anything but Done is refused: flags carry no values.

// Done carries two all_gathers of one shape: another chain's (chain_id 1, over %arg1) and its
// own (chain_id 0, over Start's pass-through of %arg0).  Its result is its own chain's
// all_gather, now reading %arg0 directly; neither custom-call remains.
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>) -> tensor<4x4xf32> {
    %0 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> {mhlo.frontend_attributes = {chain_id = "0"}} : (tensor<2x4xf32>) -> tensor<4x4xf32>
    %1:4 = stablehlo.custom_call @AsyncCollectiveStart(%0) : (tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>, tensor<2xi32>, tensor<ui32>)
    %2 = "stablehlo.all_gather"(%arg1) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> {mhlo.frontend_attributes = {chain_id = "1"}} : (tensor<2x4xf32>) -> tensor<4x4xf32>
    %3 = "stablehlo.all_gather"(%1#0) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> {mhlo.frontend_attributes = {chain_id = "0"}} : (tensor<2x4xf32>) -> tensor<4x4xf32>
    %4 = stablehlo.custom_call @AsyncCollectiveDone(%1#0, %1#1, %2, %3, %1#2, %1#3) : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<2xi32>, tensor<ui32>) -> tensor<4x4xf32>
    return %4 : tensor<4x4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   AsyncCollective
// CHECK:       "stablehlo.all_gather"(%arg1) {{.*}}chain_id = "1"
// CHECK-NEXT:  %[[OWN:.+]] = "stablehlo.all_gather"(%arg0) {{.*}}chain_id = "0"
// CHECK-NEXT:  return %[[OWN]]
// CHECK-NOT:   AsyncCollective

// -----

// A Done that carries no collective completes Start's: the all_reduce Start wraps is the
// result, and the compute between them reads Start's pass-through (the operand itself).
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %0 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %1:3 = stablehlo.custom_call @AsyncCollectiveStart(%0) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<ui32>)
    %2 = stablehlo.negate %1#0 : tensor<4xf32>
    %3 = stablehlo.custom_call @AsyncCollectiveDone(%1#0, %1#1, %1#2) : (tensor<4xf32>, tensor<4xf32>, tensor<ui32>) -> tensor<4xf32>
    return %2, %3 : tensor<4xf32>, tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK:       %[[SUM:.+]] = "stablehlo.all_reduce"(%arg0)
// CHECK-NOT:   AsyncCollective
// CHECK:       %[[NEG:.+]] = stablehlo.negate %arg0
// CHECK-NEXT:  return %[[NEG]], %[[SUM]]

// -----

// Refused: the flag (Start's result 2) is returned, so something other than Done reads it.
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func @main(%arg0: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<ui32>) {
    %0 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> : (tensor<2x4xf32>) -> tensor<4x4xf32>
    %1:3 = stablehlo.custom_call @AsyncCollectiveStart(%0) : (tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>, tensor<ui32>)
    %2 = stablehlo.custom_call @AsyncCollectiveDone(%1#0, %1#1, %1#2) : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<ui32>) -> tensor<4x4xf32>
    return %2, %1#2 : tensor<4x4xf32>, tensor<ui32>
  }
}
// ERROR: AsyncCollectiveStart
// ERROR: flag result 2 is read by func.return; flags carry no values
