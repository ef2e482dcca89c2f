"""CPU meanings hlo-roundtrip ships for library kernels whose semantics are public, written
as custom-call plug-ins (passes.lib.plugins).  Listed here so that discovering them imports
nothing: a module (and JAX) is imported only when a dump calls one of its targets."""

# target -> (module in passes.kernels, function)
SHIPPED: dict[str, tuple[str, str]] = {
    "AwsNeuronGelu": ("neuron", "gelu"),
    "AwsNeuronGeluBackward": ("neuron", "gelu_backward"),
    "AwsNeuronGeluApprxTanh": ("neuron", "gelu_tanh"),
    "AwsNeuronSoftmax": ("neuron", "softmax"),
    "AwsNeuronSoftmaxBackward": ("neuron", "softmax_backward"),
    "AwsNeuronRmsNorm": ("neuron", "rms_norm"),
    "AwsNeuronTransferWithStaticRing": ("neuron", "transfer_with_static_ring"),
    "rms_forward_affine_mixed_dtype": ("rms_norm", "rms_forward"),
    "rms_backward_affine": ("rms_norm", "rms_backward"),
    "pfft_C64": ("jaxdecomp", "pfft_ffi"),
    "pfft_C128": ("jaxdecomp", "pfft_ffi"),
    "pfft3d": ("jaxdecomp", "pfft3d"),
}

# target -> (module whose docstring says more, why its meaning is not established)
REFUSED: dict[str, tuple[str, str]] = {
    "AwsNeuronRmsNormBackward": (
        "neuron", "its operands are the forward's output, weight and eps; the normalization scale the gradient "
                  "needs is not among them and no public source says how the kernel recovers it"),
}
