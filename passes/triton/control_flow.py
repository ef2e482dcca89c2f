"""Structured control flow in Triton bodies → StableHLO loops and branches, with pointers
among the values: scf.for, scf.if, scf.while and arith.select.

The Mosaic translator's scheme (passes/mosaic/translate.py build_while / build_if): the
buffers a region writes are carried as loop values or branch results.  A pointer crosses
a loop or a branch as its offsets; its buffer is a trace-time fact and must be the same on
every path (a KernelError otherwise).  Registered into passes.triton.translate.RULES
(imported by it).
"""

from __future__ import annotations

from typing import Callable, Sequence

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.mosaic import translate as mosaic
from passes.mosaic.kernel import KernelError
from passes.mosaic.translate import tensor_type
from passes.triton.translate import Ptr, Translator, broadcast_to, i64, is_pointer_type, rule, shape_of_type


# ------------------------------------------------------------------ pointers through control flow
# Hand-written Triton kernels advance pointers in loops (`a_ptrs += BLOCK_K`) and pick them
# with selects: a pointer crosses a loop or a branch as its offsets, and its buffer (a
# trace-time fact) must be the same on every path.

def _carried(value: object) -> ir.Value:
    return value.offsets if isinstance(value, Ptr) else value  # type: ignore[return-value]


def _rewrap(values: Sequence[ir.Value], like: Sequence[object]) -> list:
    return [Ptr(k.buffer, v) if isinstance(k, Ptr) else v for v, k in zip(values, like)]


def _same_buffers(got: Sequence[object], like: Sequence[object], what: str) -> None:
    for g, k in zip(got, like):
        if isinstance(k, Ptr) != isinstance(g, Ptr) or (isinstance(k, Ptr) and g.buffer != k.buffer):
            raise KernelError(f"{what} yields a pointer into another buffer than it started with "
                              "(pointers must keep their buffer across iterations and branches)")


@rule("scf.for")
def _scf_for(t: Translator, op: ir.Operation) -> None:
    lb, ub, step, *inits = op.operands
    lb_v, ub_v, step_v = (t.value(x) for x in (lb, ub, step))
    init_values = [t.env.get(x) for x in inits]
    if any(v is None for v in init_values):
        raise KernelError("an scf.for operand is used before it is defined")
    body_block = op.regions[0].blocks[0]
    written = t.written_buffers([op.regions[0]])

    def cond(values):
        return builders.compare(values[0], ub_v, "LT", "SIGNED")

    def body(values):
        outs = t.run_block(body_block, [values[0]] + _rewrap(values[1:], init_values))
        _same_buffers(outs, init_values, "scf.for")
        return [builders.binary("add", values[0], step_v)] + [_carried(v) for v in outs]

    results = t.build_while([lb_v] + [_carried(v) for v in init_values], written, cond, body)
    for r, v in zip(op.results, _rewrap(results[1:], init_values)):
        t.set(r, v)


@rule("scf.if")
def _scf_if(t: Translator, op: ir.Operation) -> None:
    pred = t.value(op.operands[0])
    written = t.written_buffers(list(op.regions))
    pointer_results = [is_pointer_type(r.type) for r in op.results]
    types = [ir.RankedTensorType.get(shape_of_type(r.type), i64()) if p else tensor_type(r.type)
             for r, p in zip(op.results, pointer_results)]
    yielded: list[list[object]] = []

    def branch(region: ir.Region) -> Callable[[], list[ir.Value]]:
        def run() -> list[ir.Value]:
            if not region.blocks:
                return []
            outs = t.run_block(region.blocks[0], [])
            yielded.append(outs)
            return [_carried(v) for v in outs]
        return run

    results = t.build_if(pred, types, written, [branch(op.regions[0]), branch(op.regions[1])])
    if any(pointer_results):
        if len(yielded) != 2:
            raise KernelError("an scf.if yielding pointers without an else branch")
        _same_buffers(yielded[1], yielded[0], "scf.if")
        results = _rewrap(results, yielded[0])
    for r, v in zip(op.results, results):
        t.set(r, v)


@rule("arith.select")
def _select(t: Translator, op: ir.Operation) -> None:
    a, b = (t.env.get(v) for v in op.operands[1:])
    if isinstance(a, Ptr) or isinstance(b, Ptr):
        _same_buffers([b], [a], "arith.select")
        shape = shape_of_type(op.results[0].type)
        c = t.value(op.operands[0])
        offsets = builders.select(broadcast_to(c, shape) if builders.shape_of(c) != shape else c,
                                  broadcast_to(a.offsets, shape), broadcast_to(b.offsets, shape))
        t.set(op.results[0], a.with_offsets(offsets))
        return
    mosaic.RULES["arith.select"](t, op)


