"""The RMSNorm kernels of JAX's "Custom operations for GPUs" example (jax docs/gpu_ops,
derived from NVIDIA apex's fused layer norm), as their HLO holds them:

- `rms_forward_affine_mixed_dtype(x, gamma) -> (out, invvar)`: x of type T and any shape,
  gamma of type V whose n2 elements are x's trailing n2 elements (n1 = x.size / n2 rows);
  U = f64 for f64 inputs, else f32.  invvar[i] = rsqrt(mean_j(x[i,j]²) + eps) in U;
  out[i,j] = gamma[j] · V(invvar[i] · x[i,j]) (the product rounded to V, then scaled by
  gamma in V), out shaped like x in V.
- `rms_backward_affine(dout, invvar, x, gamma) -> (grad_input, grad_gamma, part_grad)`:
  dout of type V, in U: s[i] = Σ_j dout·gamma·x·invvar[i];
  grad_input = invvar[i]/n2 · (n2·dout·gamma − x·invvar[i]·s[i]) as T;
  part_grad[b, j] = Σ over the rows of segment b of dout·x·invvar (the kernel's partial
  sums: rows in segments of ceil(ceil(n1/16)/parts)·16, parts = part_grad's first dim);
  grad_gamma = Σ_b part_grad[b] as V.

The backend_config is the packed `RMSNormDescriptor {int n1; int n2; double eps;
ElementType x_type; ElementType w_type; int part_grad_size;}` (x86-64: 32 bytes).
"""

from __future__ import annotations

import struct

import jax.numpy as jnp
import numpy as np

from passes.lib.plugins import CallAttributes

# ElementType of the descriptor (gpu_ops kernels.h).
_ELEMENT_TYPES = {0: np.dtype(jnp.bfloat16), 1: np.dtype(np.float16), 2: np.dtype(np.float32), 3: np.dtype(np.float64)}
# Rows each partial sum of the gamma gradient covers: blockDim.y² of its launch (4 x 4).
_ROWS_PER_SEGMENT = 16


def _descriptor(attrs: CallAttributes, x_shape, w_shape, x_dtype, w_dtype) -> tuple[int, int, float, int]:
    data = attrs.opaque
    if len(data) < 28:
        raise ValueError(f"backend_config holds {len(data)} bytes; the RMSNorm descriptor has 32")
    n1, n2, eps, x_type, w_type, part = struct.unpack_from("<iidiii", data)
    size, wsize = int(np.prod(x_shape)), int(np.prod(w_shape))
    if n2 != wsize or n1 * n2 != size:
        raise ValueError(f"descriptor n1={n1} n2={n2} does not fit x {tuple(x_shape)} and gamma {tuple(w_shape)}")
    if _ELEMENT_TYPES.get(x_type) != np.dtype(x_dtype) or _ELEMENT_TYPES.get(w_type) != np.dtype(w_dtype):
        raise ValueError(f"descriptor element types ({x_type}, {w_type}) differ from the operands' "
                         f"({np.dtype(x_dtype).name}, {np.dtype(w_dtype).name})")
    return n1, n2, eps, part


def _acc(dtype) -> np.dtype:
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def rms_forward(x, gamma, attrs: CallAttributes):
    n1, n2, eps, _ = _descriptor(attrs, x.shape, gamma.shape, x.dtype, gamma.dtype)
    u = _acc(x.dtype)
    rows = x.reshape(n1, n2).astype(u)
    invvar = 1.0 / jnp.sqrt(jnp.mean(rows * rows, axis=1) + u.type(eps))
    normed = (rows * invvar[:, None]).astype(gamma.dtype)
    out = normed * gamma.reshape(1, n2)
    return out.reshape(x.shape), invvar


def rms_backward(dout, invvar, x, gamma, attrs: CallAttributes):
    n1, n2, eps, _ = _descriptor(attrs, x.shape, gamma.shape, x.dtype, gamma.dtype)
    u = np.dtype(invvar.dtype)
    parts = attrs.result_shapes[2][0]
    g = dout.reshape(n1, n2).astype(u)
    h = x.reshape(n1, n2).astype(u)
    w = gamma.reshape(1, n2).astype(u)
    iv = invvar[:, None]
    s = jnp.sum(g * w * h * iv, axis=1, keepdims=True)
    grad_input = (iv / n2) * (n2 * g * w - h * iv * s)
    # The kernel's partial sums of the gamma gradient: segment b covers rows
    # [b·S·16, (b+1)·S·16), S = ceil(ceil(n1/16) / parts); later segments are empty.
    per_row = g * h * iv
    seg = -(-(-(-n1 // _ROWS_PER_SEGMENT)) // parts) * _ROWS_PER_SEGMENT
    padded = jnp.zeros((parts * seg, n2), u).at[:n1].set(per_row)  # parts·seg ≥ n1 by the choice of S
    part_grad = padded.reshape(parts, seg, n2).sum(axis=1)
    grad_gamma = part_grad.sum(axis=0)
    return (grad_input.astype(x.dtype).reshape(x.shape), grad_gamma.astype(gamma.dtype).reshape(gamma.shape),
            part_grad.reshape(attrs.result_shapes[2]))
