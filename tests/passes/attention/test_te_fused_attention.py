"""Transformer Engine fused attention calls (the MaxText sample's typed-FFI form), rewritten
and run on CPU, against a NumPy reference of the documented semantics (forward), JAX's
own dot_product_attention, and jax.vjp of a JAX reference (backward)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module
from passes import PassOptions
from tests.helpers import assert_close

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


def te_config(heads, groups, sq, skv, d, mask, layout=9, bias_type=0, scale=None, wl=-1, wr=-1, dropout=0.0,
              batch=2, max_segments=1, extra="") -> str:
    scale = scale if scale is not None else 1 / math.sqrt(d)
    return (f"{{attn_heads = {heads} : i64, bias_batch = 0 : i64, bias_heads = 0 : i64, bias_type = {bias_type} : i64, "
            f"deterministic = false, dropout_probability = {dropout:e} : f64, input_batch = {batch} : i64, "
            f"is_training = true, kv_max_seqlen = {skv} : i64, mask_type = {mask} : i64, "
            f"max_segments_per_seq = {max_segments} : i64, num_gqa_groups = {groups} : i64, q_max_seqlen = {sq} : i64, "
            f"qk_head_dim = {d} : i64, qkv_layout = {layout} : i64, scaling_factor = {scale!r} : f64, "
            f"v_head_dim = {d} : i64, window_size_left = {wl} : i64, window_size_right = {wr} : i64{extra}}}")


def shape(dims) -> str:
    return ",".join(map(str, dims))


def forward_module(dt, qs, ks, vs, bias_s, aux_s, config, cu=2, offs=0, out_s=None) -> str:
    """Forward call with its 13 operands in v2.5-v2.9 order; cu_seqlens and offsets are
    parameters 4-7 so tests choose lengths."""
    os_ = shape(out_s or qs)
    return f"""HloModule te_fwd
