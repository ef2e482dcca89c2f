// PASSES: drop-default-attributes
// drop-default-attributes erases attributes that hold their StableHLO default (precision
// DEFAULT, unit strides/dilations, zero padding, unsorted indices, an unstable sort, an empty
// custom-call config, no side effect), as a portable artifact writes them; attributes with any
// other value stay.

// A dot_general with DEFAULT precision loses precision_config; one with HIGHEST keeps it.
module {
  func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    return %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>
  }
}
// CHECK: stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] :
// CHECK: stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST]

// -----

// reduce_window: unit strides and dilations and zero padding go; the window stays.
// A second reduce_window with stride 2 keeps its strides.
module {
  func.func @main(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %0 = "stablehlo.reduce_window"(%x, %zero) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {window_dimensions = array<i64: 1>, window_strides = array<i64: 1>, base_dilations = array<i64: 1>,
        window_dilations = array<i64: 1>, padding = dense<0> : tensor<1x2xi64>} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
    %1 = "stablehlo.reduce_window"(%x, %zero) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>, base_dilations = array<i64: 1>} : (tensor<8xf32>, tensor<f32>) -> tensor<4xf32>
    return %0, %1 : tensor<8xf32>, tensor<4xf32>
  }
}
// CHECK: "stablehlo.reduce_window"(%arg0, %{{.*}}) <{window_dimensions = array<i64: 1>}>
// CHECK: "stablehlo.reduce_window"(%arg0, %{{.*}}) <{window_dimensions = array<i64: 2>, window_strides = array<i64: 2>}>
// CHECK-NOT: base_dilations

// -----

// A custom-call's empty backend_config and has_side_effect = false go; a non-empty config stays.
module {
  func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %0 = stablehlo.custom_call @plain(%x) {backend_config = "", has_side_effect = false} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = stablehlo.custom_call @configured(%x) {backend_config = "cfg", has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>
    return %0, %1 : tensor<4xf32>, tensor<4xf32>
  }
}
// CHECK: stablehlo.custom_call @plain(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK: stablehlo.custom_call @configured(%arg0) {backend_config = "cfg", has_side_effect = true}

// -----

// sort: is_stable = false goes, is_stable = true stays.
module {
  func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %0 = "stablehlo.sort"(%x) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %c = stablehlo.compare LT, %l, %r : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }) {dimension = 0 : i64, is_stable = false} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "stablehlo.sort"(%x) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %c = stablehlo.compare LT, %l, %r : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }) {dimension = 0 : i64, is_stable = true} : (tensor<4xf32>) -> tensor<4xf32>
    return %0, %1 : tensor<4xf32>, tensor<4xf32>
  }
}
// CHECK: "stablehlo.sort"(%arg0) <{dimension = 0 : i64}>
// CHECK: "stablehlo.sort"(%arg0) <{dimension = 0 : i64, is_stable = true}>
