"""tpu-custom-calls: the TPU compiler's own small custom-calls → plain StableHLO.

Found in deviceless TPU v5e dumps of ordinary JAX programs (tests/dumps/tpu):
- `AllocateBuffer()` — an uninitialized buffer (a scan's output accumulator that a loop
  then overwrites): zeros, a valid value for uninitialized memory.
- `AssumeGatherIndicesInBound(i)` — a promise to the gather emitter: the identity.
- `GatherScatterIndicesBitpacked(i)` — marks gather indices that the compiler computed
  from bit-packed words; the operand already holds the unpacked indices (the HLO before
  it masks and shifts them), so the identity.
- `X64SplitLow(x)` / `X64SplitHigh(x)` / `X64Combine(lo, hi)` — the TPU keeps 64-bit
  element types as pairs of 32-bit halves: c64 as (real, imag) f32, s64/u64 as (low,
  high) 32-bit words, f64 as an (f32 high, f32 residual) pair whose sum is the value.
- `ConcatBitcast(a, b, ...)` — the operands' buffers laid end to end, read as the result:
  where the compiler splits a weight into slices to prefetch them into faster memory
  (slice-start/slice-done, memory space S(1)) it joins them again with this call.  Each
  operand is read in its physical (major-to-minor) order, the flat arrays concatenated in
  operand order, and the result's physical dims read back to its logical order: for the
  row slices XLA writes, a concatenation along dimension 0.
- `Cholesky(a)` — lower Cholesky factor (XLA's cholesky with lower=true; the upper
  triangle is unspecified there), as a loop over columns in plain ops.
- `InvertDiagBlocksLowerTriangular(a)` / `InvertDiagBlocksUpperTriangular(a)` — XLA's
  TriangularSolveExpander step: each diagonal block (128 x 128 on TPU) of the triangular
  `a` inverted, zeros elsewhere (xla/service/triangular_solve_expander.cc,
  InvertDiagonalBlocks).

The TPU's blocked linear algebra (JAX's lu, qr, eigh, svd compiled for TPU) calls kernels
for the panel steps of XLA's expanders; their results follow LAPACK's conventions, so they
become jaxlib's CPU LAPACK calls (cpu_only, as in CPU dumps) or plain StableHLO:
A complex matrix comes and goes as its real and imaginary parts (two operands, two results).
- `LuDecompositionBlock(a)` → (lu, pivots, permutation): partial-pivoting LU with 0-based
  pivots and the row permutation they make, as `jax.lax.linalg.lu` returns them:
  `lapack_?getrf_ffi` (1-based pivots) and the pivots' permutation as a loop of swaps.
  Newer libtpu (jax 0.12) names it by element kind, `LuRealDecompositionBlock` (one
  operand) and `LuComplexDecompositionBlock` (real and imaginary parts), same operands
  and results.
- `QrDecompositionBlock(a)` → (a, taus): Householder QR in LAPACK's geqrf storage (XLA's
  QrExpander::QrBlock): `lapack_?geqrf_ffi`.
- `CompactWyHelper(m)` → t: the compact WY factor of XLA's
  QrExpander::CompactWYRepresentation (Schreiber & Van Loan).  The operand the dump computes
  is m = (triu(YᴴY, 1) + I) · diag(-taus), and XLA's loop `t[:, i] = t @ vtv[:, i]` from
  t = diag(-taus) is t = D + t·N with D = diag(m), N = the strict upper part of m, i.e.
  t·(I - N) = D: one triangular solve.
- `EighTpu(tl, tr, bl, br)` → (w_top, w_bottom, v_tl, v_tr, v_bl, v_br): the TPU's Jacobi
  eigensolver (XLA's eigh_expander layout) on the symmetric matrix [[tl, tr], [bl, br]],
  padded by zero rows and columns to an even order; [[v_tl, v_tr], [v_bl, v_br]] holds
  the eigenvectors as rows.  The dump sorts the eigenpairs after
  the call and drops the padded ones, which Jacobi leaves in place (eigenvalue 0, a unit
  eigenvector).  So: `lapack_?syevd_ffi` on the unpadded matrix (the padding read off the
  `pad` that makes the bottom-right block), the padded pairs put back in their places.

SparseCore offloads of older libtpu (v6e dumps of jax 0.10.2: the scatter of jnp.unique's
counts, of MoE routing) hand their `call-start` a token made by a pair of calls:
`%h = s32[] PrepareAsyncCallStart()`, `%t = token[] PrepareAsyncCallDone(%h)`, then
`call-start(operands..., %t)` whose computation takes the token as its last parameter.
The start has no operands, so its s32[] handle holds nothing of the program's data, and
the done turns it into a token, which holds no value at all: the pair only orders the
offloaded call after the runtime readied it.  On one CPU nothing needs readying, so the
done becomes a fresh token (`after_all()`) where anything uses it, and the start goes.
A handle read by anything other than a PrepareAsyncCallDone is refused: its value is
whatever the TPU runtime writes there.
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.lapack import jaxlib_cpu_call, lapack_letter, pivots_to_permutation
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

IDENTITY = ("AssumeGatherIndicesInBound", "GatherScatterIndicesBitpacked")
LU_BY_KIND = {"LuRealDecompositionBlock": False, "LuComplexDecompositionBlock": True}  # complex?
LINALG = ("LuDecompositionBlock", *LU_BY_KIND, "QrDecompositionBlock", "CompactWyHelper", "EighTpu")
PREPARE_START, PREPARE_DONE = "PrepareAsyncCallStart", "PrepareAsyncCallDone"
TARGETS = ("AllocateBuffer", "ConcatBitcast", "X64SplitLow", "X64SplitHigh", "X64Combine", "Cholesky",
           "InvertDiagBlocksLowerTriangular", "InvertDiagBlocksUpperTriangular", PREPARE_DONE, PREPARE_START
           ) + IDENTITY + LINALG
# TriangularSolveExpander's block size on TPU.
DIAGONAL_BLOCK = 128


@register_pass("tpu-custom-calls",
               "TPU compiler custom-calls (AllocateBuffer, ConcatBitcast, X64 split/combine, gather-index markers, Cholesky, "
               "diagonal-block inverses; LU, QR and eigh kernels → LAPACK calls; SparseCore call tokens) → plain ops",
               targets=TARGETS, preserves={Fact.USES})
def lower_tpu_custom_calls(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    # The prepare-dones first: each reads a prepare-start's handle, which must be unused after.
    calls = sorted(walks.custom_calls(TARGETS), key=lambda op: rewrite.call_target(op) != PREPARE_DONE)
    for op in calls:
        target = rewrite.call_target(op)
        if target == PREPARE_START:
            _drop_prepare_start(op)
            continue
        with rewrite.at(op):
            values = LOWERINGS[target](op)
        rewrite.replace(op, values if isinstance(values, list) else [values])


def _single_result(op: ir.Operation) -> ir.Type:
    if len(op.results) != 1:
        raise rewrite.op_error(op, f"expected one result, found {len(op.results)}")
    return op.results[0].type


def _identity(op: ir.Operation) -> ir.Value:
    if len(op.operands) != 1 or op.operands[0].type != _single_result(op):
        raise rewrite.op_error(op, "expected one operand of the result's type")
    return op.operands[0]


def _prepare_async_call_done(op: ir.Operation) -> list[ir.Value | None]:
    """The token that orders a SparseCore call after its preparation: a fresh one."""
    operands = list(op.operands)
    start = rewrite.defining_op(operands[0]) if len(operands) == 1 else None
    if start is None or start.name != "stablehlo.custom_call" or rewrite.call_target(start) != PREPARE_START:
        raise rewrite.op_error(op, f"expected one operand, the handle of a {PREPARE_START}")
    if not stablehlo.TokenType.isinstance(_single_result(op)):
        raise rewrite.op_error(op, f"expected a token result, found {op.results[0].type}")
    token = op.results[0]
    return [builders.op1("stablehlo.after_all", token.type, []) if rewrite.has_uses(token) else None]


def _drop_prepare_start(op: ir.Operation) -> None:
    """Erase a prepare-start whose handle only its prepare-dones read (rewritten before it)."""
    if len(op.operands) or len(op.results) != 1:
        raise rewrite.op_error(op, f"expected no operands and one result, found {len(op.operands)} and {len(op.results)}")
    readers = [use.owner for use in op.results[0].uses]
    if readers:
        reader = readers[0].operation  # an OpView: its Operation names and locates it
        what = f"custom-call {rewrite.call_target(reader)}" if reader.name == "stablehlo.custom_call" else reader.name
        raise rewrite.op_error(op, f"its handle is read by {what} ({rewrite.location_text(reader)}), not only by "
                                   f"{PREPARE_DONE}: the value there is whatever the TPU runtime writes, unknown here")
    op.erase()


def _allocate_buffer(op: ir.Operation) -> ir.Value:
    return builders.zeros_like_type(_single_result(op))


def _concat_bitcast(op: ir.Operation) -> ir.Value:
    result_t = ir.RankedTensorType(_single_result(op))
    operands = list(op.operands)
    if not operands or any(builders.element_type_of(x) != result_t.element_type for x in operands):
        raise rewrite.op_error(op, "expected operands of the result's element type")
    total = sum(int(np.prod(builders.shape_of(x))) for x in operands)
    if total != int(np.prod(result_t.shape)):
        raise rewrite.op_error(op, f"the operands hold {total} elements, the result {int(np.prod(result_t.shape))}")
    flat = []
    for i, x in enumerate(operands):
        shape = builders.shape_of(x)
        order = rewrite.dump_layout(op, "operand", i, len(shape))[::-1]
        flat.append(builders.reshape(builders.transpose(x, order), [int(np.prod(shape))]))
    joined = builders.concatenate(flat, 0)
    order = rewrite.dump_layout(op, "result", 0, result_t.rank)[::-1]
    physical = builders.reshape(joined, [result_t.shape[d] for d in order])
    inverse = [order.index(d) for d in range(result_t.rank)]
    return builders.transpose(physical, inverse)


def _x64_kind(op: ir.Operation, wide: ir.Type) -> str:
    if isinstance(wide, ir.ComplexType):
        return "complex"
    if isinstance(wide, ir.F64Type):
        return "float"
    if isinstance(wide, ir.IntegerType) and ir.IntegerType(wide).width == 64:
        return "integer"
    raise rewrite.op_error(op, f"a 64-bit split/combine of element type {wide}")


def _x64_split(op: ir.Operation, high: bool) -> ir.Value:
    (x,) = op.operands
    out_t = _single_result(op)
    half = ir.RankedTensorType(out_t).element_type
    wide = builders.element_type_of(x)
    kind = _x64_kind(op, wide)
    if kind == "complex":
        return builders.op1("stablehlo.imag" if high else "stablehlo.real", out_t, [x])
    if kind == "integer":
        u64 = ir.IntegerType.get_unsigned(64)
        bits = builders.op1("stablehlo.bitcast_convert", builders.tensor_type_like(x, element=u64), [x])
        if high:
            bits = builders.binary("shift_right_logical", bits, builders.scalar_constant(32, u64, builders.shape_of(x)))
        word = builders.convert(bits, ir.IntegerType.get_unsigned(32))  # keeps the low 32 bits
        return builders.op1("stablehlo.bitcast_convert", out_t, [word]) if half != word.type.element_type else word
    head = builders.convert(x, half)
    if not high:
        return head
    return builders.convert(builders.binary("subtract", x, builders.convert(head, wide)), half)


def _x64_combine(op: ir.Operation) -> ir.Value:
    lo, hi = op.operands
    out_t = _single_result(op)
    wide = ir.RankedTensorType(out_t).element_type
    kind = _x64_kind(op, wide)
    if kind == "complex":
        return builders.op1("stablehlo.complex", out_t, [lo, hi])
    if kind == "integer":
        u64 = ir.IntegerType.get_unsigned(64)
        u32 = ir.IntegerType.get_unsigned(32)
        words = [builders.convert(builders.op1("stablehlo.bitcast_convert", builders.tensor_type_like(v, element=u32), [v])
                           if builders.element_type_of(v) != u32 else v, u64) for v in (lo, hi)]
        shift = builders.scalar_constant(32, u64, builders.shape_of(lo))
        bits = builders.binary("or", words[0], builders.binary("shift_left", words[1], shift))
        return builders.op1("stablehlo.bitcast_convert", out_t, [bits]) if wide != u64 else bits
    return builders.binary("add", builders.convert(lo, wide), builders.convert(hi, wide))


def _cholesky(op: ir.Operation) -> ir.Value | list[ir.Value]:
    (a,), split = _joined(op, 1)   # a complex matrix comes as (real, imaginary), as its factor goes
    if len(op.results) != (2 if split else 1):
        raise rewrite.op_error(op, f"expected {2 if split else 1} result(s), found {len(op.results)}")
    factor = builders.cholesky(a, lower=True)
    return _split(factor) if split else factor


def _invert_diagonal_blocks(op: ir.Operation, lower: bool = True) -> list[ir.Value]:
    """Mask `a` to its triangular diagonal blocks; the inverse of that block-diagonal
    matrix is the block-wise inverse, solved from the identity."""
    (a,), split = _joined(op, 1)
    shape = builders.shape_of(a)
    n = shape[-1]
    et = builders.element_type_of(a)
    block = np.arange(n) // DIAGONAL_BLOCK
    rows, cols = np.arange(n)[:, None], np.arange(n)[None, :]
    keep = (block[:, None] == block[None, :]) & ((rows >= cols) if lower else (rows <= cols))
    matrix_dims = [len(shape) - 2, len(shape) - 1]
    zero = builders.scalar_constant(0, et, shape)
    masked = builders.select(builders.broadcast_in_dim(builders.mask_constant(keep), shape, matrix_dims), a, zero)
    eye = builders.select(builders.broadcast_in_dim(builders.mask_constant(np.eye(n, dtype=bool)), shape, matrix_dims),
                   builders.scalar_constant(1, et, shape), zero)
    inverse = builders.triangular_solve(masked, eye, left_side=True, lower=lower)
    return _split(inverse) if split else [inverse]


def _joined(op: ir.Operation, count: int) -> tuple[list[ir.Value], bool]:
    """The call's `count` matrix operands; a complex matrix comes as (real, imaginary)
    pairs of f32/f64 arrays (the TPU keeps 64-bit elements split), joined here."""
    operands = list(op.operands)
    if len(operands) == count:
        return operands, False
    if len(operands) != 2 * count:
        raise rewrite.op_error(op, f"expected {count} operand(s), or {2 * count} as real and imaginary parts; "
                              f"found {len(operands)}")
    return [builders.op1("stablehlo.complex", _as_complex(re_.type), [re_, im])
            for re_, im in zip(operands[::2], operands[1::2])], True


def _as_complex(t: ir.Type) -> ir.Type:
    t = ir.RankedTensorType(t)
    return ir.RankedTensorType.get(list(t.shape), ir.ComplexType.get(t.element_type))


def _split(value: ir.Value) -> list[ir.Value]:
    return [builders.real_part(value), builders.imag_part(value)]


def _lu_block(op: ir.Operation) -> list[ir.Value]:
    (a,), split = _joined(op, 1)
    target = rewrite.call_target(op)
    if target in LU_BY_KIND and LU_BY_KIND[target] != split:
        raise rewrite.op_error(op, f"{target} with {len(list(op.operands))} operand(s)")
    results = [r.type for r in op.results]
    pivots_t, perm_t = results[-2:]
    *batch, m, n = builders.shape_of(a)
    s32 = ir.IntegerType.get_signless(32)
    lu, ipiv, _info = jaxlib_cpu_call(
        f"lapack_{lapack_letter(op, a)}getrf_ffi", [a],
        [a.type, ir.RankedTensorType.get(batch + [min(m, n)], s32), ir.RankedTensorType.get(batch, s32)], aliases={0: 0})
    pivots = builders.binary("subtract", ipiv, builders.scalar_constant(1, s32, batch + [min(m, n)]))  # LAPACK's are 1-based
    perm_type = ir.RankedTensorType(perm_t)
    perm = pivots_to_permutation(pivots, perm_type.shape[-1], perm_type.element_type)
    return (_split(lu) if split else [lu]) + [builders.convert(pivots, ir.RankedTensorType(pivots_t).element_type), perm]


def _qr_block(op: ir.Operation) -> list[ir.Value]:
    (a,), split = _joined(op, 1)
    types = [r.type for r in op.results]
    if split:  # (a real, a imaginary, taus real, taus imaginary)
        types = [_as_complex(types[0]), _as_complex(types[2])]
    qr, taus = jaxlib_cpu_call(f"lapack_{lapack_letter(op, a)}geqrf_ffi", [a], types, aliases={0: 0})
    return _split(qr) + _split(taus) if split else [qr, taus]


def _compact_wy(op: ir.Operation) -> list[ir.Value]:
    (m,), split = _joined(op, 1)
    shape = builders.shape_of(m)
    rank = len(shape)
    diagonal = builders.compare(builders.iota(ir.IntegerType.get_signless(32), shape, rank - 2),
                         builders.iota(ir.IntegerType.get_signless(32), shape, rank - 1), "EQ", "SIGNED")
    d = builders.select(diagonal, m, builders.scalar_constant(0, builders.element_type_of(m), shape))
    # X · A = D with A unit upper triangular whose strict upper part is -N.
    t = builders.triangular_solve(builders.unary("negate", m), d, left_side=False, lower=False, unit_diagonal=True)
    return _split(t) if split else [t]


def _zero_padding(op: ir.Operation, value: ir.Value) -> int:
    """How many zero rows and columns the `pad` that made `value` appended, or 0."""
    producer = rewrite.defining_op(value)
    if producer is not None and producer.name == "func.call":
        # A kept fusion hides the pad: guessing 0 would mix the padding's eigenpairs in.
        raise rewrite.op_error(op, "the bottom-right block comes from a kept fusion, which hides how far the matrix "
                              "was padded; convert without --keep-fusions")
    if producer is None or producer.name != "stablehlo.pad":
        return 0
    low = list(ir.DenseI64ArrayAttr(producer.attributes["edge_padding_low"]))
    high = list(ir.DenseI64ArrayAttr(producer.attributes["edge_padding_high"]))
    interior = list(ir.DenseI64ArrayAttr(producer.attributes["interior_padding"]))
    fill = rewrite.defining_op(producer.operands[1])
    if any(low) or any(interior) or high[-1] != high[-2] or any(high[:-2]) or fill is None \
            or fill.name != "stablehlo.constant":
        return 0
    values = np.asarray(ir.DenseElementsAttr(fill.attributes["value"]))
    return high[-1] if values.size and not np.any(values) else 0


def _eigh_tpu(op: ir.Operation) -> list[ir.Value]:
    if len(op.operands) != 4 or len(op.results) != 6:
        raise rewrite.op_error(op, f"expected 4 operands and 6 results, found {len(op.operands)} and {len(op.results)}")
    tl, tr, bl, br = op.operands
    *batch, k, _ = builders.shape_of(tl)
    nb = len(batch)
    full = builders.concatenate([builders.concatenate([tl, tr], nb + 1), builders.concatenate([bl, br], nb + 1)], nb)
    padded = _zero_padding(op, br)
    n = 2 * k - padded
    a = builders.slice_(full, [0] * (nb + 2), batch + [n, n]) if padded else full
    element = builders.element_type_of(a)
    real = ir.RankedTensorType(op.results[0].type).element_type
    letter = lapack_letter(op, a)
    routine = "heevd" if letter in "cz" else "syevd"
    u8 = ir.IntegerType.get_unsigned(8)
    v, w, _info = jaxlib_cpu_call(
        f"lapack_{letter}{routine}_ffi", [a],
        [a.type, ir.RankedTensorType.get(batch + [n], real), ir.RankedTensorType.get(batch, ir.IntegerType.get_signless(32))],
        {"mode": ir.IntegerAttr.get(u8, ord("V")), "uplo": ir.IntegerAttr.get(u8, ord("L"))}, aliases={0: 0})
    # The kernel's blocks hold the eigenvectors as rows: the dump transposes the assembled
    # matrix (a bitcast to the other layout) before sorting its columns by eigenvalue.
    v = builders.transpose(v, list(range(nb)) + [nb + 1, nb])
    if padded:
        # Jacobi leaves each zero row/column where it is: eigenvalue 0, eigenvector e_j.
        w = builders.pad(w, [0] * (nb + 1), [0] * nb + [padded])
        keep = np.zeros((2 * k, 2 * k), dtype=bool)
        keep[n:, n:] = np.eye(padded, dtype=bool)
        unit = builders.broadcast_in_dim(builders.mask_constant(keep), batch + [2 * k, 2 * k], [nb, nb + 1])
        v = builders.pad(v, [0] * (nb + 2), [0] * nb + [padded, padded])
        v = builders.select(unit, builders.scalar_constant(1, element, batch + [2 * k, 2 * k]), v)
    zeros = [0] * nb
    halves = [builders.slice_(w, zeros + [0], batch + [k]), builders.slice_(w, zeros + [k], batch + [2 * k])]
    quadrants = [builders.slice_(v, zeros + [r0, c0], batch + [r0 + k, c0 + k]) for r0 in (0, k) for c0 in (0, k)]
    return halves + quadrants


LOWERINGS = {
    "AllocateBuffer": _allocate_buffer,
    "ConcatBitcast": _concat_bitcast,
    "AssumeGatherIndicesInBound": _identity,
    "GatherScatterIndicesBitpacked": _identity,
    "X64SplitLow": lambda op: _x64_split(op, high=False),
    "X64SplitHigh": lambda op: _x64_split(op, high=True),
    "X64Combine": _x64_combine,
    "Cholesky": _cholesky,
    "InvertDiagBlocksLowerTriangular": _invert_diagonal_blocks,
    "InvertDiagBlocksUpperTriangular": lambda op: _invert_diagonal_blocks(op, lower=False),
    "LuDecompositionBlock": _lu_block,
    "LuRealDecompositionBlock": _lu_block,
    "LuComplexDecompositionBlock": _lu_block,
    "QrDecompositionBlock": _qr_block,
    "CompactWyHelper": _compact_wy,
    "EighTpu": _eigh_tpu,
    PREPARE_DONE: _prepare_async_call_done,
}
