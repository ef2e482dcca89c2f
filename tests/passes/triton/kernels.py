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
    # > 1: build(interpret, mesh) over a 1-D mesh ("d") of this many devices; inputs and
    # outputs split on their axis 0 (each device's shard is its slice of the global array).
    devices: int = 1


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


def masked_other(interpret):
    """Explicit masked loads with `other` and a masked store (pltriton.load / store)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as pltriton

    def kernel(x_ref, o_ref):
        idx = pl.program_id(0) * 32 + jnp.arange(32)
        x = pltriton.load(x_ref.at[pl.ds(pl.program_id(0) * 32, 32)], mask=idx % 3 != 0, other=-5.0)
        pltriton.store(o_ref.at[pl.ds(pl.program_id(0) * 32, 32)], x * 2.0, mask=idx < 50)

    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((64,), np.float32), interpret, grid=(2,),
                         input_output_aliases={}))


def strided(interpret):
    """Strided block reads (pl.ds with a stride) and a transposed store."""
    import jax
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        even = x_ref[pl.ds(0, 8, stride=2), :]
        o_ref[...] = even.T + 1.0

    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((32, 8), np.float32), interpret))


def mixed_dtypes(interpret):
    """f16 and bf16 inputs, a bf16 output."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = (x_ref[...].astype(jnp.float32) * y_ref[...].astype(jnp.float32) + 0.5).astype(jnp.bfloat16)

    spec = pl.BlockSpec((64,), lambda i: (i,))
    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((128,), jnp.bfloat16), interpret, grid=(2,),
                         in_specs=[spec, spec], out_specs=spec))


def _mixed_inputs(rng):
    import ml_dtypes

    return [rng.standard_normal(128).astype(np.float16), rng.standard_normal(128).astype(ml_dtypes.bfloat16)]


def int_ops(interpret):
    """Integer arithmetic: signed division and remainder, shifts, comparisons, where."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        x = x_ref[...]
        q = jax.lax.div(x, 7) + jax.lax.rem(x, 5) + (x >> 2) + (x << 1) + (x & 12) + (x ^ 5)
        o_ref[...] = jnp.where(x > 3, q, jnp.maximum(-x, jnp.minimum(x, 2)))

    spec = pl.BlockSpec((32,), lambda i: (i,))
    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((64,), np.int32), interpret, grid=(2,),
                         in_specs=[spec], out_specs=spec))


def cond_while(interpret):
    """lax.cond on the program id (scf.if) and a lax.while_loop (scf.while)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        x = x_ref[...]
        pid = pl.program_id(0)  # read outside the loop's regions (Pallas' interpreter asks so)
        y = jax.lax.cond(pid % 2 == 0, lambda v: v * 2.0, lambda v: v - 1.0, x)

        def body(carry):
            i, v = carry
            return i + 1, v * 0.5 + jnp.float32(1.0)

        _, z = jax.lax.while_loop(lambda c: c[0] < pid + 2, body, (0, y))
        o_ref[...] = z

    spec = pl.BlockSpec((16,), lambda i: (i,))
    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((64,), np.float32), interpret, grid=(4,),
                         in_specs=[spec], out_specs=spec))


def reductions(interpret):
    """Reductions over each axis (sum, max, min, argmax) and to a scalar."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, rows_ref, cols_ref, arg_ref, total_ref):
        x = x_ref[...]
        rows_ref[...] = jnp.sum(x, axis=1) + jnp.min(x, axis=1)
        cols_ref[...] = jnp.max(x, axis=0)
        arg_ref[...] = jnp.argmax(x, axis=1).astype(jnp.int32)
        total_ref[...] = jnp.full((2,), jnp.sum(x))

    out = [jax.ShapeDtypeStruct((16,), np.float32), jax.ShapeDtypeStruct((32,), np.float32),
           jax.ShapeDtypeStruct((16,), np.int32), jax.ShapeDtypeStruct((2,), np.float32)]
    return jax.jit(_call(kernel, out, interpret))


def math_zoo(interpret):
    """Elementwise math Pallas lowers to libdevice calls (tt.extern_elementwise) and
    arith/math ops."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        x = x_ref[...]
        a = jnp.abs(x) + 0.5
        o_ref[0, :] = jnp.tanh(x) + jnp.log(a) + jnp.sqrt(a) + jax.lax.rsqrt(a)
        o_ref[1, :] = jnp.exp2(x) + jnp.log1p(a) + jnp.expm1(x) + jnp.sin(x) * jnp.cos(x)
        o_ref[2, :] = jnp.floor(x * 3) + jnp.ceil(x * 3) + jnp.clip(x, -0.5, 0.5) + jax.nn.sigmoid(x)
        o_ref[3, :] = jnp.power(a, 1.5) + jnp.arctan2(x, a) + x ** 3

    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((4, 64), np.float32), interpret))


