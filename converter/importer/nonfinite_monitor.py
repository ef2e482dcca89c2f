"""The non-finite monitor (`run --find-nonfinite`): where the first NaN or Inf appears.

The converted program checks every floating-point instruction as it computes it and keeps
no value: per instruction it counts the NaN/Inf elements of the result (an is_finite
reduction to an i32 scalar) and calls the instruction an *origin* when that count is
non-zero while its operands hold none.  Per instruction it returns one row of i32
scalars — the iteration indices at which it first was an origin (one column per while
nesting level, -1 outside loops) and its non-finite count then (0: never) — so the extra
result is O(#instructions) scalars, whatever the trip counts.

Which fused computations are checked instruction by instruction is the import's
MonitorScope: all of them (the exhaustive search, `--find-nonfinite`), or only the fusion
instances at given paths (`--find-nonfinite=escaping`: none at first, each fusion's result
checked as one value, then the one fusion instance its first NaN/Inf left).  A fusion not
entered is one instruction of its caller's block; `monitored_callee` alone decides.

Inside a while body each loop carries an iteration counter and its body's rows: an
iteration's row replaces the carried one only while that one is still empty, which keeps
the first iteration; a nested loop's rows get the enclosing loop's counter in its column
when they leave the inner loop.  Instructions are monitored where their value exists once
per execution of the enclosing block: the entry, the computations fusions and calls
inline, and while bodies (at any depth).  A value computed per element or per branch —
inside a reduce, sort or scatter region, a conditional branch, a while condition — is
checked as the result of the instruction that holds that region.

The static plan (`monitor_plan`) lists the rows in the order the program returns them,
each with its instruction and a time key template, so that the report can order origins
by when they happened: positions in the computations on the way, with the iteration
indices in between.  Constants are not origins (an Inf constant is the program's own
mask value, e.g. the -inf start of a max-reduction), nor are parameters of inlined or loop
computations (their values are their caller's); entry parameters are (an input holding
NaN is where it starts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from converter.hlo.ir import Computation, Instruction, Module

MONITOR_LABEL = "#nonfinite-rows"
# Opcodes whose result holds a NaN or Inf only where an operand does (they move, select
# or order values, or change their sign): never an origin, so never counted.  A user's
# "operands hold none" then reads the counts of the values these were made from, which
# says the same for the first origin: before it, no value but an input or a constant
# holds a NaN or Inf.
PASS_THROUGH = frozenset({
    "bitcast", "reshape", "transpose", "broadcast", "slice", "dynamic-slice", "concatenate", "copy", "reverse",
    "pad", "select", "gather", "get-tuple-element", "tuple", "dynamic-update-slice", "negate", "abs", "maximum",
    "minimum", "clamp", "copy-start", "copy-done", "opt-barrier", "optimization-barrier", "domain",
    "add-dependency", "real", "imag"})
# A container's own value (fusion, call, while) sorts after everything inside it.
AFTER = 1 << 30
FLOAT_TYPES = {"f16", "bf16", "f32", "f64", "c64", "c128"}


def _is_float(element_type: str) -> bool:
    return element_type in FLOAT_TYPES or element_type.startswith(("f8", "f4", "f6"))


def has_float_leaf(instr: Instruction) -> bool:
    return any(_is_float(leaf.element_type) for leaf in instr.shape.leaves())


@dataclass(frozen=True)
class MonitorScope:
    """Which fusion instances the monitor enters (checks instruction by instruction):
    every one (`fusions` None), or those at the given paths — a fusion instruction's
    positions in the computations on the way, as MonitorItem.path, since a fused
    computation may be shared by several fusion instructions — with the fusions nested
    in them.  A fusion not entered is checked as one value, its result."""

    fusions: frozenset[tuple[int, ...]] | None = None
    # (while instruction's path, iteration): the rows of that loop's body are recorded at
    # that iteration only (the second run of the escaping search asks where a fusion's
    # NaN/Inf came from at the iteration it left the fusion, not where one was made first).
    only_iterations: tuple[tuple[tuple[int, ...], int], ...] = ()
    # Not None: only the values under this path get rows (the second run of the escaping
    # search checks one fusion's instructions, not again every value the first run did:
    # its compile costs about a plain one).
    within: tuple[int, ...] | None = None

    def enters(self, fusion_path: tuple[int, ...]) -> bool:
        if self.fusions is None:
            return True
        return any(fusion_path[:k] in self.fusions for k in range(1, len(fusion_path) + 1))

    def checks(self, path: tuple[int, ...]) -> bool:
        return self.within is None or (len(path) > len(self.within) and path[: len(self.within)] == self.within)

    def only_iteration(self, loop_path: tuple[int, ...]) -> int | None:
        return dict(self.only_iterations).get(loop_path)

    @staticmethod
    def inside(fusion_path: tuple[int, ...], loop_paths: Sequence[tuple[int, ...]],
               iterations: Sequence[int]) -> MonitorScope:
        """One fusion instance entered and its instructions alone checked, at the given
        iterations of the loops around it."""
        return MonitorScope(frozenset({fusion_path}), tuple(zip(map(tuple, loop_paths), iterations)), fusion_path)


# `--find-nonfinite`: every fused instruction; `--find-nonfinite=escaping`'s first run:
# fusions as whole values.
EXHAUSTIVE = MonitorScope(None)
FUSIONS_WHOLE = MonitorScope(frozenset())


@dataclass
class MonitorItem:
    """One row: an instruction at one place of the call tree."""

    instr: Instruction
    # Positions in the computations on the way (AFTER for a container's own value); the
    # identity the importer records the row under.
    path: tuple[int, ...]
    # The while instructions on the way, outer to inner, and after which path index each
    # one's iteration number goes in the time key.
    loops: tuple[str, ...]
    loop_after: tuple[int, ...]
    # The innermost fusion instruction whose computation holds this one (None: not fused).
    fusion: Instruction | None = None

    def loop_paths(self) -> tuple[tuple[int, ...], ...]:
        """The paths of the while instructions on the way (as `loops`)."""
        return tuple(self.path[: k + 1] for k in self.loop_after)

    def time_key(self, iterations: list[int]) -> tuple[int, ...]:
        key: list[int] = []
        it = iter(iterations)
        for k, position in enumerate(self.path):
            key.append(position)
            if k in self.loop_after:
                key.append(next(it))
        return tuple(key)


@dataclass
class LoopSlice:
    start: int
    end: int
    depth: int  # 0: a loop of the entry
    only_iteration: int | None = None  # the scope's: rows recorded at this iteration only


@dataclass
class MonitorPlan:
    items: list[MonitorItem] = field(default_factory=list)
    index: dict[tuple[int, ...], int] = field(default_factory=dict)
    loops: dict[tuple[int, ...], LoopSlice] = field(default_factory=dict)
    depth: int = 0  # the deepest while nesting: the rows have depth + 1 columns

    def pieces(self, start: int, end: int, depth: int) -> list[tuple[str, int, int]]:
        """The rows start..end of a block at loop `depth` (-1: the entry) as runs of its
        own instructions ("items", a, b) and nested loops' row blocks ("loop", a, b)."""
        out: list[tuple[str, int, int]] = []
        i = start
        while i < end:
            item = self.items[i]
            if len(item.loops) > depth + 1:
                inner = self.loops[item.path[: item.loop_after[depth + 1] + 1]]
                out.append(("loop", inner.start, inner.end))
                i = inner.end
                continue
            if out and out[-1][0] == "items" and out[-1][2] == i:
                out[-1] = ("items", out[-1][1], i + 1)
            else:
                out.append(("items", i, i + 1))
            i += 1
        return out


