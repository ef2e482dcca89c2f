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

Findings of batch 3 (2026-11, 41 programs: linalg, FFT, sort, conv/pool gradients, MoE, selective
scan, MoE/pipeline/FSDP/collective-matmul/ring-attention shard_maps, cuDNN attention on H100):
- fixed: `check --against-xla` on jax 0.10 2x4 NamedSharding dumps: XLA's importer drops a mesh's
  `device_ids=([2,4]T(1,0))` from mesh-axes replica groups, so XLA ran other groups and called a
  right conversion wrong (converter/runtime/xla_oracle.py writes such groups out first).
- fixed: TPU v6e SparseCore scatter offload, `call-start()` whose operands come in `call-update`
  (jnp.unique, bincount); XLA's own ragged-dot metadata `tpu_custom_call`, a Mosaic kernel written
  as MLIR text; the TPU `Cholesky` custom-call of a complex matrix split into (real, imaginary).
- not a converter bug: cuDNN flash attention and XLA's CPU attention differ by a bf16 ulp (both
  within rounding of a float64 reference): its outputs are compared at bf16 tolerance.
- fixed in `compare`: the H100 jax 0.10 sm_pipeline_ring against CPU had said the dumps differ while
  every output agrees (its matching paired different constants, 7 and 1, and the loop's results by
  position): constants and tuple reads now pair only when they are one value
  (tests/tools/test_compare.py with both dumps).
