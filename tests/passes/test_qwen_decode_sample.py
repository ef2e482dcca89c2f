"""samples/gpu_torchxla_qwen_decode_cublas.hlo: five `__cublas$gemm` calls (bf16 x bf16 →
bf16, weights stored [out, in]) inside a GPU command-buffer `call`.  The default pipeline
must leave no custom-call, and at full size the converted module run on CPU must match a
NumPy re-implementation of the dump, written from reading it (below).

What the dump computes (torch-xla decode step of a Qwen-style model, 32 tokens):
  emb   = embed[token_ids]                              gather (u32 indices, clamped)
  attn  = zeros[32,2048] @ concat(Wo1, Wo0).T           a Triton GEMM fusion whose rhs is a
                                                        broadcast of 0: the attention output
                                                        is a zero placeholder in this graph
  x1    = attn[:,1024:] + emb                           f32 residual, never rounded
  gu0   = bf16(rmsnorm(x1)·w_norm0) @ Wgu0.T            cuBLAS #1 → bf16 [32,6144]
  act0  = silu(gate)·up  with exp evaluated in bf16     cuBLAS #2: down0 = act0 @ Wd0.T
  x2    = attn[:,:1024] + (down0 + x1)                  f32
  gu1, act1, down1 likewise on rmsnorm(x2)              cuBLAS #3, #4
  x3    = down1 + x2
  qkv   = bf16(rmsnorm(x3)·w_norm2) @ Wqkv.T            cuBLAS #5 → bf16 [32,4096]
  k     = rmsnorm_128(qkv[:,2048:3072] as [32,8,128])·w_k   (f32, per head)
  out0  = rope(k, cos_sin[positions])                   bf16 [32,8,128], rotate-half form
  out1  = qkv[:,3072:] as [32,8,128]                    v
  out2, out3 = kv_cache[0], kv_cache[1]                 the paged cache passed through
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converter.runtime.convert import convert_text
from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "gpu_torchxla_qwen_decode_cublas.hlo"
BF16 = ml_dtypes.bfloat16


def test_qwen_sample_converts_without_custom_calls_and_verifies():
    text = SAMPLE.read_text()
    assert text.count('custom_call_target="__cublas$gemm"') == 5
    module = convert_text(text, str(SAMPLE))
    module.operation.verify()
    asm = str(module)
    assert "custom_call" not in asm
    # The five GEMMs and the Triton GEMM fusion's dot.
    assert asm.count("stablehlo.dot_general") == 6


# ---------------------------------------------------------------------------------------
# The NumPy reference: f64 arithmetic, with a bf16 rounding wherever the dump converts to
# bf16 (GEMM outputs, fusion outputs, the bf16 exponential inside SiLU).


def bf16(x: np.ndarray) -> np.ndarray:
    """Round to bf16 (through f32, as the f32 computation the dump runs would) and back."""
    return np.asarray(x, np.float32).astype(BF16).astype(np.float64)


def rmsnorm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x · rsqrt(mean(x², last axis) + eps) · weight, as the fused computations write it."""
    mean_sq = (x * x).sum(axis=-1, keepdims=True) * (1.0 / x.shape[-1])
    return x / np.sqrt(mean_sq + eps) * weight