def monitor_plan(hlo: Module, scope: MonitorScope = EXHAUSTIVE, keep_fusions: bool = False) -> MonitorPlan:
    """The rows of a module imported with `scope` (and the import's keep_fusions)."""
    plan = MonitorPlan()

    def walk(comp: Computation, path: tuple[int, ...], loops: tuple[str, ...], loop_after: tuple[int, ...],
             fusion: Instruction | None) -> None:
        for pos, instr in enumerate(comp.instructions):
            if instr.opcode == "constant" or (instr.opcode == "parameter" and not comp.is_entry):
                continue
            here = path + (pos,)
            callee = monitored_callee(instr, here, scope, keep_fusions)
            if callee is not None:
                inner = hlo.by_name.get(callee)
                if inner is None:
                    continue
                if instr.opcode == "while":
                    start = len(plan.items)
                    walk(inner, here, loops + (instr.name,), loop_after + (len(here) - 1,), fusion)
                    if len(plan.items) > start:  # else imported as it is: nothing in it is checked
                        plan.loops[here] = LoopSlice(start, len(plan.items), len(loops), scope.only_iteration(here))
                    plan.depth = max(plan.depth, len(loops) + 1)
                else:
                    walk(inner, here, loops, loop_after, instr if instr.opcode == "fusion" else fusion)
                here = here + (AFTER,)
            if has_float_leaf(instr) and instr.opcode not in PASS_THROUGH and scope.checks(here):
                plan.index[here] = len(plan.items)
                plan.items.append(MonitorItem(instr, here, loops, loop_after, fusion))

    walk(hlo.entry, (), (), (), None)
    return plan