- fixed: TPU v6e jax 0.10's older SparseCore offload form (PrepareAsyncCallStart/Done feeding
  `call-start` a token).
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
    in_specs: list | None = None  # a shard_map program's input PartitionSpecs (default: one, split over "x")
    backends: frozenset[str] | None = None  # the backends it is dumped for (default: all)
    oracle: Callable | None = None  # computes JAX's CPU result when `fn` itself cannot run on CPU


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

    def shard_map_prog(inner, out_specs, in_specs=(PS("x"),)):
        def sm(mesh):
            if hasattr(jax, "shard_map"):
                return jax.shard_map(inner, mesh=mesh, in_specs=tuple(in_specs), out_specs=out_specs, check_vma=False)
            from jax.experimental.shard_map import shard_map
            return shard_map(inner, mesh=mesh, in_specs=tuple(in_specs), out_specs=out_specs, check_rep=False)
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
    # --- batch 3: backend-divergent lowerings (linalg, FFT, sort, conv, collectives) -------------
    def add3(name, inputs, **kw):
        def deco(fn):
            P.append(Program(name, fn, inputs, **kw))
            return fn
        return deco

    def spd(r, n, batch=()):
        a = f32(r, *batch, n, n)
        return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)).astype(np.float32)

    # Eigenvectors and singular vectors are only defined up to sign/phase, and TPU, GPU and CPU
    # compute them differently: outputs are the sign-free values and reconstructions.
    @add3("linalg_cholesky_trisolve", lambda r: [spd(r, 6), f32(r, 6, 3), f32(r, 3, 6)])
    def linalg_cholesky_trisolve(a, b, c):
        from jax.scipy.linalg import cho_factor, cho_solve
        l = jnp.linalg.cholesky(a)
        x1 = lax.linalg.triangular_solve(l, b, left_side=True, lower=True)
        x2 = lax.linalg.triangular_solve(l, c, left_side=False, lower=True, transpose_a=True)
        x3 = lax.linalg.triangular_solve(l.T, b, left_side=True, lower=False, unit_diagonal=True)
        return l, x1, x2, x3, cho_solve(cho_factor(a), b)

    @add3("linalg_batched_inv_det", lambda r: [spd(r, 5, (3,)) + f32(r, 3, 5, 5)])
    def linalg_batched_inv_det(a):
        sign, logdet = jnp.linalg.slogdet(a)
        return jnp.linalg.inv(a), jnp.linalg.det(a), sign, logdet, jnp.linalg.matrix_power(a, 3)

    @add3("linalg_lu_pivots", lambda r: [f32(r, 6, 6), f32(r, 6, 2)])
    def linalg_lu_pivots(a, b):
        from jax.scipy.linalg import lu_factor, lu_solve
        lu, piv, perm = lax.linalg.lu(a)
        return lu, piv, perm, lu_solve(lu_factor(a), b), lu_solve(lu_factor(a), b, trans=1)

    @add3("linalg_pinv_lstsq", lambda r: [f32(r, 7, 4), f32(r, 7, 2)])
    def linalg_pinv_lstsq(a, b):
        x, _, rank, sv = jnp.linalg.lstsq(a, b)
        return jnp.linalg.pinv(a), x, rank, sv, jnp.linalg.norm(a, 2), jnp.linalg.matrix_rank(a)

    @add3("linalg_decomp_grads", lambda r: [spd(r, 5), f32(r, 5, 4)])
    def linalg_decomp_grads(s, a):
        w = jnp.arange(1.0, 6.0)
        g_eigh = jax.grad(lambda s: jnp.sum(jnp.linalg.eigvalsh(s) * w))(s)
        g_chol = jax.grad(lambda s: 2 * jnp.sum(jnp.log(jnp.diag(jnp.linalg.cholesky(s)))))(s)
        g_svd = jax.grad(lambda a: jnp.sum(jnp.linalg.svd(a, compute_uv=False)))(a)
        q, rr = jnp.linalg.qr(a, mode="complete")
        u, sv, vt = jnp.linalg.svd(a, full_matrices=False)
        return g_eigh, g_chol, g_svd, q @ rr, q @ q.T, (u * sv) @ vt, sv

    @add3("linalg_complex_chol_inv", lambda r: [f32(r, 5, 5), f32(r, 5, 5), f32(r, 5, 2), f32(r, 5, 2)])
    def linalg_complex_chol_inv(re, im, bre, bim):
        z = lax.complex(re, im)
        h = z @ jnp.conj(z).T + 5 * jnp.eye(5)
        l = jnp.linalg.cholesky(h)
        b = lax.complex(bre, bim)
        x = lax.linalg.triangular_solve(l, b, left_side=True, lower=True, conjugate_a=True, transpose_a=True)
        return l, jnp.linalg.inv(z + 3 * jnp.eye(5)), jnp.linalg.det(z), x, jnp.linalg.eigvalsh(h)

    # --- FFT ---------------------------------------------------------------------------------
    @add3("fft_rfftn_3d", lambda r: [f32(r, 2, 4, 6, 8)])
    def fft_rfftn_3d(x):
        f = jnp.fft.rfftn(x, axes=(1, 2, 3))
        back = jnp.fft.irfftn(f * 0.5, s=(4, 6, 8), axes=(1, 2, 3))
        g = jnp.fft.fftn(x[0].astype(jnp.complex64))
        return jnp.abs(f), back, g.real, jnp.fft.ifftn(g).imag

    @add3("fft_axis0_norms", lambda r: [f32(r, 16, 5), f32(r, 16, 5)])
    def fft_axis0_norms(re, im):
        z = lax.complex(re, im)
        a = jnp.fft.fft(z, axis=0, norm="ortho")
        b = jnp.fft.ifft(a, axis=0, norm="forward")
        return a, b, jnp.fft.hfft(z[:9], axis=0), jnp.fft.rfft(re, n=20, axis=0), jnp.fft.fftshift(jnp.abs(a), axes=0)

    # --- sort --------------------------------------------------------------------------------
    @add3("sort_two_keys_three_operands", lambda r: [r.integers(0, 3, (4, 20)).astype(np.int32),
                                                      np.round(f32(r, 4, 20)).astype(np.float32), f32(r, 4, 20)])
    def sort_two_keys_three_operands(k1, k2, v):
        return lax.sort((k1, k2, v), dimension=1, num_keys=2, is_stable=True)

    @add3("sort_descending_nan_bf16", lambda r: [np.where(r.random((6, 17)) < 0.15, np.nan, f32(r, 6, 17)).astype(np.float32),
                                                 np.round(f32(r, 6, 17) * 2).astype(np.float32)])
    def sort_descending_nan_bf16(a, t):
        return (jnp.sort(a, axis=1, descending=True), jnp.argsort(t, axis=1, stable=True, descending=True),
                jnp.sort(t.astype(jnp.bfloat16), axis=0).astype(jnp.float32), jnp.argsort(a, axis=0, stable=True))

    @add3("unique_counts_inverse", lambda r: [r.integers(0, 7, 24).astype(np.int32)])
    def unique_counts_inverse(x):
        u, idx, inv, cnt = jnp.unique(x, return_index=True, return_inverse=True, return_counts=True, size=8,
                                      fill_value=-1)
        return u, idx, inv, cnt

    # --- random ------------------------------------------------------------------------------
    @add3("random_beta_dirichlet_choice", lambda r: [np.array([3, 11], np.uint32), f32(r, 5, 10)])
    def random_beta_dirichlet_choice(kd, logits):
        key = jax.random.wrap_key_data(kd, impl="threefry2x32")
        k = jax.random.split(key, 5)
        return (jax.random.beta(k[0], 2.0, 3.0, (6,)), jax.random.dirichlet(k[1], jnp.array([1.0, 2.0, 0.5])),
                jax.random.choice(k[2], 20, (6,), replace=False), jax.random.categorical(k[3], logits, axis=1),
                jax.random.permutation(k[4], logits, axis=1, independent=True))

    # --- mixture of experts, selective scan ------------------------------------------------
    @add3("moe_top2_ragged", lambda r: [f32(r, 16, 8), f32(r, 8, 4, scale=0.5), f32(r, 4, 8, 12, scale=0.3)])
    def moe_top2_ragged(x, wr, we):
        gates, experts = lax.top_k(jax.nn.softmax(x @ wr), 2)       # [16, 2]
        flat = experts.reshape(-1)
        order = jnp.argsort(flat, stable=True)
        tokens = jnp.repeat(x, 2, axis=0)[order]
        sizes = jnp.bincount(flat, length=4).astype(jnp.int32)
        y = lax.ragged_dot(tokens, we, sizes)
        y = jnp.zeros_like(y).at[order].set(y).reshape(16, 2, 12)
        return jnp.sum(y * gates[..., None], axis=1), sizes

    @add3("mamba_selective_scan", lambda r: [f32(r, 32, 4), -np.abs(f32(r, 4, 6)) - 0.1, f32(r, 32, 6),
                                             f32(r, 32, 6), f32(r, 4)])
    def mamba_selective_scan(x, a, b, c, dt_bias):
        delta = jax.nn.softplus(x + dt_bias)                          # [L, D]
        da = jnp.exp(delta[:, :, None] * a[None])                      # [L, D, N]
        dbx = delta[:, :, None] * b[:, None, :] * x[:, :, None]
        def comb(l, r):
            return r[0] * l[0], r[0] * l[1] + r[1]
        _, h = lax.associative_scan(comb, (da, dbx), axis=0)
        return jnp.einsum("ldn,ln->ld", h, c), h[-1]

    # --- scans and loops ---------------------------------------------------------------------
    @add3("switch_in_scan", lambda r: [f32(r, 6), r.integers(-1, 7, 10).astype(np.int32), f32(r, 10, 6)])
    def switch_in_scan(h, idx, xs):
        branches = [lambda h, x: h + x, lambda h, x: h * x, lambda h, x: jnp.sin(h) - x,
                    lambda h, x: jnp.maximum(h, x), lambda h, x: jnp.roll(h, 1) * 0.5 + x]
        def body(h, ix):
            i, x = ix
            h = lax.switch(i, branches, h, x)   # out-of-range indices clamp
            return h, jnp.sum(h)
        return lax.scan(body, h, (idx, xs))

    @add3("while_until_converged_nested_scan", lambda r: [f32(r, 4, 4, scale=0.3), f32(r, 4)])
    def while_until_converged_nested_scan(m, v):
        def inner(c, _):
            return jnp.tanh(m @ c) + 0.5 * c, None
        def cond(s):
            i, x, prev = s
            return (i < 50) & (jnp.max(jnp.abs(x - prev)) > 1e-3)
        def body(s):
            i, x, _ = s
            y, _ = lax.scan(inner, x, None, length=3)
            return i + 1, y * 0.5, x
        i, x, _ = lax.while_loop(cond, body, (jnp.int32(0), v, v + 1.0))
        return i, x

    @add3("cumulative_reverse_mixed", lambda r: [f32(r, 24, 6)])
    def cumulative_reverse_mixed(x):
        return (lax.cumlogsumexp(x, axis=0, reverse=True), lax.cummin(x, axis=1, reverse=True),
                jnp.cumsum(x.astype(jnp.bfloat16), axis=0).astype(jnp.float32), lax.cumprod(1 + 0.1 * x, axis=0))

    # --- convolutions and pooling --------------------------------------------------------------
    @add3("conv_1d_3d", lambda r: [f32(r, 2, 20, 4), f32(r, 3, 4, 6, scale=0.3), f32(r, 1, 3, 6, 6, 6),
                                   f32(r, 4, 3, 2, 3, 3, scale=0.3)])
    def conv_1d_3d(x1, w1, x3, w3):
        y1 = lax.conv_general_dilated(x1, w1, (2,), [(2, 1)], rhs_dilation=(2,), dimension_numbers=("NWC", "WIO", "NWC"))
        y3 = lax.conv_general_dilated(x3, w3, (1, 2, 1), "SAME", dimension_numbers=("NCDHW", "OIDHW", "NCDHW"))
        return y1, y3

    @add3("conv_grouped_grads", lambda r: [f32(r, 2, 8, 8, 8), f32(r, 3, 3, 2, 8, scale=0.3)])
    def conv_grouped_grads(x, w):
        def f(x, w):
            y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                         feature_group_count=4)
            return jnp.sum(jnp.tanh(y) ** 2)
        return jax.grad(f, argnums=(0, 1))(x, w)

    @add3("conv_batch_group_count", lambda r: [f32(r, 4, 6, 6, 3), f32(r, 3, 3, 3, 6, scale=0.3)])
    def conv_batch_group_count(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        batch_group_count=2)

    @add3("conv_transpose_nchw_dilated", lambda r: [f32(r, 2, 4, 5, 5), f32(r, 4, 6, 3, 3, scale=0.3)])
    def conv_transpose_nchw_dilated(x, w):
        a = lax.conv_transpose(x, w, (2, 2), [(1, 2), (0, 1)], rhs_dilation=(2, 1),
                               dimension_numbers=("NCHW", "OIHW", "NCHW"), transpose_kernel=True)
        b = lax.conv_general_dilated(x, w[:, :, ::-1, ::-1], (1, 1), [(2, 2), (2, 2)],
                                     lhs_dilation=(3, 2), dimension_numbers=("NCHW", "IOHW", "NCHW"))
        return a, b

    @add3("pool_padded_grads", lambda r: [f32(r, 2, 7, 7, 3)])
    def pool_padded_grads(x):
        def maxpool(x):
            return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        def avgpool(x):   # count_include_pad=False: divide by the window's in-bounds size
            pad = ((0, 0), (1, 1), (1, 1), (0, 0))
            s = lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), pad)
            n = lax.reduce_window(jnp.ones_like(x), 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), pad)
            return s / n
        gm = jax.grad(lambda x: jnp.sum(maxpool(x) ** 2))(x)
        ga = jax.grad(lambda x: jnp.sum(jnp.sin(avgpool(x))))(x)
        return maxpool(x), avgpool(x), gm, ga

    # --- autodiff and training steps ------------------------------------------------------------
    @add3("checkpoint_policy_dots", lambda r: [f32(r, 8, 16), f32(r, 16, 16, scale=0.3), f32(r, 16, 16, scale=0.3)])
    def checkpoint_policy_dots(x, w1, w2):
        policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
        @jax.checkpoint
        def inner(h, w):
            return jnp.sin(h @ w)
        def f(w1, w2):
            g = jax.checkpoint(lambda h: jax.nn.gelu(inner(h, w1) @ w2), policy=policy)
            return jnp.sum(g(x) ** 2)
        return jax.value_and_grad(f, argnums=(0, 1))(w1, w2)

    @add3("custom_vjp_clip", lambda r: [f32(r, 12, 4, scale=3.0), f32(r, 4, 4)])
    def custom_vjp_clip(x, w):
        @jax.custom_vjp
        def clip_grad(x):
            return x
        clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.5, 0.5),))
        @jax.custom_vjp
        def safe_log(x):
            return jnp.log(x)
        safe_log.defvjp(lambda x: (jnp.log(x), x), lambda x, g: (g / jnp.maximum(x, 1e-3),))
        f = lambda x, w: jnp.sum(safe_log(jnp.abs(clip_grad(x @ w)) + 1e-4))
        return jax.grad(f, argnums=(0, 1))(x, w)

    @add3("f16_loss_scaling_step", lambda r: [f32(r, 8, 16), f32(r, 16, 4, scale=0.3), f32(r, 8, 4), np.float32(1024.0)])
    def f16_loss_scaling_step(x, w, y, scale):
        def loss(w16):
            p = jnp.dot(x.astype(jnp.float16), w16, preferred_element_type=jnp.float32)
            return jnp.mean((p - y) ** 2) * scale
        g = jax.grad(loss)(w.astype(jnp.float16)).astype(jnp.float32) / scale
        finite = jnp.all(jnp.isfinite(g))
        new_w = jnp.where(finite, w - 0.1 * g, w)
        new_scale = jnp.where(finite, scale * 2.0, scale * 0.5)
        return new_w, new_scale, finite

    @add3("int8_weight_only_bf16", lambda r: [f32(r, 8, 32), r.integers(-127, 128, (32, 16)).astype(np.int8),
                                              np.abs(f32(r, 16)) * 0.02])
    def int8_weight_only_bf16(x, wq, scale):
        w = wq.astype(jnp.bfloat16)
        y = lax.dot_general(x.astype(jnp.bfloat16), w, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)
        return y * scale, jnp.dot(x, wq.astype(jnp.float32) * scale)

    @add3("dot_general_odd_batch", lambda r: [f32(r, 3, 4, 5, 6), f32(r, 6, 5, 7, 3), f32(r, 4, 2, 3), f32(r, 3, 4, 5)])
    def dot_general_odd_batch(a, b, c, d):
        # batch dims not leading: a's (2, 0) with b's (1, 3), contracting a's 3 with b's 0
        x = lax.dot_general(a, b, (((3,), (0,)), ((2, 0), (1, 3))))
        y = lax.dot_general(c, d, (((2,), (0,)), ((0,), (1,))))    # batch 4 in the middle of d
        return x, y

    @add3("einsum_many_operands", lambda r: [f32(r, 4, 5), f32(r, 5, 6), f32(r, 6, 3), f32(r, 3, 4),
                                             f32(r, 2, 4, 5), f32(r, 2, 5, 3), f32(r, 3, 2)])
    def einsum_many_operands(a, b, c, d, e, f, g):
        return (jnp.einsum("ab,bc,cd,de->ae", a, b, c, d, optimize="greedy"),
                jnp.einsum("bij,bjk,kb->bi", e, f, g), jnp.einsum("ii->i", a[:, :4] @ d.T @ c.T[:, :4]))

    @add3("segment_min_prod", lambda r: [f32(r, 30, 3), r.integers(0, 7, 30).astype(np.int32)])
    def segment_min_prod(x, ids):
        return (jax.ops.segment_min(x, ids, 8), jax.ops.segment_prod(1 + 0.1 * x, ids, 8),
                jax.ops.segment_max(x.astype(jnp.int32), ids, 8), jax.ops.segment_sum(x, ids, 3, mode="drop"))

    # --- elementwise: special functions and bits ---------------------------------------------------
    @add3("special_functions", lambda r: [np.abs(f32(r, 24)) + 0.1, np.clip(f32(r, 24) * 0.4, -0.95, 0.95)])
    def special_functions(p, u):
        from jax import scipy as jsp
        return (lax.erf_inv(u), lax.lgamma(p), lax.digamma(p), lax.bessel_i0e(u * 5), lax.bessel_i1e(u * 5),
                lax.igamma(p, p * 1.3), lax.igammac(p, 0.7 * p), lax.nextafter(u, jnp.ones_like(u) * 2),
                jsp.special.betainc(p, p + 1, jnp.abs(u)), jsp.special.erfc(u * 3), lax.polygamma(1.0, p))

    @add3("bits_unsigned_widths", lambda r: [f32(r, 6, 4), r.integers(0, 2**32, (6, 4), dtype=np.uint64).astype(np.uint32),
                                             r.integers(0, 40, (6, 4)).astype(np.uint32),
                                             r.integers(-128, 128, (6, 4)).astype(np.int8)])
    def bits_unsigned_widths(x, u, s, i8):
        halves = lax.bitcast_convert_type(x, jnp.uint16)                       # f32[6,4] -> u16[6,4,2]
        bytes_ = lax.bitcast_convert_type(u, jnp.uint8)                         # u32 -> u8[...,4]
        back = lax.bitcast_convert_type(bytes_[..., ::-1], jnp.uint32)          # byte swap
        return (halves, back, lax.population_count(u), lax.clz(u.astype(jnp.uint8)),
                lax.shift_right_logical(u, s), lax.shift_left(u.astype(jnp.uint16), s.astype(jnp.uint16)),
                lax.shift_right_arithmetic(i8, (s % 10).astype(jnp.int8)), lax.shift_right_logical(i8, jnp.int8(3)))

    # --- attention -----------------------------------------------------------------------------
    @add3("dot_product_attention_bias_mask", lambda r: [f32(r, 2, 8, 4, 16), f32(r, 2, 8, 2, 16), f32(r, 2, 8, 2, 16),
                                                        f32(r, 1, 4, 8, 8), r.random((2, 1, 8, 8)) < 0.8])
    def dot_product_attention_bias_mask(q, k, v, bias, mask):
        a = jax.nn.dot_product_attention(q, k, v, bias=bias, mask=mask | jnp.eye(8, dtype=bool))
        b = jax.nn.dot_product_attention(q.astype(jnp.bfloat16), k.astype(jnp.bfloat16), v.astype(jnp.bfloat16),
                                         is_causal=True, scale=0.3)
        return a, b.astype(jnp.float32)

    def cudnn_attention(impl):
        def fn(q, k, v):
            q, k, v = (a.astype(jnp.bfloat16) for a in (q, k, v))
            o = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=impl)
            g = jax.grad(lambda q: jnp.sum(jax.nn.dot_product_attention(q, k, v, implementation=impl)
                                           .astype(jnp.float32) ** 2))(q)
            return o, g   # bf16: cuDNN and XLA's CPU softmax round differently (a bf16 ulp)
        return fn
    P.append(Program("dot_product_attention_cudnn", cudnn_attention("cudnn"),
                     lambda r: [f32(r, 2, 128, 4, 64), f32(r, 2, 128, 4, 64), f32(r, 2, 128, 4, 64)],
                     backends=frozenset({"gpu"}), oracle=cudnn_attention("xla")))

    # --- multi-device: parallelism patterns in shard_map ----------------------------------------
    def ring(n=8):
        return [(i, (i + 1) % n) for i in range(n)]

    def sm_moe_all_to_all(x, w):
        # 4 tokens per device, expert e = token % 8 on device e: dispatch, expert MLP, combine
        e = lax.axis_index("x")
        buckets = jnp.broadcast_to(x[None], (8,) + x.shape)                   # [8 dest, 4, 16]
        got = lax.all_to_all(buckets, "x", 0, 0)                              # from each source
        y = jnp.tanh(got @ w[0]) * (e + 1).astype(jnp.float32)
        back = lax.all_to_all(y, "x", 0, 0)
        return back.sum(0)
    P.append(Program("sm_moe_all_to_all", sm_moe_all_to_all, lambda r: [f32(r, 32, 16), f32(r, 8, 16, 16, scale=0.3)],
                     devices=8, in_specs=[PS("x"), PS("x")],
                     shard=shard_map_prog(sm_moe_all_to_all, PS("x"), (PS("x"), PS("x")))))

    def sm_pipeline_ring(x, w):
        # GPipe-like: microbatches flow around the 8 stages; stage i holds w[i]
        def step(i, carry):
            h, outs = carry
            h = jnp.tanh(h @ w[0])
            outs = outs + jnp.where(lax.axis_index("x") == 7, h, 0.0)
            return lax.ppermute(h, "x", ring()), outs
        h, outs = lax.fori_loop(0, 8, step, (x, jnp.zeros_like(x)))
        return h, outs
    P.append(Program("sm_pipeline_ring", sm_pipeline_ring, lambda r: [f32(r, 32, 16), f32(r, 8, 16, 16, scale=0.4)],
                     devices=8, in_specs=[PS("x"), PS("x")],
                     shard=shard_map_prog(sm_pipeline_ring, (PS("x"), PS("x")), (PS("x"), PS("x")))))

    def sm_fsdp_grad(x, w):
        # w is sharded by rows: all-gather for the forward, reduce-scatter the gradient
        def loss(w_shard):
            wf = lax.all_gather(w_shard, "x", tiled=True)
            return jnp.sum(jnp.tanh(x @ wf) ** 2)
        l, g = jax.value_and_grad(loss)(w)
        return lax.psum(l, "x")[None], g
    P.append(Program("sm_fsdp_grad", sm_fsdp_grad, lambda r: [f32(r, 32, 16), f32(r, 16, 8, scale=0.3)],
                     devices=8, in_specs=[PS("x"), PS("x")],
                     shard=shard_map_prog(sm_fsdp_grad, (PS(), PS("x")), (PS("x"), PS("x")))))

    def sm_collective_matmul(x, w):
        # all-gather(x) @ w overlapped: each step multiplies the chunk it holds, then passes it on
        idx = lax.axis_index("x")
        def step(i, carry):
            chunk, out = carry
            src = (idx - i) % 8
            out = lax.dynamic_update_slice(out, chunk @ w, (src * 4, 0))
            return lax.ppermute(chunk, "x", ring()), out
        _, out = lax.fori_loop(0, 8, step, (x, jnp.zeros((32, w.shape[1]), x.dtype)))
        return out
    P.append(Program("sm_collective_matmul", sm_collective_matmul, lambda r: [f32(r, 32, 16), f32(r, 16, 64, scale=0.3)],
                     devices=8, in_specs=[PS("x"), PS(None, "x")],
                     shard=shard_map_prog(sm_collective_matmul, PS(None, "x"), (PS("x"), PS(None, "x")))))

    def sm_ring_attention(q, k, v):
        # online softmax over the key/value blocks passed around the ring
        def step(i, carry):
            k, v, m, l, o = carry
            s = q @ k.T / 4.0
            m2 = jnp.maximum(m, s.max(-1))
            p = jnp.exp(s - m2[:, None])
            corr = jnp.exp(m - m2)
            l = l * corr + p.sum(-1)
            o = o * corr[:, None] + p @ v
            return lax.ppermute(k, "x", ring()), lax.ppermute(v, "x", ring()), m2, l, o
        n = q.shape[0]
        init = (k, v, jnp.full((n,), -jnp.inf), jnp.zeros((n,)), jnp.zeros_like(q))
        _, _, m, l, o = lax.fori_loop(0, 8, step, init)
        return o / l[:, None]
    P.append(Program("sm_ring_attention", sm_ring_attention, lambda r: [f32(r, 32, 16), f32(r, 32, 16), f32(r, 32, 16)],
                     devices=8, in_specs=[PS("x"), PS("x"), PS("x")],
                     shard=shard_map_prog(sm_ring_attention, PS("x"), (PS("x"), PS("x"), PS("x")))))

    def sm_collectives_more(x):
        i = lax.axis_index("x")
        return (lax.pmin(x, "x"), lax.pmean(x * i, "x"), lax.all_gather(x, "x", axis=1),
                lax.psum_scatter(x.reshape(8, 8), "x", scatter_dimension=0),
                lax.all_to_all(x, "x", 1, 1, tiled=True), lax.psum((x > 0).astype(jnp.int32), "x"),
                lax.ppermute(x, "x", [(0, 7), (7, 0), (3, 4)]))
    P.append(Program("sm_collectives_more", sm_collectives_more, lambda r: [f32(r, 32, 16)], devices=8,
                     shard=shard_map_prog(sm_collectives_more, (PS(), PS(), PS("x"), PS("x"), PS("x"), PS(), PS("x")))))

    def named_fsdp_train(x, y, w1, w2):
        def loss(w1, w2):
            return jnp.mean((jax.nn.gelu(x @ w1) @ w2 - y) ** 2)
        l, (g1, g2) = jax.value_and_grad(loss, argnums=(0, 1))(w1, w2)
        return l, w1 - 0.1 * g1, w2 - 0.1 * g2
    P.append(Program("named_sharding_fsdp_train", named_fsdp_train,
                     lambda r: [f32(r, 16, 32), f32(r, 16, 8), f32(r, 32, 64, scale=0.2), f32(r, 64, 8, scale=0.2)],
                     devices=8, shard=lambda mesh: ([PS(("a", "b"), None), PS(("a", "b"), None), PS("b", "a"),
                                                     PS("a", None)], None)))

    def named_conv_sort(x, w, s):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return y, jnp.sort(s, axis=0), jnp.argmax(s, axis=0), jnp.fft.rfft(s, axis=1)
    P.append(Program("named_sharding_conv_sort_fft", named_conv_sort,
                     lambda r: [f32(r, 4, 6, 6, 8), f32(r, 3, 3, 8, 8, scale=0.3), f32(r, 8, 16)], devices=8,
                     shard=lambda mesh: ([PS("a", None, None, "b"), PS(None, None, None, "b"), PS("b", "a")], None)))

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
            in_specs, fn = program.in_specs or [jax.sharding.PartitionSpec("x")], jax.jit(made)
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
        if program.backends is not None and args.backend not in program.backends:
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
                result = jax.tree_util.tree_leaves(jax.jit(program.oracle or program.fn)(*inputs))
            np.savez(out / f"{program.name}.in.npz", **{f"arg{i}": np.asarray(a) for i, a in enumerate(inputs)})
            np.savez(out / f"{program.name}.expected.npz", **{f"out{i}": np.asarray(a) for i, a in enumerate(result)})
        print(f"{program.name}: ok")
    print(f"{failures} program(s) failed to compile")


if __name__ == "__main__":
    main()
