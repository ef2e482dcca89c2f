// PASSES: strip-annotations
// strip-annotations removes custom-calls that only annotate a value (Sharding,
// SPMDFullToShardShape / SPMDShardToFullShape, MoveToHost / MoveToDevice, LayoutConstraint,
// Shardy's xla.sdy.* markers, ...): each result is replaced by its operand.  Calls with no
// result (InspectSharding, xla.sdy.ShardingGroup) are erased.  Other targets stay; an
// annotation that changes its operand's shape is refused.

// A chain Sharding -> MoveToHost feeding a call to another target: both annotations vanish,
// the other call now reads the entry argument directly; the result-less InspectSharding goes.
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{replicated}"} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = stablehlo.custom_call @MoveToHost(%0) : (tensor<4xf32>) -> tensor<4xf32>
    stablehlo.custom_call @InspectSharding(%arg0) {has_side_effect = true} : (tensor<4xf32>) -> ()
    %2 = stablehlo.custom_call @ShardingLike(%1) : (tensor<4xf32>) -> tensor<4xf32>
    return %2 : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   @Sharding(
// CHECK-NOT:   @MoveToHost
// CHECK-NOT:   @InspectSharding
// CHECK:       %[[OTHER:.+]] = stablehlo.custom_call @ShardingLike(%arg0)
// CHECK-NEXT:  return %[[OTHER]]

// -----

// Shardy's markers as jax writes them before SPMD partitioning: FuncResultSharding passes its
// operand through, ShardingGroup (no result) is erased; the op between them stays.
module {
  func.func @main(%arg0: tensor<8x2xf32>) -> tensor<8x2xf32> {
    stablehlo.custom_call @xla.sdy.ShardingGroup(%arg0) {has_side_effect = true, mhlo.frontend_attributes = {xla.sdy.sharding_group_id = "0"}} : (tensor<8x2xf32>) -> ()
    %0 = stablehlo.exponential %arg0 : tensor<8x2xf32>
    %1 = stablehlo.custom_call @xla.sdy.FuncResultSharding(%0) {has_side_effect = true} : (tensor<8x2xf32>) -> tensor<8x2xf32>
    return %1 : tensor<8x2xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[E:.+]] = stablehlo.exponential %arg0
// CHECK-NEXT:  return %[[E]]

// -----

// Refused: an SPMD shape change (4x2 -> 2x2) is not the identity, so the dump was not
// partitioned; the error names the call and its line.
module {
  func.func @main(%arg0: tensor<4x2xf32>) -> tensor<2x2xf32> {
    %0 = stablehlo.custom_call @SPMDFullToShardShape(%arg0) {mhlo.sharding = "{manual}"} : (tensor<4x2xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
}
// ERROR: 49:10
// ERROR: SPMDFullToShardShape
// ERROR: changes the shape of its operand

// -----

// Refused: a shard_map boundary (Shardy's GlobalToLocalShape) that splits its operand, in a
// module SPMD partitioning has not run on.
module {
  func.func @main(%arg0: tensor<4x2xf32>) -> tensor<2x2xf32> {
    %0 = stablehlo.custom_call @xla.sdy.GlobalToLocalShape(%arg0) : (tensor<4x2xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
}
// ERROR: xla.sdy.GlobalToLocalShape
// ERROR: a shard_map (Shardy manual computation) in a module SPMD partitioning has not run on