def gemm_bf16(x_bf16: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """`__cublas$gemm` bf16 x bf16 → bf16 with contracting dims {1},{1}: x @ W.T, exact
    products, accumulated wide, rounded once to bf16."""
    return bf16(x_bf16 @ weight.T)


def silu_mul(gate_up: np.ndarray) -> np.ndarray:
    """fused_convert: gate·1/(1 + bf16(exp(bf16(-gate))))·up, rounded to bf16."""
    half = gate_up.shape[1] // 2
    gate, up = gate_up[:, :half], gate_up[:, half:]
    e = bf16(np.exp(bf16(-gate)))
    return bf16(gate * (1.0 / (1.0 + e)) * up)


def qwen_reference(args: list[np.ndarray]) -> list[np.ndarray]:
    (w_k, eps, w_qkv, w_norm2, token_ids, embed, wo0, wd0, wgu0, w_norm0, wo1, wd1, wgu1, w_norm1,
     positions, cos_sin, kv_cache) = args
    f64 = lambda a: np.asarray(a).astype(np.float64)  # noqa: E731
    eps = float(eps)
    # gather: s32 → s64 → u32 indices, clamped into the table (XLA's gather semantics).
    ids = np.clip(token_ids.astype(np.int64).astype(np.uint32), 0, embed.shape[0] - 1)
    emb = f64(embed[ids])  # [32, 1024]
    # The Triton GEMM fusion: concat(Wo1, Wo0) [2048, 2048] against zeros [32, 2048].
    attn = bf16(np.zeros((32, 2048)) @ np.concatenate([f64(wo1), f64(wo0)]).T)
    x1 = attn[:, 1024:] + emb
    act0 = silu_mul(gemm_bf16(bf16(rmsnorm(x1, f64(w_norm0), eps)), f64(wgu0)))
    down0 = gemm_bf16(act0, f64(wd0))
    x2 = attn[:, :1024] + (down0 + x1)
    act1 = silu_mul(gemm_bf16(bf16(rmsnorm(x2, f64(w_norm1), eps)), f64(wgu1)))
    down1 = gemm_bf16(act1, f64(wd1))
    x3 = down1 + x2
    qkv = gemm_bf16(bf16(rmsnorm(x3, f64(w_norm2), eps)), f64(w_qkv))  # [32, 4096]
    k = rmsnorm(qkv[:, 2048:3072].reshape(32, 8, 128), f64(w_k), eps)
    cs = f64(cos_sin[np.clip(positions.astype(np.int64), 0, cos_sin.shape[0] - 1)])  # [32, 128]
    cos, sin = cs[:, None, :64], cs[:, None, 64:]
    k1, k2 = k[..., :64], k[..., 64:]
    k_rot = np.concatenate([bf16(k1 * cos - k2 * sin), bf16(k2 * cos + k1 * sin)], axis=-1)
    v = qkv[:, 3072:].reshape(32, 8, 128)
    return [k_rot.astype(np.float32).astype(BF16), v.astype(np.float32).astype(BF16), kv_cache[0], kv_cache[1]]


def qwen_inputs(params) -> list[np.ndarray]:
    """Inputs shaped like a real decode step: weights N(0, 1/fan_in) so activations stay
    O(1), a small positive eps, token ids and positions inside their tables (the random
    inputs of `run` would give a negative eps half the time: rsqrt of a negative)."""
    rng = np.random.default_rng(7)
    out = []
    for spec in params:
        shape = spec.shape
        if spec.element_type == "s32":
            high = 151936 if spec.index == 4 else 40960
            out.append(rng.integers(0, high, size=shape).astype(np.int32))
        elif spec.element_type == "f32":
            out.append(np.float32(1e-6))
        elif len(shape) == 5:
            # The paged KV cache only passes through: a cheap exact pattern (no RNG on
            # 139M elements), every value representable in bf16.
            pattern = (np.arange(np.prod(shape), dtype=np.int32) % 509 - 254).astype(np.float32) / 64
            out.append(pattern.astype(BF16).reshape(shape))
        elif len(shape) == 1:
            out.append((1 + 0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(BF16))
        else:
            scale = 1.0 if shape[0] > 100000 or shape == (40960, 128) else 1 / np.sqrt(shape[1])
            out.append((rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(BF16))
    return out


@pytest.mark.slow
def test_qwen_sample_runs_on_cpu_and_matches_numpy():
    from converter.runtime.program import load

    prog = load(str(SAMPLE))
    assert [s.shape for s in prog.params][4] == (32,) and prog.params[4].element_type == "s32"
    inputs = qwen_inputs(prog.params)
    got = prog(*inputs)
    want = qwen_reference(inputs)
    assert [g.shape for g in got] == [(32, 8, 128), (32, 8, 128), (4233, 16, 8, 128), (4233, 16, 8, 128)]
    # The cache outputs are copies: bit for bit.
    np.testing.assert_array_equal(got[2].view(np.uint16), want[2].view(np.uint16))
    np.testing.assert_array_equal(got[3].view(np.uint16), want[3].view(np.uint16))
    # k and v pass through five bf16-rounded GEMMs and a dozen bf16 roundings.  The
    # reference rounds at the same points, so most elements agree to the last bf16 bit;
    # where an f32-vs-f64 difference tips an intermediate rounding, the flip (one bf16
    # ulp, 2^-8 relative) propagates through the following GEMMs and norms.  Bound: every
    # element within 4 bf16 ulps of its magnitude (plus a floor for values near 0 after
    # cancellation), and the bulk bit-exact or within one ulp.
    for name, g, w in (("k_rot", got[0], want[0]), ("v", got[1], want[1])):
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        scale = np.abs(w64).mean()
        err = np.abs(g64 - w64)
        assert np.all(err <= 4 * 2.0**-8 * np.abs(w64) + 0.02 * scale), (name, err.max(), scale)
        within_one_ulp = err <= 2.0**-8 * np.abs(w64) + 1e-6 * scale
        assert within_one_ulp.mean() > 0.97, (name, within_one_ulp.mean())
