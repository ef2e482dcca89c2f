"""cudnn-fmha: XLA's own cuDNN flash-attention custom-calls → portable attention.

Targets (xla/service/gpu/cublas_cudnn.cc; built by jax/_src/cudnn/fused_attention_stablehlo.py,
`_dot_product_attention_fwd_cuda_lowering` / `_bwd_cuda_lowering`, for
`jax.nn.dot_product_attention(implementation="cudnn")`): `__cudnn$fmhaSoftmax`,
`__cudnn$fmhaScaleBiasSoftmax`, `__cudnn$fmhaSoftmaxDropout`,
`__cudnn$fmhaScaleBiasSoftmaxDropout` and their `Backward` counterparts.

Forward operands: Q, K, V, [bias], [q_seqlen, kv_seqlen], [q_offsets, kv_offsets];
results: O (logical [B, N, T, H], laid out like Q), [stats = LSE f32 [B·M, N, T] when
training], workspace.  Backward operands: Q, K, V, stats, dO, [bias], O, [q_seqlen,
kv_seqlen], [q_offsets, kv_offsets]; results dQ, dK, dV (logical [B, N, T, H]), [dbias],
workspace.  Packed segments (max_seg_per_batch M > 1): lengths [B, M] and element offsets
[B, M+1] (token · N · H) as jax's `_fix_seqlen_offsets` writes them, attention within each
segment, statistics per segment slot and position from the segment's start.  `cudnn_fmha_backend_config` gives
fmha_scale (applied to Q·Kᵀ before the bias), mask_type (NO_MASK, PADDING, CAUSAL —
top-left only —, PADDING_CAUSAL), sliding_window_length w (keys j > i − w), dropout_rate
and seed, and the dot dimension numbers from which Q's layout follows (batch dims [0,2]:
BTNH; [0,1]: BNTH) (xla/stream_executor/cuda/cuda_dnn.cc,
GetCudnnFlashAttentionOperationGraph; xla/service/gpu/backend_configs.proto,
CudnnfMHABackendConfig).  The math is `passes.lib.attention`; dropout's mask is the
core's portable one, not cuDNN's.

Flex attention (jax 0.12's `score_mod`): the calls carry the score function's extra
arguments after every other operand and name it in `called_computations`
(passes.lib.flex_attention computes that form).
"""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.attention import (AttentionConfig, AttentionInputs, TokenMasks, attention_backward, attention_forward,
                                   lse_from_segment_major, lse_to_segment_major, segment_tokens)
from passes.lib.flex_attention import flex_backward, flex_forward, score_function
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

FORWARD = ("__cudnn$fmhaSoftmax", "__cudnn$fmhaScaleBiasSoftmax", "__cudnn$fmhaSoftmaxDropout",
           "__cudnn$fmhaScaleBiasSoftmaxDropout")
BACKWARD = tuple(t + "Backward" for t in FORWARD)
FP8 = ("__cudnn$fmhaSoftmaxF8", "__cudnn$fmhaSoftmaxBackwardF8")
MASK_TYPES = {0: "NO_MASK", 1: "PADDING", 2: "CAUSAL", 3: "PADDING_CAUSAL", 4: "ALIBI"}


def _config(op: ir.Operation) -> dict:
    cfg = rewrite.backend_config(op).get("cudnn_fmha_backend_config")
    if cfg is None:
        raise rewrite.op_error(op, "backend_config has no cudnn_fmha_backend_config")
    return cfg


def _mask_type(op, cfg: dict) -> str:
    # proto3 JSON: enums as names or numbers, and the default (NO_MASK) may be absent.
    value = cfg.get("mask_type", "NO_MASK")
    name = MASK_TYPES.get(int(value), str(value)) if str(value).isdigit() else str(value)
    if name not in ("NO_MASK", "PADDING", "CAUSAL", "PADDING_CAUSAL"):
        raise rewrite.op_error(op, f"mask_type {name} is not supported (NO_MASK, PADDING, CAUSAL, PADDING_CAUSAL are)")
    return name


def _segments_per_batch(op, cfg: dict) -> int:
    if cfg.get("is_paged_attention"):
        raise rewrite.op_error(op, "is_paged_attention: paged cuDNN attention (page tables) is not supported")
    return int(cfg.get("max_seg_per_batch", 1) or 1)


def _heads_major(op, cfg: dict, key: str) -> bool:
    """True for BNTH (batch dims [0,1]), False for BTNH (batch dims [0,2])."""
    dims = cfg.get(key) or {}
    batch = [int(d) for d in dims.get("lhs_batch_dimensions", [])]
    if batch == [0, 2]:
        return False
    if batch == [0, 1]:
        return True
    raise rewrite.op_error(op, f"{key} batch dimensions {batch} are neither BTNH ([0,2]) nor BNTH ([0,1])")


