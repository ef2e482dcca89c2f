// PASSES: host-callbacks
// host-callbacks handles JAX's host callbacks, whose Python function is not in the dump.
// One with no array results (jax.debug.print / debug.callback) is removed; its token results
// become its token operand, so the ordering chain stays valid; an entry token parameter and
// result (JAX's ordered effects) then go from main's signature. One with array results
// (pure_callback / io_callback) needs a --callback plug-in; without one it is refused,
// naming its op_name, source and types.

// An unordered debug print: the call goes, the computation it watched stays and is returned.
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.sine %x : tensor<4xf32>
    stablehlo.custom_call @xla_ffi_python_cpu_callback(%0) {api_version = 4 : i32, backend_config = {index = 0 : ui64}, has_side_effect = true} : (tensor<4xf32>) -> ()
    return %0 : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT: python_cpu_callback
// CHECK: %[[S:.*]] = stablehlo.sine %arg0
// CHECK: return %[[S]]

// -----

// An ordered callback threading JAX's entry token: the call goes, its token result is its
// token operand, and main takes and returns the array only (the token becomes a fresh
// after_all nothing needs).
module {
  func.func @main(%tok: !stablehlo.token, %x: tensor<4xf32>) -> (!stablehlo.token, tensor<4xf32>) {
    %t = stablehlo.custom_call @xla_ffi_python_cpu_callback(%tok, %x) {api_version = 4 : i32, backend_config = {index = 0 : ui64}, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> !stablehlo.token
    %y = stablehlo.cosine %x : tensor<4xf32>
    return %t, %y : !stablehlo.token, tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT: python_cpu_callback
// CHECK: %[[Y:.*]] = stablehlo.cosine %arg0
// CHECK: return %[[Y]] : tensor<4xf32>

// -----

// A pure_callback with an array result and no plug-in for it: refused with its op_name, its
// source line, its operand and result types, and the --callback option keyed by the op_name.
module {
  func.func @main(%x: tensor<2x3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @xla_ffi_python_cpu_callback(%x) {api_version = 4 : i32, backend_config = {index = 0 : ui64}} : (tensor<2x3xf32>) -> tensor<3xf32> loc(fused["custom-call.3"("dump.hlo":4:3), "jit(f)/pure_callback"("model.py":17:9)])
    return %0 : tensor<3xf32>
  }
}
// ERROR: dump.hlo:4:3
// ERROR: custom-call xla_ffi_python_cpu_callback
// ERROR: a host callback with results (jax.pure_callback / io_callback) at model.py:17
// ERROR: op_name "jit(f)/pure_callback": operands (f32[2,3]) -> results (f32[3])
// ERROR: --callback 'jit(f)/pure_callback=pkg.module:function' (or --callback 'model.py:17=...')

// -----

// A TPU debug print: JAX sends each argument to the host and receives one f32[] nothing
// reads (so that the token waits for the call).  Both sends and the recv go; the ordering
// token reaches the entry's result as the chain's first token.
module {
  func.func @main(%tok: !stablehlo.token, %x: tensor<4xf32>, %i: tensor<i32>) -> (!stablehlo.token, tensor<4xf32>) {
    %0 = stablehlo.sine %x : tensor<4xf32>
    %t1 = "stablehlo.send"(%0, %tok) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 2>, is_host_transfer = true}> : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token
    %t2 = "stablehlo.send"(%i, %t1) <{channel_handle = #stablehlo.channel_handle<handle = 2, type = 2>, is_host_transfer = true}> : (tensor<i32>, !stablehlo.token) -> !stablehlo.token
    %r:2 = "stablehlo.recv"(%t2) <{channel_handle = #stablehlo.channel_handle<handle = 3, type = 3>, is_host_transfer = true}> : (!stablehlo.token) -> (tensor<f32>, !stablehlo.token)
    return %r#1, %0 : !stablehlo.token, tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<i32>) -> tensor<4xf32>
// CHECK-NOT: stablehlo.send
// CHECK-NOT: stablehlo.recv
// CHECK: %[[S:.*]] = stablehlo.sine %arg0
// CHECK: return %[[S]]

// -----

// A TPU pure_callback: the f32[4] received from the host is read, and no plug-in is
// registered for its op_name or source: refused at the recv's line.
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %tok = stablehlo.after_all : !stablehlo.token
    %t1 = "stablehlo.send"(%x, %tok) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 2>, is_host_transfer = true}> : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token
    %r:2 = "stablehlo.recv"(%t1) <{channel_handle = #stablehlo.channel_handle<handle = 2, type = 3>, is_host_transfer = true}> : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
    return %r#0 : tensor<4xf32>
  }
}
// ERROR: a TPU host callback with results
// ERROR: operands (f32[4]) -> results (f32[4])
