"""The Triton kernel body → StableHLO, op by op, for one program of the grid.

Values: a Triton scalar is a rank-0 tensor, a tensor a tensor.  Memory: every kernel
argument pointer is a flat buffer (`Translator.buffers`), the operand in row-major order
plus one trailing slot that masked-off stores write to (and nothing reads).  A pointer
value is a `Ptr`: its buffer and an i64 offset (a scalar or a tensor of the pointer
tensor's shape), so tt.splat / tt.addptr / tt.broadcast / tt.expand_dims / tt.reshape /
tt.trans on pointers are index arithmetic; tt.load is a gather (masked-off lanes take
`other`, or zero where the load has none: Triton leaves them undefined), tt.store a
scatter to the buffer.  Structured control flow (scf.for/while/if) carries the buffers
as loop values or results, so memory is SSA state (the Mosaic translator's scheme:
passes/mosaic/translate.py, whose arith, math and scf rules serve here too).

An op without a rule is a KernelError naming it; the pass adds the kernel and the dump line.

This module holds the translator, the values it works with and the rules for program ids
and shapes; the other op families register their rules into the same table from their
own modules, imported at the end of this one: `memory` (pointers, loads, stores,
atomics), `compute` (tt.dot, reductions and scans, elementwise and libdevice functions,
float conversions, inline assembly) and `control_flow` (scf.for/if/while and arith.select
carrying pointers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from jaxlib.mlir import ir

import passes.mosaic.arith  # noqa: F401  (registers the arith/math rules this translator reuses)
from converter.mlir import builders
from passes.mosaic import translate as mosaic
from passes.mosaic.kernel import KernelError

RuleFn = Callable[["Translator", ir.Operation], None]
RULES: dict[str, RuleFn] = {}
# Ops the Mosaic translator's rules lower the same way in a Triton body.
SHARED_DIALECTS = ("arith.", "math.", "scf.")
WRITES = ("tt.store", "tt.atomic_rmw", "tt.atomic_cas")
BRANCHES = ("cf.br", "cf.cond_br")
TERMINATORS = ("tt.return", "tt.reduce.return", "tt.scan.return", "scf.yield", "scf.condition")


def rule(*names: str) -> Callable[[RuleFn], RuleFn]:
    def register(fn: RuleFn) -> RuleFn:
        for n in names:
            RULES[n] = fn
        return fn
    return register


def i64() -> ir.Type:
    return ir.IntegerType.get_signless(64)


@dataclass
class Ptr:
    """A pointer value: element offsets (i64, a scalar or a tensor) into buffer `buffer`."""

    buffer: int
    offsets: ir.Value

    def with_offsets(self, offsets: ir.Value) -> "Ptr":
        return Ptr(self.buffer, offsets)


def is_pointer_type(t: ir.Type) -> bool:
    return "!tt.ptr" in str(t)


def shape_of_type(t: ir.Type) -> list[int]:
    return list(ir.ShapedType(t).shape) if isinstance(t, ir.ShapedType) else []


class Translator(mosaic.Translator):
    """Translates Triton ops at the current insertion point for one program: `program_ids`
    and `grid` (i32 scalars / ints, x y z) give tt.get_program_id / tt.get_num_programs."""

    def __init__(self, program_ids: Sequence[ir.Value], grid: Sequence[int]) -> None:
        super().__init__()
        self.program_ids = list(program_ids)
        self.grid = list(grid)
        self.sizes: list[int] = []  # each buffer's element count (its trash slot is at that index)

    def value(self, v: ir.Value) -> ir.Value:
        got = self.env.get(v)
        if isinstance(got, Ptr):
            raise KernelError("a pointer where a value was expected (pointers cross scf.for, scf.while, scf.if "
                              "and arith.select; other ops on pointers are not supported yet)")
        return super().value(v)

    def ptr(self, v: ir.Value) -> Ptr:
        got = self.env.get(v)
        if not isinstance(got, Ptr):
            raise KernelError("a value where a pointer was expected")
        return got

    def run_block(self, block: ir.Block, args: Sequence[object]) -> list:
        if len(args) != len(block.arguments):
            raise KernelError(f"a block of {len(block.arguments)} arguments entered with {len(args)}")
        for a, v in zip(block.arguments, args):
            self.env[a] = v
        for op in block.operations:
            op = op.operation
            if op.name in TERMINATORS:
                return [self.env[v] for v in op.operands]
            if op.name in BRANCHES:
                return self.run_branch(op)
            self.run_op(op)
        return []

    def run_branch(self, op: ir.Operation) -> list:
        """cf.br / cf.cond_br between a tt.func's blocks (Triton's frontend writes an early
        `return` inside an `if` as one): the rest of the function from each successor
        runs to its tt.return, the branches as a stablehlo.if (control_flow.py)."""
        from passes.triton.control_flow import run_unstructured_branch

        return run_unstructured_branch(self, op)

    def run_op(self, op: ir.Operation) -> None:
        fn = RULES.get(op.name)
        if fn is None and op.name.startswith(SHARED_DIALECTS):
            fn = mosaic.RULES.get(op.name)
        if fn is None:
            raise KernelError(f"Triton op {op.name} is not supported yet", op)
        try:
            fn(self, op)  # type: ignore[arg-type]
        except KernelError as e:
            if e.op is None:
                e.op = op
            raise

    def written_buffers(self, regions: Sequence[ir.Region]) -> list[int]:
        """Every buffer, where an op in `regions` writes memory (which one a pointer
        computed inside the region names is known only as it is translated)."""
        found = False

        def visit(o: ir.Operation) -> ir.WalkResult:
            nonlocal found
            # a tt.call's callee may write (its body is known only as the call is inlined)
            found = found or o.name in WRITES or o.name == "tt.call"
            return ir.WalkResult.ADVANCE

        for region in regions:
            for block in region.blocks:
                for op in block.operations:
                    op.operation.walk(visit)
        return list(range(len(self.buffers))) if found else []


def _axis(op: ir.Operation) -> int:
    """A tt.get_program_id / get_num_programs axis: an integer attribute (0, 1, 2) or an
    enum printed `x`, `y`, `z`."""
    a = op.attributes["axis"]
    if isinstance(a, ir.IntegerAttr):
        axis = int(ir.IntegerAttr(a).value)
    else:
        m = re.search(r"\b([xyz])\b", str(a))
        axis = "xyz".index(m.group(1)) if m else -1
    if axis not in (0, 1, 2):
        raise KernelError(f"program axis {a} is not x, y or z")
    return axis


@rule("tt.get_program_id")
def _program_id(t: Translator, op: ir.Operation) -> None:
    t.set(op.results[0], t.program_ids[_axis(op)])


@rule("tt.get_num_programs")
def _num_programs(t: Translator, op: ir.Operation) -> None:
    t.set(op.results[0], builders.scalar_constant(t.grid[_axis(op)], mosaic.i32()))


@rule("ub.poison")
def _poison(t: Translator, op: ir.Operation) -> None:
    """An undefined value (Triton's frontend writes one for a value no path defines, e.g.
    the results of the unreachable block after a helper's return): any value refines
    poison, zero is taken."""
    result = op.results[0].type
    if is_pointer_type(result):
        raise KernelError("ub.poison of a pointer type is not supported")
    tt = mosaic.tensor_type(result)
    t.set(op.results[0], builders.scalar_constant(0, tt.element_type, list(tt.shape)))


@rule("tt.make_range")
def _make_range(t: Translator, op: ir.Operation) -> None:
    start = int(ir.IntegerAttr(op.attributes["start"]).value)
    end = int(ir.IntegerAttr(op.attributes["end"]).value)
    out = builders.iota(mosaic.i32(), [end - start], 0)
    if start:
        out = builders.binary("add", out, builders.scalar_constant(start, mosaic.i32(), [end - start]))
    t.set(op.results[0], out)


def broadcast_to(x: ir.Value, shape: list[int]) -> ir.Value:
    """tt.splat (rank 0 → shape) and tt.broadcast (size-1 dims → shape, same rank)."""
    have = builders.shape_of(x)
    if have == shape:
        return x
    dims = [] if not have else list(range(len(shape)))
    return builders.broadcast_in_dim(x, shape, dims)


def _shape_rule(fn: Callable[[ir.Value, ir.Operation], ir.Value]) -> RuleFn:
    """A rule for an op that moves elements: applied to a pointer's offsets alike."""
    def run(t: Translator, op: ir.Operation) -> None:
        got = t.env.get(op.operands[0])
        if isinstance(got, Ptr):
            t.set(op.results[0], got.with_offsets(fn(got.offsets, op)))
        else:
            t.set(op.results[0], fn(t.value(op.operands[0]), op))
    return run


RULES["tt.splat"] = RULES["tt.broadcast"] = _shape_rule(
    lambda x, op: broadcast_to(x, shape_of_type(op.results[0].type)))
RULES["tt.expand_dims"] = _shape_rule(lambda x, op: builders.reshape(x, shape_of_type(op.results[0].type)))


def _reshape(x: ir.Value, op: ir.Operation) -> ir.Value:
    """tt.reshape in row-major order.  With `allow_reorder` (what tl.sum / tl.max over all
    axes and tl.reshape(can_reorder=True) write) Triton may place the elements in any
    order it likes, so a kernel's result cannot rely on one: row-major is one of the
    orders the GPU may pick, and is taken."""
    return builders.reshape(x, shape_of_type(op.results[0].type))


RULES["tt.reshape"] = _shape_rule(_reshape)
RULES["tt.trans"] = _shape_rule(lambda x, op: builders.transpose(x, mosaic.int_list(op.attributes["order"])))


# Importing the op families registers their rules into RULES (they import this module's
# names, all defined by now).
from passes.triton import compute, control_flow, memory  # noqa: E402,F401
