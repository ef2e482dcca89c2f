"""Constants, tuples, calls, fusions, control flow and the ops that only order things."""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func, stablehlo

from converter.hlo.ir import Shape
from converter.hlo.printer import shape_to_text
from converter.importer import build as b
from converter.importer.core import ComputationImporter, dense_elements
from converter.importer.registry import import_rule


@import_rule("constant")
def import_constant(ctx):
    instr = ctx.instr
    if instr.shape.is_tuple:
        return [_array_constant(ctx, v, s) for v, s in zip(_flatten(instr.literal), instr.shape.leaves())]
    return _array_constant(ctx, instr.literal, instr.shape)


def _flatten(literal):
    if isinstance(literal, tuple):
        return [x for item in literal for x in _flatten(item)]
    return [literal]


def _array_constant(ctx, value, shape: Shape) -> ir.Value:
    from converter import dtypes

    if shape.is_token:
        return b.op1("stablehlo.after_all", stablehlo.TokenType.get(), [])
    if value is None:
        policy = ctx.mi.options.elided_constants
        if policy == "mark":
            ctx.mi.elided_constants.append(ctx.instr.name)
            policy = "zeros"
        if policy == "error":
            raise ctx.error(
                f"the dump elides this constant's {shape.num_elements()} values ('{{...}}'); re-dump with "
                "XLA_FLAGS=--xla_dump_large_constants (or print with print_large_constants), or pass "
                "--elided-constants=zeros|random to run with made-up values")
        dtype = dtypes.numpy_dtype(shape.element_type)
        if ctx.mi.elided_constants and ctx.mi.elided_constants[-1] == ctx.instr.name:
            # Marked: execution refuses, so the zeros are never materialized; a splat
            # holds them in constant space whatever the size.
            return b.op1("stablehlo.constant", ctx.result_type(shape), [],
                         {"value": dense_elements(np.zeros((), dtype), shape.element_type, shape.dims)})
        from converter.resources import check_fits

        # Made-up values to run with: XLA materializes them, and so does NumPy for random ones.
        check_fits(shape.byte_size() * (1 if policy == "zeros" else 3),
                   f"constant '{ctx.instr.name}' ({shape_to_text(shape, False)}, elided in the dump) made up as {policy}")
        if policy == "zeros":
            return b.op1("stablehlo.constant", ctx.result_type(shape), [],
                         {"value": dense_elements(np.zeros((), dtype), shape.element_type, shape.dims)})
        else:
            rng = ctx.mi._rng
            if dtype.kind in "iu":
                value = rng.integers(0, 8, size=shape.dims).astype(dtype)
            elif dtype.kind == "b":
                value = rng.integers(0, 2, size=shape.dims).astype(bool)
            else:
                value = rng.standard_normal(size=shape.dims).astype(dtype)
    value = np.asarray(value)
    if value.size == 1:
        # Scalars and splats repeat (zeros, ones, -inf): their attribute is made once.
        key = (shape.element_type, shape.dims, value.dtype.str, value.tobytes())
        attr = ctx.mi.splat_constants.get(key)
        if attr is None:
            attr = ctx.mi.splat_constants[key] = dense_elements(value.reshape(shape.dims), shape.element_type)
    else:
        attr = dense_elements(value.reshape(shape.dims), shape.element_type)
    return b.op1("stablehlo.constant", ctx.result_type(shape), [], {"value": attr})


@import_rule("tuple")
def import_tuple(ctx, *operands):
    out = []
    for x in operands:
        out.extend(x if isinstance(x, list) else [x])
    return out


@import_rule("get-tuple-element")
def import_get_tuple_element(ctx, operand):
    index = ctx.attrs["index"]
    shape = ctx.operand_shape(0)
    if not shape.is_tuple or not 0 <= index < len(shape.tuple_shapes):
        raise ctx.error(f"index {index} is out of range for {shape_to_text(shape, False)}")
    lo, hi = shape.leaf_range(index)
    return operand[lo:hi]