def atomic_add(interpret):
    """Every program adds its block into one shared accumulator (tt.atomic_rmw)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as pltriton

    def kernel(x_ref, acc_ref, o_ref):
        del acc_ref
        pltriton.atomic_add(o_ref, pl.ds(0, 16), x_ref[...])

    return jax.jit(_call(kernel, jax.ShapeDtypeStruct((16,), np.float32), interpret, grid=(4,),
                         in_specs=[pl.BlockSpec((16,), lambda i: (i,)), pl.BlockSpec((16,), lambda i: (0,))],
                         out_specs=pl.BlockSpec((16,), lambda i: (0,)), input_output_aliases={1: 0}))


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


def layer_norm_grad(interpret):
    """layer_norm's forward and Triton backward kernels (dx; dw and db accumulated)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.gpu import layer_norm as ln

    def loss(x, w, b):
        out = ln.layer_norm(x, w, b, num_warps=4, num_stages=1, interpret=interpret)
        return jnp.sum(out * jnp.cos(out))

    return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def rms_norm_grad(interpret):
    import jax
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.gpu import rms_norm as rn

    def loss(x, w, b):
        out = rn.rms_norm(x, w, b, num_warps=4, num_stages=1, interpret=interpret)
        return jnp.sum(out * jnp.cos(out))

    return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def mha_causal_grad(interpret):
    """Flash attention's Triton backward kernels (dq, dk, dv), causal."""
    import jax
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.gpu import attention

    sizes = attention.BlockSizes(block_q=16, block_k=16, block_q_dkv=16, block_kv_dkv=16, block_q_dq=16,
                                 block_kv_dq=16)

    def loss(q, k, v):
        out = attention.mha(q, k, v, None, sm_scale=0.25, causal=True, block_sizes=sizes,
                            backward_pass_impl="triton", num_warps=4, num_stages=1, interpret=interpret)
        return jnp.sum(out * jnp.cos(out))

    return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def decode_mqa(interpret):
    """Decode attention (multi-query) with per-example KV lengths, split over k."""
    import jax
    from jax.experimental.pallas.ops.gpu import decode_attention

    def fn(q, k, v, lengths):
        return decode_attention.mqa(q, k, v, kv_seq_len=lengths, block_h=16, block_k=16, k_splits=2,
                                    num_warps=4, num_stages=1, interpret=interpret)

    return jax.jit(fn)


def paged_attention(interpret):
    import jax
    from jax.experimental.pallas.ops.gpu import paged_attention as pa

    def fn(q, k_pages, v_pages, block_tables, lengths):
        return pa.paged_attention(q, k_pages, v_pages, block_tables, lengths, block_h=16,
                                  pages_per_compute_block=2, k_splits=2, num_warps=4, num_stages=1,
                                  interpret=interpret)

    return jax.jit(fn)


def _paged_inputs(rng):
    # batch 2, 16 query heads, 2 KV heads, head_dim 16, 8 pages of 4 tokens, 4 pages each
    q = rng.standard_normal((2, 16, 16)).astype(np.float32)
    k = rng.standard_normal((2, 8, 4, 16)).astype(np.float32)
    v = rng.standard_normal((2, 8, 4, 16)).astype(np.float32)
    tables = rng.permutation(8).reshape(2, 4).astype(np.int32)
    return [q, k, v, tables, np.array([13, 7], np.int32)]


