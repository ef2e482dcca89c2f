"""te-fused-attention: Transformer Engine's JAX fused-attention calls → portable attention.

Targets `te_fused_attn_forward_ffi` / `te_fused_attn_backward_ffi` (typed FFI, MLIR
dictionary config) and the older opaque `te_fused_attn_forward` / `te_fused_attn_backward`.
The contract (operand and result order by TE version, NVTE_QKV_Layout / NVTE_Mask_Type /
NVTE_Bias_Type values, leading dims flattened into the batch, cu_seqlens and THD segment
offsets, softmax_aux = natural-log LSE [*B, h, s_q, 1], rng_state, masks and windows) is
the one in NVIDIA/TransformerEngine: transformer_engine/jax/cpp_extensions/attention.py
(FusedAttnFwdPrimitive / FusedAttnBwdPrimitive lowering), transformer_engine/jax/csrc/
extensions/attention.cpp (FusedAttnForwardFFI, FusedAttnBackwardFFI,
FUSED_ATTN_IMPL_COMMON_BLOCK), transformer_engine/common/include/transformer_engine/
fused_attn.h (enums), common/fused_attn/fused_attn_f16_arbitrary_seqlen.cu (masks) and
utils.cu (cu_seqlens, offsets); summarized in the project's notes.

The math is `passes.lib.attention`.  Dropout uses the core's portable RNG seeded from
the call's seed (kept in rng_state for the backward); it cannot equal cuDNN's mask bit
for bit.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.attention import (AttentionConfig, AttentionInputs, TokenMasks, attention_backward, attention_forward,
                                   lse_from_segment_major, lse_to_segment_major, segment_tokens)
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

FORWARD = ("te_fused_attn_forward_ffi", "te_fused_attn_forward")
BACKWARD = ("te_fused_attn_backward_ffi", "te_fused_attn_backward")

# NVTE_QKV_Layout values JAX can emit → (packing, THD?)
LAYOUTS = {5: ("qkv", False), 7: ("kv", False), 9: ("separate", False),
           10: ("qkv", True), 12: ("kv", True), 14: ("separate", True)}
LAYOUT_NAMES = {5: "BS3HD", 7: "BSHD_BS2HD", 9: "BSHD_BSHD_BSHD", 10: "T3HD", 12: "THD_T2HD", 14: "THD_THD_THD"}
PADDING_MASKS = {1, 3, 5}
CAUSAL_MASKS = {2, 3, 4, 5}
BOTTOM_RIGHT_MASKS = {4, 5}


@dataclass
class TeCall:
    """The operands of one call, by role (None when the version has no such operand)."""

    q: ir.Value
    k: ir.Value
    v: ir.Value
    bias: ir.Value
    seed: ir.Value | None
    q_cu: ir.Value
    kv_cu: ir.Value
    q_off: ir.Value
    k_off: ir.Value
    softmax_offset: ir.Value | None = None
    aux: ir.Value | None = None
    rng_state: ir.Value | None = None
    out: ir.Value | None = None
    dout: ir.Value | None = None


def _roles(op: ir.Operation, forward: bool) -> TeCall:
    ops = list(op.operands)
    n = len(ops)
    if forward:
        if n == 13:  # v2.1 – v2.9
            q, k, v, bias, seed, q_cu, kv_cu, q_off, k_off = ops[:9]
            return TeCall(q, k, v, bias, seed, q_cu, kv_cu, q_off, k_off)
        if n == 14:  # v2.10+: softmax_offset at index 4
            q, k, v, bias, offset, seed, q_cu, kv_cu, q_off, k_off = ops[:10]
            return TeCall(q, k, v, bias, seed, q_cu, kv_cu, q_off, k_off, softmax_offset=offset)
        if n == 9:
            # v1.9 – v2.0 put the seed last; the opaque calls of v2.1 – v2.2 put it at index
            # 4, where v1.9 has q_cu_seqlens.  The seed is the unsigned operand (JAX key
            # data, u32); cu_seqlens and offsets are signed.
            if _is_unsigned(ops[8]) and not _is_unsigned(ops[4]):
                q, k, v, bias, q_cu, kv_cu, q_off, k_off, seed = ops
            elif _is_unsigned(ops[4]) and not _is_unsigned(ops[8]):
                q, k, v, bias, seed, q_cu, kv_cu, q_off, k_off = ops
            else:
                raise rewrite.op_error(op, "9 operands, but neither operand 4 (TE v2.1 – v2.2) nor operand 8 "
                                      "(TE v1.9 – v2.0) alone is an unsigned seed: cannot tell the TE version")
            return TeCall(q, k, v, bias, seed, q_cu, kv_cu, q_off, k_off)
        if n == 7:  # v1.5 – v1.8
            q, k, v, bias, q_cu, kv_cu, seed = ops
            return TeCall(q, k, v, bias, seed, q_cu, kv_cu, q_cu, kv_cu)
    else:
        if n in (16, 12):  # v2.1 – v2.9 (16), v1.9 – v2.0 (12)
            q, k, v, bias, aux, rng, out, dout, q_cu, kv_cu, q_off, k_off = ops[:12]
            return TeCall(q, k, v, bias, None, q_cu, kv_cu, q_off, k_off, aux=aux, rng_state=rng, out=out, dout=dout)
        if n == 17:  # v2.10+
            q, k, v, bias, offset, aux, rng, out, dout, q_cu, kv_cu, q_off, k_off = ops[:13]
            return TeCall(q, k, v, bias, None, q_cu, kv_cu, q_off, k_off, offset, aux, rng, out, dout)
        if n == 10:  # v1.5 – v1.8
            q, k, v, bias, aux, rng, out, dout, q_cu, kv_cu = ops
            return TeCall(q, k, v, bias, None, q_cu, kv_cu, q_cu, kv_cu, aux=aux, rng_state=rng, out=out, dout=dout)
    raise rewrite.op_error(op, f"{n} operands match no Transformer Engine version this pass knows "
                          f"(forward 7/9/13/14, backward 10/12/16/17)")


def _is_unsigned(value: ir.Value) -> bool:
    element = builders.element_type_of(value)
    return isinstance(element, ir.IntegerType) and ir.IntegerType(element).is_unsigned


# ---------------------------------------------------------------- attributes
def _opaque_config(op: ir.Operation) -> dict:
    """The packed CustomCallFusedAttnDescriptor of the opaque targets (x86-64 layout),
    identified by its length: 128 bytes TE v1.12 – v2.2 (sliding window), 112 bytes
    v1.9 – v1.11, 104 bytes v1.5 – v1.8 (no max_segments_per_seq; v1.5 also has no
    qkv_layout, told apart below from the operands)."""
    attr = op.attributes["backend_config"] if "backend_config" in op.attributes else None
    data = ir.StringAttr(attr).value_bytes if attr is not None and isinstance(attr, ir.StringAttr) else b""
    if len(data) in (112, 128):
        (input_batch, bias_batch, q_max, kv_max, heads, groups, bias_heads, head_dim, max_seg, _ws) = \
            struct.unpack_from("<10Q", data, 0)
        scale, dropout = struct.unpack_from("<2f", data, 80)
        bias_type, mask_type, layout, _dtype, _wdtype = struct.unpack_from("<5i", data, 88)
        is_training = bool(data[108])
        wl, wr = struct.unpack_from("<2q", data, 112) if len(data) == 128 else (-1, -1)
    elif len(data) == 104:
        (input_batch, bias_batch, q_max, kv_max, heads, groups, bias_heads, head_dim, _ws) = \
            struct.unpack_from("<9Q", data, 0)
        max_seg, wl, wr = 1, -1, -1
        scale, dropout = struct.unpack_from("<2f", data, 72)
        bias_type, mask_type, field88, field92 = struct.unpack_from("<4i", data, 80)
        layout = _v15_or_v16_layout(op, field88, field92)
        is_training = bool(data[96 if layout is None else 100])
        layout = 9 if layout is None else layout
    else:
        raise rewrite.op_error(op, f"backend_config: an opaque descriptor of {len(data)} bytes; the decodable ones are "
                              "TE v1.5 – v2.2's (104, 112 or 128 bytes)")
    return dict(input_batch=input_batch, bias_batch=bias_batch, q_max_seqlen=q_max, kv_max_seqlen=kv_max,
                attn_heads=heads, num_gqa_groups=groups, bias_heads=bias_heads, qk_head_dim=head_dim,
                v_head_dim=head_dim, max_segments_per_seq=max_seg, scaling_factor=scale,
                dropout_probability=dropout, bias_type=bias_type, mask_type=mask_type, qkv_layout=layout,
                is_training=is_training, window_size_left=wl, window_size_right=wr)


def _v15_or_v16_layout(op: ir.Operation, field88: int, field92: int) -> int | None:
    """104-byte descriptors: v1.6 – v1.8 hold qkv_layout at byte 88 and the dtype at 92;
    v1.5 holds the dtype (TE DType 4 fp16, 5 bf16) at 88 and always means BSHD_BSHD_BSHD.
    The JAX layouts of v1.6 – v1.8 are 5 (BS3HD, q packed [b, s, 3, h, d]), 7 (BSHD_BS2HD,
    k packed) and 9; a fp16/bf16 value at 92 with a layout the operands agree with means
    v1.6 – v1.8 (returns the layout), else v1.5 (returns None)."""
    q_shape, k_shape = builders.shape_of(op.operands[0]), builders.shape_of(op.operands[1])
    packed_q = len(q_shape) >= 5 and q_shape[-3] == 3
    packed_k = len(k_shape) >= 5 and k_shape[-3] == 2
    fits = {5: packed_q, 7: packed_k and not packed_q, 9: not packed_q and not packed_k}
    if field92 in (4, 5) and fits.get(field88, False):
        return field88
    if field88 in (4, 5) and not packed_q and not packed_k:
        return None
    raise rewrite.op_error(op, f"backend_config: a 104-byte descriptor whose bytes 88/92 ({field88}, {field92}) fit "
                          "neither TE v1.5 (dtype) nor v1.6 – v1.8 (qkv_layout, dtype) for these operands")


def _config(op: ir.Operation) -> dict:
    if rewrite.call_target(op).endswith("_ffi"):
        cfg = rewrite.backend_config(op)
        if not cfg:
            raise rewrite.op_error(op, "has no backend_config attributes")
        return cfg
    return _opaque_config(op)


def _attr(op, cfg: dict, name: str, default=None):
    if name in cfg:
        return cfg[name]
    if default is None:
        raise rewrite.op_error(op, f"backend_config has no '{name}'")
    return default


# ------------------------------------------------------------ tensor views
def _flat(x: ir.Value, trailing: int, batch: int) -> ir.Value:
    """Flatten every leading dim before the last `trailing` into the batch (row-major)."""
    shape = builders.shape_of(x)
    return builders.reshape(x, [batch, *shape[len(shape) - trailing:]])


def _unpack(op, call: TeCall, packing: str, batch: int) -> tuple[ir.Value, ir.Value, ir.Value]:
    """q [N, sq, h, d], k [N, skv, g, d], v [N, skv, g, dv] from the layout's packing."""
    if packing == "qkv":
        qkv = _flat(call.q, 4, batch)  # [N, s, 3, h, d]
        n, s, _, h, d = builders.shape_of(qkv)
        parts = [builders.reshape(builders.slice_(qkv, [0, 0, i, 0, 0], [n, s, i + 1, h, d]), [n, s, h, d]) for i in range(3)]
        return parts[0], parts[1], parts[2]
    q = _flat(call.q, 3, batch)
    if packing == "kv":
        kv = _flat(call.k, 4, batch)  # [N, s, 2, g, d]
        n, s, _, g, d = builders.shape_of(kv)
        k, v = (builders.reshape(builders.slice_(kv, [0, 0, i, 0, 0], [n, s, i + 1, g, d]), [n, s, g, d]) for i in range(2))
        return q, k, v
    return q, _flat(call.k, 3, batch), _flat(call.v, 3, batch)