def monitored_callee(instr: Instruction, path: tuple[int, ...], scope: MonitorScope, keep_fusions: bool) -> str | None:
    """The computation whose instructions are monitored as part of `instr`'s block (or,
    for a while, as its body): a fusion's (at `path`) imported inline and entered by the
    scope, a call's computation, a while body.  The one place that decides what is
    monitored: the plan and the importer's frames both ask it."""
    if instr.opcode == "fusion":
        if keep_fusions or not scope.enters(path):
            return None
        calls = instr.attrs.get("calls")
        return calls[0] if isinstance(calls, (list, tuple)) else calls
    if instr.opcode == "call":
        return instr.attrs.get("to_apply")
    if instr.opcode == "while":
        return instr.attrs.get("body")
    return None


@dataclass
class MonitorFrame:
    """The importer's place in one computation being imported: the path to it (None: its
    values are not monitored) and the instruction being imported."""

    path: tuple[int, ...] | None
    comp: Computation
    position: int = -1
    instr: Instruction | None = None


def child_frame(parent: MonitorFrame | None, comp: Computation, scope: MonitorScope, keep_fusions: bool) -> MonitorFrame:
    if parent is None:
        return MonitorFrame((), comp) if comp.is_entry else MonitorFrame(None, comp)
    if parent.path is None or parent.instr is None:
        return MonitorFrame(None, comp)
    here = parent.path + (parent.position,)
    if monitored_callee(parent.instr, here, scope, keep_fusions) == comp.name:
        return MonitorFrame(here, comp)
    return MonitorFrame(None, comp)


# ------------------------------------------------------------------ MLIR side
def _i32():
    from jaxlib.mlir import ir

    return ir.IntegerType.get_signless(32)


def nonfinite_count(x):
    """An i32 scalar: how many elements of float (or complex) tensor `x` are NaN or Inf."""
    from jaxlib.mlir import ir

    from converter.mlir import builders

    t = ir.RankedTensorType(x.type)
    et = t.element_type
    if isinstance(et, ir.ComplexType):
        parts = [builders.real_part(x), builders.imag_part(x)]
    else:
        parts = [x]
    i1 = ir.IntegerType.get_signless(1)
    bad = None
    for part in parts:
        pt = ir.RankedTensorType(part.type).element_type
        if not isinstance(pt, (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type)):
            part = builders.convert(part, ir.F32Type.get())  # f8/f6/f4: NaN and Inf survive the widening
        finite = builders.op1("stablehlo.is_finite", builders.tensor_type_like(part, element=i1), [part])
        not_finite = builders.unary("not", finite)
        bad = not_finite if bad is None else builders.binary("or", bad, not_finite)
    counts = builders.convert(bad, _i32())
    rank = len(t.shape)
    return builders.reduce(counts, list(range(rank)), "add", 0) if rank else counts