def mha_segments(interpret):
    """Flash attention forward, not causal, with segment ids (the kernel's segment mask)."""
    import jax
    from jax.experimental.pallas.ops.gpu import attention

    sizes = attention.BlockSizes(block_q=16, block_k=16)

    def fn(q, k, v, segment_ids):
        return attention.mha(q, k, v, segment_ids, sm_scale=0.25, causal=False, block_sizes=sizes,
                             num_warps=4, num_stages=1, interpret=interpret)

    return jax.jit(fn)


def mha_segments_grad(interpret):
    """Flash attention's Triton backward kernels, not causal, with segment ids."""
    import jax
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.gpu import attention

    sizes = attention.BlockSizes(block_q=16, block_k=16, block_q_dkv=16, block_kv_dkv=16, block_q_dq=16,
                                 block_kv_dq=16)

    def loss(q, k, v, segment_ids):
        out = attention.mha(q, k, v, segment_ids, sm_scale=0.25, causal=False, block_sizes=sizes,
                            backward_pass_impl="triton", num_warps=4, num_stages=1, interpret=interpret)
        return jnp.sum(out * jnp.cos(out))

    return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def _mha_segment_inputs(rng):
    # batch 2, 32 tokens, 2 heads, head_dim 16; segments of ragged lengths (ids ascending,
    # boundaries inside the 16-token blocks) so each block mixes masked and unmasked pairs
    q, k, v = (rng.standard_normal((2, 32, 2, 16)).astype(np.float32) for _ in range(3))
    segment_ids = np.stack([np.repeat(np.arange(3), [5, 19, 8]), np.repeat(np.arange(2), [23, 9])]).astype(np.int32)
    return [q, k, v, segment_ids]


def paged_attention_quantized(interpret):
    """Paged attention over int8 k/v pages with per-token f32 scales (k cast to q's dtype
    before the dot, the k scale on the logits, the v scale on the weights) and a soft cap."""
    import jax
    from jax.experimental.pallas.ops.gpu import paged_attention as pa

    def fn(q, k_pages, v_pages, block_tables, lengths, k_scales, v_scales):
        return pa.paged_attention(q, k_pages, v_pages, block_tables, lengths, k_scales, v_scales, block_h=16,
                                  pages_per_compute_block=2, k_splits=2, num_warps=4, num_stages=1,
                                  attn_logits_soft_cap=8.0, interpret=interpret)

    return jax.jit(fn)


def _paged_quantized_inputs(rng):
    q, _, _, tables, lengths = _paged_inputs(rng)
    k = rng.integers(-127, 128, (2, 8, 4, 16)).astype(np.int8)
    v = rng.integers(-127, 128, (2, 8, 4, 16)).astype(np.int8)
    k_scales = rng.uniform(0.002, 0.02, (2, 8, 4)).astype(np.float32)
    v_scales = rng.uniform(0.002, 0.02, (2, 8, 4)).astype(np.float32)
    return [q, k, v, tables, lengths, k_scales, v_scales]


def plain_default_backend(interpret):
    """A plain pallas_call with no compiler parameters: the jax's default GPU backend
    (Mosaic GPU in jax 0.10, unless JAX_PALLAS_USE_MOSAIC_GPU=0)."""
    import jax
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    return jax.jit(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((128,), np.float32),
                                  interpret=interpret))


# ------------------------------------------------------------------ kernels inside other programs
def in_shard_map(interpret, mesh):
    """A kernel on each of 4 devices' shards (rows split over "d"), its result summed over
    the devices (an all-reduce after the kernel) and added back."""
    import jax
    from jax.experimental import pallas as pl
    from jax.sharding import PartitionSpec as P

    try:
        from jax import shard_map
    except ImportError:  # jax 0.10
        from jax.experimental.shard_map import shard_map

    def kernel(x_ref, y_ref, o_ref):
        i = pl.program_id(0)
        o_ref[...] = x_ref[...] * y_ref[...] + i.astype(np.float32)

    spec = pl.BlockSpec((4, 32), lambda i: (i, 0))
    local = _call(kernel, jax.ShapeDtypeStruct((8, 32), np.float32), interpret,
                  grid=(2,), in_specs=[spec, spec], out_specs=spec)

    def per_shard(x, y):
        z = local(x, y)
        return z + jax.lax.psum(z, "d")

    return jax.jit(shard_map(per_shard, mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P("d"),
                             check_vma=False))  # the kernel's out_shape names no varying axes