def _to_tokens(x: ir.Value, heads_major: bool) -> ir.Value:
    """Q/K/V/dO operand → [B, T, N, H] (the core's layout)."""
    return builders.transpose(x, [0, 2, 1, 3]) if heads_major else x


def _split_operands(op, rest: list[ir.Value], has_bias: bool, padding: bool, packed: bool, names: str):
    """(bias, q_seqlen, kv_seqlen, q_offsets, kv_offsets) from the optional operands, in
    the order jax writes them (_dot_product_attention_fwd/bwd_cuda_lowering)."""
    expected = (1 if has_bias else 0) + (2 if padding or packed else 0) + (2 if packed else 0)
    if len(rest) != expected:
        raise rewrite.op_error(op, f"{len(op.operands)} operands do not match {names}{', bias' if has_bias else ''}"
                              f"{', q_seqlen, kv_seqlen' if padding or packed else ''}"
                              f"{', q_offsets, kv_offsets' if packed else ''}")
    bias = rest.pop(0) if has_bias else None
    lengths = (rest.pop(0), rest.pop(0)) if padding or packed else (None, None)
    offsets = (rest.pop(0), rest.pop(0)) if packed else (None, None)
    return bias, lengths, offsets


class _Packed:
    """Per-side packed segments: slot lengths and token starts on the flattened axis."""

    def __init__(self, lengths: ir.Value, starts: ir.Value):
        self.lengths, self.starts = lengths, starts


def _packed_side(op, lengths: ir.Value, offsets: ir.Value, slots: int, stride: int) -> _Packed:
    """cuDNN reads B·M lengths and the first B·M element offsets; jax scaled each token
    offset by the query's N·H (the token stride of BTNH)."""
    i32 = ir.IntegerType.get_signless(32)
    flat_len = builders.convert(builders.reshape(lengths, [builders.shape_of(lengths)[0] * builders.shape_of(lengths)[1]]), i32)
    flat_off = builders.convert(builders.reshape(offsets, [builders.shape_of(offsets)[0] * builders.shape_of(offsets)[1]]), i32)
    if builders.shape_of(flat_len)[0] < slots or builders.shape_of(flat_off)[0] < slots:
        raise rewrite.op_error(op, f"packed lengths {lengths.type} / offsets {offsets.type} hold fewer than {slots} segments")
    starts = builders.binary("divide", builders.slice_(flat_off, [0], [slots]), builders.scalar_constant(stride, i32, [slots]))
    return _Packed(builders.slice_(flat_len, [0], [slots]), starts)


def _prepare(op, cfg: dict, q, k, v, bias, lengths, offsets, heads_major: bool, block: int):
    mask = _mask_type(op, cfg)
    segments = _segments_per_batch(op, cfg)
    q, k, v = (_to_tokens(x, heads_major) for x in (q, k, v))
    n, sq, hq, dq = builders.shape_of(q)
    _, skv, hkv, _ = builders.shape_of(k)
    window = int(cfg.get("sliding_window_length", 0) or 0)
    dropout = float(cfg.get("dropout_rate", 0.0) or 0.0)
    if not 0.0 <= dropout < 1.0:
        raise rewrite.op_error(op, f"dropout_rate={dropout} is outside [0, 1)")
    config = AttentionConfig(batch=n, q_heads=hq, kv_heads=hkv, q_len=sq, kv_len=skv, qk_dim=dq,
                             v_dim=builders.shape_of(v)[3], scale=float(cfg.get("fmha_scale", 1.0)),
                             causal=mask in ("CAUSAL", "PADDING_CAUSAL"),
                             window_left=window - 1 if window > 0 else -1, dropout=dropout,
                             block_q=block, block_k=block)
    masks = TokenMasks()
    i32 = ir.IntegerType.get_signless(32)
    q_packed = None
    if segments > 1:
        if heads_major or hq != hkv:
            raise rewrite.op_error(op, f"max_seg_per_batch={segments} with {'BNTH' if heads_major else 'GQA'}: jax scales "
                                  "packed offsets by the query's N·H as BTNH token strides, which only mean tokens "
                                  "for BTNH without grouped KV heads")
        slots = n * segments
        q_packed = _packed_side(op, lengths[0], offsets[0], slots, hq * dq)
        kv_packed = _packed_side(op, lengths[1], offsets[1], slots, hq * dq)
        masks.q_segment, masks.q_position, _ = segment_tokens(q_packed.lengths, q_packed.starts, n, sq)
        masks.kv_segment, masks.kv_position, _ = segment_tokens(kv_packed.lengths, kv_packed.starts, n, skv)
    elif mask.startswith("PADDING"):
        for side, length, seq in (("q", lengths[0], sq), ("kv", lengths[1], skv)):
            index = builders.iota(i32, [n, seq], 1)
            length = builders.convert(builders.reshape(length, [n]), i32)
            inside = builders.compare(index, builders.broadcast_in_dim(length, [n, seq], [0]), "LT", "SIGNED")
            setattr(masks, f"{side}_segment",
                    builders.select(inside, builders.scalar_constant(1, i32, [n, seq]), builders.scalar_constant(0, i32, [n, seq])))
    seed = None
    if dropout > 0:
        seed = builders.scalar_constant(int(cfg.get("seed", 0)) & (2**64 - 1), ir.IntegerType.get_unsigned(64))
    return config, AttentionInputs(q, k, v, bias, masks, seed), q_packed


