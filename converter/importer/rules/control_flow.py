"""Calls, fusions, while loops and conditionals, and the ops that only order things
(optimization barriers, tokens, add-dependency, domain)."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func, stablehlo

from converter.mlir import builders
from converter.importer.core import ComputationImporter, operand_leaves
from converter.importer.registry import import_rule


# Inlined: the called computation's ops carry their own instructions' locations (no
# location is made for the call, a tenth of a fusion-heavy dump's instructions).
@import_rule("call", located=False)
def import_call(ctx, *operands):
    return ctx.inline(ctx.attrs["to_apply"], [operand_leaves(x) for x in operands])


@import_rule("fusion", located=False)
def import_fusion(ctx, *operands):
    calls = ctx.attrs["calls"]
    args = [operand_leaves(x) for x in operands]
    if not ctx.module_importer.options.keep_fusions:
        return ctx.inline(calls[0], args)
    comp = ctx.computation(calls[0])
    flat = [v for group in args for v in group]
    name, result_types = ctx.module_importer.fusion_function(comp, [v.type for v in flat])
    with ctx.module_importer.location(ctx.instr):
        call = func.CallOp(result_types, ir.FlatSymbolRefAttr.get(name), flat)
    kind = ctx.attrs.get("kind")
    if kind:
        call.attributes["hlo.fusion_kind"] = ir.StringAttr.get(kind)
    return list(call.results)


@import_rule("while")
def import_while(ctx, init):
    init = operand_leaves(init)
    types = [v.type for v in init]
    plan = ctx.module_importer.tap_plan
    taps = plan.in_loop_body.get(ctx.attrs["body"], []) if plan is not None else []
    monitor = ctx.module_importer.monitor
    if monitor is not None and monitor.frames[-1].path is not None:
        frame = monitor.frames[-1]
        path = frame.path + (frame.position,)
        loop = monitor.plan.loops.get(path)
        if loop is not None:
            if taps:
                raise ctx.error("--find-nonfinite cannot also tap instructions inside this loop's body")
            from converter.importer.nonfinite_monitor import import_monitored_while

            return import_monitored_while(ctx, init, loop, path)
    if taps:
        return _while_with_taps(ctx, init, taps)
    op = builders.op("stablehlo.while", types, init, regions=2)
    # Condition and body take the whole loop state (tuple or array) as one parameter.
    ctx.region(op.regions[0], ctx.attrs["condition"], [types])
    ctx.region(op.regions[1], ctx.attrs["body"], [types])
    return list(op.results)


def _while_with_taps(ctx, init: list, taps: list[str]) -> list:
    """A while loop that also carries the values of the taps inside its body: each
    iteration overwrites them, so the loop's extra results are the last iteration's
    values (zeros when it runs none); recorded as the taps' values outside the loop.
    It carries an iteration counter where the plan asks for `iterations:WHILE` (a loop of
    unknown trip count) or with --tap-iterations (the plan's `stacked`), which carries per
    tap a buffer of the selected iterations that each iteration writes its value into."""
    module_importer = ctx.module_importer
    plan = module_importer.tap_plan
    body_name = ctx.attrs["body"]
    stacked = plan.stacked.get(body_name)
    n = len(init)
    zeros = []
    for name in taps:
        inner = plan.stack_dims(name, body_name)
        outer = ([stacked[1]] if stacked else []) + inner
        for leaf in plan.instructions[name].shape.leaves():
            if not leaf.is_token:
                zeros.append(ctx.constant(0, leaf.element_type, outer + list(leaf.dims)))
    from converter.importer.taps import ITERATIONS, array_leaf_mask

    counted = plan.wanted(ITERATIONS + ctx.instr.name)
    counter = [builders.scalar_constant(0, ir.IntegerType.get_signless(32))] if stacked or counted else []
    state = init + counter + zeros
    op = builders.op("stablehlo.while", [v.type for v in state], state, regions=2)
    for is_body, comp_name in ((False, ctx.attrs["condition"]), (True, body_name)):
        block = op.regions[int(is_body)].blocks.append(*[v.type for v in state])
        arguments = list(block.arguments)
        args = [arguments[:n]]
        comp = ctx.computation(comp_name)
        with ir.InsertionPoint(block):
            module_importer.tap_collectors.append({})
            results = ComputationImporter(module_importer, comp, args).run()
            recorded = module_importer.tap_collectors.pop()
            if is_body:
                values = module_importer.tap_values(taps, recorded)
                if counter:
                    i = arguments[n]
                    if stacked:
                        buffers = arguments[n + 1:]
                        values = [_write_iteration(buffer, value, i, stacked) for buffer, value in zip(buffers, values)]
                    one = builders.scalar_constant(1, ir.IntegerType.get_signless(32))
                    values = [builders.binary("add", i, one)] + values
                results = list(results) + values
            with module_importer.location(comp.root):
                stablehlo.ReturnOp(results)
    carried = list(op.results)[n + len(counter):]
    if counted:
        module_importer.record_tap(ITERATIONS + ctx.instr.name, [op.results[n]])
    for name in taps:
        mask = array_leaf_mask(plan.instructions[name])
        count = sum(mask)
        leaves, carried = carried[:count], carried[count:]
        # Token leaves are not carried; the recorded value holds array leaves only, in
        # the positions tap_values reads them from.
        it = iter(leaves)
        module_importer.record_tap(name, [next(it) if keep else None for keep in mask])
    return list(op.results)[:n]


def _write_iteration(buffer: ir.Value, value: ir.Value, counter: ir.Value, stacked: tuple[int, int]) -> ir.Value:
    """`buffer` with row `counter - first` set to `value` when the counter is among the
    selected iterations (the row written back unchanged otherwise: an in-place update)."""
    first, count = stacked
    if count == 0:  # a loop known to run no iteration: nothing to write
        return buffer
    i32 = ir.IntegerType.get_signless(32)
    dims = builders.shape_of(buffer)
    row = builders.binary("subtract", counter, builders.scalar_constant(first, i32))
    selected = builders.binary("and", builders.compare(row, builders.scalar_constant(0, i32), "GE"),
                               builders.compare(row, builders.scalar_constant(count, i32), "LT"))
    at = builders.op1("stablehlo.clamp", row.type, [builders.scalar_constant(0, i32), row,
                                                    builders.scalar_constant(count - 1, i32)])
    zero = builders.scalar_constant(0, i32)
    starts = [at] + [zero] * (len(dims) - 1)
    old = builders.dynamic_slice(buffer, starts, [1] + dims[1:])
    new = builders.select(builders.broadcast_in_dim(selected, [1] + dims[1:], []),
                          builders.reshape(value, [1] + dims[1:]), old)
    return builders.dynamic_update_slice(buffer, new, starts)


@import_rule("conditional")
def import_conditional(ctx, selector, *branch_operands):
    result_types = ctx.result_types()
    if "branch_computations" in ctx.attrs:
        branches = ctx.attrs["branch_computations"]
    else:
        branches = [ctx.attrs["true_computation"], ctx.attrs["false_computation"]]
    if len(branches) != len(branch_operands):
        raise ctx.error(f"{len(branches)} branches but {len(branch_operands)} branch operands")
    if "branch_computations" in ctx.attrs:
        op = builders.op("stablehlo.case", result_types, [selector], regions=len(branches))
    else:
        op = builders.op("stablehlo.if", result_types, [selector], regions=2)
    for region, comp_name, operand in zip(op.regions, branches, branch_operands):
        # Branch regions capture their operand from the enclosing scope.
        block = region.blocks.append()
        with ir.InsertionPoint(block):
            results = ctx.inline(comp_name, [operand_leaves(operand)])
            stablehlo.ReturnOp(results)
    return list(op.results)


@import_rule("opt-barrier", "optimization-barrier")
def import_optimization_barrier(ctx, operand):
    leaves = operand_leaves(operand)
    return list(builders.op("stablehlo.optimization_barrier", [v.type for v in leaves], leaves).results)


@import_rule("after-all")
def import_after_all(ctx, *tokens):
    return builders.op1("stablehlo.after_all", stablehlo.TokenType.get(), list(tokens))


@import_rule("add-dependency")
def import_add_dependency(ctx, operand, token):
    # Orders operand after token; the identity on values.
    return operand


@import_rule("domain")
def import_domain(ctx, operand):
    return operand
