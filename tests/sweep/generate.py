"""Breadth sweep: post-optimization dumps of ordinary programs that the catalog does not hold
(not run by the default test suite; the dumps go to /tmp, a few that exposed bugs are committed
under tests/dumps/sweep/).

    JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 \\
        PYTHON -m tests.sweep.generate --backend {cpu,tpu-v5e,tpu-v6e,gpu} --out DIR

Each single-device program's dump `NAME.hlo` comes with `NAME.in.npz` (its inputs, arg0..argN)
and `NAME.expected.npz` (JAX's own CPU result for them, out0..outM): the oracle for `run`.
Matmuls use `jax_default_matmul_precision=highest` so TPU dumps keep f32 operands (DESIGN §7).
Multi-device programs (shard_map collectives on 8 devices, NamedSharding on a 2x4 mesh) have no
expected file: CPU ones are checked against XLA itself (`check --against-xla`), the TPU and GPU
ones against the CPU dump with `hlo-roundtrip compare CPU.hlo OTHER.hlo` (same per-device inputs).
PYTHON: the jax[tpu] / jax[cuda12] environment of the jax version wanted (/opt/envs/tpu010,
tpu012, cuda010, cuda012; GPU also needs HLO_ROUNDTRIP_GPU_TARGET). Then tabulate with
`python -m tests.sweep.run_sweep DIR...` (tests/sweep/run_sweep.py).

Findings of the first sweep (2026-11, 48 programs x CPU/TPU v5e/TPU v6e/H100 x jax 0.10.2/0.12.0.1):
- fixed: TPU rng-bit-generator without its state result; TPU SPMD bitcast of padded tiles
  (tests/sweep/test_sweep_regressions.py with the dumps that exposed them).
- refused, clearly: TPU approx_min_k's custom-call `PartialReduce` (its TPU binning is not public).
- not a converter bug: on H100, XLA drops a f32→f8→f32 convert pair (the dump returns its input),
  so f8_casts differs from JAX's CPU result while matching the dump.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
GPU_TARGET = pathlib.Path(os.environ.get("HLO_ROUNDTRIP_GPU_TARGET", ROOT.parent / "shared" / "gpu_target_h100.txtpb"))


@dataclass
class Program:
    name: str
    fn: Callable
    inputs: Callable[[np.random.Generator], list]
    devices: int = 1
    shard: Callable | None = None  # (mesh) -> (in_shardings, out_shardings) for multi-device programs
    tags: list[str] = field(default_factory=list)


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def programs() -> list[Program]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    P: list[Program] = []

    def add(name, inputs, devices=1, shard=None):
        def deco(fn):
            P.append(Program(name, fn, inputs, devices, shard))
            return fn
        return deco

    # --- transformer pieces -------------------------------------------------------------------
    def rope(x, pos):
        d = x.shape[-1] // 2
        freq = 1.0 / (10000 ** (jnp.arange(d, dtype=jnp.float32) / d))
        ang = pos[:, None].astype(jnp.float32) * freq[None, :]
        c, s = jnp.cos(ang)[:, None, :], jnp.sin(ang)[:, None, :]
        x1, x2 = x[..., :d], x[..., d:]
        return jnp.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)

    def rmsnorm(x, w):
        return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w

    @add("gpt_rope_gqa", lambda r: [f32(r, 2, 16, 64), f32(r, 64, 64, scale=0.1), f32(r, 64, 32, scale=0.1),
                                    f32(r, 64, 64, scale=0.1), f32(r, 64, 128, scale=0.1), f32(r, 128, 64, scale=0.1),
                                    f32(r, 64)])
    def gpt_rope_gqa(x, wq, wkv, wo, w1, w2, g):
        b, t, _ = x.shape
        h = rmsnorm(x, g)
        q = (h @ wq).reshape(b, t, 8, 8)
        kv = (h @ wkv).reshape(b, t, 2, 2, 8)
        k, v = kv[:, :, 0], kv[:, :, 1]
        pos = jnp.arange(t)
        q = jax.vmap(lambda a: rope(a, pos))(q)
        k = jax.vmap(lambda a: rope(a, pos))(k)
        k = jnp.repeat(k, 4, axis=2)
        v = jnp.repeat(v, 4, axis=2)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(8.0)
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e9)
        a = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v).reshape(b, t, 64)
        x = x + a @ wo
        return x + jax.nn.silu(rmsnorm(x, g) @ w1) @ w2

    @add("vit_patch_attn", lambda r: [f32(r, 2, 3, 16, 16), f32(r, 32, 3, 4, 4, scale=0.1), f32(r, 32, 96, scale=0.1),
                                      f32(r, 16, 32, scale=0.1)])
    def vit_patch_attn(img, wpatch, wqkv, posemb):
        p = lax.conv_general_dilated(img, wpatch, (4, 4), "VALID", dimension_numbers=("NCHW", "OIHW", "NHWC"))
        x = p.reshape(2, 16, 32) + posemb
        mu = x.mean(-1, keepdims=True)
        x = (x - mu) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)
        q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
        q, k, v = (a.reshape(2, 16, 4, 8) for a in (q, k, v))
        return jax.nn.dot_product_attention(q, k, v)

    @add("resnet_bn_train", lambda r: [f32(r, 4, 8, 8, 16), f32(r, 3, 3, 16, 16, scale=0.1), f32(r, 16), f32(r, 16)])
    def resnet_bn_train(x, w, gamma, beta):
        def loss(w, gamma, beta):
            y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
            mean = y.mean((0, 1, 2))
            var = y.var((0, 1, 2))
            y = (y - mean) * lax.rsqrt(var + 1e-5) * gamma + beta
            out = jax.nn.relu(y + x)
            return jnp.sum(out ** 2), (mean, var)
        (l, stats), grads = jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True)(w, gamma, beta)
        return l, stats, grads

    # --- optimizers (optax's update rules written out) ---------------------------------------
    @add("adamw_update", lambda r: [f32(r, 64, 32), f32(r, 64, 32), f32(r, 64, 32), np.abs(f32(r, 64, 32)), np.int32(7)])
    def adamw_update(p, g, m, v, step):
        b1, b2, lr, wd = 0.9, 0.999, 1e-3, 0.01
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        t = (step + 1).astype(jnp.float32)
        mh, vh = m / (1 - b1 ** t), v / (1 - b2 ** t)
        return p - lr * (mh / (jnp.sqrt(vh) + 1e-8) + wd * p), m, v

    @add("lion_update", lambda r: [f32(r, 64, 32), f32(r, 64, 32), f32(r, 64, 32)])
    def lion_update(p, g, m):
        u = jnp.sign(0.9 * m + 0.1 * g)
        return p - 1e-4 * (u + 0.1 * p), 0.99 * m + 0.01 * g

    @add("adafactor_update", lambda r: [f32(r, 64, 32), f32(r, 64, 32), np.abs(f32(r, 64)), np.abs(f32(r, 32))])
    def adafactor_update(p, g, vr, vc):
        g2 = g * g + 1e-30
        vr = 0.8 * vr + 0.2 * g2.mean(1)
        vc = 0.8 * vc + 0.2 * g2.mean(0)
        v = vr[:, None] * vc[None, :] / vr.mean()
        u = g * lax.rsqrt(v)
        u = u / jnp.maximum(1.0, jnp.sqrt(jnp.mean(u * u)))
        scale = jnp.maximum(1e-3, jnp.sqrt(jnp.mean(p * p)))
        return p - 1e-2 * scale * u, vr, vc

    @add("clip_global_norm", lambda r: [f32(r, 64, 32), f32(r, 32), f32(r, 7, 3)])
    def clip_global_norm(a, b, c):
        n = jnp.sqrt(sum(jnp.sum(x * x) for x in (a, b, c)))
        s = jnp.minimum(1.0, 1.0 / n)
        return a * s, b * s, c * s, n

    # --- scans and loops ---------------------------------------------------------------------
    @add("scan_rnn", lambda r: [f32(r, 12, 4, 8), f32(r, 8, 16, scale=0.3), f32(r, 16, 16, scale=0.3), f32(r, 4, 16)])
    def scan_rnn(xs, wx, wh, h0):
        def cell(h, x):
            h = jnp.tanh(x @ wx + h @ wh)
            return h, h.sum(-1)
        return lax.scan(cell, h0, xs)

    @add("assoc_scan_linrec", lambda r: [np.abs(f32(r, 64, 8)) * 0.5, f32(r, 64, 8)])
    def assoc_scan_linrec(a, b):
        def comb(l, r):
            return r[0] * l[0], r[0] * l[1] + r[1]
        return lax.associative_scan(comb, (a, b), axis=0)

    @add("while_dynamic_trip", lambda r: [f32(r, 16), np.int32(5)])
    def while_dynamic_trip(x, n):
        def body(c):
            i, y = c
            return i + 1, jnp.sin(y) * 1.5 + 0.1 * i
        return lax.while_loop(lambda c: c[0] < n, body, (jnp.int32(0), x))

    @add("fori_nested_cond", lambda r: [f32(r, 8, 8), np.int32(3)])
    def fori_nested_cond(x, k):
        def body(i, y):
            return lax.cond(i % 2 == 0, lambda z: z @ z.T * 0.1, lambda z: jnp.tanh(z) + i, y)
        return lax.fori_loop(0, k + 2, body, x)

    @add("cumsum_cumprod", lambda r: [f32(r, 32, 16), (1 + 0.05 * f32(r, 32, 16))])
    def cumsum_cumprod(a, b):
        return jnp.cumsum(a, axis=0), jnp.cumprod(b, axis=1), lax.cummax(a, axis=1), jnp.cumsum(a.astype(jnp.int32), axis=1)

    @add("logcumsumexp", lambda r: [f32(r, 64, 8)])
    def logcumsumexp(a):
        return lax.cumlogsumexp(a, axis=0), jax.nn.logsumexp(a, axis=1)

    # --- sorting and searching ---------------------------------------------------------------
    @add("sort_argsort", lambda r: [f32(r, 8, 33), r.integers(0, 5, (8, 33)).astype(np.int32)])
    def sort_argsort(a, k):
        return jnp.sort(a, axis=1), jnp.argsort(a, axis=0), lax.sort((k, a), num_keys=1, dimension=1)

    @add("top_k", lambda r: [f32(r, 4, 100)])
    def top_k(a):
        return lax.top_k(a, 5)

    @add("searchsorted", lambda r: [np.sort(f32(r, 50)), f32(r, 7, 3)])
    def searchsorted(s, q):
        return jnp.searchsorted(s, q), jnp.searchsorted(s, q, side="right", method="sort"), jnp.digitize(q, s[::5])

    @add("argmax_ties", lambda r: [np.round(f32(r, 16, 12)).astype(np.float32)])
    def argmax_ties(a):
        return jnp.argmax(a, axis=1), jnp.argmin(a, axis=0), jnp.max(a, axis=0)

    @add("segment_sum", lambda r: [f32(r, 40, 4), r.integers(0, 6, 40).astype(np.int32)])
    def segment_sum(x, ids):
        return (jax.ops.segment_sum(x, ids, 6), jax.ops.segment_max(x, ids, 6),
                jax.ops.segment_sum(x, jnp.sort(ids), 6, indices_are_sorted=True))

    # --- FFT and complex ---------------------------------------------------------------------
    @add("rfft_irfft", lambda r: [f32(r, 4, 64)])
    def rfft_irfft(x):
        f = jnp.fft.rfft(x)
        return jnp.abs(f), jnp.fft.irfft(f * jnp.exp(-0.1j * jnp.arange(33)), n=64)

    @add("fft2_complex", lambda r: [f32(r, 8, 16), f32(r, 8, 16)])
    def fft2_complex(re, im):
        z = lax.complex(re, im)
        f = jnp.fft.ifft2(jnp.fft.fft2(z) * jnp.conj(z))
        return f.real, f.imag

    @add("complex_arith", lambda r: [f32(r, 6, 6), f32(r, 6, 6)])
    def complex_arith(re, im):
        z = lax.complex(re, im)
        w = jnp.exp(z * 0.3) / (z + 2.0) + jnp.sqrt(z) * jnp.log(z + 3.0)
        m = z @ jnp.conj(z).T
        return jnp.real(w), jnp.imag(w), jnp.abs(m), jnp.angle(w)

    # --- precision and quantization ----------------------------------------------------------
    @add("int8_matmul_dequant", lambda r: [r.integers(-127, 128, (16, 64)).astype(np.int8),
                                           r.integers(-127, 128, (64, 32)).astype(np.int8),
                                           np.abs(f32(r, 16, 1)) * 0.01, np.abs(f32(r, 1, 32)) * 0.01])
    def int8_matmul_dequant(a, b, sa, sb):
        acc = lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32)
        return acc.astype(jnp.float32) * sa * sb

    @add("quantize_int8_roundtrip", lambda r: [f32(r, 32, 16)])
    def quantize_int8_roundtrip(x):
        s = jnp.max(jnp.abs(x), axis=1, keepdims=True) / 127.0
        q = jnp.clip(jnp.round(x / s), -127, 127).astype(jnp.int8)
        return q, q.astype(jnp.float32) * s

    @add("f8_casts", lambda r: [f32(r, 16, 16, scale=3.0)])
    def f8_casts(x):
        a = x.astype(jnp.float8_e4m3fn)
        b = x.astype(jnp.float8_e5m2)
        return a.astype(jnp.float32), b.astype(jnp.float32), (a.astype(jnp.bfloat16) * 2).astype(jnp.float32)

    @add("reduce_precision", lambda r: [f32(r, 64, scale=100.0)])
    def reduce_precision(x):
        return lax.reduce_precision(x, 5, 10), lax.reduce_precision(x, 8, 7), lax.reduce_precision(x, 4, 3)

    @add("bf16_mlp_mixed", lambda r: [f32(r, 8, 32), f32(r, 32, 64, scale=0.2), f32(r, 64, 32, scale=0.2)])
    def bf16_mlp_mixed(x, w1, w2):
        h = jnp.dot(x.astype(jnp.bfloat16), w1.astype(jnp.bfloat16), preferred_element_type=jnp.float32)
        h = jax.nn.gelu(h).astype(jnp.bfloat16)
        return jnp.dot(h, w2.astype(jnp.bfloat16), preferred_element_type=jnp.float32)

    # --- autodiff ----------------------------------------------------------------------------
    @add("remat_mlp_grad", lambda r: [f32(r, 16, 32), f32(r, 32, 32, scale=0.2), f32(r, 32, 32, scale=0.2)])
    def remat_mlp_grad(x, w1, w2):
        @jax.checkpoint
        def layer(h, w):
            return jnp.tanh(h @ w)
        return jax.grad(lambda a, b: jnp.sum(layer(layer(x, a), b) ** 2), argnums=(0, 1))(w1, w2)

    @add("vmap_of_grad", lambda r: [f32(r, 8, 5), f32(r, 5, 3)])
    def vmap_of_grad(xs, w):
        return jax.vmap(jax.grad(lambda x, w: jnp.sum(jax.nn.softplus(x @ w))), in_axes=(0, None))(xs, w)

    @add("xent_grad", lambda r: [f32(r, 8, 10), r.integers(0, 10, 8).astype(np.int32)])
    def xent_grad(logits, labels):
        def loss(l):
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(l), labels[:, None], axis=1))
        return jax.value_and_grad(loss)(logits)

    # --- indexing ----------------------------------------------------------------------------
    @add("kv_cache_decode", lambda r: [f32(r, 2, 32, 4, 8), f32(r, 2, 32, 4, 8), f32(r, 2, 1, 4, 8), f32(r, 2, 1, 4, 8),
                                       f32(r, 2, 1, 4, 8), np.int32(9)])
    def kv_cache_decode(kc, vc, q, k, v, pos):
        kc = lax.dynamic_update_slice(kc, k, (0, pos, 0, 0))
        vc = lax.dynamic_update_slice(vc, v, (0, pos, 0, 0))
        s = jnp.einsum("bqhd,bkhd->bhqk", q, kc)
        s = jnp.where(jnp.arange(32) <= pos, s, -jnp.inf)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), vc), kc, vc

    @add("gather_unusual", lambda r: [f32(r, 5, 7, 6), r.integers(0, 5, (3, 4)).astype(np.int32),
                                      r.integers(0, 6, (3, 4)).astype(np.int32)])
    def gather_unusual(x, i, j):
        a = x[i, :, j]                       # advanced indices split by a slice
        b = jnp.take_along_axis(x, jnp.clip(j[:, :1, None], 0, 4).repeat(6, 2)[:1].repeat(5, 0)[:, :1], axis=1)
        c = lax.dynamic_slice(x, (i[0, 0], 2, j[1, 1]), (2, 3, 2))
        d = x[::-1, 1::2, i[0]]
        return a, b, c, d

    @add("scatter_unusual", lambda r: [f32(r, 5, 7, 6), r.integers(0, 5, (3, 4)).astype(np.int32),
                                       r.integers(0, 6, (3, 4)).astype(np.int32), f32(r, 3, 4, 7)])
    def scatter_unusual(x, i, j, u):
        a = x.at[i, :, j].add(u)
        b = x.at[i, :, j].max(u)
        c = x.at[:, 3, j[0]].set(1.0, mode="drop")
        d = x.at[i[:, 0]].multiply(2.0, unique_indices=False)
        return a, b, c, d

    @add("pad_rev_conv_depthwise", lambda r: [f32(r, 2, 10, 10, 8), f32(r, 3, 3, 1, 8)])
    def pad_rev_conv_depthwise(x, w):
        y = lax.conv_general_dilated(jnp.pad(x, ((0, 0), (1, 2), (2, 1), (0, 0)), mode="reflect"), w, (2, 1), "VALID",
                                     rhs_dilation=(1, 2), dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                     feature_group_count=8)
        return y[:, ::-1], jnp.flip(x, (1, 2)).sum((1, 2))

    @add("conv_transpose", lambda r: [f32(r, 2, 6, 6, 4), f32(r, 3, 3, 8, 4, scale=0.2)])
    def conv_transpose(x, w):
        return lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWOI", "NHWC"))

    # --- random ------------------------------------------------------------------------------
    @add("random_threefry", lambda r: [np.array([0, 42], np.uint32), f32(r, 16, 8)])
    def random_threefry(kd, x):
        key = jax.random.wrap_key_data(kd, impl="threefry2x32")
        k1, k2, k3 = jax.random.split(key, 3)
        drop = jax.random.bernoulli(k1, 0.8, x.shape)
        return (jnp.where(drop, x / 0.8, 0.0), jax.random.normal(k2, (4, 4)), jax.random.randint(k3, (10,), 0, 100),
                jax.random.permutation(k3, 12), jax.random.key_data(k2))

    @add("random_rbg", lambda r: [np.array([1, 2, 3, 4], np.uint32)])
    def random_rbg(kd):
        key = jax.random.wrap_key_data(kd, impl="rbg")
        return jax.random.uniform(key, (8, 8)), jax.random.bits(jax.random.fold_in(key, 3), (16,), jnp.uint32)

    # --- batch 2: ops the catalog lacks ---------------------------------------------------------
    @add("ragged_dot_groups", lambda r: [f32(r, 12, 8), f32(r, 3, 8, 5), np.array([5, 0, 7], np.int32)])
    def ragged_dot_groups(x, w, sizes):
        return lax.ragged_dot(x, w, sizes)

    @add("approx_max_k", lambda r: [f32(r, 4, 256)])
    def approx_max_k(x):
        return lax.approx_max_k(x, 8, recall_target=0.95), lax.approx_min_k(x, 4)

    @add("fp8_matmul_scaled", lambda r: [f32(r, 32, 64), f32(r, 64, 32), np.float32(0.5), np.float32(2.0)])
    def fp8_matmul_scaled(a, b, sa, sb):
        a8 = (a / sa).astype(jnp.float8_e4m3fn)
        b8 = (b / sb).astype(jnp.float8_e4m3fn)
        out = lax.dot_general(a8, b8, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)
        return out * sa * sb

    @add("int4_matmul", lambda r: [r.integers(-8, 8, (16, 32)).astype(np.int8), f32(r, 32, 8)])
    def int4_matmul(q, x):
        w = q.astype(jnp.int4)
        return jnp.dot(x.T, w.astype(jnp.float32).T).T, w.astype(jnp.int8)

    @add("random_gamma_beta", lambda r: [np.array([0, 7], np.uint32), np.abs(f32(r, 6)) + 0.5])
    def random_gamma_beta(kd, a):
        key = jax.random.wrap_key_data(kd, impl="threefry2x32")
        k1, k2 = jax.random.split(key)
        return jax.random.gamma(k1, a), jax.random.truncated_normal(k2, -1.0, 2.0, (5,))

    @add("nonzero_unique_sized", lambda r: [r.integers(0, 4, 20).astype(np.int32)])
    def nonzero_unique_sized(x):
        (nz,) = jnp.nonzero(x > 1, size=12, fill_value=-1)
        u = jnp.unique(x, size=6, fill_value=-1)
        return nz, u, jnp.bincount(x, length=5)

    @add("gather_fill_oob", lambda r: [f32(r, 10, 4), r.integers(-3, 14, 9).astype(np.int32)])
    def gather_fill_oob(x, i):
        return (jnp.take(x, i, axis=0, mode="fill", fill_value=-7.0), x.at[i].get(mode="clip"),
                x.at[i].add(1.0, mode="drop"))

    @add("host_offload_remat", lambda r: [f32(r, 16, 32), f32(r, 32, 32, scale=0.2)])
    def host_offload_remat(x, w):
        from jax.ad_checkpoint import checkpoint_name
        policy = jax.checkpoint_policies.save_and_offload_only_these_names(
            names_which_can_be_saved=[], names_which_can_be_offloaded=["h"],
            offload_src="device", offload_dst="pinned_host")

        def f(w):
            h = checkpoint_name(jnp.sin(x @ w), "h")
            return jnp.sum(jnp.cos(h @ w))
        return jax.grad(jax.checkpoint(f, policy=policy))(w)

    # --- multi-device ------------------------------------------------------------------------
    from jax.sharding import PartitionSpec as PS

    def sm_inputs(r):
        return [f32(r, 8 * 4, 16)]

    def shard_map_prog(inner, out_specs):
        def sm(mesh):
            if hasattr(jax, "shard_map"):
                return jax.shard_map(inner, mesh=mesh, in_specs=(PS("x"),), out_specs=out_specs, check_vma=False)
            from jax.experimental.shard_map import shard_map
            return shard_map(inner, mesh=mesh, in_specs=(PS("x"),), out_specs=out_specs, check_rep=False)
        return sm

    def sm_collectives(x):
        s = lax.psum(x, "x")
        g = lax.all_gather(x, "x", tiled=True)
        p = lax.ppermute(x, "x", [(i, (i + 1) % 8) for i in range(8)])
        a = lax.all_to_all(x.reshape(8, -1), "x", 0, 0, tiled=True)
        m = lax.pmax(x, "x")
        return s, g.sum(0, keepdims=True), p, a, m
    P.append(Program("shard_map_collectives", sm_collectives, sm_inputs, devices=8,
                     shard=shard_map_prog(sm_collectives, (PS(), PS("x"), PS("x"), PS("x"), PS()))))

    def sm_reduce_scatter(x):
        return lax.psum_scatter(x, "x", scatter_dimension=1, tiled=True), lax.axis_index("x") + jnp.zeros((1,), jnp.int32)
    P.append(Program("shard_map_reduce_scatter", sm_reduce_scatter, sm_inputs, devices=8,
                     shard=shard_map_prog(sm_reduce_scatter, (PS("x"), PS("x")))))

    def named_mlp(x, w1, w2):
        h = jax.nn.relu(x @ w1)
        return jnp.sum((h @ w2) ** 2, axis=1), jnp.mean(h, axis=0)
    P.append(Program("named_sharding_2x4_mlp", named_mlp,
                     lambda r: [f32(r, 16, 32), f32(r, 32, 64, scale=0.2), f32(r, 64, 32, scale=0.2)], devices=8,
                     shard=lambda mesh: ([PS("a", None), PS(None, "b"), PS("b", None)], None)))
    def uneven(x, w):
        # 7 columns over the 2 devices of axis "a": XLA pads the shards
        y = jax.lax.with_sharding_constraint(jnp.tanh(x @ w)[:, :7], jax.sharding.PartitionSpec(None, "a"))
        return y.T @ y, jnp.cumsum(x, axis=0)
    P.append(Program("named_sharding_uneven", uneven, lambda r: [f32(r, 12, 6), f32(r, 6, 8)], devices=8,
                     shard=lambda mesh: ([PS("b", None), PS(None, "a")], None)))
    return P


def backend_devices(backend: str, n: int) -> list:
    import jax
    from jax.experimental import topologies

    if backend == "cpu":
        return jax.devices("cpu")[:n]
    if backend in ("tpu-v5e", "tpu-v6e"):
        chip = backend.split("-")[1]
        name = f"{chip}:2x2" if n <= 4 else f"{chip}:2x4"  # v5e has no 1x1 topology: take one chip of four
        return list(topologies.get_topology_desc(platform="tpu", topology_name=name).devices)[:n]
    if backend == "gpu":
        topo = topologies.get_topology_desc("", "cuda", target_config=GPU_TARGET.read_text(), topology=f"1x1x{n}")
        return list(topo.devices)
    raise SystemExit(f"unknown backend {backend}")


def compile_text(program: Program, devices: list, args: list) -> str:
    import jax
    import jaxlib._hlo as xla_hlo
    from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding

    if program.devices == 1:
        specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype, sharding=SingleDeviceSharding(devices[0]))
                 for a in args]
        fn = jax.jit(program.fn)
    else:
        shape, names = ((2, 4), ("a", "b")) if program.name.startswith("named") else ((8,), ("x",))
        mesh = Mesh(np.array(devices).reshape(shape), names)
        made = program.shard(mesh)
        if isinstance(made, tuple):
            in_specs, _ = made
            fn = jax.jit(program.fn)
        else:
            in_specs, fn = [jax.sharding.PartitionSpec("x")], jax.jit(made)
        specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype, sharding=NamedSharding(mesh, s))
                 for a, s in zip(args, in_specs)]
    if program.devices == 1:
        compiled = fn.lower(*specs).compile()
    else:
        with mesh:  # with_sharding_constraint's PartitionSpecs name this mesh's axes
            compiled = fn.lower(*specs).compile()
    options = xla_hlo.HloPrintOptions()
    options.print_large_constants = True
    text = compiled._executable.xla_executable.hlo_modules()[0].to_string(options)
    return text.replace(f'"{ROOT}/', '"')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["cpu", "tpu-v5e", "tpu-v6e", "gpu"], required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", help="comma-separated program names")
    args = parser.parse_args()
    import jax

    jax.config.update("jax_num_cpu_devices", 8)
    jax.config.update("jax_default_matmul_precision", "highest")
    sys.path.insert(0, str(ROOT))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    failures = 0
    for program in programs():
        if only and program.name not in only:
            continue
        rng = np.random.default_rng(0)
        inputs = program.inputs(rng)
        try:
            text = compile_text(program, backend_devices(args.backend, program.devices), inputs)
        except Exception as e:  # a program this backend cannot compile: report, go on
            failures += 1
            print(f"{program.name}: cannot compile for {args.backend}: {type(e).__name__}: {str(e)[:300]}")
            traceback.print_exc(limit=2)
            continue
        (out / f"{program.name}.hlo").write_text(text)
        if program.devices == 1:
            with jax.default_device(jax.devices("cpu")[0]):
                result = jax.tree_util.tree_leaves(jax.jit(program.fn)(*inputs))
            np.savez(out / f"{program.name}.in.npz", **{f"arg{i}": np.asarray(a) for i, a in enumerate(inputs)})
            np.savez(out / f"{program.name}.expected.npz", **{f"out{i}": np.asarray(a) for i, a in enumerate(result)})
        print(f"{program.name}: ok")
    print(f"{failures} program(s) failed to compile")


if __name__ == "__main__":
    main()
