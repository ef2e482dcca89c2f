"""The programs behind tests/passes/attention/dumps/: jax's cuDNN fused attention
(`jax.nn.dot_product_attention(implementation="cudnn")`, and the lower-level
`jax._src.cudnn.fused_attention_stablehlo.dot_product_attention` for BNTH, dropout and packed
segments) with its gradient, each paired with a reference that computes what cuDNN computes
through JAX's XLA implementation.

Imports only jax and numpy: `generate_cudnn_dumps.py` runs it in an environment with
jax[cuda12] (no project code), the tests import it with the project.

Every case's function takes its inputs, then the output cotangent `dout` last, and returns
(out, *gradients).  Where cuDNN and JAX's XLA path differ by definition, the reference
is written with cuDNN's semantics:
- padded query rows: cuDNN writes O = 0 (XLA zero-fills fMHA outputs); JAX's XLA path leaves
  a uniform average of V there.  The reference multiplies its output by the valid-row
  mask, which also zeroes those rows' cotangent, as cuDNN's backward ignores them.
- a sliding window without a causal mask: cuDNN bounds the window on the left only
  (`sliding_window_length` = `set_diagonal_band_left_bound`); the reference passes that
  band as a boolean mask.
- packed segments: attention within each segment, top-left causal from the segment start;
  tokens outside every segment get O = 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

SCALE = 0.3


@dataclass
class Case:
    name: str
    inputs: list[tuple[tuple[int, ...], str]]  # (shape, dtype name), dout last
    cudnn: Callable
    reference: Callable
    grads: bool = True  # False: forward only (the call without stats)
    notes: str = ""
    extra: dict = field(default_factory=dict)


def _with_vjp(attn, diff: int):
    """f(*args, dout) = (out, *d(out·dout)/d(args[:diff]))."""
    def f(*args):
        *args, dout = args
        out, vjp = jax.vjp(lambda *d: attn(*d, *args[diff:]), *args[:diff])
        return (out, *vjp(dout))
    return f


def _forward_only(attn):
    """f(*args, dout) = (out,): no gradient, so the forward call has no stats result."""
    def f(*args):
        return (attn(*args[:-1]),)
    return f


def _rows(lengths, t):
    """[B, T, 1, 1] 1/0 for valid query rows."""
    return (jnp.arange(t)[None, :] < lengths[:, None])[:, :, None, None]


def _dpa(impl, **kw):
    def attn(q, k, v):
        if impl == "xla" and q.dtype == jnp.float16:
            # XLA:CPU has no f16 x f16 -> f32 dot: the reference computes in f32 and
            # rounds its results to f16 once, as cuDNN does.
            f32 = jnp.float32
            return jax.nn.dot_product_attention(q.astype(f32), k.astype(f32), v.astype(f32), scale=SCALE,
                                                implementation=impl, **kw).astype(q.dtype)
        return jax.nn.dot_product_attention(q, k, v, scale=SCALE, implementation=impl, **kw)
    return attn


def _cases() -> list[Case]:
    from jax._src.cudnn import fused_attention_stablehlo as fa

    bf16, f16, i32 = "bfloat16", "float16", "int32"
    B, T, H = 2, 16, 16
    cases: list[Case] = []

    def plain(name, n, k, dtype=bf16, t=T, s=T, **kw):
        ins = [((B, t, n, H), dtype), ((B, s, k, H), dtype), ((B, s, k, H), dtype), ((B, t, n, H), dtype)]
        cases.append(Case(name, ins, _with_vjp(_dpa("cudnn", **kw), 3), _with_vjp(_dpa("xla", **kw), 3)))

    plain("causal_gqa", 4, 2, is_causal=True)
    plain("f16_causal", 2, 2, dtype=f16, is_causal=True)
    plain("window_causal", 2, 1, is_causal=True, local_window_size=(3, 0))

    # Left-bounded window without a causal mask: keys j > i - 4, any j above the diagonal.
    def window_left(impl):
        if impl == "cudnn":
            return lambda q, k, v: jax.nn.dot_product_attention(
                q, k, v, scale=SCALE, local_window_size=(3, 0), implementation="cudnn")
        band = (jnp.arange(T)[None, :] > jnp.arange(T)[:, None] - 4)[None, None]
        return lambda q, k, v: jax.nn.dot_product_attention(q, k, v, mask=band, scale=SCALE, implementation="xla")

    ins = [((B, T, 2, H), bf16)] * 3 + [((B, T, 2, H), bf16)]
    cases.append(Case("window_left_only", ins, _with_vjp(window_left("cudnn"), 3),
                      _with_vjp(window_left("xla"), 3)))

    # Bias (post-scale) with its gradient: [1, N, T, S] and, cross-attention, [B, 1, T, S].
    def biased(impl):
        return lambda q, k, v, b: jax.nn.dot_product_attention(q, k, v, bias=b, scale=SCALE, implementation=impl)

    for name, (n, k, t, s, bshape) in {"bias_1n": (4, 4, T, T, (1, 4, T, T)),
                                      "bias_b1_cross": (2, 2, 8, 24, (B, 1, 8, 24))}.items():
        ins = [((B, t, n, H), bf16), ((B, s, k, H), bf16), ((B, s, k, H), bf16), (bshape, bf16), ((B, t, n, H), bf16)]
        cases.append(Case(name, ins, _with_vjp(biased("cudnn"), 4), _with_vjp(biased("xla"), 4)))

    # A boolean mask: jax folds it into a bias of large negatives (ScaleBias target), so a
    # fully masked row is a uniform softmax whose logits still carry gradient to Q and K.
    # JAX's XLA path selects a constant for masked logits instead (no gradient there); the
    # reference folds the mask the way jax's cuDNN wrapper does (combine_bias_and_mask).
    def masked(impl):
        if impl == "cudnn":
            return lambda q, k, v, m: jax.nn.dot_product_attention(q, k, v, mask=m, scale=SCALE, implementation=impl)

        def attn(q, k, v, m):
            bias = jnp.where(m, jnp.zeros((), q.dtype), jnp.asarray(-2 << 40, q.dtype))
            return jax.nn.dot_product_attention(q, k, v, bias=bias, scale=SCALE, implementation="xla")
        return attn

    ins = [((B, T, 2, H), bf16)] * 3 + [((B, 1, T, T), "bool"), ((B, T, 2, H), bf16)]
    cases.append(Case("bool_mask", ins, _with_vjp(masked("cudnn"), 3), _with_vjp(masked("xla"), 3)))

    # Padding lengths, with and without causal.
    def padded(impl, causal):
        def attn(q, k, v, ql, kl):
            out = jax.nn.dot_product_attention(q, k, v, scale=SCALE, is_causal=causal, query_seq_lengths=ql,
                                               key_value_seq_lengths=kl, implementation=impl)
            return out if impl == "cudnn" else out * _rows(ql, q.shape[1]).astype(out.dtype)
        return attn

    for name, (n, k, causal) in {"padding": (2, 2, False), "padding_causal_gqa": (4, 1, True)}.items():
        ins = [((B, T, n, H), bf16), ((B, T, k, H), bf16), ((B, T, k, H), bf16), ((B,), i32), ((B,), i32),
               ((B, T, n, H), bf16)]
        cases.append(Case(name, ins, _with_vjp(padded("cudnn", causal), 3), _with_vjp(padded("xla", causal), 3)))

    # Inference: the forward call alone, 2 results (no stats).
    ins = [((B, T, 4, H), bf16), ((B, T, 2, H), bf16), ((B, T, 2, H), bf16), ((B, T, 4, H), bf16)]
    cases.append(Case("inference_causal", ins, _forward_only(_dpa("cudnn", is_causal=True)),
                      _forward_only(_dpa("xla", is_causal=True)), grads=False))

    # The residual (log-sum-exp stats, [B, T, N]) next to the output.
    def residual(impl):
        return lambda q, k, v: jax.nn.dot_product_attention(q, k, v, scale=SCALE, is_causal=True,
                                                            implementation=impl, return_residual=True)

    cases.append(Case("residual_causal", ins, lambda q, k, v, d: residual("cudnn")(q, k, v),
                      lambda q, k, v, d: residual("xla")(q, k, v), grads=False))

    # BNTH layout through the lower-level API.
    def bnth(impl):
        def attn(q, k, v):
            if impl == "cudnn":
                return fa.dot_product_attention(q, k, v, scale=SCALE, mask_type=fa.MaskType.CAUSAL, qkv_layout="BNTH")
            tr = lambda x: jnp.transpose(x, (0, 2, 1, 3))  # noqa: E731
            return tr(jax.nn.dot_product_attention(tr(q), tr(k), tr(v), scale=SCALE, is_causal=True,
                                                   implementation="xla"))
        return attn

    ins = [((B, 4, T, H), bf16), ((B, 2, T, H), bf16), ((B, 2, T, H), bf16), ((B, 4, T, H), bf16)]
    cases.append(Case("bnth_causal_gqa", ins, _with_vjp(bnth("cudnn"), 3), _with_vjp(bnth("xla"), 3)))

    # Dropout: cuDNN's mask cannot be reproduced; the test checks statistics, not values.
    def dropout(q, k, v):
        return fa.dot_product_attention(q, k, v, scale=SCALE, dropout_rate=0.5, seed=7)

    ins = [((1, 64, 1, H), bf16)] * 4
    cases.append(Case("dropout", ins, _with_vjp(dropout, 3), None))

    # Packed segments (max_seg_per_batch = 3): lengths [B, M], row-relative offsets [B, M+1].
    M = 3

    def packed(impl):
        def attn(q, k, v, ql, kl, qo, ko):
            if impl == "cudnn":
                return fa.dot_product_attention(q, k, v, q_seqlen=ql, kv_seqlen=kl, q_offsets=qo, kv_offsets=ko,
                                                scale=SCALE, mask_type=fa.MaskType.PADDING_CAUSAL)
            pos = jnp.arange(T)
            seg_q = _segment_of(pos, qo, ql)  # [B, T], -1 outside
            seg_k = _segment_of(pos, ko, kl)
            start_q = _segment_start(seg_q, qo)
            start_k = _segment_start(seg_k, ko)
            vis = (seg_q[:, :, None] == seg_k[:, None, :]) & (seg_q[:, :, None] >= 0)
            vis &= (pos[None, None, :] - start_k[:, None, :]) <= (pos[None, :, None] - start_q[:, :, None])
            out = jax.nn.dot_product_attention(q, k, v, mask=vis[:, None], scale=SCALE, implementation="xla")
            return out * (seg_q >= 0)[:, :, None, None].astype(out.dtype)
        return attn

    ins = [((B, T, 2, H), bf16)] * 3 + [((B, M), i32), ((B, M), i32), ((B, M + 1), i32), ((B, M + 1), i32),
                                        ((B, T, 2, H), bf16)]
    cases.append(Case("packed_causal", ins, _with_vjp(packed("cudnn"), 3), _with_vjp(packed("xla"), 3),
                      extra={"segments": M}))

    # Flex attention (jax >= 0.12: `score_mod`, its args appended to the call's operands).
    # The reference applies the same score function to scale·Q·Kᵀ (+ bias) before the mask
    # and softmax, as the cuDNN wrapper documents it.
    def softcap(s, c):
        cap = c * c + 2.0  # positive, away from 0, for any input
        return cap * jnp.tanh(s / cap)

    def alibi(s, slopes):  # per-head slope times the key's distance behind the query
        t, k = s.shape[-2:]
        dist = (jnp.arange(k)[None, :] - jnp.arange(t)[:, None]).astype(s.dtype)
        return s + slopes[None, :, None, None] * dist

    def flex(impl, score_mod, causal):
        def attn(q, k, v, arg):
            if impl == "cudnn":
                return fa.dot_product_attention(q, k, v, scale=SCALE, score_mod=score_mod, score_mod_args=(arg,),
                                                mask_type=fa.MaskType.CAUSAL if causal else fa.MaskType.NO_MASK)
            group = q.shape[2] // k.shape[2]
            kk, vv = jnp.repeat(k, group, axis=2), jnp.repeat(v, group, axis=2)
            s = SCALE * jnp.einsum("btnh,bsnh->bnts", q.astype(jnp.float32), kk.astype(jnp.float32))
            s = score_mod(s, arg)
            if causal:
                s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], bool)), s, -jnp.inf)
            p = jax.nn.softmax(s, axis=-1)
            return jnp.einsum("bnts,bsnh->btnh", p, vv.astype(jnp.float32)).astype(q.dtype)
        return attn

    ins = [((B, T, 4, H), bf16), ((B, T, 2, H), bf16), ((B, T, 2, H), bf16), ((), "float32"), ((B, T, 4, H), bf16)]
    cases.append(Case("flex_softcap_gqa_inference", ins, _forward_only(flex("cudnn", softcap, False)),
                      _forward_only(flex("xla", softcap, False)), grads=False))
    ins = [((B, T, 2, H), bf16)] * 3 + [((2,), "float32"), ((B, T, 2, H), bf16)]
    cases.append(Case("flex_alibi_causal", ins, _with_vjp(flex("cudnn", alibi, True), 3),
                      _with_vjp(flex("xla", alibi, True), 3)))
    ins = [((B, T, 4, H), bf16), ((B, T, 2, H), bf16), ((B, T, 2, H), bf16), ((), "float32"), ((B, T, 4, H), bf16)]
    cases.append(Case("flex_softcap_gqa", ins, _with_vjp(flex("cudnn", softcap, False), 3),
                      _with_vjp(flex("xla", softcap, False), 3)))
    return cases


def _segment_of(pos, offsets, lengths):
    """Segment index of each position (-1 outside every segment): [B, T]."""
    starts = offsets[:, :-1]
    inside = (pos[None, :, None] >= starts[:, None, :]) & (pos[None, :, None] < (starts + lengths)[:, None, :]) \
        & (lengths[:, None, :] > 0) & (starts[:, None, :] >= 0)
    return jnp.where(inside.any(-1), jnp.argmax(inside, -1), -1)


def _segment_start(seg, offsets):
    return jnp.where(seg >= 0, jnp.take_along_axis(offsets, jnp.maximum(seg, 0), axis=1), 0)


CASES: dict[str, Case] = {}


def cases() -> dict[str, Case]:
    if not CASES:
        CASES.update({c.name: c for c in _cases()})
    return CASES


def random_inputs(case: Case, seed: int = 0) -> list[np.ndarray]:
    """Inputs for a case: normal values; lengths, offsets and masks as the case needs."""
    import ml_dtypes

    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in case.inputs:
        if dtype == "int32":
            out.append(None)
        elif dtype == "bool":
            # No fully masked row: there cuDNN's backward (and the rewrite's) rebuilds P as
            # exp(s − LSE) with every logit ≈ −2.2e12, where the f32 LSE cannot hold the
            # log(S) above the maximum, so P comes back as 1 instead of 1/S (JAX's XLA path
            # differentiates the softmax directly).  Rows with a visible key are exact.
            m = rng.random(shape) < 0.7
            m[..., 0] = True
            out.append(m)
        else:
            dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
            out.append(rng.standard_normal(shape).astype(np.float32).astype(dt))
    ints = [i for i, (_, d) in enumerate(case.inputs) if d == "int32"]
    if case.name.startswith("packed"):
        # row 0: segments of 5, 6 and 3 tokens at 0, 5, 11 (2 tokens uncovered); row 1: 7, 9.
        t = case.inputs[0][0][1]
        lengths = np.array([[5, 6, 3], [7, 9, -1]], np.int32)
        offsets = np.array([[0, 5, 11, -1], [0, 7, -1, -1]], np.int32)
        assert t == 16
        for i, value in zip(ints, [lengths, lengths, offsets, offsets]):
            out[i] = value
    else:
        t = case.inputs[0][0][1]
        for i, value in zip(ints, [np.array([t, 11], np.int32), np.array([t - 3, 9], np.int32)]):
            out[i] = value
    return out
