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
- `Cholesky(a)` — lower Cholesky factor (XLA's cholesky with lower=true; the upper
  triangle is unspecified there too).
- `InvertDiagBlocksLowerTriangular(a)` — XLA's TriangularSolveExpander step: each
  diagonal block (128 x 128 on TPU) of the lower-triangular `a` inverted, zeros
  elsewhere (xla/service/triangular_solve_expander.cc, InvertDiagonalBlocks).
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from passes import rewrite as rw
from passes.registry import PassOptions, register_pass

IDENTITY = ("AssumeGatherIndicesInBound", "GatherScatterIndicesBitpacked")
TARGETS = ("AllocateBuffer", "X64SplitLow", "X64SplitHigh", "X64Combine", "Cholesky",
           "InvertDiagBlocksLowerTriangular") + IDENTITY
# TriangularSolveExpander's block size on TPU.
DIAGONAL_BLOCK = 128


@register_pass("tpu-custom-calls",
               "TPU compiler custom-calls (AllocateBuffer, X64 split/combine, Cholesky, diagonal-block inverse, "
               "gather-index markers) → plain ops", targets=TARGETS)
def lower_tpu_custom_calls(module: ir.Module, options: PassOptions) -> None:
    for op in rw.custom_calls(module, TARGETS):
        target = rw.call_target(op)
        with rw.at(op):
            value = LOWERINGS[target](op)
        rw.replace(op, [value])


def _single_result(op: ir.Operation) -> ir.Type:
    if len(op.results) != 1:
        raise rw.op_error(op, f"expected one result, found {len(op.results)}")
    return op.results[0].type


def _identity(op: ir.Operation) -> ir.Value:
    if len(op.operands) != 1 or op.operands[0].type != _single_result(op):
        raise rw.op_error(op, "expected one operand of the result's type")
    return op.operands[0]


def _allocate_buffer(op: ir.Operation) -> ir.Value:
    return rw.build.zeros_like_type(_single_result(op))


def _x64_kind(op: ir.Operation, wide: ir.Type) -> str:
    if isinstance(wide, ir.ComplexType):
        return "complex"
    if isinstance(wide, ir.F64Type):
        return "float"
    if isinstance(wide, ir.IntegerType) and ir.IntegerType(wide).width == 64:
        return "integer"
    raise rw.op_error(op, f"a 64-bit split/combine of element type {wide}")


def _x64_split(op: ir.Operation, high: bool) -> ir.Value:
    b = rw.build
    (x,) = op.operands
    out_t = _single_result(op)
    half = ir.RankedTensorType(out_t).element_type
    wide = b.element_type_of(x)
    kind = _x64_kind(op, wide)
    if kind == "complex":
        return b.op1("stablehlo.imag" if high else "stablehlo.real", out_t, [x])
    if kind == "integer":
        u64 = ir.IntegerType.get_unsigned(64)
        bits = b.op1("stablehlo.bitcast_convert", b.tensor_type_like(x, element=u64), [x])
        if high:
            bits = b.binary("shift_right_logical", bits, b.scalar_constant(32, u64, b.shape_of(x)))
        word = b.convert(bits, ir.IntegerType.get_unsigned(32))  # keeps the low 32 bits
        return b.op1("stablehlo.bitcast_convert", out_t, [word]) if half != word.type.element_type else word
    head = b.convert(x, half)
    if not high:
        return head
    return b.convert(b.binary("subtract", x, b.convert(head, wide)), half)


def _x64_combine(op: ir.Operation) -> ir.Value:
    b = rw.build
    lo, hi = op.operands
    out_t = _single_result(op)
    wide = ir.RankedTensorType(out_t).element_type
    kind = _x64_kind(op, wide)
    if kind == "complex":
        return b.op1("stablehlo.complex", out_t, [lo, hi])
    if kind == "integer":
        u64 = ir.IntegerType.get_unsigned(64)
        u32 = ir.IntegerType.get_unsigned(32)
        words = [b.convert(b.op1("stablehlo.bitcast_convert", b.tensor_type_like(v, element=u32), [v])
                           if b.element_type_of(v) != u32 else v, u64) for v in (lo, hi)]
        shift = b.scalar_constant(32, u64, b.shape_of(lo))
        bits = b.binary("or", words[0], b.binary("shift_left", words[1], shift))
        return b.op1("stablehlo.bitcast_convert", out_t, [bits]) if wide != u64 else bits
    return b.binary("add", b.convert(lo, wide), b.convert(hi, wide))


def _cholesky(op: ir.Operation) -> ir.Value:
    (a,) = op.operands
    return rw.build.op1("stablehlo.cholesky", _single_result(op), [a], {"lower": ir.BoolAttr.get(True)})


def _invert_diagonal_blocks(op: ir.Operation) -> ir.Value:
    """Mask `a` to its lower-triangular diagonal blocks; the inverse of that block-
    diagonal matrix is the block-wise inverse, solved from the identity."""
    b = rw.build
    (a,) = op.operands
    out_t = _single_result(op)
    shape = b.shape_of(a)
    n = shape[-1]
    et = b.element_type_of(a)
    block = np.arange(n) // DIAGONAL_BLOCK
    keep = (block[:, None] == block[None, :]) & (np.arange(n)[:, None] >= np.arange(n)[None, :])
    mask_t = ir.RankedTensorType.get([n, n], ir.IntegerType.get_signless(1))
    mask = b.op1("stablehlo.constant", mask_t, [], {"value": ir.DenseElementsAttr.get(
        keep, type=ir.IntegerType.get_signless(1), shape=[n, n])})
    mask = b.broadcast_in_dim(mask, shape, [len(shape) - 2, len(shape) - 1])
    masked = b.select(mask, a, b.scalar_constant(0, et, shape))
    eye = b.broadcast_in_dim(b.op1("stablehlo.constant", ir.RankedTensorType.get([n, n], et), [], {
        "value": ir.DenseElementsAttr.get(np.eye(n, dtype=np.float32 if isinstance(et, ir.F32Type) else np.float64),
                                          type=et, shape=[n, n])}), shape, [len(shape) - 2, len(shape) - 1])
    return b.op1("stablehlo.triangular_solve", out_t, [masked, eye], {
        "left_side": ir.BoolAttr.get(True), "lower": ir.BoolAttr.get(True),
        "unit_diagonal": ir.BoolAttr.get(False), "transpose_a": stablehlo.TransposeAttr.get("NO_TRANSPOSE")})


LOWERINGS = {
    "AllocateBuffer": _allocate_buffer,
    "AssumeGatherIndicesInBound": _identity,
    "GatherScatterIndicesBitpacked": _identity,
    "X64SplitLow": lambda op: _x64_split(op, high=False),
    "X64SplitHigh": lambda op: _x64_split(op, high=True),
    "X64Combine": _x64_combine,
    "Cholesky": _cholesky,
    "InvertDiagBlocksLowerTriangular": _invert_diagonal_blocks,
}
