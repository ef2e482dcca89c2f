"""cudnn-fmha: XLA's own cuDNN flash-attention custom-calls → portable attention.

Targets (xla/service/gpu/cublas_cudnn.cc; built by jax/_src/cudnn/fused_attention_stablehlo.py,
`_dot_product_attention_fwd_cuda_lowering` / `_bwd_cuda_lowering`, for
`jax.nn.dot_product_attention(implementation="cudnn")`): `__cudnn$fmhaSoftmax`,
`__cudnn$fmhaScaleBiasSoftmax`, `__cudnn$fmhaSoftmaxDropout`,
`__cudnn$fmhaScaleBiasSoftmaxDropout` and their `Backward` counterparts.

Forward operands: Q, K, V, [bias], [q_seqlen, kv_seqlen]; results: O (logical
[B, N, T, H], laid out like Q), [stats = LSE f32 [B, N, T] when training], workspace.
Backward operands: Q, K, V, stats, dO, [bias], O, [q_seqlen, kv_seqlen]; results dQ, dK,
dV (logical [B, N, T, H]), [dbias], workspace.  `cudnn_fmha_backend_config` gives
fmha_scale (applied to Q·Kᵀ before the bias), mask_type (NO_MASK, PADDING, CAUSAL —
top-left only —, PADDING_CAUSAL), sliding_window_length w (keys j > i − w), dropout_rate
and seed, and the dot dimension numbers from which Q's layout follows (batch dims [0,2]:
BTNH; [0,1]: BNTH) (xla/stream_executor/cuda/cuda_dnn.cc,
GetCudnnFlashAttentionOperationGraph; xla/service/gpu/backend_configs.proto,
CudnnfMHABackendConfig).  The math is `passes.attention_core`; dropout's mask is the
core's portable one, not cuDNN's.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from passes import rewrite as rw
from passes.attention_core import AttentionConfig, AttentionInputs, TokenMasks, attention_backward, attention_forward
from passes.registry import PassOptions, register_pass

FORWARD = ("__cudnn$fmhaSoftmax", "__cudnn$fmhaScaleBiasSoftmax", "__cudnn$fmhaSoftmaxDropout",
           "__cudnn$fmhaScaleBiasSoftmaxDropout")
BACKWARD = tuple(t + "Backward" for t in FORWARD)
MASK_TYPES = {0: "NO_MASK", 1: "PADDING", 2: "CAUSAL", 3: "PADDING_CAUSAL", 4: "ALIBI"}


def _config(op: ir.Operation) -> dict:
    cfg = rw.backend_config(op).get("cudnn_fmha_backend_config")
    if cfg is None:
        raise rw.op_error(op, "backend_config has no cudnn_fmha_backend_config")
    return cfg


def _mask_type(op, cfg: dict) -> str:
    # proto3 JSON: enums as names or numbers, and the default (NO_MASK) may be absent.
    value = cfg.get("mask_type", "NO_MASK")
    name = MASK_TYPES.get(int(value), str(value)) if str(value).isdigit() else str(value)
    if name not in ("NO_MASK", "PADDING", "CAUSAL", "PADDING_CAUSAL"):
        raise rw.op_error(op, f"mask_type {name} is not supported (NO_MASK, PADDING, CAUSAL, PADDING_CAUSAL are)")
    return name


def _heads_major(op, cfg: dict, key: str) -> bool:
    """True for BNTH (batch dims [0,1]), False for BTNH (batch dims [0,2])."""
    dims = cfg.get(key) or {}
    batch = [int(d) for d in dims.get("lhs_batch_dimensions", [])]
    if batch == [0, 2]:
        return False
    if batch == [0, 1]:
        return True
    raise rw.op_error(op, f"{key} batch dimensions {batch} are neither BTNH ([0,2]) nor BNTH ([0,1])")


def _to_tokens(x: ir.Value, heads_major: bool) -> ir.Value:
    """Q/K/V/dO operand → [B, T, N, H] (the core's layout)."""
    return rw.build.transpose(x, [0, 2, 1, 3]) if heads_major else x


def _prepare(op, cfg: dict, q, k, v, bias, q_len, kv_len, heads_major: bool, block: int):
    b = rw.build
    if int(cfg.get("max_seg_per_batch", 1) or 1) > 1 or cfg.get("is_paged_attention"):
        raise rw.op_error(op, "packed (max_seg_per_batch > 1) or paged cuDNN attention is not supported")
    mask = _mask_type(op, cfg)
    q, k, v = (_to_tokens(x, heads_major) for x in (q, k, v))
    n, sq, hq, dq = b.shape_of(q)
    _, skv, hkv, _ = b.shape_of(k)
    window = int(cfg.get("sliding_window_length", 0) or 0)
    dropout = float(cfg.get("dropout_rate", 0.0) or 0.0)
    config = AttentionConfig(batch=n, q_heads=hq, kv_heads=hkv, q_len=sq, kv_len=skv, qk_dim=dq,
                             v_dim=b.shape_of(v)[3], scale=float(cfg.get("fmha_scale", 1.0)),
                             causal=mask in ("CAUSAL", "PADDING_CAUSAL"),
                             window_left=window - 1 if window > 0 else -1, dropout=dropout,
                             block_q=block, block_k=block)
    masks = TokenMasks()
    if mask.startswith("PADDING"):
        i32 = ir.IntegerType.get_signless(32)
        for side, lengths, seq in (("q", q_len, sq), ("kv", kv_len, skv)):
            index = b.iota(i32, [n, seq], 1)
            inside = b.compare(index, b.broadcast_in_dim(b.convert(lengths, i32), [n, seq], [0]), "LT", "SIGNED")
            setattr(masks, f"{side}_segment",
                    b.select(inside, b.scalar_constant(1, i32, [n, seq]), b.scalar_constant(0, i32, [n, seq])))
    seed = None
    if dropout > 0:
        seed = b.scalar_constant(int(cfg.get("seed", 0)) & (2**64 - 1), ir.IntegerType.get_unsigned(64))
    return config, AttentionInputs(q, k, v, bias, masks, seed)


@register_pass("cudnn-fmha",
               "XLA cuDNN fused attention (__cudnn$fmha*, forward and backward) → blockwise portable attention",
               targets=FORWARD + BACKWARD)
def lower_cudnn_fmha(module: ir.Module, options: PassOptions) -> None:
    for op in rw.custom_calls(module, FORWARD):
        lower_cudnn_fmha_forward(op, options.attention_block)
    for op in rw.custom_calls(module, BACKWARD):
        lower_cudnn_fmha_backward(op, options.attention_block)


def lower_cudnn_fmha_forward(op: ir.Operation, block: int = 0) -> None:
    b = rw.build
    cfg = _config(op)
    target = rw.call_target(op)
    has_bias = "ScaleBias" in target
    ops = list(op.operands)
    q, k, v = ops[:3]
    rest = ops[3:]
    bias = rest.pop(0) if has_bias else None
    padding = _mask_type(op, cfg).startswith("PADDING")
    q_len, kv_len = (rest[0], rest[1]) if padding and len(rest) >= 2 else (None, None)
    if len(rest) != (2 if padding else 0):
        raise rw.op_error(op, f"{len(ops)} operands do not match Q, K, V{', bias' if has_bias else ''}"
                              f"{', q_seqlen, kv_seqlen' if padding else ''}")
    results = list(op.results)
    training = len(results) == 3
    heads_major = _heads_major(op, cfg, "bmm1_dot_dimension_numbers")
    with rw.at(op):
        config, inputs = _prepare(op, cfg, q, k, v, bias, q_len, kv_len, heads_major, block)
        out, lse = attention_forward(config, inputs)  # [B, T, N, Hv], [B, N, T]
        values = [b.transpose(out, [0, 2, 1, 3])]  # the result is logically [B, N, T, Hv]
        if training:
            values.append(b.reshape(lse, list(ir.RankedTensorType(results[1].type).shape)))
    values += [None if not rw.has_uses(r) else _zeros(op, r) for r in results[len(values):]]
    rw.replace(op, values)


def lower_cudnn_fmha_backward(op: ir.Operation, block: int = 0) -> None:
    b = rw.build
    cfg = _config(op)
    target = rw.call_target(op)
    has_bias = "ScaleBias" in target
    ops = list(op.operands)
    q, k, v, stats, dout = ops[:5]
    rest = ops[5:]
    bias = rest.pop(0) if has_bias else None
    out = rest.pop(0)
    padding = _mask_type(op, cfg).startswith("PADDING")
    q_len, kv_len = (rest[0], rest[1]) if padding and len(rest) >= 2 else (None, None)
    if len(rest) != (2 if padding else 0):
        raise rw.op_error(op, f"{len(ops)} operands do not match Q, K, V, stats, dO{', bias' if has_bias else ''}, O"
                              f"{', q_seqlen, kv_seqlen' if padding else ''}")
    results = list(op.results)
    heads_major = _heads_major(op, cfg, "bmm2_grad_gemm2_dot_dimension_numbers") \
        if "bmm2_grad_gemm2_dot_dimension_numbers" in cfg else _heads_major(op, cfg, "bmm1_dot_dimension_numbers")
    with rw.at(op):
        config, inputs = _prepare(op, cfg, q, k, v, bias, q_len, kv_len, heads_major, block)
        lse = b.reshape(b.convert(stats, ir.F32Type.get()), [config.batch, config.q_heads, config.q_len])
        dq, dk, dv, dbias = attention_backward(config, inputs, _to_tokens(out, heads_major),
                                               _to_tokens(dout, heads_major), lse)
        values = [b.transpose(x, [0, 2, 1, 3]) for x in (dq, dk, dv)]  # logical [B, N, T, H]
        if has_bias:
            values.append(dbias)
    values += [None if not rw.has_uses(r) else _zeros(op, r) for r in results[len(values):]]
    rw.replace(op, values)


def _zeros(op: ir.Operation, result: ir.Value) -> ir.Value:
    with rw.at(op):
        return rw.build.zeros_like_type(result.type)