class MonitorRecorder:
    """Per import: the plan, the frames of the computations being imported, the counts
    already built per value (per block: a value never crosses into a while body), and per
    block being filled the rows recorded so far."""

    def __init__(self, plan: MonitorPlan, scope: MonitorScope, keep_fusions: bool):
        self.plan = plan
        self.scope = scope
        self.keep_fusions = keep_fusions
        self.frames: list[MonitorFrame] = []
        self.blocks: list[dict] = []  # {"counts": {value: count}, "rows": {path: i32 scalar}, "loops": {path: rows}}

    def push_block(self) -> None:
        self.blocks.append({"counts": {}, "rows": {}, "loops": {}, "sources": {}})

    def pop_block(self) -> dict:
        return self.blocks.pop()

    def enter(self, comp: Computation) -> MonitorFrame:
        frame = child_frame(self.frames[-1] if self.frames else None, comp, self.scope, self.keep_fusions)
        self.frames.append(frame)
        return frame

    def leave(self) -> None:
        self.frames.pop()

    def count_of(self, value):
        """The i32 count of NaN/Inf in `value`, built once per block; for the result of a
        PASS_THROUGH instruction, the sum of the counts of the values it was made from."""
        from converter.mlir import builders

        block = self.blocks[-1]
        counts = block["counts"]
        c = counts.get(value)
        if c is None:
            sources = block["sources"].get(value)
            if sources is None:
                c = nonfinite_count(value)
            elif not sources:
                c = builders.scalar_constant(0, _i32())
            else:
                c = self.count_of(sources[0])
                for source in sources[1:]:
                    c = builders.binary("add", c, self.count_of(source))
            counts[value] = c
        return c

    def record(self, frame: MonitorFrame, instr: Instruction, operand_leaves: list, result_leaves: list) -> list:
        """Build the masked count of `instr`'s row (its non-finite count where none of its
        operands holds one, else 0) and return its result leaves to use from here on: its
        float values through an optimization barrier.  The barrier makes the value
        counted the value its users read: XLA would otherwise recompute a fused value
        separately in the count's fusion and in each user's, and two compiles of one
        expression may round differently (a multiply contracted into an add in one and
        not the other).  Each value is computed once, counted and used, as an unfused
        program would (its buffer freed after its last use)."""
        from converter.mlir import builders

        if instr.opcode in PASS_THROUGH:
            sources = [v for v in operand_leaves if v is not None and _is_float_value(v)]
            known = self.blocks[-1]["sources"]
            for v in result_leaves:
                if v is not None and _is_float_value(v) and v not in known and v not in sources:
                    known[v] = sources
            return result_leaves
        path = frame.path + (frame.position,)
        if path not in self.plan.index:
            path = path + (AFTER,)
            if path not in self.plan.index:
                return result_leaves
        positions = [k for k, v in enumerate(result_leaves) if v is not None and _is_float_value(v)]
        if not positions:
            return result_leaves
        floats = [result_leaves[k] for k in positions]
        floats = list(builders.op("stablehlo.optimization_barrier", [v.type for v in floats], floats).results)
        result_leaves = list(result_leaves)
        for k, v in zip(positions, floats):
            result_leaves[k] = v
        total = None
        for v in floats:
            c = self.count_of(v)
            total = c if total is None else builders.binary("add", total, c)
        inputs = None
        for v in operand_leaves:
            if v is None or not _is_float_value(v):
                continue
            c = self.count_of(v)
            inputs = c if inputs is None else builders.binary("add", inputs, c)
        if inputs is not None:
            zero = builders.scalar_constant(0, _i32())
            clean = builders.compare(inputs, zero, "EQ")
            total = builders.select(clean, total, zero)
        self.blocks[-1]["rows"][path] = total
        return result_leaves

    def rows(self, start: int, end: int, depth: int, counter=None):
        """The block's rows start..end (i32[end - start, plan.depth + 1]): own
        instructions' rows with `counter` in column `depth`, nested loops' rows with it
        set there too (depth -1: the entry, no counter)."""
        from converter.mlir import builders

        width = self.plan.depth + 1
        block = self.blocks[-1]
        pieces = []
        for kind, a, b in self.plan.pieces(start, end, depth):
            if kind == "items":
                counts = []
                for item in self.plan.items[a:b]:
                    c = block["rows"].get(item.path)
                    if c is None:  # never imported here (e.g. an import rule that does not inline it)
                        c = builders.scalar_constant(0, _i32())
                    counts.append(c)
                column = builders.concatenate([builders.reshape(c, [1, 1]) for c in counts], 0)
                iterations = np.full((b - a, width - 1), -1, np.int32)
                it = _i32_constant(iterations)
                if counter is not None:
                    mask = np.zeros(iterations.shape, bool)
                    mask[:, depth] = True
                    it = builders.select(builders.mask_constant(mask),
                                         builders.broadcast_in_dim(counter, list(iterations.shape), []), it)
                pieces.append(builders.concatenate([it, column], 1) if width > 1 else column)
            else:
                inner = self.plan.items[a]
                key = inner.path[: inner.loop_after[depth + 1] + 1]
                r = block["loops"][key]
                if counter is not None:
                    mask = np.zeros((b - a, width), bool)
                    mask[:, depth] = True
                    r = builders.select(builders.mask_constant(mask),
                                        builders.broadcast_in_dim(counter, [b - a, width], []), r)
                pieces.append(r)
        if not pieces:
            return _i32_constant(np.zeros((0, width), np.int32))
        return builders.concatenate(pieces, 0)