@register_pass("cudnn-fmha",
               "XLA cuDNN fused attention (__cudnn$fmha*, forward and backward) → blockwise portable attention",
               targets=FORWARD + BACKWARD + FP8, preserves={Fact.CALL_TARGETS, Fact.USES})
def lower_cudnn_fmha(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(FP8):
        raise rewrite.op_error(op, "FP8 cuDNN attention (descale/scale factors, amax outputs) is not supported")
    # A flex backward rebuilds P with its forward's score function: found before the
    # forward calls are rewritten.
    forward_functions = [(op, _forward_score_function(op)) for op in walks.custom_calls(BACKWARD)]
    for op in walks.custom_calls(FORWARD):
        lower_cudnn_fmha_forward(op, options.attention_block)
    for op, forward_fn in forward_functions:
        lower_cudnn_fmha_backward(op, options.attention_block, forward_fn)


# Ops between a forward call's statistics and the backward's stats operand in XLA's dumps.
_PASS_THROUGH = ("stablehlo.reshape", "stablehlo.bitcast_convert", "stablehlo.convert", "stablehlo.transpose",
                 "mhlo.copy", "stablehlo.copy")


def _forward_score_function(op: ir.Operation) -> ir.Operation | None:
    """For a flex backward call: the score function of the forward call whose statistics it
    reads (its 4th operand); None for a backward without a score function."""
    if score_function(op) is None:
        return None
    value = op.operands[3]
    producer = rewrite.defining_op(value)
    while producer is not None and producer.name in _PASS_THROUGH:
        producer = rewrite.defining_op(producer.operands[0])
    if producer is None or producer.name != "stablehlo.custom_call" or rewrite.call_target(producer) not in FORWARD:
        raise rewrite.op_error(op, "flex attention backward: its statistics do not come from a forward cuDNN call, "
                              "whose score function the backward needs")
    found = score_function(producer)
    if found is None:
        raise rewrite.op_error(op, "flex attention backward: its forward call has no score function")
    return found[0]


def _flex_args(op, ops: list, fn_inputs: int, leading: int) -> tuple[list, list]:
    """(the call's other operands, the score function's extra arguments: its inputs but the
    `leading` score tensors, the call's last operands)."""
    count = fn_inputs - leading
    if count < 0 or count > len(ops) - 3:
        raise rewrite.op_error(op, f"the score function takes {fn_inputs} inputs; the call has {len(ops)} operands")
    return (ops[: len(ops) - count], ops[len(ops) - count:]) if count else (ops, [])


def _check_flex(op, cfg: dict) -> None:
    if _segments_per_batch(op, cfg) > 1 or float(cfg.get("dropout_rate", 0.0) or 0.0) > 0:
        raise rewrite.op_error(op, "flex attention (a score function) with packed segments or dropout is not supported")


def lower_cudnn_fmha_forward(op: ir.Operation, block: int = 0) -> None:
    cfg = _config(op)
    target = rewrite.call_target(op)
    ops = list(op.operands)
    flex = score_function(op)
    score_args: list = []
    if flex is not None:
        _check_flex(op, cfg)
        ops, score_args = _flex_args(op, ops, flex[1], 1)
    padding = _mask_type(op, cfg).startswith("PADDING")
    packed = _segments_per_batch(op, cfg) > 1
    bias, lengths, offsets = _split_operands(op, ops[3:], "ScaleBias" in target, padding, packed, "Q, K, V")
    results = list(op.results)
    training = len(results) == 3
    heads_major = _heads_major(op, cfg, "bmm1_dot_dimension_numbers")
    with rewrite.at(op):
        config, inputs, q_packed = _prepare(op, cfg, *ops[:3], bias, lengths, offsets, heads_major, block)
        if flex is not None:
            out, lse = flex_forward(config, inputs, flex[0], score_args)  # [B, N, T, Hv], [B, N, T]
            values = [out]
        else:
            out, lse = attention_forward(config, inputs)  # [B, T, N, Hv], [B, N, T]
            values = [builders.transpose(out, [0, 2, 1, 3])]  # the result is logically [B, N, T, Hv]
        if training:
            if q_packed is not None:
                lse = lse_to_segment_major(lse, q_packed.lengths, q_packed.starts)  # [B·M, N, T]
            values.append(_stats_value(op, lse, results[1].type))
    values += [None if not rewrite.has_uses(r) else _zeros(op, r) for r in results[len(values):]]
    rewrite.replace(op, values)


def _stats_value(op, lse: ir.Value, stats_type: ir.Type) -> ir.Value:
    t = ir.RankedTensorType(stats_type)
    if math.prod(builders.shape_of(lse)) != math.prod(t.shape):
        raise rewrite.op_error(op, f"stats of type {stats_type} cannot hold the LSE f32{builders.shape_of(lse)}")
    return builders.convert(builders.reshape(lse, list(t.shape)), t.element_type)


def lower_cudnn_fmha_backward(op: ir.Operation, block: int = 0, forward_fn: ir.Operation | None = None) -> None:
    cfg = _config(op)
    target = rewrite.call_target(op)
    ops = list(op.operands)
    flex = score_function(op)
    score_args: list = []
    if flex is not None:
        _check_flex(op, cfg)
        ops, score_args = _flex_args(op, ops, flex[1], 2)
    if len(ops) < 6:
        raise rewrite.op_error(op, f"{len(ops)} operands: the backward has at least Q, K, V, stats, dO, O")
    q, k, v, stats, dout = ops[:5]
    padding = _mask_type(op, cfg).startswith("PADDING")
    packed = _segments_per_batch(op, cfg) > 1
    has_bias = "ScaleBias" in target
    rest = ops[5:]
    # O follows dO and the optional bias.
    out = rest.pop(1 if has_bias else 0)
    bias, lengths, offsets = _split_operands(op, rest, has_bias, padding, packed, "Q, K, V, stats, dO, O")
    results = list(op.results)
    heads_major = _heads_major(op, cfg, "bmm2_grad_gemm2_dot_dimension_numbers") \
        if "bmm2_grad_gemm2_dot_dimension_numbers" in cfg else _heads_major(op, cfg, "bmm1_dot_dimension_numbers")
    with rewrite.at(op):
        config, inputs, q_packed = _prepare(op, cfg, q, k, v, bias, lengths, offsets, heads_major, block)
        stats = builders.convert(stats, ir.F32Type.get())
        if q_packed is not None:
            lse = lse_from_segment_major(builders.reshape(stats, [builders.shape_of(stats)[0], config.q_heads, config.q_len]),
                                         inputs.masks.q_segment, inputs.masks.q_position)
        else:
            lse = builders.reshape(stats, [config.batch, config.q_heads, config.q_len])
        if flex is not None:
            dq, dk, dv, ds0 = flex_backward(config, inputs, forward_fn, flex[0], score_args,
                                            _to_tokens(out, heads_major), _to_tokens(dout, heads_major), lse)
            values = [dq, dk, dv]  # logical [B, N, T, H]
            dbias = _reduce_to(ds0, bias) if bias is not None else None
        else:
            dq, dk, dv, dbias = attention_backward(config, inputs, _to_tokens(out, heads_major),
                                                   _to_tokens(dout, heads_major), lse)
            values = [builders.transpose(x, [0, 2, 1, 3]) for x in (dq, dk, dv)]  # logical [B, N, T, H]
        if has_bias and len(results) > 4:
            values.append(dbias)
    values += [None if not rewrite.has_uses(r) else _zeros(op, r) for r in results[len(values):]]
    rewrite.replace(op, values)


def _reduce_to(grad: ir.Value, bias: ir.Value) -> ir.Value:
    """∂L/∂bias from ∂L/∂(the broadcast bias) [B, N, T, S]: summed over the bias's size-1
    batch and head dims."""
    shape = builders.shape_of(bias)
    dims = [i for i in (0, 1) if shape[i] == 1 and builders.shape_of(grad)[i] != 1]
    if dims:
        grad = builders.reshape(builders.reduce(grad, dims, "add", 0.0), shape)
    return builders.convert(grad, builders.element_type_of(bias))


def _zeros(op: ir.Operation, result: ir.Value) -> ir.Value:
    with rewrite.at(op):
        return builders.zeros_like_type(result.type)