def _leaves(x) -> list:
    return x if isinstance(x, list) else [x]


@import_rule("call")
def import_call(ctx, *operands):
    return ctx.inline(ctx.attrs["to_apply"], [_leaves(x) for x in operands])


@import_rule("fusion")
def import_fusion(ctx, *operands):
    calls = ctx.attrs["calls"]
    args = [_leaves(x) for x in operands]
    if not ctx.mi.options.keep_fusions:
        return ctx.inline(calls[0], args)
    comp = ctx.computation(calls[0])
    flat = [v for group in args for v in group]
    name, result_types = ctx.mi.fusion_function(comp, [v.type for v in flat])
    call = func.CallOp(result_types, ir.FlatSymbolRefAttr.get(name), flat)
    kind = ctx.attrs.get("kind")
    if kind:
        call.attributes["hlo.fusion_kind"] = ir.StringAttr.get(kind)
    return list(call.results)


@import_rule("while")
def import_while(ctx, init):
    init = _leaves(init)
    types = [v.type for v in init]
    plan = ctx.mi.tap_plan
    taps = plan.in_loop_body.get(ctx.attrs["body"], []) if plan is not None else []
    if taps:
        return _while_with_taps(ctx, init, taps)
    op = b.op("stablehlo.while", types, init, regions=2)
    # Condition and body take the whole loop state (tuple or array) as one parameter.
    ctx.region(op.regions[0], ctx.attrs["condition"], [types])
    ctx.region(op.regions[1], ctx.attrs["body"], [types])
    return list(op.results)


def _while_with_taps(ctx, init: list, taps: list[str]) -> list:
    """A while loop that also carries the values of the taps inside its body: each
    iteration overwrites them, so the loop's extra results are the last iteration's
    values (zeros when it runs none); recorded as the taps' values outside the loop."""
    mi = ctx.mi
    n = len(init)
    zeros = []
    for name in taps:
        for leaf in mi.tap_plan.instructions[name].shape.leaves():
            if not leaf.is_token:
                zeros.append(ctx.constant(0, leaf.element_type, leaf.dims))
    state = init + zeros
    op = b.op("stablehlo.while", [v.type for v in state], state, regions=2)
    for is_body, comp_name in ((False, ctx.attrs["condition"]), (True, ctx.attrs["body"])):
        block = op.regions[int(is_body)].blocks.append(*[v.type for v in state])
        args = [list(block.arguments)[:n]]
        comp = ctx.computation(comp_name)
        with ir.InsertionPoint(block):
            mi.tap_collectors.append({})
            results = ComputationImporter(mi, comp, args).run()
            recorded = mi.tap_collectors.pop()
            if is_body:
                results = list(results) + mi.tap_values(taps, recorded)
            with mi.location(comp.root):
                stablehlo.ReturnOp(results)
    carried = list(op.results)[n:]
    from converter.taps import array_leaf_mask

    for name in taps:
        mask = array_leaf_mask(mi.tap_plan.instructions[name])
        count = sum(mask)
        leaves, carried = carried[:count], carried[count:]
        # Token leaves are not carried; the recorded value holds array leaves only, in
        # the positions tap_values reads them from.
        it = iter(leaves)
        mi.record_tap(name, [next(it) if keep else None for keep in mask])
    return list(op.results)[:n]


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
        op = b.op("stablehlo.case", result_types, [selector], regions=len(branches))
    else:
        op = b.op("stablehlo.if", result_types, [selector], regions=2)
    for region, comp_name, operand in zip(op.regions, branches, branch_operands):
        # Branch regions capture their operand from the enclosing scope.
        block = region.blocks.append()
        with ir.InsertionPoint(block):
            results = ctx.inline(comp_name, [_leaves(operand)])
            stablehlo.ReturnOp(results)
    return list(op.results)


@import_rule("opt-barrier", "optimization-barrier")
def import_optimization_barrier(ctx, operand):
    leaves = _leaves(operand)
    return list(b.op("stablehlo.optimization_barrier", [v.type for v in leaves], leaves).results)