def _is_float_value(v) -> bool:
    from jaxlib.mlir import ir

    try:
        et = ir.RankedTensorType(v.type).element_type
    except ValueError:
        return False  # a token
    return isinstance(et, (ir.FloatType, ir.ComplexType))


def _i32_constant(arr: np.ndarray):
    from jaxlib.mlir import ir

    from converter.mlir import builders

    t = ir.RankedTensorType.get(list(arr.shape), _i32())
    return builders.op1("stablehlo.constant", t, [], {
        "value": ir.DenseElementsAttr.get(np.ascontiguousarray(arr, np.int32), type=_i32(), shape=list(arr.shape))})


def initial_rows(plan: MonitorPlan, count: int):
    return _i32_constant(np.concatenate([np.full((count, plan.depth), -1, np.int32),
                                         np.zeros((count, 1), np.int32)], 1))


def import_monitored_while(ctx, init: list, loop: LoopSlice, path: tuple[int, ...]) -> list:
    """A while loop that also carries its iteration counter and its body's rows (see the
    module's docstring); the rows leave the loop into the enclosing block's record."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    from converter.importer.core import ComputationImporter
    from converter.mlir import builders

    module_importer = ctx.module_importer
    recorder: MonitorRecorder = module_importer.monitor
    n = len(init)
    count = loop.end - loop.start
    state = init + [builders.scalar_constant(0, _i32()), initial_rows(recorder.plan, count)]
    op = builders.op("stablehlo.while", [v.type for v in state], state, regions=2)
    for is_body, comp_name in ((False, ctx.attrs["condition"]), (True, ctx.attrs["body"])):
        block = op.regions[int(is_body)].blocks.append(*[v.type for v in state])
        arguments = list(block.arguments)
        comp = ctx.computation(comp_name)
        with ir.InsertionPoint(block):
            recorder.push_block()
            try:
                results = ComputationImporter(module_importer, comp, [arguments[:n]]).run()
                if is_body:
                    counter, carried = arguments[n], arguments[n + 1]
                    rows = recorder.rows(loop.start, loop.end, loop.depth, counter)
                    if loop.only_iteration is not None:
                        at = builders.compare(counter, builders.scalar_constant(loop.only_iteration, _i32()), "EQ")
                        rows = builders.select(at, rows, initial_rows(recorder.plan, count))
                    width = recorder.plan.depth + 1
                    kept = builders.compare(builders.slice_(carried, [0, width - 1], [count, width]),
                                            builders.scalar_constant(0, _i32(), [count, 1]), "GT")
                    kept = builders.broadcast_in_dim(builders.reshape(kept, [count]), [count, width], [0])
                    rows = builders.select(kept, carried, rows)
                    one = builders.scalar_constant(1, _i32())
                    results = list(results) + [builders.binary("add", counter, one), rows]
            finally:
                recorder.pop_block()
            with module_importer.location(comp.root):
                stablehlo.ReturnOp(results)
    recorder.blocks[-1]["loops"][path] = list(op.results)[n + 1]
    return list(op.results)[:n]