ENTRY main {{
  q = {dt}[{shape(qs)}] parameter(0)
  k = {dt}[{shape(ks)}] parameter(1)
  v = {dt}[{shape(vs)}] parameter(2)
  bias = {dt}[{shape(bias_s)}] parameter(3)
  qcu = s32[{cu + 1}] parameter(4)
  kvcu = s32[{cu + 1}] parameter(5)
  qoff = s32[{offs}] parameter(6)
  koff = s32[{offs}] parameter(7)
  seed = u32[2] constant({{7, 11}})
  e = f32[0] constant({{}})
  cc = ({dt}[{os_}], f32[{shape(aux_s)}], u32[2,4], u8[1]) custom-call(q, k, v, bias, seed, qcu, kvcu, qoff, koff, e, e, e, e), custom_call_target="te_fused_attn_forward_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={config}
  o = {dt}[{os_}] get-tuple-element(cc), index=0
  aux = f32[{shape(aux_s)}] get-tuple-element(cc), index=1
  ROOT t = ({dt}[{os_}], f32[{shape(aux_s)}]) tuple(o, aux)
}}
"""


def visibility(n, sq, skv, mask, lq=None, lkv=None, wl=-1, wr=-1):
    """NVTE mask semantics (common/fused_attn/fused_attn_f16_arbitrary_seqlen.cu)."""
    i = np.arange(sq)[:, None]
    j = np.arange(skv)[None, :]
    out = np.ones((n, sq, skv), bool)
    for b in range(n):
        vis = np.ones((sq, skv), bool)
        shift = 0
        if mask in (1, 3, 5):
            vis &= (i < lq[b]) & (j < lkv[b])
        if mask == 4:
            shift = skv - sq
        if mask == 5:
            shift = lkv[b] - lq[b]
        if mask in (2, 3, 4, 5):
            vis &= j <= i + shift
        if wl >= 0:
            vis &= j >= i + shift - wl
        if wr >= 0:
            vis &= j <= i + shift + wr
        out[b] = vis
    return out


def numpy_attention(q, k, v, scale, vis, bias=None):
    """O [N,Sq,H,D] and LSE [N,H,Sq] in f64; rows that see nothing: O = 0, LSE = -inf."""
    h, g = q.shape[2], k.shape[2]
    k = np.repeat(k.astype(np.float64), h // g, axis=2)
    v = np.repeat(v.astype(np.float64), h // g, axis=2)
    s = np.einsum("nqhd,nkhd->nhqk", q.astype(np.float64), k) * scale
    if bias is not None:
        s = s + bias.astype(np.float64)
    s = np.where(vis[:, None], s, -np.inf)
    m = s.max(-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - m_safe)
    l = p.sum(-1, keepdims=True)
    lse = np.where(l > 0, m_safe + np.log(np.where(l > 0, l, 1)), -np.inf)[..., 0]
    probs = p / np.where(l > 0, l, 1)
    return np.einsum("nhqk,nkhd->nqhd", probs, v), lse


def jax_attention(q, k, v, scale, vis, bias=None):
    """The same reference in JAX, for jax.vjp (gradients of masked rows are 0)."""
    h, g = q.shape[2], k.shape[2]
    k = jnp.repeat(k, h // g, axis=2)
    v = jnp.repeat(v, h // g, axis=2)
    s = jnp.einsum("nqhd,nkhd->nhqk", q, k) * scale
    if bias is not None:
        s = s + bias
    s = jnp.where(vis[:, None], s, -jnp.inf)
    m = jax.lax.stop_gradient(jnp.max(s, -1, keepdims=True))
    m = jnp.where(jnp.isfinite(m), m, 0)
    p = jnp.where(vis[:, None], jnp.exp(s - m), 0)
    l = p.sum(-1, keepdims=True)
    return jnp.einsum("nhqk,nkhd->nqhd", p / jnp.where(l > 0, l, 1), v)


def run(text, inputs, block=0):
    module = convert_text(text, "te.hlo", pass_options=PassOptions(attention_block=block))
    assert "custom_call" not in str(module)
    return program_from_module(module)(*inputs)


RNG = np.random.default_rng(0)


def rand(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(np.float32).astype(dtype)


def cu_of(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


# (mask, description): every NVTE_Mask_Type; padding ones get ragged lengths.
MASKS = [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("heads, groups", [(4, 4), (4, 2), (6, 1)])
@pytest.mark.parametrize("block", [0, 4])
def test_forward_every_mask_and_gqa_ratio(mask, heads, groups, block):
    n, sq, skv, d = 2, 12, 16 if mask in (4, 5) else 12, 8
    lq, lkv = np.array([12, 7]), np.array([skv, 5 if mask != 5 else 9])
    q, k, v = rand((n, sq, heads, d)), rand((n, skv, groups, d)), rand((n, skv, groups, d))
    cfg = te_config(heads, groups, sq, skv, d, mask, batch=n)
    text = forward_module("f32", q.shape, k.shape, v.shape, [0], [n, heads, sq, 1], cfg)
    o, aux = run(text, [q, k, v, np.zeros(0, np.float32), cu_of(lq), cu_of(lkv), np.zeros(0, np.int32),
                        np.zeros(0, np.int32)], block)
    vis = visibility(n, sq, skv, mask, lq, lkv)
    want_o, want_lse = numpy_attention(q, k, v, 1 / math.sqrt(d), vis)
    # f32 softmax and matmuls over <= 16 keys against f64: a few f32 ulps.
    assert_close(o, want_o.astype(np.float32), rtol=1e-5, atol=1e-5)
    assert_close(aux[..., 0], want_lse.astype(np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("wl, mask", [(3, 2), (0, 2), (5, 4)])
def test_sliding_window(wl, mask):
    n, h, sq, skv, d = 1, 2, 16, 16, 4
    q, k, v = rand((n, sq, h, d)), rand((n, skv, h, d)), rand((n, skv, h, d))
    cfg = te_config(h, h, sq, skv, d, mask, wl=wl, wr=0, batch=n)
    text = forward_module("f32", q.shape, k.shape, v.shape, [0], [n, h, sq, 1], cfg, cu=1)
    for block in (0, 4):
        o, aux = run(text, [q, k, v, np.zeros(0, np.float32), cu_of([sq]), cu_of([skv]),
                            np.zeros(0, np.int32), np.zeros(0, np.int32)], block)
        # v2.5-v2.9 semantics (no bottom_right_diagonal attr): the right edge is the causal one.
        want_o, want_lse = numpy_attention(q, k, v, 1 / math.sqrt(d), visibility(n, sq, skv, mask, wl=wl))
        assert_close(o, want_o.astype(np.float32), rtol=1e-5, atol=1e-5)
        assert_close(aux[..., 0], want_lse.astype(np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", [5, 7, 9])
def test_packed_layouts_and_leading_dims(layout):
    """BS3HD, BSHD_BS2HD, BSHD_BSHD_BSHD, with a leading dim beyond the batch ([1, 2, ...])."""
    lead, n, h, s, d = 1, 2, 2, 8, 4
    q, k, v = rand((lead, n, s, h, d)), rand((lead, n, s, h, d)), rand((lead, n, s, h, d))
    if layout == 5:
        qkv = np.stack([q, k, v], axis=3)
        ins, shapes = [qkv, np.zeros(0, np.float32), np.zeros(0, np.float32)], [qkv.shape, [0], [0]]
    elif layout == 7:
        kv = np.stack([k, v], axis=3)
        ins, shapes = [q, kv, np.zeros(0, np.float32)], [q.shape, kv.shape, [0]]
    else:
        ins, shapes = [q, k, v], [q.shape, k.shape, v.shape]
    cfg = te_config(h, h, s, s, d, 2, layout=layout, batch=n)
    text = forward_module("f32", *shapes, [0], [lead, n, h, s, 1], cfg, out_s=q.shape)  # output is not packed
    o, aux = run(text, ins + [np.zeros(0, np.float32), cu_of([s, s]), cu_of([s, s]), np.zeros(0, np.int32),
                              np.zeros(0, np.int32)])
    want_o, want_lse = numpy_attention(q[0], k[0], v[0], 1 / math.sqrt(d), visibility(n, s, s, 2))
    assert_close(o[0], want_o.astype(np.float32), rtol=1e-5, atol=1e-5)
    assert_close(aux[0, ..., 0], want_lse.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_matches_jax_dot_product_attention_bf16():
    """The sample's configuration at a small size in bf16, against
    jax.nn.dot_product_attention (implementation='xla')."""
    lead, n, h, g, s, d = 1, 2, 6, 2, 32, 16
    q, k, v = rand((lead, n, s, h, d), ml_dtypes.bfloat16), rand((lead, n, s, g, d), ml_dtypes.bfloat16), \
        rand((lead, n, s, g, d), ml_dtypes.bfloat16)
    cfg = te_config(h, g, s, s, d, 2, batch=n, scale=0.088388347648318433)
    text = forward_module("bf16", q.shape, k.shape, v.shape, [0], [lead, n, h, s, 1], cfg, cu=32)
    zeros_cu = np.zeros(33, np.int32)  # as in the sample: s32[33] the kernel does not read for causal
    o, _ = run(text, [q, k, v, np.zeros(0, ml_dtypes.bfloat16), zeros_cu, zeros_cu, np.zeros(0, np.int32),
                      np.zeros(0, np.int32)], block=8)
    want = jax.nn.dot_product_attention(jnp.asarray(q[0]), jnp.asarray(k[0]), jnp.asarray(v[0]),
                                        scale=0.088388347648318433, is_causal=True, implementation="xla")
    # Both compute softmax in f32 from bf16 inputs and round the output to bf16 once;
    # JAX rounds P to bf16 before P·V, we keep f32: up to ~2 bf16 ulps apart.
    assert_close(o[0], np.asarray(want), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("bias_type", [1, 2])
@pytest.mark.parametrize("bias_shape", [(1, 3), (2, 1), (2, 3)])
def test_bias_types(bias_type, bias_shape):
    n, h, s, d = 2, 3, 8, 4
    q, k, v = rand((n, s, h, d)), rand((n, s, h, d)), rand((n, s, h, d))
    bias = rand((*bias_shape, s, s))
    cfg = te_config(h, h, s, s, d, 0, bias_type=bias_type, batch=n, scale=0.5)
    text = forward_module("f32", q.shape, k.shape, v.shape, bias.shape, [n, h, s, 1], cfg)
    o, aux = run(text, [q, k, v, bias, cu_of([s, s]), cu_of([s, s]), np.zeros(0, np.int32), np.zeros(0, np.int32)])
    eff = bias if bias_type == 2 else 0.5 * bias  # pre-scale: softmax(scale·(QKᵀ + bias))
    want_o, want_lse = numpy_attention(q, k, v, 0.5, visibility(n, s, s, 0), eff)
    assert_close(o, want_o.astype(np.float32), rtol=1e-5, atol=1e-5)
    assert_close(aux[..., 0], want_lse.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_thd_packed_segments():
    """THD_THD_THD: two rows, each packing several sequences; attention per segment with
    positions from the segment start, causal within the segment."""
    n, s, h, d, m = 2, 10, 2, 4, 3
    q, k, v = rand((n, s, h, d)), rand((n, s, h, d)), rand((n, s, h, d))
    lengths = [[4, 5, 0], [3, 3, 2]]
    starts = [[0, 4, 10], [0, 3, 6]]
    flat_len = [x for row in lengths for x in row if x > 0]
    flat_off = [r * s + x for r, row in enumerate(starts) for x, ln in zip(row, lengths[r]) if ln > 0]
    segs = n * m
    cu = cu_of(flat_len + [0] * (segs - len(flat_len)))
    off = np.array(flat_off + [n * s] * (segs + 1 - len(flat_off)), np.int32)
    cfg = te_config(h, h, s, s, d, 3, layout=14, batch=n, max_segments=m)
    text = forward_module("f32", q.shape, k.shape, v.shape, [0], [n, h, s, 1], cfg, cu=segs, offs=segs + 1)
    o, aux = run(text, [q, k, v, np.zeros(0, np.float32), cu, cu, off, off])
    vis = np.zeros((n, s, s), bool)
    for r in range(n):
        for st, ln in zip(starts[r], lengths[r]):
            for i in range(st, st + ln):
                for j in range(st, st + ln):
                    vis[r, i, j] = j <= i
    want_o, want_lse = numpy_attention(q, k, v, 1 / math.sqrt(d), vis)
    assert_close(o, want_o.astype(np.float32), rtol=1e-5, atol=1e-5)
    # Tokens outside every segment: O = 0 and LSE = -inf (TE's sentinel is a large negative).
    assert_close(aux[..., 0], want_lse.astype(np.float32), rtol=1e-5, atol=1e-5)
    assert np.all(o[1, 8:] == 0)


def backward_module(dt, qs, ks, vs, bias_s, config) -> str:
    n, s, h, _ = qs
    return f"""HloModule te_bwd
