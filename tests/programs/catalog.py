"""Ordinary JAX programs whose optimized dumps (CPU, TPU, GPU) the tests convert and run
on CPU against JAX's own CPU results.

Each program is built for a device mesh (1 or 4 devices, a 2x2 mesh for some): the same
definition compiles deviceless for a TPU v5e 2x2 or 4 H100s (tests/programs/generate.py)
and runs on 4 CPU devices as the oracle (tests/test_real_dumps.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

Inputs = Callable[[np.random.Generator], list[np.ndarray]]


@dataclass(frozen=True)
class Program:
    name: str
    # The function to jit, given the mesh (shard_map programs close over it).
    build: Callable[[Mesh], Callable]
    inputs: Inputs
    mesh_shape: tuple[int, ...] = (1,)
    axis_names: tuple[str, ...] = ("x",)
    # NamedSharding specs of the inputs / outputs over the mesh (None: replicated / XLA's choice).
    in_specs: Sequence[P] | None = None
    out_specs: Sequence[P] | P | None = None
    tags: frozenset[str] = field(default_factory=frozenset)

    @property
    def devices(self) -> int:
        return int(np.prod(self.mesh_shape))


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def i32(rng, *shape, hi=5):
    return rng.integers(0, hi, shape).astype(np.int32)


def _single(name, fn, inputs, tags=()):
    return Program(name, lambda mesh: fn, inputs, tags=frozenset(tags))


def _sm(name, body, inputs, in_specs, out_specs, mesh_shape=(4,), axis_names=("x",), tags=()):
    def build(mesh):
        return jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
    return Program(name, build, inputs, mesh_shape, axis_names, in_specs, out_specs, frozenset(("shard_map", *tags)))


def _jit(name, fn, inputs, in_specs, out_specs, mesh_shape=(4,), axis_names=("x",), tags=()):
    return Program(name, lambda mesh: fn, inputs, mesh_shape, axis_names, in_specs, out_specs,
                   frozenset(("spmd", *tags)))


def _mlp(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


def _attention(q, k, v):
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    mask = jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool))
    p = jax.nn.softmax(jnp.where(mask, s, -1e30), axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v)


def _scan(h, xs):
    return jax.lax.scan(lambda c, x: (jnp.tanh(c + x), c.sum()), h, xs)


def _ring(n):
    return [(i, (i + 1) % n) for i in range(n)]


PROGRAMS: list[Program] = [
    # ---- elementwise, dtypes
    _single("elementwise_f32", lambda x, y: (jnp.exp(x) * y - jnp.sin(x) / (1 + y * y), jnp.maximum(x, y)),
            lambda r: [f32(r, 8, 16), f32(r, 8, 16)]),
    _single("math_special", lambda x: (jax.lax.erf(x), jnp.arctan2(x, 1.5), jnp.expm1(x), jnp.cbrt(x), jnp.tan(x),
                                       jnp.log1p(jnp.abs(x)), jax.nn.sigmoid(x), jnp.tanh(x)),
            lambda r: [f32(r, 32)]),
    _single("bf16_math", lambda x: (jnp.exp(x), jax.nn.gelu(x), x.astype(jnp.float32).sum()),
            lambda r: [f32(r, 64).astype(jnp.bfloat16)]),
    _single("f16_math", lambda x: (jnp.tanh(x), jnp.sqrt(jnp.abs(x))), lambda r: [f32(r, 64).astype(np.float16)]),
    _single("complex_math", lambda x: (jnp.abs(x), x * x.conj(), jnp.exp(x)),
            lambda r: [(f32(r, 16) + 1j * f32(r, 16)).astype(np.complex64)]),
    _single("int_ops", lambda x, y: (x << 2, x >> 1, jax.lax.population_count(x), jax.lax.clz(x), x & y, x ^ y,
                                     x // (y + 1), x % (y + 1)),
            lambda r: [i32(r, 32, hi=1000), i32(r, 32, hi=7)]),
    _single("uint8_bool", lambda x, b: (x + 3, jnp.maximum(x, 100), jnp.where(b, x, 0), ~b),
            lambda r: [r.integers(0, 255, 16).astype(np.uint8), r.integers(0, 2, 16).astype(bool)]),
    _single("rounding", lambda x: (jnp.round(x), jnp.floor(x), jnp.ceil(x), jnp.sign(x), jnp.clip(x, -0.5, 0.5)),
            lambda r: [f32(r, 32) * 3]),
    _single("convert_types", lambda x: (x.astype(jnp.int32), x.astype(jnp.bfloat16), (x > 0).astype(jnp.float32)),
            lambda r: [f32(r, 32) * 10]),
    # ---- reductions and normalization
    _single("reductions", lambda x: (x.sum(0), x.max(1), jnp.argmax(x, 1), x.mean(), jnp.var(x, axis=0),
                                     jax.nn.logsumexp(x, 1)),
            lambda r: [f32(r, 12, 20)]),
    _single("softmax_layernorm", lambda x, g: (jax.nn.softmax(x, -1),
                                               (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5) * g),
            lambda r: [f32(r, 16, 32), f32(r, 32)]),
    _single("rmsnorm_bf16", lambda x, g: (x * jax.lax.rsqrt((x.astype(jnp.float32) ** 2).mean(-1, keepdims=True) + 1e-6).astype(x.dtype) * g),
            lambda r: [f32(r, 16, 64).astype(jnp.bfloat16), f32(r, 64).astype(jnp.bfloat16)]),
    # ---- linear algebra
    _single("matmul_batched", lambda a, b: jnp.einsum("bij,bjk->bik", a, b), lambda r: [f32(r, 4, 8, 16), f32(r, 4, 16, 8)]),
    _single("matmul_bf16_f32acc", lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32),
            lambda r: [f32(r, 16, 32).astype(jnp.bfloat16), f32(r, 32, 8).astype(jnp.bfloat16)]),
    _single("mlp_forward", _mlp, lambda r: [f32(r, 8, 16), f32(r, 16, 32), f32(r, 32, 8)]),
    _single("mlp_grad", jax.grad(lambda w1, w2, x: jnp.sum(_mlp(x, w1, w2) ** 2), argnums=(0, 1)),
            lambda r: [f32(r, 16, 32), f32(r, 32, 8), f32(r, 8, 16)]),
    _single("attention_block", _attention, lambda r: [f32(r, 2, 16, 4, 8), f32(r, 2, 16, 4, 8), f32(r, 2, 16, 4, 8)]),
    _single("attention_grad", jax.grad(lambda q, k, v: _attention(q, k, v).sum(), argnums=(0, 1, 2)),
            lambda r: [f32(r, 1, 8, 2, 4), f32(r, 1, 8, 2, 4), f32(r, 1, 8, 2, 4)]),
    _single("cholesky_solve", lambda a, b: jax.scipy.linalg.solve_triangular(
        jnp.linalg.cholesky(a @ a.T + 4 * jnp.eye(6)), b, lower=True), lambda r: [f32(r, 6, 6), f32(r, 6, 3)]),
    # ---- convolutions and windows
    _single("conv2d_strided_dilated", lambda x, w: jax.lax.conv_general_dilated(
        x, w, (2, 1), "SAME", rhs_dilation=(1, 2), dimension_numbers=("NCHW", "OIHW", "NCHW")),
        lambda r: [f32(r, 2, 3, 9, 9), f32(r, 4, 3, 3, 3)]),
    _single("conv1d_grouped", lambda x, w: jax.lax.conv_general_dilated(x, w, (1,), "VALID", feature_group_count=2),
            lambda r: [f32(r, 2, 4, 10), f32(r, 6, 2, 3)]),
    _single("conv_transpose", lambda x, w: jax.lax.conv_transpose(x, w, (2, 2), "SAME"),
            lambda r: [f32(r, 1, 5, 5, 3), f32(r, 3, 3, 3, 4)]),
    _single("conv_grad", jax.grad(lambda x, w: jnp.sum(jax.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) ** 2), argnums=(0, 1)),
        lambda r: [f32(r, 2, 6, 6, 3), f32(r, 3, 3, 3, 4)]),
    _single("pooling", lambda x: (jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
                                  jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")),
            lambda r: [f32(r, 2, 8, 8, 3)]),
    _single("maxpool_grad", jax.grad(lambda x: jax.lax.reduce_window(
        x, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME").sum()), lambda r: [f32(r, 2, 8, 8, 3)]),
    _single("cumulative", lambda x: (jnp.cumsum(x, 1), jnp.cumprod(x, 0), jax.lax.cummax(x, axis=1)),
            lambda r: [f32(r, 6, 33) * 0.5]),
    # ---- FFT
    _single("fft_family", lambda x, c: (jnp.fft.fft(c), jnp.fft.ifft(c), jnp.fft.rfft2(x), jnp.fft.irfft(c)),
            lambda r: [f32(r, 8, 16), (f32(r, 8, 9) + 1j * f32(r, 8, 9)).astype(np.complex64)]),
    # ---- control flow
    _single("scan_rnn", _scan, lambda r: [f32(r, 8), f32(r, 6, 8)]),
    _single("fori_loop", lambda x: jax.lax.fori_loop(0, 7, lambda i, c: c * 0.9 + jnp.sin(c) * i, x), lambda r: [f32(r, 5)]),
    _single("while_dynamic", lambda x, n: jax.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.1), (0, x)),
            lambda r: [f32(r, 3), np.int32(5)]),
    _single("cond_switch", lambda p, i, x: (jax.lax.cond(p > 0, lambda x: x * 2, lambda x: -x, x),
                                            jax.lax.switch(i, [lambda x: x, lambda x: x * 2, jnp.sin], x)),
            lambda r: [np.int32(1), np.int32(7), f32(r, 3)]),
    # ---- sorting, gather, scatter
    _single("sort_multi", lambda x, y: jax.lax.sort((x, y), num_keys=1, dimension=1), lambda r: [f32(r, 5, 8), i32(r, 5, 8)]),
    _single("argsort_topk", lambda x: (jnp.argsort(x, axis=-1), jax.lax.top_k(x, 3)), lambda r: [f32(r, 4, 10)]),
    _single("gather_take", lambda x, i: (jnp.take(x, i, axis=0), jnp.take_along_axis(x[:6], i[:, None] % 4, 1)),
            lambda r: [f32(r, 10, 4), i32(r, 6, hi=10)]),
    _single("scatter_ops", lambda x, i, u: (x.at[i].add(u), x.at[i].max(u), x.at[i].set(u), x.at[i].mul(u)),
            lambda r: [f32(r, 10, 4), i32(r, 6, hi=10), f32(r, 6, 4)]),
    _single("segment_sum", lambda x, s: jax.ops.segment_sum(x, s, 4), lambda r: [f32(r, 10, 3), i32(r, 10, hi=4)]),
    _single("dynamic_slicing", lambda x, u, i: (jax.lax.dynamic_slice(x, (i, 1), (3, 2)),
                                                jax.lax.dynamic_update_slice(x, u, (i, 0))),
            lambda r: [f32(r, 8, 5), f32(r, 2, 5), np.int32(6)]),
    # ---- shapes
    _single("reshape_transpose", lambda x: (x.transpose(2, 0, 1).reshape(6, 20) * 2, x[::2, 1:4, ::3], jnp.flip(x, 0)),
            lambda r: [f32(r, 4, 5, 6)]),
    _single("pad_concat_iota", lambda x: (jax.lax.pad(x, 0.0, [(1, -1, 1), (2, 0, 0)]),
                                          jnp.concatenate([x, x * 2], 1) + jnp.arange(6.0)),
            lambda r: [f32(r, 4, 3)]),
    # ---- random
    _single("random_threefry", lambda k: (jax.random.normal(jax.random.wrap_key_data(k), (5, 3)),
                                          jax.random.uniform(jax.random.wrap_key_data(k), (17,)),
                                          jax.random.bits(jax.random.wrap_key_data(k), (4,))),
            lambda r: [np.array([0, 42], np.uint32)]),
    _single("random_categorical", lambda k, logits: jax.random.categorical(jax.random.wrap_key_data(k), logits),
            lambda r: [np.array([3, 7], np.uint32), f32(r, 6, 10)]),
    # ---- shard_map collectives on 4 devices
    _sm("sm_psum_pmean_pmax", lambda x: (jax.lax.psum(x, "x"), jax.lax.pmean(x, "x"), jax.lax.pmax(x, "x")),
        lambda r: [f32(r, 8, 3)], P("x"), (P("x"), P("x"), P("x"))),
    _sm("sm_all_gather", lambda x: (jax.lax.all_gather(x, "x", tiled=True), jax.lax.all_gather(x, "x", axis=1)),
        lambda r: [f32(r, 8, 3)], P("x"), (P("x"), P("x"))),
    _sm("sm_psum_scatter", lambda x: jax.lax.psum_scatter(x, "x", tiled=True), lambda r: [f32(r, 16, 3)], P("x"), P("x")),
    _sm("sm_all_to_all", lambda x: jax.lax.all_to_all(x, "x", 1, 0, tiled=True), lambda r: [f32(r, 8, 8)], P("x"), P("x")),
    _sm("sm_ppermute_ring", lambda x: jax.lax.ppermute(x, "x", _ring(4)), lambda r: [f32(r, 8, 3)], P("x"), P("x")),
    _sm("sm_axis_index", lambda x: x * jax.lax.axis_index("x").astype(jnp.float32) + jax.lax.psum(1.0, "x"),
        lambda r: [f32(r, 8, 3)], P("x"), P("x")),
    _sm("sm2d_psum_rows", lambda x: jax.lax.psum(x, "a"), lambda r: [f32(r, 4, 4)], P("a", "b"), P(None, "b"),
        mesh_shape=(2, 2), axis_names=("a", "b")),
    _sm("sm2d_psum_both", lambda x: jax.lax.psum(x, ("a", "b")), lambda r: [f32(r, 4, 4)], P("a", "b"), P(),
        mesh_shape=(2, 2), axis_names=("a", "b")),
    _sm("sm2d_ppermute_a2a", lambda x: (jax.lax.ppermute(x, "a", [(0, 1), (1, 0)]),
                                        jax.lax.all_to_all(x, "b", 1, 0, tiled=True)),
        lambda r: [f32(r, 4, 4)], P("a", "b"), (P("a", "b"), P("a", "b")), mesh_shape=(2, 2), axis_names=("a", "b")),
    # ---- jit with NamedShardings: XLA's SPMD partitioner writes the collectives
    _jit("spmd_matmul_contract", lambda a, b: a @ b, lambda r: [f32(r, 8, 16), f32(r, 16, 8)],
         (P(None, "x"), P("x", None)), P()),
    _jit("spmd_reshard", lambda a: a * 2 + 1, lambda r: [f32(r, 8, 8)], (P("x", None),), P(None, "x")),
    _jit("spmd_mlp_2d", _mlp, lambda r: [f32(r, 4, 8), f32(r, 8, 16), f32(r, 16, 8)],
         (P("a", None), P(None, "b"), P("b", None)), P("a", None), mesh_shape=(2, 2), axis_names=("a", "b")),
    _jit("spmd_reduce_2d", lambda x: (x.sum(0), jnp.max(x, 1)), lambda r: [f32(r, 8, 8)], (P("a", "b"),),
         (P("b"), P("a")), mesh_shape=(2, 2), axis_names=("a", "b")),
    _jit("spmd_mlp_train_step", lambda w1, w2, x: jax.grad(lambda w: jnp.sum(_mlp(x, w[0], w[1]) ** 2))((w1, w2)),
         lambda r: [f32(r, 16, 32), f32(r, 32, 16), f32(r, 8, 16)], (P(None, "x"), P("x", None), P("x", None)), None),
]

BY_NAME = {p.name: p for p in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "program names must be unique"
