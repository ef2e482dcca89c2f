"""Portable fused attention: one core for every fused-attention custom-call front-end
(Transformer Engine's `te_fused_attn_*`, XLA's `__cudnn$fmha*`).

Forward:  s = scale·(Q·Kᵀ) + bias, invisible keys → -inf; P = softmax(s) (dropout on P);
          O = P·V; LSE = log Σ exp(s) per query row (natural log, f32).
Backward: D = rowsum(dO∘O); P = exp(s − LSE); dV = Pdᵀ·dO; dP = dO·Vᵀ; dS = P∘(dP − D);
          dQ = scale·dS·K; dK = scale·dSᵀ·Q; dbias = Σ dS over the bias's broadcast dims.
Grouped-query attention: query head h uses key/value head h // (Hq/Hkv); dK and dV sum
over each group (computed without repeating K or V: the group's query heads are folded
into the query rows of one batched matmul per KV head).

Memory: the score matrix is never materialized for a whole sequence.  Query blocks (outer
`stablehlo.while`) and key/value blocks (inner `stablehlo.while`) of sizes chosen from the
shapes are combined with an online softmax (running max, running sum, rescaled
accumulator: FlashAttention-2).  Under a causal or sliding-window mask the inner loop only
visits the blocks inside the band; fully masked blocks are skipped, not computed.  The
backward loops over key/value blocks outside and query blocks inside, recomputing P from
the LSE, accumulating dK/dV per block and dQ by read-add-write.

Visibility is described per token, which covers every mask the front-ends have: a query
token (segment, position, diagonal shift) sees a key token (segment, position) iff both
are in the same non-zero segment and, if causal, k_pos ≤ q_pos + shift, and, with a
window, q_pos + shift − left ≤ k_pos ≤ q_pos + shift + right.  Padding is segment 0;
packed (THD) sequences are segments 1, 2, ...; bottom-right alignment is the shift.
Rows that see nothing produce O = 0, LSE = −inf and zero gradients (never NaN).

Computation is in f32 for bf16/f16 inputs (as cuDNN computes); outputs return to the
input type.  Dropout draws its mask from `stablehlo.rng_bit_generator` seeded from the
call's seed and the block coordinates; the backward regenerates the same mask.  It cannot
equal cuDNN's Philox stream bit for bit (cuDNN's element-to-counter mapping and offsets
are internal); only its distribution matches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders

NEG_INF = float("-inf")


@dataclass
class AttentionConfig:
    batch: int
    q_heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    qk_dim: int
    v_dim: int
    scale: float
    causal: bool = False
    window_left: int = -1  # -1: unbounded
    window_right: int = -1
    dropout: float = 0.0
    # Static diagonal shift (bottom-right alignment without per-batch lengths).
    shift: int = 0
    block_q: int = 0  # 0: chosen from the shapes
    block_k: int = 0
    # dbias is ∂L/∂(the bias the core adds) times this: a front-end that feeds the core
    # scale·bias (pre-scale bias) wants ∂L/∂bias = scale·dS.
    dbias_scale: float = 1.0

    @property
    def group(self) -> int:
        return self.q_heads // self.kv_heads

    def blocks(self) -> tuple[int, int]:
        """(query block, key block): the given sizes, else whole sequences (the direct form)
        for short sequences (≤ DIRECT_MAX_LEN) whose whole score matrix stays within
        SCORE_BLOCK_ELEMENTS, else the largest power-of-two square block (16 … 512) whose
        scores for every batch entry and head fit it."""
        if self.block_q or self.block_k:
            return self.block_q or self.block_k, self.block_k or self.block_q
        rows = self.batch * self.q_heads
        if max(self.q_len, self.kv_len) <= DIRECT_MAX_LEN and rows * self.q_len * self.kv_len <= SCORE_BLOCK_ELEMENTS:
            return self.q_len, self.kv_len
        size = 512
        while size > 16 and rows * size * size > SCORE_BLOCK_ELEMENTS:
            size //= 2
        return min(size, self.q_len), min(size, self.kv_len)


# One f32 score block (and its exponentials, P and dP in the backward) for every batch
# entry and head: 2^26 elements are 256 MB, so a few live copies stay around a GB.
SCORE_BLOCK_ELEMENTS = 2**26
DIRECT_MAX_LEN = 1024


@dataclass
class TokenMasks:
    """Per-token visibility data (see the module docstring); i32 [N, S] each, or None
    for the trivial value (segment 1 everywhere, position = index, shift = config.shift)."""

    q_segment: ir.Value | None = None
    q_position: ir.Value | None = None
    q_shift: ir.Value | None = None
    kv_segment: ir.Value | None = None
    kv_position: ir.Value | None = None

    @property
    def static_band(self) -> bool:
        """Whether block skipping may use token indices as positions."""
        return self.q_position is None and self.kv_position is None and self.q_shift is None


@dataclass
class AttentionInputs:
    """q [N, Sq, Hq, D], k [N, Skv, Hkv, D], v [N, Skv, Hkv, Dv] (token-major), optional
    bias [Nb, Hb, Sq, Skv] with Nb ∈ {1, N}, Hb ∈ {1, Hq}, optional u64 seed scalar."""

    q: ir.Value
    k: ir.Value
    v: ir.Value
    bias: ir.Value | None = None
    masks: TokenMasks = field(default_factory=TokenMasks)
    seed: ir.Value | None = None


# ------------------------------------------------------------------ small builders
def _i32(value: int) -> ir.Value:
    return builders.scalar_constant(value, ir.IntegerType.get_signless(32))


def _f32() -> ir.Type:
    return ir.F32Type.get()


def _i32_type() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def _full(value: float, shape: list[int], element: ir.Type | None = None) -> ir.Value:
    return builders.scalar_constant(value, element or _f32(), shape)


def _mul(x, y):
    return builders.binary("multiply", x, y)


def _add(x, y):
    return builders.binary("add", x, y)


def _sub(x, y):
    return builders.binary("subtract", x, y)


def _bcast(x: ir.Value, shape: list[int], dims: list[int]) -> ir.Value:
    return builders.broadcast_in_dim(x, shape, dims)


def _scalar_mul(x: ir.Value, value: float) -> ir.Value:
    return _mul(x, _full(value, builders.shape_of(x), builders.element_type_of(x)))


def _pad_axis(x: ir.Value, axis: int, size: int) -> ir.Value:
    """Zero-pad one axis at its end up to `size`."""
    shape = builders.shape_of(x)
    if shape[axis] == size:
        return x
    high = [0] * len(shape)
    high[axis] = size - shape[axis]
    return builders.pad(x, [0] * len(shape), high)


def _for_range(lo: ir.Value, hi: ir.Value, carried: list[ir.Value], invariants: list[ir.Value], body):
    """A counted loop i = lo .. hi-1 (i32 scalars).  `body(i, carried, invariants)`
    returns new carried values.  Invariants ride along as loop values, so no region
    captures a value from outside (every consumer of StableHLO accepts that form)."""
    n_carried = len(carried)

    def cond(i, *rest):
        return builders.compare(i, rest[0], "LT", "SIGNED")

    def step(i, end, *rest):
        new = body(i, list(rest[:n_carried]), list(rest[n_carried:]))
        return [_add(i, _i32(1)), end, *new, *rest[n_carried:]]

    results = builders.while_loop([lo, hi, *carried, *invariants], cond, step)
    return results[2:2 + n_carried]


def _floordiv(x: ir.Value, d: int) -> ir.Value:
    """Floor division of an i32 scalar by a positive constant (correct for negatives)."""
    q = builders.binary("divide", x, _i32(d))
    r = builders.binary("remainder", x, _i32(d))
    fix = builders.select(builders.binary("and", builders.compare(r, _i32(0), "NE", "SIGNED"), builders.compare(x, _i32(0), "LT", "SIGNED")),
                   _i32(1), _i32(0))
    return _sub(q, fix)


def _clamp_i32(lo: int, x: ir.Value, hi: int) -> ir.Value:
    return builders.clamp(_i32(lo), x, _i32(hi))


# ------------------------------------------------------------------------ masks
def _token_data(masks: TokenMasks, n: int, padded: int, real: int, side: str):
    """(segment, position, shift) i32 [N, padded] for one side; padding rows beyond the
    real length get segment 0."""
    i32 = _i32_type()
    index = builders.iota(i32, [n, padded], 1)
    in_range = builders.compare(index, _full(real, [n, padded], i32), "LT", "SIGNED")
    default_segment = builders.select(in_range, _full(1, [n, padded], i32), _full(0, [n, padded], i32))
    segment = getattr(masks, f"{side}_segment")
    position = getattr(masks, f"{side}_position")
    segment = default_segment if segment is None else builders.select(in_range, _pad_axis(segment, 1, padded),
                                                               _full(0, [n, padded], i32))
    position = index if position is None else _pad_axis(position, 1, padded)
    shift = None
    if side == "q":
        shift = masks.q_shift
        shift = None if shift is None else _pad_axis(shift, 1, padded)
    return segment, position, shift


def _visibility(cfg: AttentionConfig, q_seg, q_pos, q_shift, k_seg, k_pos) -> ir.Value:
    """pred [N, Bq, Bk] from per-token blocks ([N, Bq] and [N, Bk])."""
    n, bq = builders.shape_of(q_seg)
    bk = builders.shape_of(k_seg)[1]
    shape = [n, bq, bk]
    qs, ks = _bcast(q_seg, shape, [0, 1]), _bcast(k_seg, shape, [0, 2])
    vis = builders.binary("and", builders.compare(qs, ks, "EQ", "SIGNED"), builders.compare(qs, _full(0, shape, _i32_type()), "NE", "SIGNED"))
    if cfg.causal or cfg.window_left >= 0 or cfg.window_right >= 0:
        qp, kp = _bcast(q_pos, shape, [0, 1]), _bcast(k_pos, shape, [0, 2])
        diag = _add(qp, _bcast(q_shift, shape, [0, 1]) if q_shift is not None else _full(cfg.shift, shape, _i32_type()))
        if cfg.causal:
            vis = builders.binary("and", vis, builders.compare(kp, diag, "LE", "SIGNED"))
        if cfg.window_left >= 0:
            vis = builders.binary("and", vis, builders.compare(kp, _sub(diag, _full(cfg.window_left, shape, _i32_type())), "GE", "SIGNED"))
        if cfg.window_right >= 0:
            vis = builders.binary("and", vis, builders.compare(kp, _add(diag, _full(cfg.window_right, shape, _i32_type())), "LE", "SIGNED"))
    return vis


def _to_score_layout(x: ir.Value, cfg: AttentionConfig) -> ir.Value:
    """[N, Bq, Bk] (per batch, per token pair) → [N, Hkv, G·Bq, Bk]."""
    n, bq, bk = builders.shape_of(x)
    full = _bcast(x, [n, cfg.kv_heads, cfg.group, bq, bk], [0, 3, 4])
    return builders.reshape(full, [n, cfg.kv_heads, cfg.group * bq, bk])


def _kv_block_range(cfg: AttentionConfig, masks: TokenMasks, qb: ir.Value, bq: int, bk: int, nkb: int):
    """Key/value blocks a query block can see: the causal/window band when positions are
    token indices, else all of them."""
    lo, hi = _i32(0), _i32(nkb)
    if not masks.static_band:
        return lo, hi
    first_row = _mul(qb, _i32(bq))
    last_row = _add(first_row, _i32(bq - 1))
    if cfg.causal or cfg.window_right >= 0:
        reach = cfg.shift + (cfg.window_right if not cfg.causal else 0)
        hi = _clamp_i32(0, _add(_floordiv(_add(last_row, _i32(reach)), bk), _i32(1)), nkb)
    if cfg.window_left >= 0:
        lo = _clamp_i32(0, _floordiv(_add(first_row, _i32(cfg.shift - cfg.window_left)), bk), nkb)
    return lo, hi


def _q_block_range(cfg: AttentionConfig, masks: TokenMasks, kb: ir.Value, bq: int, bk: int, nqb: int):
    """Query blocks that can see a key/value block (the transpose of _kv_block_range)."""
    lo, hi = _i32(0), _i32(nqb)
    if not masks.static_band:
        return lo, hi
    first_key = _mul(kb, _i32(bk))
    last_key = _add(first_key, _i32(bk - 1))
    if cfg.causal or cfg.window_right >= 0:
        reach = cfg.shift + (cfg.window_right if not cfg.causal else 0)
        lo = _clamp_i32(0, _floordiv(_sub(first_key, _i32(reach)), bq), nqb)
    if cfg.window_left >= 0:
        hi = _clamp_i32(0, _add(_floordiv(_add(last_key, _i32(cfg.window_left - cfg.shift)), bq), _i32(1)), nqb)
    return lo, hi


# ----------------------------------------------------------- packed segments
def segment_tokens(lengths: ir.Value, starts: ir.Value, batch: int, seq: int) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Packed sequences (TE's THD layouts, cuDNN's max_seg_per_batch > 1): segment slot k
    covers the flattened tokens [starts[k], starts[k] + lengths[k]) of the [batch·seq]
    token axis.  Returns i32 [batch, seq] (segment k + 1, or 0 for a token no segment
    covers; position from the segment start; the length of the token's segment).
    Slots of length ≤ 0 are empty."""
    i32 = _i32_type()
    count = builders.shape_of(lengths)[0]
    lengths, starts = builders.convert(lengths, i32), builders.convert(starts, i32)
    shape = [batch * seq, count]
    tokens = builders.iota(i32, shape, 0)
    start_b, length_b = _bcast(starts, shape, [1]), _bcast(lengths, shape, [1])
    zero = _full(0, shape, i32)
    inside = builders.binary("and", builders.compare(tokens, start_b, "GE", "SIGNED"),
                      builders.compare(tokens, _add(start_b, length_b), "LT", "SIGNED"))
    inside = builders.binary("and", inside, builders.compare(length_b, zero, "GT", "SIGNED"))
    # Segments do not overlap, so a sum over slots picks the one that covers a token.
    segment = builders.reduce(builders.select(inside, _add(builders.iota(i32, shape, 1), _full(1, shape, i32)), zero), [1], "add", 0)
    position = builders.reduce(builders.select(inside, _sub(tokens, start_b), zero), [1], "add", 0)
    own_length = builders.reduce(builders.select(inside, length_b, zero), [1], "add", 0)
    return tuple(builders.reshape(x, [batch, seq]) for x in (segment, position, own_length))


