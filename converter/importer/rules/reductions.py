"""Reductions and ops with a computation applied elementwise: reduce, reduce-window,
select-and-scatter, sort, map, topk, gather and scatter."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders as b
from converter.importer.registry import import_rule


def _scalar_types(values) -> list[list[ir.Type]]:
    return [[ir.RankedTensorType.get([], b.element_type_of(v))] for v in values]


@import_rule("reduce")
def import_reduce(ctx, *operands):
    n = len(operands) // 2
    inputs, inits = list(operands[:n]), list(operands[n:])
    op = b.op("stablehlo.reduce", ctx.result_types(), inputs + inits,
              {"dimensions": b.i64_array(ctx.attrs.get("dimensions", []))}, regions=1)
    comp = ctx.attrs["to_apply"]
    ctx.region(op.regions[0], comp, ctx.scalar_region_types(comp))
    return list(op.results)


def _window_attrs(ctx, rank: int) -> dict[str, ir.Attribute]:
    window = ctx.attrs.get("window")
    dims = window.dims if window is not None else ()
    if len(dims) != rank:
        raise ctx.error(f"window has {len(dims)} dimensions, the operand {rank}")
    return {
        "window_dimensions": b.i64_array(d.size for d in dims),
        "window_strides": b.i64_array(d.stride for d in dims),
        "base_dilations": b.i64_array(d.lhs_dilation for d in dims),
        "window_dilations": b.i64_array(d.rhs_dilation for d in dims),
        "padding": b.i64_elements([[d.pad_low, d.pad_high] for d in dims], shape=(rank, 2)),
    }


@import_rule("reduce-window")
def import_reduce_window(ctx, *operands):
    n = len(operands) // 2
    inputs, inits = list(operands[:n]), list(operands[n:])
    window = ctx.attrs.get("window")
    if window is not None and any(d.reversal for d in window.dims):
        raise ctx.error("reduce-window with a reversed window")
    op = b.op("stablehlo.reduce_window", ctx.result_types(), inputs + inits,
              _window_attrs(ctx, len(b.shape_of(inputs[0]))), regions=1)
    comp = ctx.attrs["to_apply"]
    ctx.region(op.regions[0], comp, ctx.scalar_region_types(comp))
    return list(op.results)


@import_rule("select-and-scatter")
def import_select_and_scatter(ctx, operand, source, init):
    attrs = _window_attrs(ctx, len(b.shape_of(operand)))
    if any(d.lhs_dilation != 1 or d.rhs_dilation != 1 for d in ctx.attrs["window"].dims):
        raise ctx.error("select-and-scatter with a dilated window")
    padding = attrs.pop("padding")
    op = b.op("stablehlo.select_and_scatter", [ctx.result_type()], [operand, source, init], {
        "window_dimensions": attrs["window_dimensions"], "window_strides": attrs["window_strides"],
        "padding": padding}, regions=2)
    ctx.region(op.regions[0], ctx.attrs["select"], ctx.scalar_region_types(ctx.attrs["select"]))
    ctx.region(op.regions[1], ctx.attrs["scatter"], ctx.scalar_region_types(ctx.attrs["scatter"]))
    return op.result


@import_rule("sort")
def import_sort(ctx, *operands):
    dims = ctx.attrs.get("dimensions", [0])
    op = b.op("stablehlo.sort", ctx.result_types(), list(operands), {
        "dimension": b.i64_attr(dims[0]),
        "is_stable": ir.BoolAttr.get(bool(ctx.attrs.get("is_stable", False))),
    }, regions=1)
    comp = ctx.attrs["to_apply"]
    ctx.region(op.regions[0], comp, ctx.scalar_region_types(comp))
    return list(op.results)


@import_rule("map")
def import_map(ctx, *operands):
    op = b.op("stablehlo.map", [ctx.result_type()], list(operands),
              {"dimensions": b.i64_array(ctx.attrs.get("dimensions", range(len(b.shape_of(operands[0])))))},
              regions=1)
    comp = ctx.attrs["to_apply"]
    ctx.region(op.regions[0], comp, ctx.scalar_region_types(comp))
    return op.result


def sort_top_k(x: ir.Value, k: int, largest: bool = True) -> tuple[ir.Value, ir.Value]:
    """Top-k along the last dimension as a stable sort of (value, index) pairs and a
    slice: ties keep the lower index first, as XLA's TopK does.  Floats compare in
    total order so NaN sorts as the largest value (above +inf)."""
    shape = b.shape_of(x)
    rank = len(shape)
    i32 = ir.IntegerType.get_signless(32)
    indices = b.iota(i32, shape, rank - 1)
    et = b.element_type_of(x)
    scalar = ir.RankedTensorType.get([], et)
    iscalar = ir.RankedTensorType.get([], i32)
    op = b.op("stablehlo.sort", [x.type, indices.type], [x, indices], {
        "dimension": b.i64_attr(rank - 1), "is_stable": ir.BoolAttr.get(True)}, regions=1)
    block = op.regions[0].blocks.append(scalar, scalar, iscalar, iscalar)
    with ir.InsertionPoint(block):
        a, c = block.arguments[0], block.arguments[1]
        is_float = not isinstance(et, ir.IntegerType)
        unsigned = isinstance(et, ir.IntegerType) and ir.IntegerType(et).is_unsigned
        kind = "TOTALORDER" if is_float else ("UNSIGNED" if unsigned else "SIGNED")
        stablehlo.ReturnOp([b.compare(a, c, "GT" if largest else "LT", kind)])
    values, idx = op.results
    limit = shape[:-1] + [k]
    return b.slice_(values, [0] * rank, limit), b.slice_(idx, [0] * rank, limit)


@import_rule("topk")
def import_topk(ctx, x):
    values, indices = sort_top_k(x, int(ctx.attrs["k"]), bool(ctx.attrs.get("largest", True)))
    types = ctx.result_types()
    return [values, b.convert(indices, ir.RankedTensorType(types[1]).element_type)]


@import_rule("gather")
def import_gather(ctx, operand, indices):
    a = ctx.attrs
    dnums = stablehlo.GatherDimensionNumbers.get(
        offset_dims=a.get("offset_dims", []),
        collapsed_slice_dims=a.get("collapsed_slice_dims", []),
        operand_batching_dims=a.get("operand_batching_dims", []),
        start_indices_batching_dims=a.get("start_indices_batching_dims", []),
        start_index_map=a.get("start_index_map", []),
        index_vector_dim=a["index_vector_dim"],
    )
    return b.op1("stablehlo.gather", ctx.result_type(), [operand, indices], {
        "dimension_numbers": dnums,
        "slice_sizes": b.i64_array(a["slice_sizes"]),
        "indices_are_sorted": ir.BoolAttr.get(bool(a.get("indices_are_sorted", False))),
    })


@import_rule("scatter")
def import_scatter(ctx, *operands):
    n = (len(operands) - 1) // 2
    inputs, indices, updates = list(operands[:n]), operands[n], list(operands[n + 1:])
    a = ctx.attrs
    update_shape = b.shape_of(updates[0])
    dropped, inserted = _unit_windows_inserted(
        b.shape_of(inputs[0]), update_shape, list(a.get("update_window_dims", [])),
        list(a.get("inserted_window_dims", [])), list(a.get("input_batching_dims", [])),
        list(a.get("scatter_dims_to_operand_dims", [])))
    window_dims = list(a.get("update_window_dims", []))
    if dropped:
        kept = [d for d in range(len(update_shape)) if d not in dropped]
        updates = [b.reshape(u, [update_shape[d] for d in kept]) for u in updates]
        window_dims = [kept.index(d) for d in window_dims if d not in dropped]
    dnums = stablehlo.ScatterDimensionNumbers.get(
        update_window_dims=window_dims,
        inserted_window_dims=inserted,
        input_batching_dims=a.get("input_batching_dims", []),
        scatter_indices_batching_dims=a.get("scatter_indices_batching_dims", []),
        scattered_dims_to_operand_dims=a.get("scatter_dims_to_operand_dims", []),
        index_vector_dim=a["index_vector_dim"],
    )
    op = b.op("stablehlo.scatter", ctx.result_types(), inputs + [indices] + updates, {
        "scatter_dimension_numbers": dnums,
        "indices_are_sorted": ir.BoolAttr.get(bool(a.get("indices_are_sorted", False))),
        "unique_indices": ir.BoolAttr.get(bool(a.get("unique_indices", False))),
    }, regions=1)
    comp = a["to_apply"]
    ctx.region(op.regions[0], comp, ctx.scalar_region_types(comp))
    return list(op.results)


def _unit_windows_inserted(operand: list[int], updates: list[int], window_dims: list[int], inserted: list[int],
                           batching: list[int], scattered: list[int]) -> tuple[list[int], list[int]]:
    """Window dimensions of size 1 along operand dimensions that an index places are the
    same as inserted window dimensions (a window of one element at the index).  XLA writes
    either form; the inserted one is the form other compilers also take (IREE rejects
    unit update windows over indexed dimensions).  Returns the update dimensions to drop
    and the inserted dims."""
    if batching:
        return [], inserted
    operand_windows = [d for d in range(len(operand)) if d not in inserted]
    pairs = [(u, d) for u, d in zip(window_dims, operand_windows) if updates[u] == 1 and d in scattered]
    return [u for u, _ in pairs], sorted(inserted + [d for _, d in pairs])
