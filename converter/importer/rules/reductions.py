"""Reductions: reduce, reduce-window and select-and-scatter, each with its computation."""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.mlir import builders
from converter.importer.registry import import_rule


@import_rule("reduce")
def import_reduce(ctx, *operands):
    n = len(operands) // 2
    inputs, inits = list(operands[:n]), list(operands[n:])
    op = builders.op("stablehlo.reduce", ctx.result_types(), inputs + inits,
              {"dimensions": builders.i64_array(ctx.attrs.get("dimensions", []))}, regions=1)
    comp = ctx.attrs["to_apply"]
    ctx.region(op.regions[0], comp, ctx.scalar_region_types(comp))
    return list(op.results)


def _window_attrs(ctx, rank: int) -> dict[str, ir.Attribute]:
    window = ctx.attrs.get("window")
    dims = window.dims if window is not None else ()
    if len(dims) != rank:
        raise ctx.error(f"window has {len(dims)} dimensions, the operand {rank}")
    return {
        "window_dimensions": builders.i64_array(d.size for d in dims),
        "window_strides": builders.i64_array(d.stride for d in dims),
        "base_dilations": builders.i64_array(d.lhs_dilation for d in dims),
        "window_dilations": builders.i64_array(d.rhs_dilation for d in dims),
        "padding": builders.i64_elements([[d.pad_low, d.pad_high] for d in dims], shape=(rank, 2)),
    }


@import_rule("reduce-window")
def import_reduce_window(ctx, *operands):
    n = len(operands) // 2
    inputs, inits = list(operands[:n]), list(operands[n:])
    window = ctx.attrs.get("window")
    if window is not None and any(d.reversal for d in window.dims):
        raise ctx.error("reduce-window with a reversed window")
    op = builders.op("stablehlo.reduce_window", ctx.result_types(), inputs + inits,
              _window_attrs(ctx, len(builders.shape_of(inputs[0]))), regions=1)
    comp = ctx.attrs["to_apply"]
    ctx.region(op.regions[0], comp, ctx.scalar_region_types(comp))
    return list(op.results)


@import_rule("select-and-scatter")
def import_select_and_scatter(ctx, operand, source, init):
    attrs = _window_attrs(ctx, len(builders.shape_of(operand)))
    if any(d.lhs_dilation != 1 or d.rhs_dilation != 1 for d in ctx.attrs["window"].dims):
        raise ctx.error("select-and-scatter with a dilated window")
    padding = attrs.pop("padding")
    op = builders.op("stablehlo.select_and_scatter", [ctx.result_type()], [operand, source, init], {
        "window_dimensions": attrs["window_dimensions"], "window_strides": attrs["window_strides"],
        "padding": padding}, regions=2)
    ctx.region(op.regions[0], ctx.attrs["select"], ctx.scalar_region_types(ctx.attrs["select"]))
    ctx.region(op.regions[1], ctx.attrs["scatter"], ctx.scalar_region_types(ctx.attrs["scatter"]))
    return op.result