def lse_to_segment_major(lse: ir.Value, lengths: ir.Value, starts: ir.Value) -> ir.Value:
    """LSE f32 [N, H, S] (per token) → [K, H, S] per segment slot k and position i from the
    segment's start (cuDNN's packed statistics; TE THD before cuDNN 9.6).  Positions at or
    beyond a segment's length hold −inf."""
    i32 = _i32_type()
    n, h, s = builders.shape_of(lse)
    count = builders.shape_of(lengths)[0]
    tokens = builders.reshape(builders.transpose(lse, [0, 2, 1]), [n * s, h])
    shape = [count, s]
    position = builders.iota(i32, shape, 1)
    index = _add(_bcast(builders.convert(starts, i32), shape, [0]), position)
    index = builders.clamp(_full(0, shape, i32), index, _full(n * s - 1, shape, i32))
    picked = builders.gather(tokens, builders.reshape(index, [count, s, 1]), [count, s, h], offset_dims=[2],
                      collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=2, slice_sizes=[1, h])
    valid = builders.compare(position, _bcast(builders.convert(lengths, i32), shape, [0]), "LT", "SIGNED")
    picked = builders.select(_bcast(valid, [count, s, h], [0, 1]), picked, _full(NEG_INF, [count, s, h]))
    return builders.transpose(picked, [0, 2, 1])


