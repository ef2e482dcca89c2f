"""Transformer Engine fused attention, forward and backward together, for every qkv layout
JAX emits (packed qkv / kv, BSHD and THD), the THD softmax_aux layouts, the older opaque
descriptors, dropout, the blockwise path against the direct one, half precision against
jax.nn.dot_product_attention, and the configurations the pass refuses.

Oracles: jax.vjp of a JAX reference written from the documented semantics (unpacking the
packed operands inside, so its gradients are packed the same way), NumPy for the forward,
finite differences of the rewrite's own forward for dropout (whose mask is the rewrite's)."""

from __future__ import annotations

import math
import struct

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module
from passes import PassOptions
from tests.passes.attention.test_te_fused_attention import cu_of, jax_attention, numpy_attention, rand, shape, te_config, visibility
from tests.helpers import assert_close

F32 = np.float32
LAYOUT_PACKING = {5: "qkv", 7: "kv", 9: "separate", 10: "qkv", 12: "kv", 14: "separate"}


def fwd_bwd_module(dt, operand_shapes, out_shape, aux_shape, config, cu, offs, bias_shape=(0,),
                   target="te_fused_attn_{}_ffi", opaque=None, seed_last=False) -> str:
    """q/k/v operands (parameters 0-2), dout (3), bias (4), q/kv cu_seqlens (5, 6), q/k
    offsets (7, 8); the forward's output/aux feed the backward.  Returns (o, aux, dq, dk, dv,
    dbias).  `opaque`: (forward, backward) escaped descriptors for the non-FFI targets, whose
    calls have 9/12 operands (seed at 4, or last with `seed_last`)."""
    qs, ks, vs = (shape(s) for s in operand_shapes)
    os_, as_, bs = shape(out_shape), shape(aux_shape), shape(bias_shape)
    if opaque is None:
        attrs = "api_version=API_VERSION_TYPED_FFI, backend_config=" + config
        fwd_args = "q, k, v, bias, seed, qcu, kvcu, qoff, koff, e, e, e, e"
        bwd_args = "q, k, v, bias, aux, rng, o, dout, qcu, kvcu, qoff, koff, e, e, e, e"
        fwd_attrs = bwd_attrs = attrs
    else:
        fwd_args = "q, k, v, bias, qcu, kvcu, qoff, koff, seed" if seed_last else "q, k, v, bias, seed, qcu, kvcu, qoff, koff"
        bwd_args = "q, k, v, bias, aux, rng, o, dout, qcu, kvcu, qoff, koff"
        fwd_attrs = f'backend_config="{opaque[0]}"'
        bwd_attrs = f'backend_config="{opaque[1]}"'
    return f"""HloModule te_fwd_bwd
ENTRY main {{
  q = {dt}[{qs}] parameter(0)
  k = {dt}[{ks}] parameter(1)
  v = {dt}[{vs}] parameter(2)
  dout = {dt}[{os_}] parameter(3)
  bias = {dt}[{bs}] parameter(4)
  qcu = s32[{cu}] parameter(5)
  kvcu = s32[{cu}] parameter(6)
  qoff = s32[{offs}] parameter(7)
  koff = s32[{offs}] parameter(8)
  seed = u32[2] constant({{5, 3}})
  e = f32[0] constant({{}})
  fwd = ({dt}[{os_}], f32[{as_}], u32[2,4], u8[16]) custom-call({fwd_args}), custom_call_target="{target.format('forward')}", {fwd_attrs}
  o = {dt}[{os_}] get-tuple-element(fwd), index=0
  aux = f32[{as_}] get-tuple-element(fwd), index=1
  rng = u32[2,4] get-tuple-element(fwd), index=2
  bwd = ({dt}[{qs}], {dt}[{ks}], {dt}[{vs}], {dt}[{bs}], u8[16]) custom-call({bwd_args}), custom_call_target="{target.format('backward')}", {bwd_attrs}
  dq = {dt}[{qs}] get-tuple-element(bwd), index=0
  dk = {dt}[{ks}] get-tuple-element(bwd), index=1
  dv = {dt}[{vs}] get-tuple-element(bwd), index=2
  db = {dt}[{bs}] get-tuple-element(bwd), index=3
  ROOT t = ({dt}[{os_}], f32[{as_}], {dt}[{qs}], {dt}[{ks}], {dt}[{vs}], {dt}[{bs}]) tuple(o, aux, dq, dk, dv, db)
}}
"""