def _flatten(x: ir.Value) -> ir.Value:
    return builders.reshape(x, [math.prod(builders.shape_of(x))])


def _seed_u64(op: ir.Operation, seed: ir.Value) -> ir.Value:
    """The seed's first 8 bytes, little-endian, as one u64 (TE reads an int64): two u32
    words, or one 64-bit element."""
    u64 = ir.IntegerType.get_unsigned(64)
    flat = _flatten(seed)
    element = builders.element_type_of(flat)
    width = ir.IntegerType(element).width if isinstance(element, ir.IntegerType) else 0
    count = builders.shape_of(flat)[0]
    if width == 64 and count >= 1:
        return builders.convert(builders.reshape(builders.slice_(flat, [0], [1]), []), u64)
    if width != 32 or count < 2:
        raise rewrite.op_error(op, f"seed of type {seed.type}: expected at least two 32-bit words (u32[2])")
    lo = builders.convert(builders.reshape(builders.slice_(flat, [0], [1]), []), u64)
    hi = builders.convert(builders.reshape(builders.slice_(flat, [1], [2]), []), u64)
    return builders.binary("or", lo, builders.binary("shift_left", hi, builders.scalar_constant(32, u64)))


def _seed_readable(seed: ir.Value) -> bool:
    """Whether _seed_u64 can read 8 bytes from the seed operand."""
    element, count = builders.element_type_of(seed), math.prod(builders.shape_of(seed))
    width = ir.IntegerType(element).width if isinstance(element, ir.IntegerType) else 0
    return (width == 32 and count >= 2) or (width == 64 and count >= 1)


