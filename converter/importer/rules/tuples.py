"""Tuples: tuple and get-tuple-element (a tuple is its list of leaf values)."""

from __future__ import annotations

from converter.hlo.printer import shape_to_text
from converter.importer.core import flat_leaves
from converter.importer.registry import import_rule


@import_rule("tuple", builds_ops=False)
def import_tuple(ctx, *operands):
    return flat_leaves(operands)


@import_rule("get-tuple-element", builds_ops=False)
def import_get_tuple_element(ctx, operand):
    index = ctx.attrs["index"]
    shape = ctx.operand_shape(0)
    if not shape.is_tuple or not 0 <= index < len(shape.tuple_shapes):
        raise ctx.error(f"index {index} is out of range for {shape_to_text(shape, False)}")
    starts = ctx.module_importer.leaf_starts(shape)
    return operand[starts[index] : starts[index + 1]]