def run(text, inputs, block=0):
    module = convert_text(text, "te.hlo", pass_options=PassOptions(attention_block=block))
    assert "custom_call" not in str(module)
    return program_from_module(module)(*inputs)


def pack(q, k, v, packing):
    """The three operands of a layout from q [N,s,h,d], k/v [N,s,g,d]."""
    empty = np.zeros(0, q.dtype)
    if packing == "qkv":
        return [np.stack([q, k, v], axis=2), empty, empty]
    if packing == "kv":
        return [q, np.stack([k, v], axis=2), empty]
    return [q, k, v]


def unpack(ops, packing):
    if packing == "qkv":
        return ops[0][:, :, 0], ops[0][:, :, 1], ops[0][:, :, 2]
    if packing == "kv":
        return ops[0], ops[1][:, :, 0], ops[1][:, :, 1]
    return ops[0], ops[1], ops[2]


def thd_segments(n, s, lengths, starts, max_segments):
    """cu_seqlens and offsets as TE's impl writes them (used slots shifted left; offsets on
    the flattened token axis, padded with n·s), and the visibility of padding-causal."""
    flat_len = [ln for row in lengths for ln in row if ln > 0]
    flat_off = [r * s + st for r, row in enumerate(starts) for st, ln in zip(row, lengths[r]) if ln > 0]
    slots = n * max_segments
    cu = cu_of(flat_len + [0] * (slots - len(flat_len)))
    off = np.array(flat_off + [n * s] * (slots + 1 - len(flat_off)), np.int32)
    vis = np.zeros((n, s, s), bool)
    for r in range(n):
        for st, ln in zip(starts[r], lengths[r]):
            for i in range(st, st + ln):
                vis[r, i, st:i + 1] = True
    return cu, off, vis, flat_len, flat_off


# Two rows of 12 tokens: row 0 packs sequences of 4 and 5 tokens (3 uncovered), row 1
# packs 3, 3 and 2 (4 uncovered, one gap in the middle).
THD_LENGTHS, THD_STARTS, THD_M = [[4, 5, 0], [3, 3, 2]], [[0, 4, 9], [0, 4, 7]], 3


@pytest.mark.parametrize("layout", [5, 7, 9, 10, 12, 14])
@pytest.mark.parametrize("block", [0, 4])
def test_every_layout_forward_and_backward(layout, block):
    """Packed gradients come back packed (BS3HD: dq holds [dq, dk, dv] along the 3 axis,
    dk and dv are empty; BS2HD: dk holds [dk, dv]), matching jax.vjp through the packing."""
    packing = LAYOUT_PACKING[layout]
    thd = layout >= 10
    n, s, d = 2, 12, 8
    h, g = (2, 2) if packing == "qkv" else (4, 2)  # packed qkv shares one head count
    q, k, v, dout = rand((n, s, h, d)), rand((n, s, g, d)), rand((n, s, g, d)), rand((n, s, h, d))
    ops = pack(q, k, v, packing)
    if thd:
        cu, off, vis, _, _ = thd_segments(n, s, THD_LENGTHS, THD_STARTS, THD_M)
        mask, max_segments = 3, THD_M
    else:
        lq = lkv = np.array([12, 9])
        cu, off, vis = cu_of(lq), np.zeros(0, np.int32), visibility(n, s, s, 3, lq, lkv)
        mask, max_segments = 3, 1
    cfg = te_config(h, g, s, s, d, mask, layout=layout, batch=n, max_segments=max_segments)
    text = fwd_bwd_module("f32", [o.shape for o in ops], dout.shape, [n, h, s, 1], cfg, len(cu), len(off))
    o, aux, dq, dk, dv, _ = run(text, ops + [dout, np.zeros(0, F32), cu, cu, off, off], block)

    scale = 1 / math.sqrt(d)
    want_o, want_lse = numpy_attention(q, k, v, scale, vis)
    # f32 softmax and matmuls over <= 12 keys against f64: a few f32 ulps.
    assert_close(o, want_o.astype(F32), rtol=1e-5, atol=1e-5)
    assert_close(aux[..., 0], want_lse.astype(F32), rtol=1e-5, atol=1e-5)
    jvis = jnp.asarray(vis)
    live = [i for i, x in enumerate(ops) if x.size]
    _, vjp = jax.vjp(lambda *xs: jax_attention(*unpack(list(xs) + [None] * (3 - len(xs)), packing), scale, jvis),
                     *[ops[i] for i in live])
    want = vjp(dout)
    got = [dq, dk, dv]
    for i, w in zip(live, want):
        # Gradients accumulate over <= 12 keys and a GQA group in f32: 1e-4 relative.
        assert_close(got[i], np.asarray(w), rtol=1e-4, atol=1e-5, what=f"gradient {i}")
    for i in set(range(3)) - set(live):
        assert got[i].shape == (0,)
    # Tokens outside every segment (THD) or beyond a row's length: zero output and gradient.
    uncovered = ~vis.any(-1)
    assert np.all(o[uncovered] == 0)


