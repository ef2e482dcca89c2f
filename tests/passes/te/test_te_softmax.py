"""Transformer Engine softmax calls (te_scaled*_softmax_{forward,backward}_ffi) in TE's
exact typed-FFI signatures (transformer_engine/jax/csrc/extensions/softmax.cpp), rewritten
and run on CPU, against TE's JAX references (jax/cpp_extensions/softmax.py
jax_scaled_*softmax) and jax.vjp of them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from tests.helpers import assert_close
from tests.passes.te.te_hlo import dims, run

RNG = np.random.default_rng(30)


def softmax_module(kind, shape, dt, scale, mask_shape=None) -> str:
    mask = f"\n  mask = u8[{dims(mask_shape)}] parameter(2)" if mask_shape else ""
    fwd_args = "x, mask" if mask_shape else "x"
    return f"""HloModule te_softmax
ENTRY main {{
  x = {dt}[{dims(shape)}] parameter(0)
  dy = {dt}[{dims(shape)}] parameter(1){mask}
  y = {dt}[{dims(shape)}] custom-call({fwd_args}), custom_call_target="te_{kind}_softmax_forward_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{scale_factor = {scale:e} : f64}}
  dx = {dt}[{dims(shape)}] custom-call(dy, y), custom_call_target="te_{kind}_softmax_backward_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{scale_factor = {scale:e} : f64}}
  ROOT t = ({dt}[{dims(shape)}], {dt}[{dims(shape)}]) tuple(y, dx)
}}
"""


def te_softmax_reference(kind, x, scale, mask=None):
    """TE's jax_scaled_*softmax, with the CUDA kernel's fully masked rows (all -10000:
    zeros) written out."""
    s = x * scale
    if kind == "scaled":
        return jax.nn.softmax(s)
    if kind == "scaled_masked":
        keep = mask != 1
        y = jax.nn.softmax(s, where=keep)
        return jnp.where(keep.any(-1, keepdims=True), jnp.where(keep, y, 0.0), 0.0)
    sq, sk = x.shape[-2:]
    causal = jnp.arange(sk)[None, :] <= jnp.arange(sq)[:, None]
    return jnp.where(causal, jax.nn.softmax(s, where=causal), 0.0)


@pytest.mark.parametrize("kind, mask_batch", [("scaled", None), ("scaled_masked", 2), ("scaled_masked", 1),
                                              ("scaled_upper_triang_masked", None)])
def test_softmax_forward_backward_match_te_reference(kind, mask_batch):
    shape, scale = (2, 3, 8, 8), 0.125
    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    dy = RNG.standard_normal(shape).astype(np.float32)
    inputs = [x, dy]
    mask = None
    if mask_batch:
        mask = (RNG.random((mask_batch, 1, 8, 8)) < 0.4).astype(np.uint8)
        mask[0, 0, 3, :] = 1  # one fully masked row: the kernel writes zeros
        inputs.append(mask)
    y, dx = run(softmax_module(kind, shape, "f32", scale, mask.shape if mask is not None else None), inputs)
    @jax.jit
    def reference_and_vjp(a, g):
        out, vjp = jax.vjp(lambda b: te_softmax_reference(kind, b, scale, None if mask is None else jnp.asarray(mask)), a)
        return out, vjp(g)[0]

    want, want_dx = reference_and_vjp(jnp.asarray(x), jnp.asarray(dy))
    # f32 exp and sums over 8 terms on both sides: f32's tolerance.
    assert_close(y, np.asarray(want), atol=1e-6)
    # TE's backward is y·(dy − Σ dy·y)·scale from the forward's output (for masked
    # entries y = 0, so their gradient is 0 as in jax.vjp).
    assert_close(dx, np.asarray(want_dx), atol=1e-6)
    if mask_batch:
        assert not y[0, :, 3].any()


def test_softmax_bf16_rounds_once():
    shape = (1, 2, 4, 16)
    x = RNG.standard_normal(shape).astype(ml_dtypes.bfloat16)
    y, _ = run(softmax_module("scaled", shape, "bf16", 0.5), [x, np.zeros(shape, ml_dtypes.bfloat16)])
    want = np.asarray(jax.nn.softmax(jnp.asarray(x, jnp.float32) * 0.5)).astype(ml_dtypes.bfloat16)
    assert_close(y, want)  # f32 inside, one rounding to bf16: bf16's tolerance
