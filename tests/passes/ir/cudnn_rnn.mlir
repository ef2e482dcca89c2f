// PASSES: cudnn-rnn
// cudnn-rnn rewrites jax.experimental.rnn's cuDNN LSTM calls (cudnn_rnn_ffi forward,
// cudnn_rnn_bwd_ffi backward, and their hip twins) into plain StableHLO: the sizes come from
// the call's 48-byte `opaque` descriptor (jaxlib/gpu/rnn_kernels.h), the input projection is
// one dot_general over all steps, and a while loop over time computes lstm_ref's gates
// (sigmoid i, f, o; tanh g and the cell).  What it cannot mean (dropout, a descriptor that
// disagrees with the shapes) is refused at the call's line; other calls stay as they are.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// A forward call of one layer, one direction (batch 3, 5 steps, input 4, hidden 6): the
// custom-call is gone; the input projection x·W_ih for every step, then one time loop whose
// body multiplies the carried h by W_hh and applies three sigmoids and two tanh; y, h_n, c_n
// come out of the loop.
module {
  func.func @main(%x: tensor<3x5x4xf32>, %h: tensor<1x3x6xf32>, %c: tensor<1x3x6xf32>, %w: tensor<288xf32>, %len: tensor<3xi32>) -> (tensor<3x5x6xf32>, tensor<1x3x6xf32>, tensor<1x3x6xf32>) {
    %0:5 = stablehlo.custom_call @cudnn_rnn_ffi(%x, %h, %c, %w, %len) {api_version = 4 : i32, mhlo.backend_config = {opaque = "\04\00\00\00\06\00\00\00\01\00\00\00\03\00\00\00\05\00\00\00\00\00\00\00\00\00\00\00\01\00\00\00\00\01\00\00\00\00\00\00\D0\02\00\00\00\00\00\00"}} : (tensor<3x5x4xf32>, tensor<1x3x6xf32>, tensor<1x3x6xf32>, tensor<288xf32>, tensor<3xi32>) -> (tensor<3x5x6xf32>, tensor<1x3x6xf32>, tensor<1x3x6xf32>, tensor<256xf32>, tensor<720xf32>)
    return %0#0, %0#1, %0#2 : tensor<3x5x6xf32>, tensor<1x3x6xf32>, tensor<1x3x6xf32>
  }
}
// CHECK-NOT: custom_call
// CHECK: stablehlo.dot_general {{.*}} : (tensor<5x3x4xf32>, tensor<24x4xf32>) -> tensor<5x3x24xf32>
// CHECK: stablehlo.while
// CHECK: stablehlo.dot_general %iterArg{{.*}} : (tensor<3x6xf32>, tensor<24x6xf32>) -> tensor<3x24xf32>
// CHECK-COUNT-3: stablehlo.logistic
// CHECK-COUNT-2: stablehlo.tanh
// CHECK: return {{.*}} : tensor<3x5x6xf32>, tensor<1x3x6xf32>, tensor<1x3x6xf32>
// CHECK-NOT: custom_call

// -----

// A call without its descriptor cannot be read: refused at its line, naming the call.
module {
  func.func @main(%x: tensor<2x3x4xf32>, %h: tensor<1x2x5xf32>, %c: tensor<1x2x5xf32>, %w: tensor<200xf32>, %len: tensor<2xi32>) -> tensor<2x3x5xf32> {
    %0:5 = stablehlo.custom_call @cudnn_rnn_ffi(%x, %h, %c, %w, %len) {api_version = 4 : i32} : (tensor<2x3x4xf32>, tensor<1x2x5xf32>, tensor<1x2x5xf32>, tensor<200xf32>, tensor<2xi32>) -> (tensor<2x3x5xf32>, tensor<1x2x5xf32>, tensor<1x2x5xf32>, tensor<64xi8>, tensor<64xf32>)
    return %0#0 : tensor<2x3x5xf32>
  }
}
// ERROR: :34:
// ERROR: custom-call cudnn_rnn_ffi
// ERROR: has no `opaque` descriptor

// -----

// A custom-call of another target is left as it is.
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @my_rnn(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// CHECK: %[[R:.*]] = stablehlo.custom_call @my_rnn(%arg0)
// CHECK: return %[[R]]