@pytest.mark.parametrize("aux_layout", ["heads", "tokens", "segments"])
def test_thd_softmax_aux_layouts(aux_layout):
    """softmax_aux in each shape TE declares for THD: [B,h,s,1], token-major [B,s,h,1]
    (cuDNN >= 9.6) and per segment [B,h,s,M] read as [B·M, h, s] (cuDNN < 9.6); the
    backward reads the same layout back."""
    n, s, h, d = 2, 12, 2, 4
    q, k, v, dout = (rand((n, s, h, d)) for _ in range(4))
    cu, off, vis, flat_len, flat_off = thd_segments(n, s, THD_LENGTHS, THD_STARTS, THD_M)
    aux_shape = {"heads": [n, h, s, 1], "tokens": [n, s, h, 1], "segments": [n, h, s, THD_M]}[aux_layout]
    cfg = te_config(h, h, s, s, d, 3, layout=14, batch=n, max_segments=THD_M)
    text = fwd_bwd_module("f32", [q.shape, k.shape, v.shape], dout.shape, aux_shape, cfg, len(cu), len(off))
    o, aux, dq, dk, dv, _ = run(text, [q, k, v, dout, np.zeros(0, F32), cu, cu, off, off], 4)
    scale = 1 / math.sqrt(d)
    _, lse = numpy_attention(q, k, v, scale, vis)  # [n, h, s]
    if aux_layout == "heads":
        want = lse[..., None]
    elif aux_layout == "tokens":
        want = lse.transpose(0, 2, 1)[..., None]
    else:
        tokens = lse.transpose(0, 2, 1).reshape(n * s, h)
        per_slot = np.full((n * THD_M, h, s), -np.inf)
        for slot, (ln, st) in enumerate(zip(flat_len, flat_off)):
            per_slot[slot, :, :ln] = tokens[st:st + ln].T
        want = per_slot.reshape(aux_shape)
    assert_close(aux, want.astype(F32), rtol=1e-5, atol=1e-5)
    _, vjp = jax.vjp(lambda q, k, v: jax_attention(q, k, v, scale, jnp.asarray(vis)), q, k, v)
    for got, w in zip((dq, dk, dv), vjp(dout)):
        assert_close(got, np.asarray(w), rtol=1e-4, atol=1e-5)


def c_escape(data: bytes) -> str:
    """absl::CEscape, as XLA prints a string backend_config."""
    out = []
    for byte in data:
        ch = chr(byte)
        if ch in '"\\\'':
            out.append("\\" + ch)
        elif 32 <= byte < 127:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


