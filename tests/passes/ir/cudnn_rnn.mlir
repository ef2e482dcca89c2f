// PASSES: cudnn-rnn
// cudnn-rnn refuses jax.experimental.rnn's cuDNN LSTM calls (cudnn_rnn_ffi, cudnn_rnn_bwd_ffi
// and their hipdnn twins) by name, saying how to give one a meaning; any other call is no
// business of this pass and stays as it is.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// A forward cuDNN LSTM call is refused, naming the call and the plug-in remedy.
module {
  func.func @main(%x: tensor<2x3x4xf32>, %h: tensor<1x2x5xf32>, %c: tensor<1x2x5xf32>, %w: tensor<200xf32>, %len: tensor<2xi32>) -> tensor<2x3x5xf32> {
    %0:5 = stablehlo.custom_call @cudnn_rnn_ffi(%x, %h, %c, %w, %len) {api_version = 4 : i32} : (tensor<2x3x4xf32>, tensor<1x2x5xf32>, tensor<1x2x5xf32>, tensor<200xf32>, tensor<2xi32>) -> (tensor<2x3x5xf32>, tensor<1x2x5xf32>, tensor<1x2x5xf32>, tensor<64xi8>, tensor<64xf32>)
    return %0#0 : tensor<2x3x5xf32>
  }
}
// ERROR: :10:
// ERROR: custom-call cudnn_rnn_ffi
// ERROR: jax.experimental.rnn's cuDNN LSTM has no portable rewrite
// ERROR: --custom-call cudnn_rnn_ffi=MODULE:FUNCTION
// ERROR: unpack_lstm_weights and lstm_ref

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
