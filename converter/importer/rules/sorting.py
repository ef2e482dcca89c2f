"""Sorting: sort (with its comparator computation) and topk."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from converter.importer.registry import import_rule


@import_rule("sort")
def import_sort(ctx, *operands):
    dims = ctx.attrs.get("dimensions", [0])
    op = builders.op("stablehlo.sort", ctx.result_types(), list(operands), {
        "dimension": builders.i64_attr(dims[0]),
        "is_stable": ir.BoolAttr.get(bool(ctx.attrs.get("is_stable", False))),
    }, regions=1)
    comp = ctx.attrs["to_apply"]
    ctx.region(op.regions[0], comp, ctx.scalar_region_types(comp))
    return list(op.results)


def sort_top_k(x: ir.Value, k: int, largest: bool = True) -> tuple[ir.Value, ir.Value]:
    """Top-k along the last dimension as a stable sort of (value, index) pairs and a
    slice: ties keep the lower index first, as XLA's TopK does.  Floats compare in
    total order so NaN sorts as the largest value (above +inf)."""
    shape = builders.shape_of(x)
    rank = len(shape)
    i32 = ir.IntegerType.get_signless(32)
    indices = builders.iota(i32, shape, rank - 1)
    et = builders.element_type_of(x)
    scalar = ir.RankedTensorType.get([], et)
    iscalar = ir.RankedTensorType.get([], i32)
    op = builders.op("stablehlo.sort", [x.type, indices.type], [x, indices], {
        "dimension": builders.i64_attr(rank - 1), "is_stable": ir.BoolAttr.get(True)}, regions=1)
    block = op.regions[0].blocks.append(scalar, scalar, iscalar, iscalar)
    with ir.InsertionPoint(block):
        a, c = block.arguments[0], block.arguments[1]
        is_float = not isinstance(et, ir.IntegerType)
        unsigned = isinstance(et, ir.IntegerType) and ir.IntegerType(et).is_unsigned
        kind = "TOTALORDER" if is_float else ("UNSIGNED" if unsigned else "SIGNED")
        stablehlo.ReturnOp([builders.compare(a, c, "GT" if largest else "LT", kind)])
    values, idx = op.results
    limit = shape[:-1] + [k]
    return builders.slice_(values, [0] * rank, limit), builders.slice_(idx, [0] * rank, limit)


@import_rule("topk")
def import_topk(ctx, x):
    values, indices = sort_top_k(x, int(ctx.attrs["k"]), bool(ctx.attrs.get("largest", True)))
    types = ctx.result_types()
    return [values, builders.convert(indices, ir.RankedTensorType(types[1]).element_type)]
