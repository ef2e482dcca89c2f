"""Async pairs become the synchronous op they wrap: on one CPU nothing overlaps.

`async-start(operands), calls=%wrapped` has the shape ((operands), result, context...):
the start's value is the operands' leaves, the wrapped computation's results and zeros
for the context; `async-update` forwards it; `async-done` takes the result element.
The sugar `<opcode>-start` / `-update` / `-done` that XLA prints for a single wrapped
instruction works the same way for any opcode that has an import rule.
"""

from __future__ import annotations

from converter.mlir import builders
from converter.importer.core import flat_leaves
from converter.importer.registry import RULES, import_rule, rule_factory


def context_zeros(ctx, first_context_element: int = 2) -> list:
    shape = ctx.shape
    return [builders.zeros_like_type(t) for s in shape.tuple_shapes[first_context_element:] for t in ctx.result_types(s)]


def _check_start_shape(ctx) -> None:
    if not ctx.shape.is_tuple or len(ctx.shape.tuple_shapes) < 2:
        raise ctx.error("an async start must have the shape ((operands), result, context...)")


@import_rule("async-start")
def import_async_start(ctx, *operands):
    _check_start_shape(ctx)
    args = [x if isinstance(x, list) else [x] for x in operands]
    results = ctx.inline(ctx.attrs["calls"][0], args)
    return flat_leaves(operands) + list(results) + context_zeros(ctx)


@import_rule("async-update")
def import_async_update(ctx, start):
    return start


@import_rule("async-done")
def import_async_done(ctx, start):
    shape = ctx.operand_shape(0)
    lo, hi = shape.leaf_range(1)
    return start[lo:hi]


@rule_factory
def async_sugar_rule(opcode: str):
    """`<op>-start` / `-update` / `-done` of any opcode with a rule: an async-wrapped op.

    (XLA prints e.g. `reduce-scatter-start` for a reduce-scatter wrapped in async-start.)"""
    for suffix in ("-start", "-update", "-done"):
        if opcode.endswith(suffix) and opcode[: -len(suffix)] in RULES:
            return _async_sugar_rule(opcode[: -len(suffix)], suffix)
    return None


def _async_sugar_rule(base: str, suffix: str):
    if suffix == "-update":
        return import_async_update
    if suffix == "-done":
        return import_async_done

    def import_sugared_start(ctx, *operands):
        _check_start_shape(ctx)
        out = RULES[base](ctx.with_shape(ctx.shape.tuple_shapes[1]), *operands)
        results = [out] if not isinstance(out, (list, tuple)) else list(out)
        return flat_leaves(operands) + results + context_zeros(ctx)

    return import_sugared_start
