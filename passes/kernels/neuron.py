"""AWS Neuron custom-calls that torch-neuronx and transformers-neuronx write into the HLO
they hand to the Neuron compiler.

Where their meaning comes from (the public Python that emits them):
- torch_neuronx/xla_impl/ops.py, `Gelu`: `torch.nn.functional.gelu(x)` with
  approximate="none" (any other approximation is refused there) becomes
  `AwsNeuronGelu(x)`; its backward is `grad * AwsNeuronGeluBackward(x)`, so the call is
  the derivative GELU'(x) alone.  Exact GELU is x·Φ(x), Φ the standard normal CDF.
- `AwsNeuronGeluApprxTanh(x)`: GELU's tanh approximation (transformers-neuronx's
  `gelu_new`): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
- torch_neuronx/xla_impl/ops.py, `RmsNorm.forward_impl(input, weight, eps, dim)`:
  `AwsNeuronRmsNorm(input, weight, eps)` with eps an f32 scalar constant and
  backend_config the normalized dimension as decimal text; the result has input's shape
  and type: input · rsqrt(mean(input², dim) + eps) · weight, weight along `dim`.
- torch_neuronx/xla_impl/ops.py, `Softmax` (NEURON_FUSE_SOFTMAX=1): `AwsNeuronSoftmax(x)`
  with the (non-negative) dimension as decimal text; its docstring gives the reference: the
  maximum along dim subtracted, exp, divided by the sum along dim.
  `AwsNeuronSoftmaxBackward(grad, output)`: output · (grad − Σ_dim grad·output).
- transformers-neuronx hlo.py, `transfer_with_static_ring(shape)`:
  `AwsNeuronTransferWithStaticRing(w)` with w's own shape and type and no config, written on
  every weight parameter, and its result used wherever the weight is: the values are the
  weight's (the call places it in device memory).

Refused: `AwsNeuronRmsNormBackward(grad, output, weight, eps)` takes the forward's output,
not its input; the gradient needs the normalization scale, which only an ill-conditioned
inversion of output/weight recovers, and no public source says how the kernel gets it.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax.scipy.special import erf

from passes.lib.plugins import CallAttributes


def _float(x):
    """Compute in at least f32 (bf16/f16 inputs), as the Neuron engines accumulate."""
    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def gelu(x, attrs: CallAttributes):
    y = _float(x)
    return (0.5 * y * (1.0 + erf(y / math.sqrt(2.0)))).astype(x.dtype)


def gelu_backward(x, attrs: CallAttributes):
    y = _float(x)
    cdf = 0.5 * (1.0 + erf(y / math.sqrt(2.0)))
    pdf = jnp.exp(-0.5 * y * y) / math.sqrt(2.0 * math.pi)
    return (cdf + y * pdf).astype(x.dtype)


def gelu_tanh(x, attrs: CallAttributes):
    y = _float(x)
    inner = math.sqrt(2.0 / math.pi) * (y + 0.044715 * y * y * y)
    return (0.5 * y * (1.0 + jnp.tanh(inner))).astype(x.dtype)


def _dimension(attrs: CallAttributes, rank: int) -> int:
    """The dimension torch-neuronx writes as decimal text in backend_config."""
    text = attrs.backend_config_text.strip()
    if not text.lstrip("-").isdigit() or not -rank <= int(text) < rank:
        raise ValueError(f"backend_config should be a dimension of the rank-{rank} operand as decimal text, "
                         f"not {text!r}")
    return int(text) % rank


def softmax(x, attrs: CallAttributes):
    dim = _dimension(attrs, x.ndim)
    e = jnp.exp(x - jnp.max(x, axis=dim, keepdims=True))
    return e / jnp.sum(e, axis=dim, keepdims=True)


def softmax_backward(grad, output, attrs: CallAttributes):
    dim = _dimension(attrs, output.ndim)
    return output * (grad - jnp.sum(grad * output, axis=dim, keepdims=True))


def rms_norm(x, weight, eps, attrs: CallAttributes):
    dim = _dimension(attrs, x.ndim)
    if weight.shape != (x.shape[dim],):
        raise ValueError(f"weight {weight.shape} does not match dimension {dim} of the input {x.shape}")
    y = _float(x)
    scale = 1.0 / jnp.sqrt(jnp.mean(y * y, axis=dim, keepdims=True) + eps.astype(y.dtype))
    shape = [1] * x.ndim
    shape[dim] = x.shape[dim]
    return (y * scale * weight.reshape(shape).astype(y.dtype)).astype(x.dtype)


def transfer_with_static_ring(w, attrs: CallAttributes):
    return w
