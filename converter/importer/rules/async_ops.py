"""Async pairs become the synchronous op they wrap: on one CPU nothing overlaps.

`async-start(operands), calls=%wrapped` has the shape ((operands), result, context...):
the start's value is the operands' leaves, the wrapped computation's results and zeros
for the context; `async-update` forwards it; `async-done` takes the result element.
The sugar `<opcode>-start` / `-update` / `-done` that XLA prints for a single wrapped
instruction works the same way for any opcode that has an import rule; a `call-start()`
whose operands come in its `call-update` (TPU SparseCore offloads) calls at the update.
"""

from __future__ import annotations

from converter.mlir import builders
from converter.importer.core import RuleContext, flat_leaves
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


def _operands_come_later(ctx, operands) -> bool:
    """A `call-start()` that passes its computation fewer operands than it takes, with an
    empty result: TPU SparseCore offloads (v6e's scatter) start the call early and hand
    it its operands in the `call-update` (shape ((operands), result))."""
    called = ctx.attrs.get("to_apply")
    return (isinstance(called, str) and not ctx.shape.tuple_shapes[1].leaf_count()
            and len(operands) < len(ctx.computation(called).parameters))


def _async_sugar_rule(base: str, suffix: str):
    if suffix == "-done":
        return import_async_done

    def run_wrapped(ctx, operands):
        out = RULES[base](ctx.with_shape(ctx.shape.tuple_shapes[1]), *operands)
        results = [out] if not isinstance(out, (list, tuple)) else list(out)
        return flat_leaves(operands) + results + context_zeros(ctx)

    if suffix == "-update":
        def import_sugared_update(ctx, start, *late_operands):
            if not late_operands:
                return start
            _check_start_shape(ctx)
            start_ctx = RuleContext(ctx.module_importer, ctx.computation_importer, ctx.operand_instruction(0),
                                    ctx.shape)
            if not _operands_come_later(start_ctx.with_shape(ctx.operand_shape(0)), start_ctx.instr.operands):
                raise ctx.error(f"'{ctx.opcode}' passes operands to a start that already has its own")
            return run_wrapped(start_ctx, late_operands)
        return import_sugared_update

    def import_sugared_start(ctx, *operands):
        _check_start_shape(ctx)
        if _operands_come_later(ctx, operands):
            return flat_leaves(operands) + context_zeros(ctx)
        return run_wrapped(ctx, operands)

    return import_sugared_start
