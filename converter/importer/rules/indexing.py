"""Reading and writing elements by index: gather, scatter, slice, dynamic-slice and
dynamic-update-slice."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from converter.importer.registry import import_rule


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
    return builders.op1("stablehlo.gather", ctx.result_type(), [operand, indices], {
        "dimension_numbers": dnums,
        "slice_sizes": builders.i64_array(a["slice_sizes"]),
        "indices_are_sorted": ir.BoolAttr.get(bool(a.get("indices_are_sorted", False))),
    })


@import_rule("scatter")
def import_scatter(ctx, *operands):
    n = (len(operands) - 1) // 2
    inputs, indices, updates = list(operands[:n]), operands[n], list(operands[n + 1:])
    a = ctx.attrs
    update_shape = builders.shape_of(updates[0])
    dropped, inserted = _unit_windows_inserted(
        builders.shape_of(inputs[0]), update_shape, list(a.get("update_window_dims", [])),
        list(a.get("inserted_window_dims", [])), list(a.get("input_batching_dims", [])),
        list(a.get("scatter_dims_to_operand_dims", [])))
    window_dims = list(a.get("update_window_dims", []))
    if dropped:
        kept = [d for d in range(len(update_shape)) if d not in dropped]
        updates = [builders.reshape(u, [update_shape[d] for d in kept]) for u in updates]
        window_dims = [kept.index(d) for d in window_dims if d not in dropped]
    dnums = stablehlo.ScatterDimensionNumbers.get(
        update_window_dims=window_dims,
        inserted_window_dims=inserted,
        input_batching_dims=a.get("input_batching_dims", []),
        scatter_indices_batching_dims=a.get("scatter_indices_batching_dims", []),
        scattered_dims_to_operand_dims=a.get("scatter_dims_to_operand_dims", []),
        index_vector_dim=a["index_vector_dim"],
    )
    op = builders.op("stablehlo.scatter", ctx.result_types(), inputs + [indices] + updates, {
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


@import_rule("slice", pure=True)
def import_slice(ctx, x):
    dims = ctx.attrs["slice"]
    return builders.op1("stablehlo.slice", ctx.result_type(), [x], {
        "start_indices": builders.i64_array(d.start for d in dims),
        "limit_indices": builders.i64_array(d.limit for d in dims),
        "strides": builders.i64_array(d.stride for d in dims),
    })


def _index_scalars(ctx, operand_rank: int, indices: tuple) -> list[ir.Value]:
    """Start indices as scalars; older dumps pass one rank-1 index vector."""
    if len(indices) == 1 and builders.shape_of(indices[0]) != []:
        vec = indices[0]
        if builders.shape_of(vec) != [operand_rank]:
            raise ctx.error("expected one start index per operand dimension")
        return [builders.reshape(builders.slice_(vec, [i], [i + 1]), []) for i in range(operand_rank)]
    return list(indices)


@import_rule("dynamic-slice", pure=True)
def import_dynamic_slice(ctx, x, *indices):
    starts = _index_scalars(ctx, len(builders.shape_of(x)), indices)
    return builders.op1("stablehlo.dynamic_slice", ctx.result_type(), [x, *starts],
                 {"slice_sizes": builders.i64_array(ctx.attrs["dynamic_slice_sizes"])})


@import_rule("dynamic-update-slice", pure=True)
def import_dynamic_update_slice(ctx, x, update, *indices):
    starts = _index_scalars(ctx, len(builders.shape_of(x)), indices)
    update = builders.match_float(update, builders.element_type_of(x))
    return builders.op1("stablehlo.dynamic_update_slice", ctx.result_type(), [x, update, *starts])
