"""tpu-async-collectives: TPU async collective fusions → one plain collective.

XLA's TPU backend overlaps a collective with compute by splitting it over fusions: a `kCustom` fusion rooted at `custom-call AsyncCollectiveStart(coll(x))`
returns (x, the buffer being filled, an s32[2] and u32[] flags), `async_collective_fusion`
computations carry the same collective beside their compute and pass buffer and flags
through, and a fusion rooted at `AsyncCollectiveDone(x, buffer, coll(x), flags...)`
returns the filled buffer (`output_to_operand_aliasing={{}: (1, {})}`).  After the
importer inlines the fusions, each chain is plain data flow between the two custom-calls.

Portable meaning: the collective computed once.  Start's results become (x, coll(x)) and
its flags are dropped; Done's result becomes the collective it carries over the same
input (or, when it carries none, Start's collective).  The duplicate collectives that
the async fusions computed alongside are then unused or identical, and CSE/DCE remove
them, leaving one collective per chain.  Matching uses data flow (Done reads Start's
results) and, where the dump has it, `chain_id` in the collectives' frontend attributes.

Flags and barriers carry no values: a flag read by anything other than Done is an error.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker
from passes.inline import inline

START, DONE = "AsyncCollectiveStart", "AsyncCollectiveDone"
COLLECTIVES = rewrite.COLLECTIVE_OPS


def _collective_of(value: ir.Value) -> ir.Operation | None:
    op = rewrite.defining_op(value)
    return op if op is not None and op.name in COLLECTIVES else None


def _chain_id(op: ir.Operation) -> str | None:
    if "mhlo.frontend_attributes" not in op.attributes:
        return None
    return rewrite.attr_to_python(op.attributes["mhlo.frontend_attributes"]).get("chain_id")


def _start_of(done: ir.Operation) -> ir.Operation | None:
    for v in done.operands:
        owner = rewrite.defining_op(v)
        if owner is not None and owner.name == "stablehlo.custom_call" and rewrite.call_target(owner) == START:
            return owner
    return None


@register_pass("tpu-async-collectives",
               "TPU AsyncCollectiveStart/Done chains → one plain collective; flags and barriers removed",
               targets=(START, DONE), preserves={Fact.USES})
def lower_tpu_async_collectives(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    if not walks.custom_calls((START, DONE)):
        return
    if walks.walk("func.call"):
        inline(module, options)  # chains cross fusions kept as functions: make them data flow
    starts = walks.custom_calls(START)
    dones = walks.custom_calls(DONE)
    # Done first: it may read Start's collective, which the Start rewrite keeps alive.
    for done in dones:
        _lower_done(done)
    for start in starts:
        _lower_start(start)


def _lower_done(done: ir.Operation) -> None:
    if len(done.results) != 1:
        raise rewrite.op_error(done, f"expected one result (the filled buffer), found {len(done.results)}")
    result_type = done.results[0].type
    start = _start_of(done)
    start_coll = _collective_of(start.operands[0]) if start is not None and len(start.operands) else None
    candidates = [c for v in done.operands if (c := _collective_of(v)) is not None and c.results[0].type == result_type]
    chosen = None
    if start_coll is not None:
        # Prefer the collective Done carries when it matches Start's (same chain, same input).
        for c in candidates:
            same_chain = _chain_id(c) is None or _chain_id(start_coll) is None or _chain_id(c) == _chain_id(start_coll)
            if same_chain and c.name == start_coll.name:
                chosen = c.results[0]
                break
        if chosen is None and start_coll.results[0].type == result_type:
            chosen = start_coll.results[0]
    elif candidates:
        chosen = candidates[0].results[0]
    if chosen is None:
        raise rewrite.op_error(done, "cannot tell which collective this Done completes: it reads no "
                                "AsyncCollectiveStart and carries no collective of its result type")
    rewrite.replace(done, [chosen])


def _lower_start(start: ir.Operation) -> None:
    if len(start.operands) != 1:
        raise rewrite.op_error(start, f"expected one operand (the collective), found {len(start.operands)}")
    coll = _collective_of(start.operands[0])
    if coll is None:
        raise rewrite.op_error(start, "its operand is not a collective (all-gather, all-reduce, reduce-scatter, "
                                 "collective-permute, all-to-all)")
    inputs, outputs = list(coll.operands), list(coll.results)
    n = len(inputs)
    results = list(start.results)
    if len(results) < 2 * n:
        raise rewrite.op_error(start, f"has {len(results)} results; expected the collective's {n} input(s) and "
                                 f"{n} output(s) first")
    replacements: list[ir.Value | None] = []
    for i, r in enumerate(results):
        if i < n:
            replacements.append(inputs[i])
        elif i < 2 * n:
            replacements.append(outputs[i - n])
        else:
            for use in r.uses:
                raise rewrite.op_error(start, f"flag result {i} is read by {use.owner.operation.name}; "
                                         "flags carry no values")
            replacements.append(None)
    for i, (r, v) in enumerate(zip(results, replacements)):
        if v is not None and r.type != v.type:
            raise rewrite.op_error(start, f"result {i} has type {r.type}, the collective's value {v.type}")
    rewrite.replace(start, replacements)
