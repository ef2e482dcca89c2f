"""What the GPU and TPU linear-algebra rewrites share: LAPACK's type letters for jaxlib's
CPU `lapack_*_ffi` targets, and LU pivots as a permutation in plain StableHLO."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib import rewrite as rw

LAPACK_TYPE_LETTER = {"f32": "s", "f64": "d", "complex<f32>": "c", "complex<f64>": "z"}


def lapack_letter(op: ir.Operation, x: ir.Value) -> str:
    """LAPACK's letter for the element type of `x` (s, d, c, z)."""
    element = rw.build.element_type_of(x)
    letter = LAPACK_TYPE_LETTER.get(str(element))
    if letter is None:
        raise rw.op_error(op, f"LAPACK has no routine for {element}")
    return letter


def pivots_to_permutation(pivots: ir.Value, size: int, element: ir.Type) -> ir.Value:
    """perm = iota; for i < k: swap perm[i], perm[pivots[i]] (pivots 0-based; out-of-range
    pivots skipped, as jaxlib's kernel does), per batch element."""
    b = rw.build
    *batch, k = b.shape_of(pivots)
    s32 = ir.IntegerType.get_signless(32)
    nb = len(batch)
    zero = b.scalar_constant(0, s32)
    pivots = b.convert(pivots, s32)
    start = b.iota(s32, batch + [size], nb)
    positions = b.iota(s32, batch + [size], nb)

    def cond(i, perm):
        return b.compare(i, b.scalar_constant(k, s32), "LT", "SIGNED")

    def body(i, perm):
        j = b.reshape(b.dynamic_slice(pivots, [zero] * nb + [i], batch + [1]), batch)
        valid = b.binary("and", b.compare(j, b.scalar_constant(0, s32, batch), "GE", "SIGNED"),
                         b.compare(j, b.scalar_constant(size, s32, batch), "LT", "SIGNED"))
        j = b.select(valid, j, b.broadcast_in_dim(i, batch, []))
        at_i = b.compare(positions, b.broadcast_in_dim(i, batch + [size], []), "EQ", "SIGNED")
        at_j = b.compare(positions, b.broadcast_in_dim(j, batch + [size], list(range(nb))), "EQ", "SIGNED")
        value_i = b.reduce(b.select(at_i, perm, b.scalar_constant(0, s32, batch + [size])), [nb], "add", 0)
        value_j = b.reduce(b.select(at_j, perm, b.scalar_constant(0, s32, batch + [size])), [nb], "add", 0)
        spread = list(range(nb))
        perm = b.select(at_i, b.broadcast_in_dim(value_j, batch + [size], spread), perm)
        perm = b.select(at_j, b.broadcast_in_dim(value_i, batch + [size], spread), perm)
        return [b.binary("add", i, b.scalar_constant(1, s32)), perm]

    _, perm = b.while_loop([zero, start], cond, body)
    return b.convert(perm, element)
