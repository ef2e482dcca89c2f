// PASSES: bounds-to-static
// bounds-to-static runs a module whose entry takes bounded dynamic arrays
// (tensor<?xf32, #stablehlo.bounds<4>>) at the bounds: every bounded dynamic type becomes the
// static type of its bound (entry signature, values, block arguments). Where an op sets a size
// from data (set_dimension_size, ...), StableHLO's shape refinement runs instead and folds
// what it can; a dynamic dimension without a bound has no size to run at and is refused.

// No size setter: the argument, the add and the result all take the bound's static shape.
module {
  func.func @main(%x: tensor<?xf32, #stablehlo.bounds<4>>, %y: tensor<3xf32>) -> (tensor<?xf32, #stablehlo.bounds<4>>, tensor<3xf32>) {
    %0 = stablehlo.add %x, %x : tensor<?xf32, #stablehlo.bounds<4>>
    %1 = stablehlo.negate %y : tensor<3xf32>
    return %0, %1 : tensor<?xf32, #stablehlo.bounds<4>>, tensor<3xf32>
  }
}
// CHECK-LABEL: func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<3xf32>) -> (tensor<4xf32>, tensor<3xf32>)
// CHECK: %[[S:.*]] = stablehlo.add %arg0, %arg0 : tensor<4xf32>
// CHECK: %[[N:.*]] = stablehlo.negate %arg1 : tensor<3xf32>
// CHECK: return %[[S]], %[[N]]
// CHECK-NOT: bounds

// -----

// Values inside regions too: the while loop's carried value and its block arguments in both
// regions take the bound's static shape.
module {
  func.func @main(%x: tensor<?x2xf32, #stablehlo.bounds<6, ?>>) -> tensor<?x2xf32, #stablehlo.bounds<6, ?>> {
    %0 = stablehlo.while(%it = %x) : tensor<?x2xf32, #stablehlo.bounds<6, ?>>
    cond {
      %p = stablehlo.constant dense<false> : tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %y = stablehlo.multiply %it, %it : tensor<?x2xf32, #stablehlo.bounds<6, ?>>
      stablehlo.return %y : tensor<?x2xf32, #stablehlo.bounds<6, ?>>
    }
    return %0 : tensor<?x2xf32, #stablehlo.bounds<6, ?>>
  }
}
// CHECK-LABEL: func.func @main(%arg0: tensor<6x2xf32>) -> tensor<6x2xf32>
// CHECK: %[[W:.*]] = stablehlo.while(%[[IT:.*]] = %arg0) : tensor<6x2xf32>
// CHECK: stablehlo.multiply %[[IT]], %[[IT]] : tensor<6x2xf32>
// CHECK: return %[[W]] : tensor<6x2xf32>
// CHECK-NOT: bounds

// -----

// Refused today: a size set from a value (even a constant one: StableHLO's shape refinement
// as jaxlib ships it does not fold it; tests/passes/test_bounds_to_static.py holds the strict
// xfail that will flip when it does, and this case changes with it).
module {
  func.func @main(%x: tensor<?xf32, #stablehlo.bounds<4>>) -> tensor<i32> {
    %c = stablehlo.constant dense<2> : tensor<i32>
    %0 = stablehlo.set_dimension_size %x, %c, dim = 0 : (tensor<?xf32, #stablehlo.bounds<4>>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<4>>
    %1 = stablehlo.get_dimension_size %0, dim = 0 : (tensor<?xf32, #stablehlo.bounds<4>>) -> tensor<i32>
    return %1 : tensor<i32>
  }
}
// ERROR: the module sets dynamic sizes from values, so it cannot run at its bounds

// -----

// Refused: the entry takes a dynamic dimension without a bound.
module {
  func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
    %0 = stablehlo.add %x, %x : tensor<?xf32>
    return %0 : tensor<?xf32>
  }
}
// ERROR: dimension 0 of tensor<?xf32> is dynamic without a bound: it has no size to run at
