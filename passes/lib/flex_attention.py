"""cuDNN flex attention (jax 0.12's `score_mod`): the score function's math, shared by the
cudnn-fmha rewrite of the forward and backward calls.

jax's `_dot_product_attention_fwd_cuda_lowering` appends `score_mod_args` to the call's
operands and names the score function in `called_computations`: it maps the score
s0 = scale·Q·Kᵀ + bias (f32 [B, N, T, S]) and the args to the score the mask and softmax
see.  The backward call names instead the function's vjp, (dS, s0, *args) → dS0; the
forward function it needs to rebuild P comes from the forward call whose statistics the
backward reads.  A score function may mix any entries of the whole score matrix, so the
flex form is computed with the matrix materialized (not blockwise); GQA, bias and every
token mask of the blockwise core are kept (the visibility is the core's).
"""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.attention import NEG_INF, AttentionConfig, AttentionInputs, _token_data, _visibility


def _f32() -> ir.Type:
    return ir.F32Type.get()


def _full(value: float, shape: list[int]) -> ir.Value:
    return builders.scalar_constant(value, _f32(), shape)


def score_function(op: ir.Operation) -> tuple[ir.Operation, int] | None:
    """The call's score function (func.func) and its number of inputs; None for a call
    without one."""
    if "called_computations" not in op.attributes:
        return None
    names = [ir.FlatSymbolRefAttr(a).value for a in ir.ArrayAttr(op.attributes["called_computations"])]
    if not names:
        return None
    if len(names) != 1:
        raise rewrite.op_error(op, f"{len(names)} called computations; a flex attention call has one score function")
    top = op
    while top.parent is not None and top.parent.name != "builtin.module":
        top = top.parent
    for candidate in top.parent.regions[0].blocks[0].operations:
        candidate = candidate.operation
        if candidate.name == "func.func" and ir.StringAttr(candidate.attributes["sym_name"]).value == names[0]:
            inputs = ir.FunctionType(ir.TypeAttr(candidate.attributes["function_type"]).value).inputs
            return candidate, len(inputs)
    raise rewrite.op_error(op, f"the score function @{names[0]} is not in the module")


def _expand_heads(x: ir.Value, cfg: AttentionConfig) -> ir.Value:
    """K or V [N, S, Hkv, D] → [N, S, Hq, D]: query head h reads KV head h // group."""
    n, s, hkv, d = builders.shape_of(x)
    if cfg.group == 1:
        return builders.convert(x, _f32())
    full = builders.broadcast_in_dim(builders.convert(x, _f32()), [n, s, hkv, cfg.group, d], [0, 1, 2, 4])
    return builders.reshape(full, [n, s, cfg.q_heads, d])


def _sum_groups(x: ir.Value, cfg: AttentionConfig) -> ir.Value:
    """[N, Hq, S, D] → [N, Hkv, S, D], summing each KV head's query heads."""
    n, _, s, d = builders.shape_of(x)
    return builders.reduce(builders.reshape(x, [n, cfg.kv_heads, cfg.group, s, d]), [2], "add", 0.0)


def _visible(cfg: AttentionConfig, inp: AttentionInputs) -> ir.Value:
    """pred [N, Hq, T, S]: the core's per-token visibility."""
    n = cfg.batch
    q_seg, q_pos, q_shift = _token_data(inp.masks, n, cfg.q_len, cfg.q_len, "q")
    k_seg, k_pos, _ = _token_data(inp.masks, n, cfg.kv_len, cfg.kv_len, "kv")
    vis = _visibility(cfg, q_seg, q_pos, q_shift, k_seg, k_pos)
    return builders.broadcast_in_dim(vis, [n, cfg.q_heads, cfg.q_len, cfg.kv_len], [0, 2, 3])


def _base_scores(cfg: AttentionConfig, inp: AttentionInputs, k: ir.Value) -> ir.Value:
    """s0 = scale·Q·Kᵀ + bias, f32 [N, Hq, T, S]."""
    s = builders.dot_general(builders.convert(inp.q, _f32()), k, _f32(), [0, 2], [0, 2], [3], [3])
    s = builders.binary("multiply", s, _full(cfg.scale, builders.shape_of(s)))
    if inp.bias is not None:
        bias = builders.broadcast_in_dim(builders.convert(inp.bias, _f32()), builders.shape_of(s), [0, 1, 2, 3])
        s = builders.binary("add", s, bias)
    return s


def _call(fn: ir.Operation, args: list[ir.Value]) -> ir.Value:
    (out,) = rewrite.clone_function_body(fn, args)
    return out


