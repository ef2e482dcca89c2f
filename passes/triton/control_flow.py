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
