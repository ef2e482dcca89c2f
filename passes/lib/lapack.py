"""What the GPU and TPU linear-algebra rewrites share: LAPACK's type letters for jaxlib's
CPU `lapack_*_ffi` targets, and LU pivots as a permutation in plain StableHLO."""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite

LAPACK_TYPE_LETTER = {"f32": "s", "f64": "d", "complex<f32>": "c", "complex<f64>": "z"}


def lapack_letter(op: ir.Operation, x: ir.Value) -> str:
    """LAPACK's letter for the element type of `x` (s, d, c, z)."""
    element = builders.element_type_of(x)
    letter = LAPACK_TYPE_LETTER.get(str(element))
    if letter is None:
        raise rewrite.op_error(op, f"LAPACK has no routine for {element}")
    return letter


def pivots_to_permutation(pivots: ir.Value, size: int, element: ir.Type) -> ir.Value:
    """perm = iota; for i < k: swap perm[i], perm[pivots[i]] (pivots 0-based; out-of-range
    pivots skipped, as jaxlib's kernel does), per batch element."""
    *batch, k = builders.shape_of(pivots)
    s32 = ir.IntegerType.get_signless(32)
    nb = len(batch)
    zero = builders.scalar_constant(0, s32)
    pivots = builders.convert(pivots, s32)
    start = builders.iota(s32, batch + [size], nb)
    positions = builders.iota(s32, batch + [size], nb)

    def cond(i, perm):
        return builders.compare(i, builders.scalar_constant(k, s32), "LT", "SIGNED")

    def body(i, perm):
        j = builders.reshape(builders.dynamic_slice(pivots, [zero] * nb + [i], batch + [1]), batch)
        valid = builders.binary("and", builders.compare(j, builders.scalar_constant(0, s32, batch), "GE", "SIGNED"),
                         builders.compare(j, builders.scalar_constant(size, s32, batch), "LT", "SIGNED"))
        j = builders.select(valid, j, builders.broadcast_in_dim(i, batch, []))
        at_i = builders.compare(positions, builders.broadcast_in_dim(i, batch + [size], []), "EQ", "SIGNED")
        at_j = builders.compare(positions, builders.broadcast_in_dim(j, batch + [size], list(range(nb))), "EQ", "SIGNED")
        value_i = builders.reduce(builders.select(at_i, perm, builders.scalar_constant(0, s32, batch + [size])), [nb], "add", 0)
        value_j = builders.reduce(builders.select(at_j, perm, builders.scalar_constant(0, s32, batch + [size])), [nb], "add", 0)
        spread = list(range(nb))
        perm = builders.select(at_i, builders.broadcast_in_dim(value_j, batch + [size], spread), perm)
        perm = builders.select(at_j, builders.broadcast_in_dim(value_i, batch + [size], spread), perm)
        return [builders.binary("add", i, builders.scalar_constant(1, s32)), perm]

    _, perm = builders.while_loop([zero, start], cond, body)
    return builders.convert(perm, element)