def _lengths(op: ir.Operation, cu: ir.Value, count: int, what: str) -> ir.Value:
    """L[i] = cu[i+1] − cu[i] for i < count, as i32 [count] (the kernel reads no further)."""
    i32 = ir.IntegerType.get_signless(32)
    cu = builders.convert(_flatten(cu), i32)
    if builders.shape_of(cu)[0] < count + 1:
        raise rewrite.op_error(op, f"{what} holds {builders.shape_of(cu)[0]} entries; {count} segments need {count + 1}")
    return builders.binary("subtract", builders.slice_(cu, [1], [count + 1]), builders.slice_(cu, [0], [count]))


def _padding_tokens(lengths: ir.Value, batch: int, seq: int) -> tuple[ir.Value, ir.Value]:
    """(segment, position) [N, s]: segment 1 for tokens before the row's length, else 0."""
    i32 = ir.IntegerType.get_signless(32)
    index = builders.iota(i32, [batch, seq], 1)
    inside = builders.compare(index, builders.broadcast_in_dim(lengths, [batch, seq], [0]), "LT", "SIGNED")
    segment = builders.select(inside, builders.scalar_constant(1, i32, [batch, seq]), builders.scalar_constant(0, i32, [batch, seq]))
    return segment, index


@dataclass
class Segments:
    """THD packing of one side: per slot k, length and start on the flattened token axis."""

    lengths: ir.Value
    starts: ir.Value