ENTRY main {{
  q = {dt}[{shape(qs)}] parameter(0)
  k = {dt}[{shape(ks)}] parameter(1)
  v = {dt}[{shape(vs)}] parameter(2)
  bias = {dt}[{shape(bias_s)}] parameter(3)
  dout = {dt}[{shape(qs)}] parameter(4)
  qcu = s32[{n + 1}] parameter(5)
  kvcu = s32[{n + 1}] parameter(6)
  seed = u32[2] constant({{0, 0}})
  e = f32[0] constant({{}})
  z = s32[0] constant({{}})
  fwd = ({dt}[{shape(qs)}], f32[{n},{h},{s},1], u32[2,4], u8[1]) custom-call(q, k, v, bias, seed, qcu, kvcu, z, z, e, e, e, e), custom_call_target="te_fused_attn_forward_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={config}
  o = {dt}[{shape(qs)}] get-tuple-element(fwd), index=0
  aux = f32[{n},{h},{s},1] get-tuple-element(fwd), index=1
  rng = u32[2,4] get-tuple-element(fwd), index=2
  bwd = ({dt}[{shape(qs)}], {dt}[{shape(ks)}], {dt}[{shape(vs)}], {dt}[{shape(bias_s)}], u8[8]) custom-call(q, k, v, bias, aux, rng, o, dout, qcu, kvcu, z, z, e, e, e, e), custom_call_target="te_fused_attn_backward_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={config}
  dq = {dt}[{shape(qs)}] get-tuple-element(bwd), index=0
  dk = {dt}[{shape(ks)}] get-tuple-element(bwd), index=1
  dv = {dt}[{shape(vs)}] get-tuple-element(bwd), index=2
  db = {dt}[{shape(bias_s)}] get-tuple-element(bwd), index=3
  ROOT t = ({dt}[{shape(qs)}], {dt}[{shape(ks)}], {dt}[{shape(vs)}], {dt}[{shape(bias_s)}]) tuple(dq, dk, dv, db)
}}
"""


@pytest.mark.parametrize("mask, heads, groups, bias, block", [
    (2, 4, 2, False, 0), (2, 4, 2, False, 4), (0, 3, 3, True, 4), (3, 2, 1, False, 4), (5, 2, 2, False, 4),
    (4, 4, 1, False, 0)])
def test_backward_matches_jax_vjp(mask, heads, groups, bias, block):
    n, s, d = 2, 12, 8
    q, k, v, dout = rand((n, s, heads, d)), rand((n, s, groups, d)), rand((n, s, groups, d)), rand((n, s, heads, d))
    lq, lkv = np.array([12, 8]), np.array([12, 10])
    b = rand((1, heads, s, s)) if bias else np.zeros(0, np.float32)
    cfg = te_config(heads, groups, s, s, d, mask, bias_type=2 if bias else 0, batch=n)
    text = backward_module("f32", q.shape, k.shape, v.shape, b.shape, cfg)
    dq, dk, dv, db = run(text, [q, k, v, b, dout, cu_of(lq), cu_of(lkv)], block)
    vis = jnp.asarray(visibility(n, s, s, mask, lq, lkv))
    scale = 1 / math.sqrt(d)
    if bias:
        f = lambda q, k, v, bb: jax_attention(q, k, v, scale, vis, bb)  # noqa: E731
        _, vjp = jax.vjp(f, q, k, v, b)
        wq, wk, wv, wb = vjp(dout)
        assert_close(db, np.asarray(wb), rtol=1e-4, atol=1e-5)
    else:
        _, vjp = jax.vjp(lambda q, k, v: jax_attention(q, k, v, scale, vis), q, k, v)
        wq, wk, wv = vjp(dout)
    # Gradients summed over <= 12 keys and groups in f32: 1e-4 relative covers the order.
    assert_close(dq, np.asarray(wq), rtol=1e-4, atol=1e-5)
    assert_close(dk, np.asarray(wk), rtol=1e-4, atol=1e-5)
    assert_close(dv, np.asarray(wv), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dt, tol", [("bf16", 3e-2), ("f16", 4e-3)])
def test_backward_half_precision(dt, tol):
    """bf16/f16 inputs: computed in f32, rounded once on output; against jax.vjp in f32 of
    the same rounded inputs (tolerance: a couple of output ulps)."""
    n, s, h, d = 1, 16, 2, 8
    np_dt = DTYPES[dt]
    q, k, v, dout = (rand((n, s, h, d), np_dt) for _ in range(4))
    cfg = te_config(h, h, s, s, d, 2, batch=n)
    text = backward_module(dt, q.shape, k.shape, v.shape, [0], cfg)
    dq, dk, dv, _ = run(text, [q, k, v, np.zeros(0, np_dt), dout, cu_of([s]), cu_of([s])], 8)
    vis = jnp.asarray(visibility(n, s, s, 2))
    f32 = lambda x: jnp.asarray(x.astype(np.float32))  # noqa: E731
    _, vjp = jax.vjp(lambda q, k, v: jax_attention(q, k, v, 1 / math.sqrt(d), vis), f32(q), f32(k), f32(v))
    for got, want in zip((dq, dk, dv), vjp(f32(dout))):
        assert_close(got.astype(np.float32), np.asarray(want), rtol=tol, atol=tol)


def test_dropout_is_deterministic_and_drops_at_the_rate():
    """Dropout's mask is the rewrite's own (cuDNN's cannot be reproduced): the output is
    deterministic for a seed, and with p = 0.5 and identical values, kept probabilities
    average to the undropped ones."""
    n, h, s, d = 1, 1, 64, 1
    q = np.zeros((n, s, h, d), np.float32)  # uniform attention: P = 1/s everywhere
    k = np.zeros((n, s, h, d), np.float32)
    v = np.ones((n, s, h, d), np.float32)
    cfg = te_config(h, h, s, s, d, 0, batch=n, dropout=0.5)
    text = forward_module("f32", q.shape, k.shape, v.shape, [0], [n, h, s, 1], cfg, cu=1)
    ins = [q, k, v, np.zeros(0, np.float32), cu_of([s]), cu_of([s]), np.zeros(0, np.int32), np.zeros(0, np.int32)]
    o1, aux1 = run(text, ins)
    o2, _ = run(text, ins)
    np.testing.assert_array_equal(o1, o2)
    # O[i] = Σ_j keep_ij·2/s: mean over rows ≈ 1 (binomial: std 1/√s per row over 64 rows).
    assert abs(o1.mean() - 1.0) < 0.1 and o1.std() > 0.05
    assert_close(aux1[..., 0], np.full((n, h, s), np.log(s), np.float32))  # LSE is before dropout


def test_unsupported_configuration_names_the_attribute():
    n, h, s, d = 1, 2, 8, 4
    cfg = te_config(h, h, s, s, d, 2, layout=3, batch=n)
    text = forward_module("f32", [n, s, h, d], [n, s, h, d], [n, s, h, d], [0], [n, h, s, 1], cfg, cu=1)
    with pytest.raises(Exception, match="qkv_layout=3 is not one JAX emits"):
        convert_text(text, "bad.hlo")


def test_maxtext_sample_keeps_no_attention_call():
    from tests.conftest import SAMPLES

    text = str(convert_text((SAMPLES / "gpu_maxtext_train_step_te_fused_attention.hlo").read_text()))
    assert "te_fused_attn" not in text and "custom_call" not in text