@import_rule("after-all")
def import_after_all(ctx, *tokens):
    return b.op1("stablehlo.after_all", stablehlo.TokenType.get(), list(tokens))


@import_rule("add-dependency")
def import_add_dependency(ctx, operand, token):
    # Orders operand after token; the identity on values.
    return operand


@import_rule("domain")
def import_domain(ctx, operand):
    return operand


@import_rule("partition-id")
def import_partition_id(ctx):
    return b.op1("stablehlo.partition_id", ctx.result_type(), [])


@import_rule("replica-id")
def import_replica_id(ctx):
    return b.op1("stablehlo.replica_id", ctx.result_type(), [])


@import_rule("infeed", "outfeed")
def import_feed(ctx, *operands):
    raise ctx.error(f"{ctx.opcode} moves data to or from the host while the program runs; "
                    "a portable module has no host queue to read or write")


@import_rule("copy-start")
def import_copy_start(ctx, x):
    # (destination, source, context): a copy between memory spaces, synchronous here.
    rest = ctx.result_types()[2:]
    return [x, x, *[b.zeros_like_type(t) for t in rest]]


@import_rule("copy-done")
def import_copy_done(ctx, start):
    return start[0]


# XLA's CPU and GPU runtimes start the state of rng-get-and-update-state at this 128-bit
# value when an executable is loaded (xla/backends/cpu/runtime/rng_state_lib.cc, and the
# GPU emitter's rng_state global); each execution returns the state and then adds
# `delta`.  The CPU thunk runtime keeps one state per instruction, the GPU runtime one
# per module, shared by all its instructions in execution order.
RNG_STATE_INITIAL_VALUE = 0x7012395


@import_rule("rng-get-and-update-state")
def import_rng_get_and_update_state(ctx):
    """The state as the first execution of the compiled module sees it: the initial
    value [0x7012395, 0] (u64 low word first).  That is exact when the instruction runs
    once per execution and is the module's only one: then the CPU runtime's
    per-instruction state and the GPU runtime's per-module state agree.  Anything else
    depends on which runtime ran the dump and on how many times it had run the
    executable before, which a dump does not record: an error says so."""
    instr = ctx.instr
    others = [i.name for c in ctx.mi.hlo.computations for i in c.instructions
              if i.opcode == "rng-get-and-update-state" and i is not instr]
    if others:
        raise ctx.error(
            f"the module reads the RNG state in {len(others) + 1} places (also %{others[0]}); their values depend "
            "on the runtime that ran the dump (XLA's CPU runtime keeps a state per instruction, its GPU runtime one "
            "shared per module, advanced in execution order), which the dump does not say: only a module with a "
            "single rng-get-and-update-state can be reproduced")
    owner = ir.InsertionPoint.current.block.owner.operation
    at_top_level = owner.name == "func.func" and ir.StringAttr(owner.attributes["sym_name"]).value == "main"
    count = ctx.mi.imports_of.get(instr.name, 0) + 1
    ctx.mi.imports_of[instr.name] = count
    if not at_top_level or count > 1:
        where = "inside a loop, branch or applied computation" if not at_top_level else "in a computation called twice"
        raise ctx.error(
            f"rng-get-and-update-state {where} runs a number of times per execution that only the run decides, "
            f"and each run advances the state by delta={ctx.attrs.get('delta', 0)}; a portable module has no "
            "mutable state to carry it: only a read executed once per execution, at the top level of the entry "
            "computation, can be reproduced")
    if ctx.shape.element_type != "u64" or tuple(ctx.shape.dims) != (2,):
        raise ctx.error("rng-get-and-update-state must return u64[2]")
    value = np.array([RNG_STATE_INITIAL_VALUE & (2**64 - 1), RNG_STATE_INITIAL_VALUE >> 64], np.uint64)
    return b.op1("stablehlo.constant", ctx.result_type(), [], {"value": dense_elements(value, "u64")})