def lse_from_segment_major(stats: ir.Value, segment: ir.Value, position: ir.Value) -> ir.Value:
    """The inverse of lse_to_segment_major: [K, H, S] → per token [N, H, S] given each
    token's segment (k + 1, 0 for none) and position; −inf for tokens in no segment."""
    i32 = _i32_type()
    count, h, s = builders.shape_of(stats)
    n, seq = builders.shape_of(segment)
    shape = [n, seq]
    slot = builders.clamp(_full(0, shape, i32), _sub(segment, _full(1, shape, i32)), _full(count - 1, shape, i32))
    pos = builders.clamp(_full(0, shape, i32), position, _full(s - 1, shape, i32))
    index = builders.concatenate([builders.reshape(slot, [n, seq, 1]), builders.reshape(pos, [n, seq, 1])], 2)
    picked = builders.gather(builders.transpose(builders.convert(stats, _f32()), [0, 2, 1]), index, [n, seq, h], offset_dims=[2],
                      collapsed_slice_dims=[0, 1], start_index_map=[0, 1], index_vector_dim=2, slice_sizes=[1, 1, h])
    covered = builders.compare(segment, _full(0, shape, i32), "NE", "SIGNED")
    picked = builders.select(_bcast(covered, [n, seq, h], [0, 1]), picked, _full(NEG_INF, [n, seq, h]))
    return builders.transpose(picked, [0, 2, 1])


