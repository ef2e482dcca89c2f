// PASSES: custom-call-plugins
// custom-call-plugins gives each custom-call with a registered plug-in its plug-in's meaning:
// the plug-in's JAX function, lowered and inlined in place of the call. Here the built-in
// AWS Neuron plug-ins (passes/kernels/neuron.py). Calls without a plug-in stay; a plug-in
// that refuses a call, or raises on its attributes, is an error naming the call.
// An `ERROR: :N:` line requires the error to name line N of this file, the refused call's line.

// GELU's tanh approximation, then a softmax along dimension 1 (backend_config "1") of its
// result: the calls are gone, tanh and the max/exp/sum/divide of a softmax take their place
// in that order, and the call without a plug-in now reads the softmax's quotient.
module {
  func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %0 = stablehlo.custom_call @AwsNeuronGeluApprxTanh(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.custom_call @AwsNeuronSoftmax(%0) {backend_config = "1"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.custom_call @not_a_plugin(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1, %2 : tensor<2x4xf32>, tensor<2x4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT: AwsNeuron
// CHECK: stablehlo.tanh
// CHECK: stablehlo.reduce({{.*}}) applies stablehlo.maximum across dimensions = [1]
// CHECK: stablehlo.exponential
// CHECK: stablehlo.reduce({{.*}}) applies stablehlo.add across dimensions = [1]
// CHECK: %[[SOFTMAX:.*]] = stablehlo.divide
// CHECK: %[[OTHER:.*]] = stablehlo.custom_call @not_a_plugin(%[[SOFTMAX]])
// CHECK: return %[[SOFTMAX]], %[[OTHER]]
// CHECK-NOT: AwsNeuron

// -----

// A plug-in that raises on the call's attributes (dimension 5 of a rank-2 operand): an error
// naming the call, the plug-in and its message.
module {
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %1 = stablehlo.custom_call @AwsNeuronSoftmax(%x) {backend_config = "5"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}
// ERROR: :36:
// ERROR: custom-call AwsNeuronSoftmax
// ERROR: plug-in hlo-roundtrip kernels.neuron
// ERROR: backend_config should be a dimension of the rank-2 operand as decimal text, not '5'

// -----

// A target whose plug-in is a refusal (the RMSNorm backward lacks the scale it needs): an
// error naming the call and the plug-in's reason.
module {
  func.func @main(%g: tensor<2x4xf32>, %o: tensor<2x4xf32>, %w: tensor<4xf32>, %e: tensor<f32>) -> tensor<2x4xf32> {
    %1 = stablehlo.custom_call @AwsNeuronRmsNormBackward(%g, %o, %w, %e) {backend_config = "1"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}
// ERROR: :51:
// ERROR: custom-call AwsNeuronRmsNormBackward
// ERROR: plug-in hlo-roundtrip kernels.neuron: refused
// ERROR: the normalization scale the gradient needs is not among them
