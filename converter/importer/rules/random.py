"""Random number generation: rng, rng-bit-generator and the RNG state read."""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from converter.importer.core import dense_elements
from converter.importer.registry import import_rule

DISTRIBUTIONS = {"rng_uniform": "UNIFORM", "rng_normal": "NORMAL"}
ALGORITHMS = {"rng_default": "DEFAULT", "rng_three_fry": "THREE_FRY", "rng_philox": "PHILOX"}


@import_rule("rng")
def import_rng(ctx, lo, hi, *shape_operand):
    """`rng(a, b)`, or `rng(a, b, shape)` with the result's dims as an operand (as XLA's
    importer tests and MHLO-exported modules write it; the result shape says the same)."""
    dist = ctx.attrs.get("distribution", "rng_uniform")
    if dist not in DISTRIBUTIONS:
        raise ctx.error(f"unknown rng distribution '{dist}'")
    if len(shape_operand) > 1:
        raise ctx.error(f"rng takes 2 operands (or 3 with the shape), got {2 + len(shape_operand)}")
    dims = list(ctx.shape.dims)
    i64 = ir.IntegerType.get_signless(64)
    if shape_operand:
        given = ctx.operand_shape(2)
        if given.is_tuple or given.rank != 1 or given.dims[0] != len(dims) or given.element_type[0] not in "su":
            raise ctx.error(f"rng's shape operand must be an integer vector of {len(dims)} dims, got {given}")
        source = ctx.operand_instruction(2)
        if source.opcode == "constant" and source.literal is not None:
            values = [int(v) for v in np.asarray(source.literal).reshape(-1)]
            if values != dims:
                raise ctx.error(f"rng's shape operand says {values} but its result is {ctx.shape}")
        shape = shape_operand[0]
        if given.element_type != "s64":
            shape = builders.convert(shape, i64)
    else:
        shape = builders.op1("stablehlo.constant", ir.RankedTensorType.get([len(dims)], i64), [],
                      {"value": builders.i64_elements(dims, shape=(len(dims),))})
    return builders.op1("stablehlo.rng", ctx.result_type(), [lo, hi, shape],
                 {"rng_distribution": stablehlo.RngDistributionAttr.get(DISTRIBUTIONS[dist])})


@import_rule("rng-bit-generator")
def import_rng_bit_generator(ctx, state):
    algorithm = ctx.attrs.get("algorithm", "rng_default")  # one of ALGORITHMS: the parser takes no other
    types = ctx.result_types()
    # TPU dumps write it with the output alone (`u32[16] rng-bit-generator(state)`) when the
    # program drops the new state; StableHLO's op always returns (new state, output).
    state_dropped = not ctx.shape.is_tuple
    if state_dropped:
        types = [state.type, *types]
    op = builders.op("stablehlo.rng_bit_generator", types, [state],
              {"rng_algorithm": stablehlo.RngAlgorithmAttr.get(ALGORITHMS[algorithm])})
    return op.results[1] if state_dropped else list(op.results)


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
    others = [i.name for c in ctx.module_importer.hlo.computations for i in c.instructions
              if i.opcode == "rng-get-and-update-state" and i is not instr]
    if others:
        raise ctx.error(
            f"the module reads the RNG state in {len(others) + 1} places (also %{others[0]}); their values depend "
            "on the runtime that ran the dump (XLA's CPU runtime keeps a state per instruction, its GPU runtime one "
            "shared per module, advanced in execution order), which the dump does not say: only a module with a "
            "single rng-get-and-update-state can be reproduced")
    owner = ir.InsertionPoint.current.block.owner.operation
    at_top_level = owner.name == "func.func" and ir.StringAttr(owner.attributes["sym_name"]).value == "main"
    count = ctx.module_importer.imports_of.get(instr.name, 0) + 1
    ctx.module_importer.imports_of[instr.name] = count
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
    return builders.op1("stablehlo.constant", ctx.result_type(), [], {"value": dense_elements(value, "u64")})
