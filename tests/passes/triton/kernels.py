"""Pallas GPU (Triton) kernels whose deviceless H100 dumps the triton-kernels tests convert.

Each case builds the jitted program for `interpret` (False: Pallas' Triton lowering, as a
GPU dump holds it; True: Pallas' interpreter on CPU, the oracle) and draws its inputs.
Imported by the generator (jax[cuda12] environments) only: the tests read the dumps and
the oracle values written beside them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[bool], Callable]  # interpret → the program
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    triton: bool = True  # False: the default GPU backend of the jax (Mosaic GPU in jax 0.10)


def _triton_params():
    from jax.experimental.pallas import triton as pltriton

    return pltriton.CompilerParams(num_warps=4, num_stages=1)


def _call(kernel, out_shape, interpret, **kw):
    from jax.experimental import pallas as pl

    return pl.pallas_call(kernel, out_shape=out_shape, interpret=interpret,
                          compiler_params=None if interpret else _triton_params(), **kw)


def _f32(*shape):
    return lambda rng: [rng.standard_normal(s).astype(np.float32) for s in shape]


# ------------------------------------------------------------------ hand-written kernels
def add(interpret):
    import jax
    from jax.experimental import pallas as pl

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    spec = pl.BlockSpec((64,), lambda i: (i,))
    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((256,), np.float32), interpret,
                         grid=(4,), in_specs=[spec, spec], out_specs=spec))


def ragged(interpret):
    """100 elements in blocks of 32: the last block's loads and stores are masked."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.exp(x_ref[...]) * 2.0 + 1.0

    spec = pl.BlockSpec((32,), lambda i: (i,))
    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((100,), np.float32), interpret,
                         grid=(4,), in_specs=[spec], out_specs=spec))


def _matmul(dtype, precision):
    def build(interpret):
        import jax
        import jax.numpy as jnp
        from jax.experimental import pallas as pl

        def kernel(a_ref, b_ref, o_ref):
            o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32,
                                 precision=precision)

        return jax.jit(_call(kernel, jax.ShapeDtypeStruct((64, 48), np.float32), interpret, grid=(4, 3),
                             in_specs=[pl.BlockSpec((16, 32), lambda i, j: (i, 0)),
                                       pl.BlockSpec((32, 16), lambda i, j: (0, j))],
                             out_specs=pl.BlockSpec((16, 16), lambda i, j: (i, j))))

    def inputs(rng):
        import ml_dtypes

        dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
        return [rng.standard_normal((64, 32)).astype(dt), rng.standard_normal((32, 48)).astype(dt)]

    return build, inputs


def softmax_rows(interpret):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        x = x_ref[...]
        e = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))
        o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)

    spec = pl.BlockSpec((4, 64), lambda i: (i, 0))
    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((16, 64), np.float32), interpret,
                         grid=(4,), in_specs=[spec], out_specs=spec))


def cumsum(interpret):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.cumsum(x_ref[...], axis=1)

    spec = pl.BlockSpec((2, 32), lambda i: (i, 0))
    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((8, 32), np.float32), interpret,
                         grid=(4,), in_specs=[spec], out_specs=spec))


def grid2d(interpret):
    """A 2-D grid whose program ids and sizes enter the values."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        i, j = pl.program_id(0), pl.program_id(1)
        tag = (i * 100 + j * pl.num_programs(0) + pl.num_programs(1)).astype(jnp.float32)
        o_ref[...] = x_ref[...] * 2.0 + tag

    spec = pl.BlockSpec((8, 16), lambda i, j: (i, j))
    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((32, 64), np.float32), interpret,
                         grid=(4, 4), in_specs=[spec], out_specs=spec))


def aliased(interpret):
    """Output 0 aliases input 1; only the first half of it is written by the kernel."""
    import jax
    from jax.experimental import pallas as pl

    def kernel(x_ref, acc_ref, o_ref):
        o_ref[...] = acc_ref[...] + 3.0 * x_ref[...]

    spec = pl.BlockSpec((32,), lambda i: (i,))
    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((128,), np.float32), interpret,
                         grid=(2,), in_specs=[spec, spec], out_specs=spec,
                         input_output_aliases={1: 0}))


# ------------------------------------------------------------------ jax.experimental.pallas.ops.gpu
def layer_norm(interpret):
    import jax
    from jax.experimental.pallas.ops.gpu import layer_norm as ln

    return jax.jit(functools.partial(ln.layer_norm_forward, num_warps=4, num_stages=1, interpret=interpret))


def rms_norm(interpret):
    import jax
    from jax.experimental.pallas.ops.gpu import rms_norm as rn

    return jax.jit(functools.partial(rn.rms_norm_forward, num_warps=4, num_stages=1, interpret=interpret))


def softmax_op(interpret):
    import jax
    from jax.experimental.pallas.ops.gpu import softmax as sm

    return jax.jit(functools.partial(sm.softmax, axis=-1, interpret=interpret))


def mha_causal(interpret):
    import jax
    from jax.experimental.pallas.ops.gpu import attention

    sizes = attention.BlockSizes(block_q=16, block_k=16)

    def fn(q, k, v):
        return attention.mha(q, k, v, None, sm_scale=0.25, causal=True, block_sizes=sizes,
                             num_warps=4, num_stages=1, interpret=interpret)

    return jax.jit(fn)


def plain_default_backend(interpret):
    """A plain pallas_call with no compiler parameters: the jax's default GPU backend
    (Mosaic GPU in jax 0.10, unless JAX_PALLAS_USE_MOSAIC_GPU=0)."""
    import jax
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    return jax.jit(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((128,), np.float32),
                                  interpret=interpret))


_mm_f32 = _matmul("float32", "highest")
_mm_tf32 = _matmul("float32", None)
_mm_bf16 = _matmul("bfloat16", None)

CASES = [
    Case("add", add, _f32(256, 256)),
    Case("ragged", ragged, _f32(100)),
    Case("matmul_f32", *_mm_f32),
    Case("matmul_tf32", *_mm_tf32),
    Case("matmul_bf16", *_mm_bf16),
    Case("softmax_rows", softmax_rows, _f32((16, 64))),
    Case("cumsum", cumsum, _f32((8, 32))),
    Case("grid2d", grid2d, _f32((32, 64))),
    Case("aliased", aliased, _f32(128, 128)),
    Case("layer_norm", layer_norm, _f32((2, 4, 64), 64, 64)),
    Case("rms_norm", rms_norm, _f32((2, 4, 64), 64, 64)),
    Case("softmax", softmax_op, _f32((8, 64))),
    Case("mha_causal", mha_causal, _f32((1, 32, 2, 16), (1, 32, 2, 16), (1, 32, 2, 16))),
    Case("mosaic_gpu_default", plain_default_backend, _f32(128), triton=False),
]
BY_NAME = {c.name: c for c in CASES}