def in_scan(interpret):
    """A kernel in a lax.scan's body: the carry goes through it each step, with that
    step's slice of xs (the call sits inside the scan's while loop in the dump)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(c_ref, x_ref, o_ref):
        o_ref[...] = jnp.tanh(c_ref[...]) * 0.5 + x_ref[...]

    spec = pl.BlockSpec((32,), lambda i: (i,))
    step_kernel = _call(kernel, jax.ShapeDtypeStruct((64,), np.float32), interpret,
                        grid=(2,), in_specs=[spec, spec], out_specs=spec)

    def fn(c0, xs):
        def step(c, x):
            c = step_kernel(c, x)
            return c, c.sum()

        return jax.lax.scan(step, c0, xs)

    return jax.jit(fn)


def fp8(interpret):
    """f32 → fp8 (e4m3fn, e5m2) → f32 casts in the kernel (tt.fp_to_fp, round to nearest
    even).  Inputs within the fp8 ranges (where the GPU's saturating conversion and the
    interpreter's agree).  (An fp8 dot in the kernel aborts XLA's deviceless compile in
    both jax 0.10.2 and 0.12: std::bad_optional_access; tests/passes/triton/test_triton_ops.py
    covers fp8 dots with hand-written IR, test_jax_triton.py a dumped jax-triton fp8 dot.)"""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(a_ref, b_ref, o_ref, q_ref):
        a8 = a_ref[...].astype(jnp.float8_e4m3fn)
        b8 = b_ref[...].astype(jnp.float8_e5m2)
        o_ref[...] = a8.astype(jnp.float32)
        q_ref[...] = b8.astype(jnp.float32)

    return jax.jit(_call(kernel, [jax.ShapeDtypeStruct((16, 16), np.float32),
                                  jax.ShapeDtypeStruct((16, 16), np.float32)], interpret))


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
    Case("masked_other", masked_other, _f32(64)),
    Case("strided", strided, _f32((16, 32))),
    Case("mixed_dtypes", mixed_dtypes, _mixed_inputs),
    Case("int_ops", int_ops, lambda rng: [rng.integers(-100, 100, 64).astype(np.int32)]),
    Case("cond_while", cond_while, _f32(64)),
    Case("reductions", reductions, _f32((16, 32))),
    Case("math_zoo", math_zoo, _f32(64)),
    Case("atomic_add", atomic_add, _f32(64, 16)),
    Case("layer_norm", layer_norm, _f32((2, 4, 64), 64, 64)),
    Case("rms_norm", rms_norm, _f32((2, 4, 64), 64, 64)),
    Case("softmax", softmax_op, _f32((8, 64))),
    Case("mha_causal", mha_causal, _f32((1, 32, 2, 16), (1, 32, 2, 16), (1, 32, 2, 16))),
    Case("layer_norm_grad", layer_norm_grad, _f32((2, 4, 64), 64, 64)),
    Case("rms_norm_grad", rms_norm_grad, _f32((2, 4, 64), 64, 64)),
    Case("mha_causal_grad", mha_causal_grad, _f32((1, 32, 2, 16), (1, 32, 2, 16), (1, 32, 2, 16))),
    Case("decode_mqa", decode_mqa, lambda rng: [rng.standard_normal((2, 16, 16)).astype(np.float32),
                                                rng.standard_normal((2, 64, 16)).astype(np.float32),
                                                rng.standard_normal((2, 64, 16)).astype(np.float32),
                                                np.array([50, 17], np.int32)]),
    Case("paged_attention", paged_attention, _paged_inputs),
    Case("mha_segments", mha_segments, _mha_segment_inputs),
    Case("mha_segments_grad", mha_segments_grad, _mha_segment_inputs),
    Case("paged_attention_quantized", paged_attention_quantized, _paged_quantized_inputs),
    Case("mosaic_gpu_default", plain_default_backend, _f32(128), triton=False),
    Case("in_shard_map", in_shard_map, _f32((32, 32), (32, 32)), devices=4),
    Case("in_scan", in_scan, _f32(64, (5, 64))),
    Case("fp8", fp8, lambda rng: [(rng.standard_normal((16, 16)) * 8).astype(np.float32) for _ in range(2)]),
]
BY_NAME = {c.name: c for c in CASES}