# -------------------------------------------------------------------- dropout
def _keep_mask(cfg: AttentionConfig, seed: ir.Value, qb: ir.Value, kb: ir.Value, shape: list[int]) -> ir.Value:
    """Bernoulli(1 − p) keep mask for one (query block, key block) pair."""
    u64 = ir.IntegerType.get_unsigned(64)
    block_id = builders.convert(_add(_mul(qb, _i32(1 << 16)), kb), u64)
    state = builders.concatenate([builders.reshape(seed, [1]), builders.reshape(block_id, [1])], 0)
    u32 = ir.IntegerType.get_unsigned(32)
    bits_t = ir.RankedTensorType.get(shape, u32)
    gen = builders.op("stablehlo.rng_bit_generator", [state.type, bits_t], [state],
               {"rng_algorithm": stablehlo.RngAlgorithmAttr.get("THREE_FRY")})
    threshold = min(int((1.0 - cfg.dropout) * 2**32), 2**32 - 1)
    return builders.compare(gen.results[1], builders.scalar_constant(threshold, u32, shape), "LT", "UNSIGNED")


def _apply_dropout(cfg: AttentionConfig, p: ir.Value, keep: ir.Value) -> ir.Value:
    shape = builders.shape_of(p)
    scaled = _scalar_mul(p, 1.0 / (1.0 - cfg.dropout))
    return builders.select(keep, scaled, _full(0.0, shape))


# -------------------------------------------------------------------- blocks
def _q_block(x: ir.Value, qb: ir.Value, bq: int, cfg: AttentionConfig, dim: int) -> ir.Value:
    """[N, S, Hq, dim] → block qb as f32 [N, Hkv, G·Bq, dim]."""
    n = cfg.batch
    blk = builders.dynamic_slice(x, [_i32(0), _mul(qb, _i32(bq)), _i32(0), _i32(0)], [n, bq, cfg.q_heads, dim])
    blk = builders.transpose(builders.convert(blk, _f32()), [0, 2, 1, 3])  # [N, Hq, Bq, dim]
    return builders.reshape(blk, [n, cfg.kv_heads, cfg.group * bq, dim])