def _thd_segments(op: ir.Operation, cu: ir.Value, offsets: ir.Value, count: int, what: str) -> Segments:
    """Segment slot k covers flattened tokens [off[k], off[k] + L[k]) (utils.cu,
    cu_seqlens_padded_to_offsets); TE shifts used slots left and pads with length 0."""
    i32 = ir.IntegerType.get_signless(32)
    off = _flatten(offsets)
    if builders.shape_of(off)[0] < count or not isinstance(builders.element_type_of(off), ir.IntegerType):
        raise rewrite.op_error(op, f"{what}_seq_offsets of type {offsets.type}: THD needs {count} integer token "
                              f"offsets (input_batch × max_segments_per_seq)")
    starts = builders.slice_(builders.convert(off, i32), [0], [count])
    return Segments(_lengths(op, cu, count, f"{what}_cu_seqlens"), starts)
# ------------------------------------------------------------------ set-up
@dataclass
class Prepared:
    config: AttentionConfig
    inputs: AttentionInputs
    batch_shape: list[int]  # leading dims of q (flattened into N)
    packing: str
    thd: bool
    q_segments: Segments | None = None  # THD only
    max_segments: int = 1


def _prepare(op: ir.Operation, call: TeCall, cfg: dict, block: int = 0) -> Prepared:
    layout = int(_attr(op, cfg, "qkv_layout"))
    if layout not in LAYOUTS:
        raise rewrite.op_error(op, f"qkv_layout={layout} is not one JAX emits; supported: "
                              + ", ".join(f"{k} {v}" for k, v in LAYOUT_NAMES.items()))
    packing, thd = LAYOUTS[layout]
    mask_type = int(_attr(op, cfg, "mask_type"))
    if mask_type not in range(6):
        raise rewrite.op_error(op, f"mask_type={mask_type} is not an NVTE_Mask_Type (0-5)")
    bias_type = int(_attr(op, cfg, "bias_type"))
    if bias_type not in (0, 1, 2):
        raise rewrite.op_error(op, f"bias_type={bias_type} (ALiBi) is not supported; 0 none, 1 pre-scale, 2 post-scale are")
    softmax_type = int(cfg.get("softmax_type", 0))
    if softmax_type != 0 or (call.softmax_offset is not None and builders.shape_of(call.softmax_offset) != [0]):
        raise rewrite.op_error(op, f"softmax_type={softmax_type} (off-by-one or learnable attention sink) is not "
                              "supported; only 0 (vanilla softmax) is")
    batch = int(_attr(op, cfg, "input_batch"))
    heads = int(_attr(op, cfg, "attn_heads"))
    groups = int(_attr(op, cfg, "num_gqa_groups"))
    qk_dim = int(cfg.get("qk_head_dim", cfg.get("head_dim", 0)))
    v_dim = int(cfg.get("v_head_dim", cfg.get("head_dim", qk_dim)))
    qshape = builders.shape_of(call.q)
    lead = len(qshape) - (4 if packing == "qkv" else 3)
    if lead < 1 or math.prod(qshape[:lead]) != batch:
        raise rewrite.op_error(op, f"input_batch={batch} is not the product of q's leading dims {qshape[:max(lead, 0)]} "
                              f"(qkv_layout={layout} {LAYOUT_NAMES[layout]})")
    q, k, v = _unpack(op, call, packing, batch)
    n, sq, hq, dq = builders.shape_of(q)
    _, skv, hkv, dk = builders.shape_of(k)
    dv = builders.shape_of(v)[3]
    if (hq, hkv) != (heads, groups) or heads % groups:
        raise rewrite.op_error(op, f"attn_heads={heads}, num_gqa_groups={groups} disagree with q/k shapes ({hq}, {hkv})")
    if qk_dim and (dq, dk, dv) != (qk_dim, qk_dim, v_dim):
        raise rewrite.op_error(op, f"head dims (qk {qk_dim}, v {v_dim}) disagree with the operands ({dq}, {dk}, {dv})")
    batch_shape = qshape[:lead]
    main_semantics = "bottom_right_diagonal" in cfg  # TE v2.12+: window_size_right is honoured
    wl = int(cfg.get("window_size_left", -1))
    wr = int(cfg.get("window_size_right", -1))
    causal = mask_type in CAUSAL_MASKS
    if not main_semantics:
        wr = -1  # v2.5 – v2.9 never pass the right bound to cuDNN: the mask type sets it
    elif wr > 0 and causal:
        # cudnn-frontend lets the band's right bound replace causal's 0, TE's own reference
        # keeps causal: the two disagree, so there is no single meaning to reproduce.
        raise rewrite.op_error(op, f"window_size_right={wr} with a causal mask_type={mask_type}: cuDNN and TE's reference "
                              "disagree on this band; supported are window_size_right -1 or 0 with causal masks")
    elif wr == 0 and causal:
        wr = -1  # the same band as causal's
    bottom_right = bool(cfg.get("bottom_right_diagonal", mask_type in BOTTOM_RIGHT_MASKS))
    scale = float(_attr(op, cfg, "scaling_factor"))
    dropout = float(cfg.get("dropout_probability", 0.0)) if bool(cfg.get("is_training", True)) else 0.0
    if not 0.0 <= dropout < 1.0:
        raise rewrite.op_error(op, f"dropout_probability={dropout} is outside [0, 1)")
    config = AttentionConfig(batch=n, q_heads=hq, kv_heads=hkv, q_len=sq, kv_len=skv, qk_dim=dq, v_dim=dv,
                             scale=scale, causal=causal, window_left=wl, window_right=wr, dropout=dropout,
                             block_q=block, block_k=block)
    masks = TokenMasks()
    q_segments = None
    max_segments = int(cfg.get("max_segments_per_seq", 1) or 1)
    if thd:
        if mask_type not in PADDING_MASKS:
            raise rewrite.op_error(op, f"mask_type={mask_type} with THD layout {LAYOUT_NAMES[layout]}: TE requires a "
                                  "padding mask type (1, 3 or 5) for packed sequences")
        count = n * max_segments
        q_segments = _thd_segments(op, call.q_cu, call.q_off, count, "q")
        kv_segments = _thd_segments(op, call.kv_cu, call.k_off, count, "kv")
        masks.q_segment, masks.q_position, q_len_tok = segment_tokens(q_segments.lengths, q_segments.starts, n, sq)
        masks.kv_segment, masks.kv_position, _ = segment_tokens(kv_segments.lengths, kv_segments.starts, n, skv)
        if bottom_right:
            kv_len_of_q = _segment_lookup(masks.q_segment, kv_segments.lengths, n, sq)
            masks.q_shift = builders.binary("subtract", kv_len_of_q, q_len_tok)
    elif mask_type in PADDING_MASKS:
        lq = _lengths(op, call.q_cu, n, "q_cu_seqlens")
        lkv = _lengths(op, call.kv_cu, n, "kv_cu_seqlens")
        masks.q_segment, _ = _padding_tokens(lq, n, sq)
        masks.kv_segment, _ = _padding_tokens(lkv, n, skv)
        if bottom_right:
            masks.q_shift = builders.broadcast_in_dim(builders.binary("subtract", lkv, lq), [n, sq], [0])
    elif bottom_right:
        config.shift = skv - sq
    bias = None
    if bias_type != 0:
        bshape = builders.shape_of(call.bias)
        if len(bshape) < 3 or bshape[-2:] != [sq, skv]:
            raise rewrite.op_error(op, f"bias of shape {bshape} is not [*B, heads, {sq}, {skv}]")
        hb = bshape[-3]
        nb = math.prod(bshape[:-3])
        if nb not in (1, n) or hb not in (1, hq):
            raise rewrite.op_error(op, f"bias of shape {bshape}: batch {nb} must be 1 or {n}, heads {hb} 1 or {hq}")
        bias = builders.reshape(call.bias, [nb, hb, sq, skv])
        if bias_type == 1:  # pre-scale: softmax(scale·(QKᵀ + bias)); ∂/∂bias picks up the scale
            bias = builders.binary("multiply", bias, builders.scalar_constant(scale, builders.element_type_of(bias), [nb, hb, sq, skv]))
            config.dbias_scale = scale
    seed = _seed_u64(op, call.seed) if call.seed is not None and dropout > 0 else None
    inputs = AttentionInputs(q, k, v, bias, masks, seed)
    return Prepared(config, inputs, batch_shape, packing, thd, q_segments, max_segments)


