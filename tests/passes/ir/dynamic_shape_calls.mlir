// PASSES: dynamic-shape-calls
// dynamic-shape-calls lowers XLA's dynamic padder calls to StableHLO's bounded dynamic shapes.
// SliceToDynamic(data, size0, size1, ...) becomes a set_dimension_size on each dimension the
// result declares dynamic (static ones keep their extent). PadToStatic(x) becomes the data at
// its bound (set_dimension_size to the bound), with the padding zeroed by a select against an
// iota < size mask, and each dimension's size from get_dimension_size.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// f32[8,4] with sizes (n, 4) → f32[<=8,4]: one set_dimension_size, on dimension 0, to n; the
// static dimension 1 gets none.
module {
  func.func @main(%data: tensor<8x4xf32>, %n: tensor<i32>, %m: tensor<i32>) -> tensor<?x4xf32, #stablehlo.bounds<8, ?>> {
    %0 = stablehlo.custom_call @SliceToDynamic(%data, %n, %m) : (tensor<8x4xf32>, tensor<i32>, tensor<i32>) -> tensor<?x4xf32, #stablehlo.bounds<8, ?>>
    return %0 : tensor<?x4xf32, #stablehlo.bounds<8, ?>>
  }
}
// CHECK-NOT: SliceToDynamic
// CHECK: %[[R:.*]] = stablehlo.set_dimension_size %arg0, %arg1, dim = 0 : (tensor<8x4xf32>, tensor<i32>) -> tensor<?x4xf32, #stablehlo.bounds<8, ?>>
// CHECK-NOT: set_dimension_size
// CHECK: return %[[R]]

// -----

// PadToStatic of f32[<=8]: the data at its bound with positions >= size selected to zero, and
// the size read back (converted to the result's element type) as the second result.
module {
  func.func @main(%x: tensor<?xf32, #stablehlo.bounds<8>>) -> (tensor<8xf32>, tensor<i32>) {
    %0:2 = stablehlo.custom_call @PadToStatic(%x) : (tensor<?xf32, #stablehlo.bounds<8>>) -> (tensor<8xf32>, tensor<i32>)
    return %0#0, %0#1 : tensor<8xf32>, tensor<i32>
  }
}
// CHECK-NOT: PadToStatic
// CHECK-DAG: %[[SIZE:.*]] = stablehlo.get_dimension_size %arg0, dim = 0
// CHECK-DAG: %[[BOUND:.*]] = stablehlo.constant dense<8> : tensor<i32>
// CHECK: %[[FULL:.*]] = stablehlo.set_dimension_size %arg0, %[[BOUND]], dim = 0 : {{.*}} -> tensor<8xf32>
// CHECK: %[[IOTA:.*]] = stablehlo.iota dim = 0 : tensor<8xi32>
// CHECK: %[[SIZES:.*]] = stablehlo.broadcast_in_dim %{{.*}}, dims = [] : (tensor<i32>) -> tensor<8xi32>
// CHECK: %[[MASK:.*]] = stablehlo.compare LT, %[[IOTA]], %[[SIZES]], SIGNED
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<8xf32>
// CHECK: %[[DATA:.*]] = stablehlo.select %[[MASK]], %[[FULL]], %[[ZERO]]
// CHECK: return %[[DATA]], %[[SIZE]] : tensor<8xf32>, tensor<i32>

// -----

// Refused: SliceToDynamic's data must have the result's bounds as shape.
module {
  func.func @main(%data: tensor<6xf32>, %n: tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>> {
    %0 = stablehlo.custom_call @SliceToDynamic(%data, %n) : (tensor<6xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
    return %0 : tensor<?xf32, #stablehlo.bounds<8>>
  }
}
// ERROR: :48:
// ERROR: custom-call SliceToDynamic
// ERROR: data shape [6] differs from the result's bounds [8]
