"""What the GPU and TPU linear-algebra rewrites share: LAPACK's type letters for jaxlib's
CPU `lapack_*_ffi` targets, calls to those kernels laid out as JAX lays them out, and LU
pivots as a permutation in plain StableHLO."""

from __future__ import annotations

from collections.abc import Sequence

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

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


def lapack_char(c: str) -> ir.Attribute:
    """A LAPACK character argument ('V', 'N', 'L', ...) as jaxlib's typed-FFI calls take it: u8."""
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), ord(c))


def jaxlib_cpu_call(target: str, operands: Sequence[ir.Value], result_types: Sequence[ir.Type],
                    ffi_attrs: dict[str, ir.Attribute] | None = None,
                    aliases: dict[int, int] | None = None) -> list[ir.Value]:
    """A call to one of jaxlib's CPU linear-algebra kernels (`lapack_*_ffi`,
    `tridiagonal_solve_perturbed_ffi`) laid out as JAX's `_linalg_ffi_lowering` lays it out:
    every operand and result of the operands' largest rank is a batch of column-major
    matrices, the rest (vectors, info) row-major; typed FFI, attributes in
    `mhlo.backend_config`; `aliases` maps a result to the operand it overwrites."""
    ranks_in = [len(builders.shape_of(v)) for v in operands]
    matrix_rank = max(ranks_in)

    def layout(rank: int) -> ir.Attribute:
        return rewrite.lapack_layout(rank) if rank == matrix_rank else builders.layout_attr(range(rank - 1, -1, -1))

    attrs = {
        "call_target_name": ir.StringAttr.get(target),
        "api_version": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1),
        "backend_config": ir.StringAttr.get(""),
        "mhlo.backend_config": ir.DictAttr.get(ffi_attrs or {}),
        "operand_layouts": ir.ArrayAttr.get([layout(r) for r in ranks_in]),
        "result_layouts": ir.ArrayAttr.get([layout(len(ir.RankedTensorType(t).shape)) for t in result_types]),
    }
    if aliases:
        attrs["output_operand_aliases"] = ir.ArrayAttr.get(
            [stablehlo.OutputOperandAlias.get([result] if len(result_types) > 1 else [], operand, [])
             for result, operand in sorted(aliases.items())])
    return list(builders.op("stablehlo.custom_call", list(result_types), list(operands), attrs).results)