def descriptor(version, *, batch, heads, groups, s, d, scale, mask, layout=9, dtype=3, window=(-1, -1), bias=0,
               dropout=0.0, training=True, max_segments=1) -> bytes:
    """CustomCallFusedAttnDescriptor bytes (x86-64) of TE v1.5, v1.6 - v1.8, v1.9 - v1.11 or
    v1.12 - v2.2 (the offsets the notes give)."""
    head = struct.pack("<8Q", batch, 0, s, s, heads, groups, 0, d)
    if version in ("1.5", "1.6"):
        body = head + struct.pack("<Q2f", 0, scale, dropout)
        if version == "1.5":
            body += struct.pack("<4i", bias, mask, dtype, dtype) + bytes([training]) + b"\0" * 7
        else:
            body += struct.pack("<5i", bias, mask, layout, dtype, dtype) + bytes([training]) + b"\0" * 3
        assert len(body) == 104
        return body
    body = head + struct.pack("<2Q2f5i", max_segments, 0, scale, dropout, bias, mask, layout, dtype, dtype)
    body += bytes([training, 1]) + b"\0\0"
    if version == "1.12":
        body += struct.pack("<2q", *window)
    return body


@pytest.mark.parametrize("version, mask, window, seed_last", [
    ("1.12", 2, (3, 0), False),   # v2.1 - v2.2: seed at operand 4; a sliding window
    ("1.12", 3, (-1, -1), True),  # v1.12 - v2.0: seed last; padding causal
    ("1.9", 1, (-1, -1), True),   # 112 bytes: no window
])
def test_opaque_descriptor_targets(version, mask, window, seed_last):
    n, s, h, g, d = 2, 12, 4, 2, 8
    q, k, v, dout = rand((n, s, h, d)), rand((n, s, g, d)), rand((n, s, g, d)), rand((n, s, h, d))
    scale = 0.4
    lq, lkv = np.array([12, 7]), np.array([10, 12])
    raw = descriptor(version, batch=n, heads=h, groups=g, s=s, d=d, scale=scale, mask=mask, window=window)
    text = fwd_bwd_module("f32", [q.shape, k.shape, v.shape], dout.shape, [n, h, s, 1], None, n + 1, 0,
                          target="te_fused_attn_{}", opaque=(c_escape(raw), c_escape(raw)), seed_last=seed_last)
    o, aux, dq, dk, dv, _ = run(text, [q, k, v, dout, np.zeros(0, F32), cu_of(lq), cu_of(lkv), np.zeros(0, np.int32),
                                       np.zeros(0, np.int32)], 4)
    vis = visibility(n, s, s, mask, lq, lkv, wl=window[0])
    want_o, want_lse = numpy_attention(q, k, v, np.float32(scale), vis)
    assert_close(o, want_o.astype(F32), rtol=1e-5, atol=1e-5)
    assert_close(aux[..., 0], want_lse.astype(F32), rtol=1e-5, atol=1e-5)
    _, vjp = jax.vjp(lambda q, k, v: jax_attention(q, k, v, np.float32(scale), jnp.asarray(vis)), q, k, v)
    for got, w in zip((dq, dk, dv), vjp(dout)):
        assert_close(got, np.asarray(w), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("version, layout", [("1.5", 9), ("1.6", 5)])
def test_opaque_104_byte_descriptors(version, layout):
    """v1.5 (dtype at byte 88, layout implied) and v1.6 - v1.8 (qkv_layout at 88): 7
    forward operands q, k, v, bias, q_cu, kv_cu, seed."""
    n, s, h, d = 1, 8, 2, 4
    q, k, v = rand((n, s, h, d)), rand((n, s, h, d)), rand((n, s, h, d))
    ops = pack(q, k, v, LAYOUT_PACKING[layout])
    # dtype 5 (bf16) as TE writes it; the pass reads the element type from the operands.
    raw = descriptor(version, batch=n, heads=h, groups=h, s=s, d=d, scale=0.5, mask=2, layout=layout, dtype=5)
    qs, ks, vs = (shape(x.shape) for x in ops)
    text = f"""HloModule te_v15
ENTRY main {{
  q = f32[{qs}] parameter(0)
  k = f32[{ks}] parameter(1)
  v = f32[{vs}] parameter(2)
  bias = f32[0] constant({{}})
  cu = s32[2] constant({{0, {s}}})
  seed = u32[2] constant({{1, 2}})
  fwd = (f32[{n},{s},{h},{d}], f32[{n},{h},{s},1], u32[2,4], u8[16]) custom-call(q, k, v, bias, cu, cu, seed), custom_call_target="te_fused_attn_forward", backend_config="{c_escape(raw)}"
  o = f32[{n},{s},{h},{d}] get-tuple-element(fwd), index=0
  aux = f32[{n},{h},{s},1] get-tuple-element(fwd), index=1
  ROOT t = (f32[{n},{s},{h},{d}], f32[{n},{h},{s},1]) tuple(o, aux)
}}
"""
    o, aux = run(text, ops)
    want_o, want_lse = numpy_attention(q, k, v, 0.5, visibility(n, s, s, 2))
    assert_close(o, want_o.astype(F32), rtol=1e-5, atol=1e-5)
    assert_close(aux[..., 0], want_lse.astype(F32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mask, window, bias", [(2, (-1, -1), False), (4, (20, -1), False), (5, (-1, -1), False),
                                                (0, (-1, -1), True), (3, (9, -1), False)])
def test_blockwise_equals_direct(mask, window, bias):
    """S = 64 in blocks of 16 (online softmax, skipped blocks, dQ read-add-write) against
    the whole sequence as one block; forward and backward, GQA 4:2.  Both are f32 sums of
    the same terms in a different order: 2e-5 relative."""
    n, sq, skv, h, g, d = 2, 48 if mask in (4, 5) else 64, 64, 4, 2, 8
    q, k, v, dout = rand((n, sq, h, d)), rand((n, skv, g, d)), rand((n, skv, g, d)), rand((n, sq, h, d))
    b = rand((1, h, sq, skv)) if bias else np.zeros(0, F32)
    lq, lkv = np.array([sq, 33]), np.array([skv, 41])
    cfg = te_config(h, g, sq, skv, d, mask, batch=n, wl=window[0], wr=window[1], bias_type=2 if bias else 0)
    text = fwd_bwd_module("f32", [q.shape, k.shape, v.shape], dout.shape, [n, h, sq, 1], cfg, n + 1, 0,
                          bias_shape=b.shape)
    ins = [q, k, v, dout, b, cu_of(lq), cu_of(lkv), np.zeros(0, np.int32), np.zeros(0, np.int32)]
    direct = run(text, ins, 0)
    blockwise = run(text, ins, 16)
    for i, (x, y) in enumerate(zip(blockwise, direct)):
        assert_close(x, y, rtol=2e-5, atol=2e-5, what=f"output {i}")
    # And both against the reference (the forward).
    vis = visibility(n, sq, skv, mask, lq, lkv, wl=window[0])
    want_o, _ = numpy_attention(q, k, v, 1 / math.sqrt(d), vis, b if bias else None)
    assert_close(blockwise[0], want_o.astype(F32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("mask", [0, 2])
def test_half_precision_forward_matches_jax(dt, mask):
    """bf16/f16 in and out, f32 inside (as cuDNN), against jax.nn.dot_product_attention
    (implementation='xla') on the same rounded inputs computed in f32 and rounded once.
    Measured <= 1 output ulp apart; allowed 2 ulps of the output's magnitude."""
    np_dt = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}[dt]
    n, s, h, g, d = 2, 40, 6, 2, 16
    q, k, v = rand((n, s, h, d), np_dt), rand((n, s, g, d), np_dt), rand((n, s, g, d), np_dt)
    cfg = te_config(h, g, s, s, d, mask, batch=n)
    text = fwd_bwd_module(dt, [q.shape, k.shape, v.shape], q.shape, [n, h, s, 1], cfg, n + 1, 0)
    o = run(text, [q, k, v, q, np.zeros(0, np_dt), cu_of([s, s]), cu_of([s, s]), np.zeros(0, np.int32),
                   np.zeros(0, np.int32)], 16)[0]
    f32 = lambda x: jnp.asarray(x.astype(F32))  # noqa: E731
    want = jax.nn.dot_product_attention(f32(q), f32(k), f32(v), is_causal=mask == 2, scale=1 / math.sqrt(d),
                                        implementation="xla")
    ulp = 2.0**-8 if dt == "bf16" else 2.0**-11
    err = np.max(np.abs(o.astype(np.float64) - np.asarray(want, np.float64)))
    assert err <= 2 * ulp * np.max(np.abs(np.asarray(want))), err


def test_dropout_backward_is_the_gradient_of_the_forward():
    """With dropout the mask is the rewrite's own; the backward must differentiate the
    forward that used it.  Central differences of sum(O·dO) along a random direction
    (f32, eps 1e-2: truncation ~1e-4) against <gradients, direction>."""
    n, s, h, d = 1, 16, 2, 4
    q, k, v, dout = (rand((n, s, h, d)) for _ in range(4))
    cfg = te_config(h, h, s, s, d, 2, batch=n, dropout=0.3)
    text = fwd_bwd_module("f32", [q.shape, k.shape, v.shape], q.shape, [n, h, s, 1], cfg, n + 1, 0)
    program = program_from_module(convert_text(text, "te.hlo", pass_options=PassOptions(attention_block=8)))
    rest = [np.zeros(0, F32), cu_of([s]), cu_of([s]), np.zeros(0, np.int32), np.zeros(0, np.int32)]
    o, _, dq, dk, dv, _ = program(q, k, v, dout, *rest)
    rng = np.random.default_rng(3)
    dirs = [rng.standard_normal(x.shape).astype(F32) for x in (q, k, v)]
    eps = 1e-2

    def loss(sign):
        moved = [x + sign * eps * t for x, t in zip((q, k, v), dirs)]
        return float(np.sum(program(*moved, dout, *rest)[0].astype(np.float64) * dout))

    numeric = (loss(1) - loss(-1)) / (2 * eps)
    analytic = sum(float(np.sum(g.astype(np.float64) * t)) for g, t in zip((dq, dk, dv), dirs))
    assert abs(numeric - analytic) <= 2e-3 * max(1.0, abs(analytic)), (numeric, analytic)
    # Dropout did drop: the output differs from the undropped attention.
    undropped, _ = numpy_attention(q, k, v, 1 / math.sqrt(d), visibility(n, s, s, 2))
    assert np.max(np.abs(o - undropped)) > 0.1


def _unsupported(cfg_kwargs, aux_shape=None, bias_shape=(0,), match=""):
    n, s, h, d = 1, 8, 2, 4
    cfg = te_config(h, h, s, s, d, batch=n, **cfg_kwargs)
    text = fwd_bwd_module("f32", [[n, s, h, d]] * 3, [n, s, h, d], aux_shape or [n, h, s, 1], cfg, n + 1, 0,
                          bias_shape=bias_shape)
    with pytest.raises(Exception, match=match):
        convert_text(text, "bad.hlo")


@pytest.mark.parametrize("kwargs, aux, bias, match", [
    (dict(mask=2, bias_type=3), None, (0,), "bias_type=3 \\(ALiBi\\) is not supported"),
    (dict(mask=7), None, (0,), "mask_type=7 is not an NVTE_Mask_Type"),
    (dict(mask=2, layout=1), None, (0,), "qkv_layout=1 is not one JAX emits"),
    (dict(mask=2, extra=", softmax_type = 1 : i64"), None, (0,), "softmax_type=1"),
    (dict(mask=2, wl=2, wr=3, extra=", bottom_right_diagonal = false"), None, (0,), "window_size_right=3 with a causal"),
    (dict(mask=2), [1, 2, 8, 8], (0,), "max512 backend"),
    (dict(mask=2, bias_type=2), None, (1, 2, 8, 7), "bias of shape \\[1, 2, 8, 7\\]"),
    (dict(mask=2, layout=14), None, (0,), "mask_type=2 with THD layout THD_THD_THD"),
    (dict(mask=1, layout=14, max_segments=4), None, (0,), "q_seq_offsets .* THD needs 4 integer token offsets"),
])
def test_unsupported_configurations_name_the_attribute(kwargs, aux, bias, match):
    _unsupported(kwargs, aux, bias, match)


def test_opaque_descriptor_of_unknown_size_is_refused():
    text = fwd_bwd_module("f32", [[1, 8, 2, 4]] * 3, [1, 8, 2, 4], [1, 2, 8, 1], None, 2, 0,
                          target="te_fused_attn_{}", opaque=(c_escape(b"\1" * 96), c_escape(b"\1" * 96)))
    with pytest.raises(Exception, match="opaque descriptor of 96 bytes"):
        convert_text(text, "bad.hlo")