def _kv_block(x: ir.Value, kb: ir.Value, bk: int, cfg: AttentionConfig, dim: int) -> ir.Value:
    """[N, S, Hkv, dim] → block kb as f32 [N, Hkv, Bk, dim]."""
    blk = builders.dynamic_slice(x, [_i32(0), _mul(kb, _i32(bk)), _i32(0), _i32(0)], [cfg.batch, bk, cfg.kv_heads, dim])
    return builders.transpose(builders.convert(blk, _f32()), [0, 2, 1, 3])


def _from_q_layout(x: ir.Value, cfg: AttentionConfig, bq: int) -> ir.Value:
    """[N, Hkv, G·Bq, dim] → [N, Bq, Hq, dim]."""
    dim = builders.shape_of(x)[3]
    return builders.transpose(builders.reshape(x, [cfg.batch, cfg.q_heads, bq, dim]), [0, 2, 1, 3])


def _rows(x: ir.Value, cfg: AttentionConfig, bq: int) -> ir.Value:
    """[N, Hq, Bq] statistics → [N, Hkv, G·Bq]."""
    return builders.reshape(x, [cfg.batch, cfg.kv_heads, cfg.group * bq])


def _scores(cfg, q_blk, k_blk, bias, qb, kb, bq, bk, vis) -> ir.Value:
    """scale·(q·kᵀ) + bias, invisible entries −inf: f32 [N, Hkv, G·Bq, Bk]."""
    s = builders.dot_general(q_blk, k_blk, _f32(), [0, 1], [0, 1], [3], [3])
    s = _scalar_mul(s, cfg.scale)
    if bias is not None:
        s = _add(s, _bias_block(cfg, bias, qb, kb, bq, bk))
    return builders.select(vis, s, _full(NEG_INF, builders.shape_of(s)))


def _bias_block(cfg, bias, qb, kb, bq, bk) -> ir.Value:
    nb, hb = builders.shape_of(bias)[:2]
    blk = builders.dynamic_slice(bias, [_i32(0), _i32(0), _mul(qb, _i32(bq)), _mul(kb, _i32(bk))], [nb, hb, bq, bk])
    blk = builders.convert(blk, _f32())
    # Size-1 batch or head dims of the bias broadcast along the corresponding dims.
    full = _bcast(blk, [cfg.batch, cfg.q_heads, bq, bk], [0, 1, 2, 3])
    return builders.reshape(full, [cfg.batch, cfg.kv_heads, cfg.group * bq, bk])