def _probabilities(s: ir.Value, vis: ir.Value, lse: ir.Value) -> ir.Value:
    """P = exp(s − LSE) where visible and the row saw anything, else 0."""
    shape = builders.shape_of(s)
    finite = builders.compare(lse, _full(NEG_INF, builders.shape_of(lse)), "NE", "FLOAT")
    safe = builders.select(finite, lse, _full(0.0, builders.shape_of(lse)))
    p = builders.unary("exponential", builders.binary("subtract", s, builders.broadcast_in_dim(safe, shape, [0, 1, 2])))
    keep = builders.binary("and", vis, builders.broadcast_in_dim(finite, shape, [0, 1, 2]))
    return builders.select(keep, p, _full(0.0, shape))


def flex_forward(cfg: AttentionConfig, inp: AttentionInputs, fn: ir.Operation,
                 args: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
    """(O [N, Hq, T, Dv] in q's type, LSE f32 [N, Hq, T]); rows that see nothing: O = 0,
    LSE = −inf."""
    k, v = _expand_heads(inp.k, cfg), _expand_heads(inp.v, cfg)
    vis = _visible(cfg, inp)
    s = _call(fn, [_base_scores(cfg, inp, k), *args])
    shape = builders.shape_of(s)
    s = builders.select(vis, s, _full(NEG_INF, shape))
    m = builders.reduce(s, [3], "maximum", NEG_INF)
    rows = builders.shape_of(m)
    empty_max = builders.compare(m, _full(NEG_INF, rows), "EQ", "FLOAT")
    m_safe = builders.select(empty_max, _full(0.0, rows), m)
    e = builders.unary("exponential", builders.binary("subtract", s, builders.broadcast_in_dim(m_safe, shape, [0, 1, 2])))
    total = builders.reduce(e, [3], "add", 0.0)
    empty = builders.compare(total, _full(0.0, rows), "EQ", "FLOAT")
    safe_total = builders.select(empty, _full(1.0, rows), total)
    p = builders.binary("divide", e, builders.broadcast_in_dim(safe_total, shape, [0, 1, 2]))
    out = builders.dot_general(p, v, _f32(), [0, 1], [0, 2], [3], [1])  # [N, Hq, T, Dv]
    lse = builders.select(empty, _full(NEG_INF, rows), builders.binary("add", m_safe, builders.unary("log", safe_total)))
    return builders.convert(out, builders.element_type_of(inp.q)), lse


def flex_backward(cfg: AttentionConfig, inp: AttentionInputs, fwd_fn: ir.Operation, bwd_fn: ir.Operation,
                  args: list[ir.Value], out: ir.Value, dout: ir.Value, lse: ir.Value):
    """(dQ [N, Hq, T, D], dK [N, Hkv, S, D], dV [N, Hkv, S, Dv] in their inputs' types,
    dS0 f32 [N, Hq, T, S] — the gradient of the bias the score saw); `out`, `dout` token-major
    [N, T, Hq, Dv], `lse` f32 [N, Hq, T]."""
    k, v = _expand_heads(inp.k, cfg), _expand_heads(inp.v, cfg)
    q = builders.convert(inp.q, _f32())
    vis = _visible(cfg, inp)
    s0 = _base_scores(cfg, inp, k)
    s = builders.select(vis, _call(fwd_fn, [s0, *args]), _full(NEG_INF, builders.shape_of(s0)))
    p = _probabilities(s, vis, lse)
    do = builders.convert(dout, _f32())
    dp = builders.dot_general(do, v, _f32(), [0, 2], [0, 2], [3], [3])  # [N, Hq, T, S]
    delta = builders.reduce(builders.binary("multiply", do, builders.convert(out, _f32())), [3], "add", 0.0)  # [N, T, Hq]
    delta = builders.transpose(delta, [0, 2, 1])
    ds = builders.binary("multiply", p, builders.binary("subtract", dp, builders.broadcast_in_dim(delta, builders.shape_of(dp), [0, 1, 2])))
    ds0 = builders.select(vis, _call(bwd_fn, [ds, s0, *args]), _full(0.0, builders.shape_of(ds)))
    scale = _full(cfg.scale, [cfg.batch, cfg.q_heads, cfg.q_len, cfg.qk_dim])
    dq = builders.binary("multiply", builders.dot_general(ds0, k, _f32(), [0, 1], [0, 2], [3], [1]), scale)  # [N, Hq, T, D]
    dk = builders.dot_general(ds0, q, _f32(), [0, 1], [0, 2], [2], [1])  # [N, Hq, S, D]
    dk = builders.binary("multiply", dk, _full(cfg.scale, builders.shape_of(dk)))
    dv = builders.dot_general(p, do, _f32(), [0, 1], [0, 2], [2], [1])  # [N, Hq, S, Dv]
    return (builders.convert(dq, builders.element_type_of(inp.q)), builders.convert(_sum_groups(dk, cfg), builders.element_type_of(inp.k)),
            builders.convert(_sum_groups(dv, cfg), builders.element_type_of(inp.v)), ds0)