@rule("scf.while")
def _scf_while(t: Translator, op: ir.Operation) -> None:
    """The Mosaic translator's scf.while, with pointers among the carried and forwarded
    values (carried as their offsets; each keeps its buffer)."""
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    if t.written_buffers([op.regions[0]]):
        raise KernelError("an scf.while whose condition region writes memory")
    written = t.written_buffers([op.regions[1]])
    inits = [t.env.get(x) for x in op.operands]
    if any(v is None for v in inits):
        raise KernelError("an scf.while operand is used before it is defined")

    def condition(values):
        outs = t.run_block(before, _rewrap(values, inits))
        return outs[0], outs[1:]

    def body(values):
        _, forwarded = condition(values)
        outs = t.run_block(after, forwarded)
        _same_buffers(outs, inits, "scf.while")
        return [_carried(v) for v in outs]

    results = t.build_while([_carried(v) for v in inits], written, lambda vs: condition(vs)[0], body)
    _, final = condition(results)
    for r, v in zip(op.results, final):
        t.set(r, v)


# ------------------------------------------------------------------ calls
# Triton's frontend keeps each @triton.jit helper a kernel calls as a tt.func of the same
# module (private, `noinline` or not) and calls it with tt.call: jax-triton's `ttir` is the
# IR before Triton's inliner runs (tokamax's layer norm and ragged dot call helpers).  A
# call runs the callee's body in place, its arguments (values or pointers) bound to the
# callee's block arguments, the operands of its tt.return as the call's results.
MAX_CALL_DEPTH = 32


def _callee(op: ir.Operation) -> ir.Operation:
    name = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    parent = op.parent
    while parent is not None and parent.name != "builtin.module":
        parent = parent.parent
    if parent is not None:
        for candidate in parent.regions[0].blocks[0].operations:
            candidate = candidate.operation
            if candidate.name == "tt.func" and ir.StringAttr(candidate.attributes["sym_name"]).value == name:
                return candidate
    raise KernelError(f"tt.call of '{name}': no tt.func of that name in the kernel's module")


@rule("tt.call")
def _call(t: Translator, op: ir.Operation) -> None:
    callee = _callee(op)
    name = ir.StringAttr(callee.attributes["sym_name"]).value
    stack: list[str] = t.__dict__.setdefault("call_stack", [])
    if name in stack or len(stack) >= MAX_CALL_DEPTH:
        raise KernelError(f"tt.call of '{name}' is recursive (through {' → '.join(stack)}): not supported")
    # Triton's frontend leaves a block without predecessors after a helper's return
    # (`^bb1: // no predecessors`, ub.poison results): with the entry block ending in
    # tt.return, no other block can run.  Branches between blocks (cf.br) are refused.
    entry = callee.regions[0].blocks[0]
    operations = list(entry.operations)
    if not operations or operations[-1].operation.name != "tt.return":
        raise KernelError(f"tt.call of '{name}': a callee whose entry block does not end in tt.return "
                          "(unstructured control flow) is not supported")
    stack.append(name)
    try:
        results = t.run_block(entry, [t.env[v] for v in op.operands])
    finally:
        stack.pop()
    if len(results) != len(op.results):
        raise KernelError(f"tt.call of '{name}' returns {len(results)} values for {len(op.results)} results")
    for r, v in zip(op.results, results):
        t.env[r] = v


# ------------------------------------------------------------------ branches between blocks
# Triton's frontend lowers `if cond: return` (an early exit, as tokamax's ragged dot has)
# to cf.cond_br between a tt.func's blocks.  Such a branch is translated by running the
# rest of the function from each successor to its tt.return (straight-line or further
# branches), the two paths joined as a stablehlo.if whose results are the function's
# returned values and the buffers it writes.  A back edge (a loop of blocks) is refused.
MAX_BLOCKS_ON_A_PATH = 64


def _successor_operands(op: ir.Operation) -> list[list[ir.Value]]:
    """Each successor's block arguments' values: cf.cond_br's operands are the condition,
    then the true successor's, then the false one's (in the order of its successors)."""
    operands = list(op.operands)[1 if op.name == "cf.cond_br" else 0:]
    out = []
    for block in op.successors:
        n = len(block.arguments)
        out.append(operands[:n])
        operands = operands[n:]
    return out


def run_unstructured_branch(t: Translator, op: ir.Operation) -> list:
    path: list[ir.Block] = t.__dict__.setdefault("block_path", [])
    successors = list(op.successors)
    if any(b in path for b in successors) or len(path) >= MAX_BLOCKS_ON_A_PATH:
        raise KernelError(f"{op.name} back to an earlier block (a loop of blocks, unstructured control flow) "
                          "is not supported")
    args = [[t.env[v] for v in values] for values in _successor_operands(op)]

    def follow(block: ir.Block, block_args: list) -> list:
        path.append(block)
        try:
            return t.run_block(block, block_args)
        finally:
            path.pop()

    if op.name == "cf.br":
        return follow(successors[0], args[0])
    func = op.parent
    while func is not None and func.name != "tt.func":
        func = func.parent
    if func is None:
        raise KernelError("cf.cond_br outside a tt.func")
    result_types = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value).results
    pointer_results = [is_pointer_type(r) for r in result_types]
    if any(pointer_results):
        raise KernelError("cf.cond_br in a function that returns pointers is not supported")
    types = [tensor_type(r) for r in result_types]
    written = t.written_buffers([func.regions[0]])

    def branch(k: int) -> Callable[[], list[ir.Value]]:
        return lambda: list(follow(successors[k], args[k]))

    return t.build_if(t.value(op.operands[0]), types, written, [branch(0), branch(1)])