def _segment_lookup(segment: ir.Value, per_segment: ir.Value, batch: int, seq: int) -> ir.Value:
    """per_segment[segment − 1] for every token (0 where segment is 0)."""
    i32 = ir.IntegerType.get_signless(32)
    table = builders.concatenate([builders.scalar_constant(0, i32, [1]), builders.convert(per_segment, i32)], 0)
    return builders.gather(table, builders.reshape(segment, [batch, seq, 1]), [batch, seq], offset_dims=[],
                    collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=2, slice_sizes=[1])


# ---------------------------------------------------------------- rewrites
@register_pass("te-fused-attention",
               "Transformer Engine fused attention (forward and backward) → blockwise portable attention",
               targets=FORWARD + BACKWARD, preserves={Fact.CALL_TARGETS, Fact.OPS_BUT_ITS_CALLS, Fact.USES})
def lower_te_fused_attention(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    # One walk: the lowerings write no calls of these targets.
    forward, backward = walks.custom_calls_of(FORWARD, BACKWARD)
    for op in forward:
        lower_te_forward(op, options.attention_block)
    for op in backward:
        lower_te_backward(op, options.attention_block)


def _aux_layout(op: ir.Operation, shape: list[int], prepared: Prepared) -> str:
    """How softmax_aux holds the f32 LSE (TE's FusedAttnHelper / cuDNN stats layouts):
    "heads" [*B, h, s_q, 1]; THD with cuDNN ≥ 9.6 "tokens" [*B, s_q, h, 1] (token-major);
    THD with cuDNN < 9.6 "segments" [*B, h, s_q, M], read as [B·M, h, s_q] per segment slot
    and position from the segment's start."""
    cfg = prepared.config
    lead = prepared.batch_shape
    if shape[:-3] == lead and shape[-3:] == [cfg.q_heads, cfg.q_len, 1]:
        return "heads"
    if prepared.thd and shape[:-3] == lead and shape[-3:] == [cfg.q_len, cfg.q_heads, 1]:
        return "tokens"
    if prepared.thd and shape[:-3] == lead and shape[-3:] == [cfg.q_heads, cfg.q_len, prepared.max_segments]:
        return "segments"
    if shape[-1:] == [cfg.kv_len] and cfg.kv_len != 1:
        raise rewrite.op_error(op, f"softmax_aux of shape {shape} holds the full softmax matrix (TE's max512 backend), "
                              "whose cuDNN layout cannot be reproduced; only the arbitrary-seqlen backend's LSE is")
    raise rewrite.op_error(op, f"softmax_aux of shape {shape} is not [*B, {cfg.q_heads}, {cfg.q_len}, 1]"
                          + (f", [*B, {cfg.q_len}, {cfg.q_heads}, 1] or [*B, {cfg.q_heads}, {cfg.q_len}, "
                             f"{prepared.max_segments}]" if prepared.thd else ""))


def _aux_from_lse(op, lse: ir.Value, aux_type: ir.Type, prepared: Prepared) -> ir.Value:
    """LSE f32 [N, h, s_q] → softmax_aux of the call's type."""
    shape = list(ir.RankedTensorType(aux_type).shape)
    layout = _aux_layout(op, shape, prepared)
    if layout == "heads":
        value = lse
    elif layout == "tokens":
        value = builders.transpose(lse, [0, 2, 1])
    else:
        value = lse_to_segment_major(lse, prepared.q_segments.lengths, prepared.q_segments.starts)
    return builders.convert(builders.reshape(value, shape), ir.RankedTensorType(aux_type).element_type)


def _lse_from_aux(op, aux: ir.Value, prepared: Prepared) -> ir.Value:
    """softmax_aux → LSE f32 [N, h, s_q]."""
    cfg = prepared.config
    f32 = ir.F32Type.get()
    layout = _aux_layout(op, builders.shape_of(aux), prepared)
    if layout == "heads":
        return builders.convert(builders.reshape(aux, [cfg.batch, cfg.q_heads, cfg.q_len]), f32)
    if layout == "tokens":
        return builders.transpose(builders.convert(builders.reshape(aux, [cfg.batch, cfg.q_len, cfg.q_heads]), f32), [0, 2, 1])
    stats = builders.reshape(aux, [cfg.batch * prepared.max_segments, cfg.q_heads, cfg.q_len])
    masks = prepared.inputs.masks
    return lse_from_segment_major(stats, masks.q_segment, masks.q_position)


def _rng_state(op: ir.Operation, seed: ir.Value | None, rng_type: ir.Type, needed: bool) -> ir.Value:
    """rng_state: TE writes {int64 seed, int64 philox offset} per row.  Here: the seed's
    8 bytes as two little-endian u32 words, then zeros, in every row; the backward reads
    the seed back from there (lower_te_backward) and regenerates the same dropout mask."""
    t = ir.RankedTensorType(rng_type)
    element, shape = t.element_type, list(t.shape)
    u32 = ir.IntegerType.get_unsigned(32)
    if seed is None or element != u32 or not shape or shape[-1] < 2 or not _seed_readable(seed):
        if needed:
            raise rewrite.op_error(op, f"rng_state of type {rng_type} cannot carry the dropout seed to the backward "
                                  "(expected u32[..., 4])")
        return builders.scalar_constant(0, element, shape)
    u64 = ir.IntegerType.get_unsigned(64)
    seed64 = _seed_u64(op, seed)
    lo = builders.convert(builders.binary("and", seed64, builders.scalar_constant(0xFFFFFFFF, u64)), u32)
    hi = builders.convert(builders.binary("shift_right_logical", seed64, builders.scalar_constant(32, u64)), u32)
    row = builders.concatenate([builders.reshape(lo, [1]), builders.reshape(hi, [1])] +
                        ([builders.scalar_constant(0, u32, [shape[-1] - 2])] if shape[-1] > 2 else []), 0)
    return builders.broadcast_in_dim(row, shape, [len(shape) - 1])


def lower_te_forward(op: ir.Operation, block: int = 0) -> None:
    cfg = _config(op)
    call = _roles(op, forward=True)
    results = list(op.results)
    if len(results) < 3:
        raise rewrite.op_error(op, "expected (output, softmax_aux, rng_state, workspace) results")
    with rewrite.at(op):
        prepared = _prepare(op, call, cfg, block)
        _aux_layout(op, list(ir.RankedTensorType(results[1].type).shape), prepared)  # before building the loops
        out, lse = attention_forward(prepared.config, prepared.inputs)
        out = builders.reshape(out, list(ir.RankedTensorType(results[0].type).shape))
        aux = _aux_from_lse(op, lse, results[1].type, prepared)
        rng = _rng_state(op, call.seed, results[2].type, prepared.config.dropout > 0)
    rewrite.replace(op, [out, aux, rng] + [None if not rewrite.has_uses(r) else _zeros_at(op, r) for r in results[3:]])


def lower_te_backward(op: ir.Operation, block: int = 0) -> None:
    cfg = _config(op)
    call = _roles(op, forward=False)
    results = list(op.results)
    if len(results) < 4:
        raise rewrite.op_error(op, "expected (dq, dk, dv, dbias, workspace) results")
    with rewrite.at(op):
        prepared = _prepare(op, call, cfg, block)
        config = prepared.config
        if config.dropout > 0:
            # The forward stored its seed words at the start of rng_state.
            prepared.inputs.seed = _seed_u64(op, call.rng_state)
        lse = _lse_from_aux(op, call.aux, prepared)
        n = config.batch
        out = builders.reshape(call.out, [n, config.q_len, config.q_heads, config.v_dim])
        dout = builders.reshape(call.dout, [n, config.q_len, config.q_heads, config.v_dim])
        dq, dk, dv, dbias = attention_backward(config, prepared.inputs, out, dout, lse)
        grads = _pack_grads(op, prepared, dq, dk, dv, results)
        if len(builders.shape_of(call.bias)) and builders.shape_of(call.bias) != [0] and dbias is not None:
            grads.append(builders.reshape(dbias, list(ir.RankedTensorType(results[3].type).shape)))
        else:
            t = ir.RankedTensorType(results[3].type)
            grads.append(builders.scalar_constant(0, t.element_type, list(t.shape)))
    values: list[ir.Value | None] = list(grads)
    for r in results[4:]:
        values.append(None if not rewrite.has_uses(r) else _zeros_at(op, r))
    rewrite.replace(op, values)


def _pack_grads(op, prepared: Prepared, dq, dk, dv, results) -> list[ir.Value]:
    """dq, dk, dv in the call's result shapes: packed layouts return packed gradients in
    the first result(s) and empty tensors for the rest."""
    shapes = [list(ir.RankedTensorType(r.type).shape) for r in results[:3]]
    types = [ir.RankedTensorType(r.type).element_type for r in results[:3]]

    def empty(i):
        return builders.scalar_constant(0, types[i], shapes[i])

    def stack(parts, axis_shape):
        n, s = builders.shape_of(parts[0])[:2]
        h, d = builders.shape_of(parts[0])[2:]
        joined = builders.concatenate([builders.reshape(p, [n, s, 1, h, d]) for p in parts], 2)
        return builders.reshape(joined, axis_shape)

    if prepared.packing == "qkv":
        return [stack([dq, dk, dv], shapes[0]), empty(1), empty(2)]
    if prepared.packing == "kv":
        return [builders.reshape(dq, shapes[0]), stack([dk, dv], shapes[1]), empty(2)]
    return [builders.reshape(dq, shapes[0]), builders.reshape(dk, shapes[1]), builders.reshape(dv, shapes[2])]


def _zeros_at(op: ir.Operation, result: ir.Value) -> ir.Value:
    with rewrite.at(op):
        return builders.zeros_like_type(result.type)