# ------------------------------------------------------------------- forward
def attention_forward(cfg: AttentionConfig, inp: AttentionInputs) -> tuple[ir.Value, ir.Value]:
    """(O [N, Sq, Hq, Dv] in q's type, LSE f32 [N, Hq, Sq])."""
    n, hq, hkv, g = cfg.batch, cfg.q_heads, cfg.kv_heads, cfg.group
    bq, bk = cfg.blocks()
    sqp, skp = -(-cfg.q_len // bq) * bq, -(-cfg.kv_len // bk) * bk
    nqb, nkb = sqp // bq, skp // bk
    q, k, v = _pad_axis(inp.q, 1, sqp), _pad_axis(inp.k, 1, skp), _pad_axis(inp.v, 1, skp)
    bias = inp.bias
    if bias is not None:
        bias = _pad_axis(_pad_axis(bias, 2, sqp), 3, skp)
    q_seg, q_pos, q_shift = _token_data(inp.masks, n, sqp, cfg.q_len, "q")
    k_seg, k_pos, _ = _token_data(inp.masks, n, skp, cfg.kv_len, "kv")
    out_type = builders.element_type_of(inp.q)
    rows = g * bq
    invariants = [q, k, v, q_seg, q_pos, k_seg, k_pos]
    has_shift, has_bias, has_seed = q_shift is not None, bias is not None, cfg.dropout > 0 and inp.seed is not None
    invariants += ([q_shift] if has_shift else []) + ([bias] if has_bias else []) + ([inp.seed] if has_seed else [])

    def unpack(inv):
        q, k, v, q_seg, q_pos, k_seg, k_pos, *rest = inv
        q_shift = rest.pop(0) if has_shift else None
        bias = rest.pop(0) if has_bias else None
        seed = rest.pop(0) if has_seed else None
        return q, k, v, q_seg, q_pos, k_seg, k_pos, q_shift, bias, seed

    def q_step(qb, carried, inv):
        out, lse = carried
        q, k, v, q_seg, q_pos, k_seg, k_pos, q_shift, bias, seed = unpack(inv)
        q_blk = _q_block(q, qb, bq, cfg, cfg.qk_dim)
        start = [_i32(0), _mul(qb, _i32(bq))]
        qs_b = builders.dynamic_slice(q_seg, start, [n, bq])
        qp_b = builders.dynamic_slice(q_pos, start, [n, bq])
        qh_b = builders.dynamic_slice(q_shift, start, [n, bq]) if q_shift is not None else None
        lo, hi = _kv_block_range(cfg, inp.masks, qb, bq, bk, nkb)

        def kv_step(kb, state, inv2):
            m, l, acc = state
            q_blk, k, v, qs_b, qp_b, k_seg, k_pos, *rest = inv2
            qh_b = rest.pop(0) if has_shift else None
            bias = rest.pop(0) if has_bias else None
            seed = rest.pop(0) if has_seed else None
            k_blk = _kv_block(k, kb, bk, cfg, cfg.qk_dim)
            v_blk = _kv_block(v, kb, bk, cfg, cfg.v_dim)
            kstart = [_i32(0), _mul(kb, _i32(bk))]
            vis = _visibility(cfg, qs_b, qp_b, qh_b, builders.dynamic_slice(k_seg, kstart, [n, bk]),
                              builders.dynamic_slice(k_pos, kstart, [n, bk]))
            vis = _to_score_layout(vis, cfg)
            s = _scores(cfg, q_blk, k_blk, bias, qb, kb, bq, bk, vis)
            m_new = builders.binary("maximum", m, builders.reduce(s, [3], "maximum", NEG_INF))
            m_safe = builders.select(builders.compare(m_new, _full(NEG_INF, [n, hkv, rows]), "EQ", "FLOAT"),
                              _full(0.0, [n, hkv, rows]), m_new)
            p = builders.unary("exponential", _sub(s, _bcast(m_safe, builders.shape_of(s), [0, 1, 2])))
            correction = builders.unary("exponential", _sub(m, m_safe))
            l = _add(_mul(l, correction), builders.reduce(p, [3], "add", 0.0))
            if seed is not None:
                p = _apply_dropout(cfg, p, _keep_mask(cfg, seed, qb, kb, builders.shape_of(p)))
            pv = builders.dot_general(p, v_blk, _f32(), [0, 1], [0, 1], [3], [2])
            acc = _add(_mul(acc, _bcast(correction, builders.shape_of(acc), [0, 1, 2])), pv)
            return [m_new, l, acc]

        init = [_full(NEG_INF, [n, hkv, rows]), _full(0.0, [n, hkv, rows]), _full(0.0, [n, hkv, rows, cfg.v_dim])]
        inv2 = [q_blk, k, v, qs_b, qp_b, k_seg, k_pos] + ([qh_b] if has_shift else []) + \
               ([bias] if has_bias else []) + ([seed] if has_seed else [])
        m, l, acc = _for_range(lo, hi, init, inv2, kv_step)
        empty = builders.compare(l, _full(0.0, [n, hkv, rows]), "EQ", "FLOAT")
        safe_l = builders.select(empty, _full(1.0, [n, hkv, rows]), l)
        o_blk = builders.binary("divide", acc, _bcast(safe_l, builders.shape_of(acc), [0, 1, 2]))
        o_blk = builders.select(_bcast(empty, builders.shape_of(acc), [0, 1, 2]), _full(0.0, builders.shape_of(acc)), o_blk)
        lse_blk = builders.select(empty, _full(NEG_INF, [n, hkv, rows]), _add(m, builders.unary("log", safe_l)))
        out = builders.dynamic_update_slice(out, builders.convert(_from_q_layout(o_blk, cfg, bq), out_type),
                                     [_i32(0), _mul(qb, _i32(bq)), _i32(0), _i32(0)])
        lse = builders.dynamic_update_slice(lse, builders.reshape(lse_blk, [n, hq, bq]), [_i32(0), _i32(0), _mul(qb, _i32(bq))])
        return [out, lse]

    out0 = _full(0.0, [n, sqp, hq, cfg.v_dim], out_type)
    lse0 = _full(0.0, [n, hq, sqp])
    out, lse = _for_range(_i32(0), _i32(nqb), [out0, lse0], invariants, q_step)
    if sqp != cfg.q_len:
        out = builders.slice_(out, [0, 0, 0, 0], [n, cfg.q_len, hq, cfg.v_dim])
        lse = builders.slice_(lse, [0, 0, 0], [n, hq, cfg.q_len])
    return out, lse


# ------------------------------------------------------------------ backward
def attention_backward(cfg: AttentionConfig, inp: AttentionInputs, out: ir.Value, dout: ir.Value,
                       lse: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value | None]:
    """(dQ, dK, dV in their inputs' types, dbias in the bias's type or None).
    `out`, `dout` are [N, Sq, Hq, Dv]; `lse` f32 [N, Hq, Sq]."""
    n, hq, hkv, g = cfg.batch, cfg.q_heads, cfg.kv_heads, cfg.group
    bq, bk = cfg.blocks()
    sqp, skp = -(-cfg.q_len // bq) * bq, -(-cfg.kv_len // bk) * bk
    nqb, nkb = sqp // bq, skp // bk
    rows = g * bq
    q, k, v = _pad_axis(inp.q, 1, sqp), _pad_axis(inp.k, 1, skp), _pad_axis(inp.v, 1, skp)
    out, dout = _pad_axis(out, 1, sqp), _pad_axis(dout, 1, sqp)
    lse = _pad_axis(builders.convert(lse, _f32()), 2, sqp)
    bias = inp.bias
    if bias is not None:
        bias = _pad_axis(_pad_axis(bias, 2, sqp), 3, skp)
    q_seg, q_pos, q_shift = _token_data(inp.masks, n, sqp, cfg.q_len, "q")
    k_seg, k_pos, _ = _token_data(inp.masks, n, skp, cfg.kv_len, "kv")
    # D = rowsum(dO ∘ O), f32 [N, Hq, Sq].
    delta = builders.reduce(_mul(builders.convert(dout, _f32()), builders.convert(out, _f32())), [3], "add", 0.0)
    delta = builders.transpose(delta, [0, 2, 1])
    has_shift, has_bias, has_seed = q_shift is not None, bias is not None, cfg.dropout > 0 and inp.seed is not None
    invariants = [q, k, v, dout, lse, delta, q_seg, q_pos, k_seg, k_pos]
    invariants += ([q_shift] if has_shift else []) + ([bias] if has_bias else []) + ([inp.seed] if has_seed else [])

    def unpack(inv):
        q, k, v, dout, lse, delta, q_seg, q_pos, k_seg, k_pos, *rest = inv
        q_shift = rest.pop(0) if has_shift else None
        bias = rest.pop(0) if has_bias else None
        seed = rest.pop(0) if has_seed else None
        return q, k, v, dout, lse, delta, q_seg, q_pos, k_seg, k_pos, q_shift, bias, seed

    def kv_step(kb, carried, inv):
        dq, dk, dv, *dbias_l = carried
        q, k, v, dout, lse, delta, q_seg, q_pos, k_seg, k_pos, q_shift, bias, seed = unpack(inv)
        k_blk = _kv_block(k, kb, bk, cfg, cfg.qk_dim)
        v_blk = _kv_block(v, kb, bk, cfg, cfg.v_dim)
        kstart = [_i32(0), _mul(kb, _i32(bk))]
        ks_b = builders.dynamic_slice(k_seg, kstart, [n, bk])
        kp_b = builders.dynamic_slice(k_pos, kstart, [n, bk])
        lo, hi = _q_block_range(cfg, inp.masks, kb, bq, bk, nqb)

        def q_step(qb, state, inv2):
            dk_acc, dv_acc, dq, *dbias_s = state
            q, dout, lse, delta, q_seg, q_pos, k_blk, v_blk, ks_b, kp_b, *rest = inv2
            q_shift = rest.pop(0) if has_shift else None
            bias = rest.pop(0) if has_bias else None
            seed = rest.pop(0) if has_seed else None
            q_blk = _q_block(q, qb, bq, cfg, cfg.qk_dim)
            do_blk = _q_block(dout, qb, bq, cfg, cfg.v_dim)
            qstart = [_i32(0), _mul(qb, _i32(bq))]
            vis = _visibility(cfg, builders.dynamic_slice(q_seg, qstart, [n, bq]), builders.dynamic_slice(q_pos, qstart, [n, bq]),
                              builders.dynamic_slice(q_shift, qstart, [n, bq]) if q_shift is not None else None, ks_b, kp_b)
            vis = _to_score_layout(vis, cfg)
            s = _scores(cfg, q_blk, k_blk, bias, qb, kb, bq, bk, vis)
            lstart = [_i32(0), _i32(0), _mul(qb, _i32(bq))]
            lse_b = _rows(builders.dynamic_slice(lse, lstart, [n, hq, bq]), cfg, bq)
            d_b = _rows(builders.dynamic_slice(delta, lstart, [n, hq, bq]), cfg, bq)
            shape = builders.shape_of(s)
            finite = builders.compare(lse_b, _full(NEG_INF, [n, hkv, rows]), "NE", "FLOAT")
            lse_safe = builders.select(finite, lse_b, _full(0.0, [n, hkv, rows]))
            p = builders.unary("exponential", _sub(s, _bcast(lse_safe, shape, [0, 1, 2])))
            p = builders.select(builders.binary("and", vis, _bcast(finite, shape, [0, 1, 2])), p, _full(0.0, shape))
            dp = builders.dot_general(do_blk, v_blk, _f32(), [0, 1], [0, 1], [3], [3])
            pd = p
            if seed is not None:
                keep = _keep_mask(cfg, seed, qb, kb, shape)
                pd = _apply_dropout(cfg, p, keep)
                dp = _apply_dropout(cfg, dp, keep)
            dv_acc = _add(dv_acc, builders.dot_general(pd, do_blk, _f32(), [0, 1], [0, 1], [2], [2]))
            ds = _mul(p, _sub(dp, _bcast(d_b, shape, [0, 1, 2])))
            dk_acc = _add(dk_acc, _scalar_mul(builders.dot_general(ds, q_blk, _f32(), [0, 1], [0, 1], [2], [2]), cfg.scale))
            dq_blk = _scalar_mul(builders.dot_general(ds, k_blk, _f32(), [0, 1], [0, 1], [3], [2]), cfg.scale)
            dq_start = [_i32(0), _mul(qb, _i32(bq)), _i32(0), _i32(0)]
            dq_old = builders.dynamic_slice(dq, dq_start, [n, bq, hq, cfg.qk_dim])
            dq = builders.dynamic_update_slice(dq, _add(dq_old, _from_q_layout(dq_blk, cfg, bq)), dq_start)
            new = [dk_acc, dv_acc, dq]
            if dbias_s:
                (dbias,) = dbias_s
                nb, hb = builders.shape_of(dbias)[:2]
                ds_full = builders.reshape(ds, [n, hq, bq, bk])
                sum_dims = ([0] if nb == 1 else []) + ([1] if hb == 1 else [])
                contribution = builders.reduce(ds_full, sum_dims, "add", 0.0) if sum_dims else ds_full
                contribution = builders.reshape(contribution, [nb, hb, bq, bk])
                bstart = [_i32(0), _i32(0), _mul(qb, _i32(bq)), _mul(kb, _i32(bk))]
                old = builders.dynamic_slice(dbias, bstart, [nb, hb, bq, bk])
                new.append(builders.dynamic_update_slice(dbias, _add(old, contribution), bstart))
            return new

        state0 = [_full(0.0, [n, hkv, bk, cfg.qk_dim]), _full(0.0, [n, hkv, bk, cfg.v_dim]), dq, *dbias_l]
        inv2 = [q, dout, lse, delta, q_seg, q_pos, k_blk, v_blk, ks_b, kp_b] + ([q_shift] if has_shift else []) + \
               ([bias] if has_bias else []) + ([seed] if has_seed else [])
        dk_acc, dv_acc, dq, *dbias_l = _for_range(lo, hi, state0, inv2, q_step)
        to_tokens = lambda x: builders.transpose(x, [0, 2, 1, 3])  # noqa: E731  [N, Hkv, Bk, d] → [N, Bk, Hkv, d]
        kv_start = [_i32(0), _mul(kb, _i32(bk)), _i32(0), _i32(0)]
        dk = builders.dynamic_update_slice(dk, to_tokens(dk_acc), kv_start)
        dv = builders.dynamic_update_slice(dv, to_tokens(dv_acc), kv_start)
        return [dq, dk, dv, *dbias_l]

    carried = [_full(0.0, [n, sqp, hq, cfg.qk_dim]), _full(0.0, [n, skp, hkv, cfg.qk_dim]),
               _full(0.0, [n, skp, hkv, cfg.v_dim])]
    if bias is not None:
        carried.append(_full(0.0, builders.shape_of(bias)))
    dq, dk, dv, *dbias_l = _for_range(_i32(0), _i32(nkb), carried, invariants, kv_step)
    dq = builders.convert(builders.slice_(dq, [0, 0, 0, 0], [n, cfg.q_len, hq, cfg.qk_dim]), builders.element_type_of(inp.q))
    dk = builders.convert(builders.slice_(dk, [0, 0, 0, 0], [n, cfg.kv_len, hkv, cfg.qk_dim]), builders.element_type_of(inp.k))
    dv = builders.convert(builders.slice_(dv, [0, 0, 0, 0], [n, cfg.kv_len, hkv, cfg.v_dim]), builders.element_type_of(inp.v))
    dbias = None
    if dbias_l:
        nb, hb = builders.shape_of(inp.bias)[:2]
        dbias = builders.slice_(dbias_l[0], [0, 0, 0, 0], [nb, hb, cfg.q_len, cfg.kv_len])
        if cfg.dbias_scale != 1.0:
            dbias = _scalar_mul(dbias, cfg.dbias_scale)
        dbias = builders.convert(dbias, builders.element_type_of(inp.bias))
    return dq, dk, dv, dbias


__all__ = ["AttentionConfig", "AttentionInputs", "TokenMasks", "attention_backward", "attention_forward",
           "lse_from_segment_major", "lse_to_segment_major", "segment_tokens"]
