"""The Mosaic kernel body → StableHLO, op by op.

Values: a Mosaic scalar becomes a rank-0 tensor (`index` as i32), a vector a tensor of its
shape.  Memory: every buffer the kernel sees (a window of an operand, a whole operand, a
scratch buffer) is a tensor in `Translator.buffers`; a memref value is a `Ref`, a view
into one buffer (offsets, and which buffer dimensions it keeps).  A store replaces the
buffer's tensor; structured control flow (scf.if/for/while) carries the buffers its
region writes as extra results or loop values, so memory becomes SSA state.

Op rules live in the family modules (arith, vector, memory) and register here with
`@rule("dialect.op", ...)`; an op without a rule is a KernelError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from passes.mosaic.kernel import KernelError

RuleFn = Callable[["Translator", ir.Operation], None]
RULES: dict[str, RuleFn] = {}
# Ops that write memory, and the operand that is the memref they write (for the
# buffers a region must carry).
WRITES: dict[str, Callable[[ir.Operation], ir.Value]] = {}



def rule(*names: str, writes: Callable[[ir.Operation], ir.Value] | None = None) -> Callable[[RuleFn], RuleFn]:
    def register(fn: RuleFn) -> RuleFn:
        for n in names:
            RULES[n] = fn
            if writes is not None:
                WRITES[n] = writes
        return fn
    return register


def i32() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def element_type(t: ir.Type) -> ir.Type:
    """A Mosaic element type in the current (StableHLO) context; `index` becomes i32."""
    text = str(t)
    if text == "index":
        return i32()
    return ir.Type.parse(text)


def tensor_type(t: ir.Type) -> ir.RankedTensorType:
    """The tensor type standing for a Mosaic scalar or vector type."""
    if isinstance(t, ir.ShapedType):
        st = ir.ShapedType(t)
        return ir.RankedTensorType.get(list(st.shape), element_type(st.element_type))
    return ir.RankedTensorType.get([], element_type(t))


def segments(op: ir.Operation) -> list[list[ir.Value]]:
    """The op's operands grouped by its operandSegmentSizes (one group per operand if
    the op has no variadic operands)."""
    operands = list(op.operands)
    if "operandSegmentSizes" not in op.attributes:
        return [[v] for v in operands]
    groups, i = [], 0
    for n in ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]):
        groups.append(operands[i:i + n])
        i += n
    return groups


def attr(op: ir.Operation, name: str) -> ir.Attribute | None:
    return op.attributes[name] if name in op.attributes else None


def int_list(a: ir.Attribute) -> list[int]:
    for cls in (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr):
        if isinstance(a, cls):
            return [int(x) for x in cls(a)]
    if isinstance(a, ir.ArrayAttr):
        return [int(ir.IntegerAttr(x).value) for x in ir.ArrayAttr(a)]
    raise KernelError(f"expected an integer array attribute, found {a}")


@dataclass
class Ref:
    """A memref: a view of buffer `buffer` starting at `offsets` (one per buffer dim, ints
    or i32 scalars), `shape` its memref shape, `dims[i]` the buffer dim of view dim i
    (buffer dims not listed are unit dims squeezed away).  `buffer` None: a semaphore;
    a `Reshaped`: the contents of another view read in another shape."""

    buffer: "int | Reshaped | None"
    offsets: list
    shape: list[int]
    dims: list[int]


@dataclass
class Reshaped:
    """A reshaped memref (tpu.memref_reshape) acts as a buffer of its own shape whose
    contents are those of `source` (a view) in row-major order: reading it reads the
    whole source view, writing it writes the whole source view back."""

    source: Ref
    shape: list[int]


def squeeze_dims(full: Sequence[int], squeezed: Sequence[int]) -> list[int] | None:
    """Which dims of `full` remain when unit dims are dropped to give `squeezed`."""
    kept: list[int] = []
    i = 0
    for j, size in enumerate(squeezed):
        while i < len(full) and full[i] != size:
            if full[i] != 1:
                return None
            i += 1
        if i == len(full):
            return None
        kept.append(i)
        i += 1
    if any(full[k] != 1 for k in range(i, len(full))):
        return None
    return kept


class Translator:
    """Translates Mosaic ops at the current insertion point.  `buffers` is the memory
    state; `env` maps Mosaic values to tensors or Refs."""

    def __init__(self) -> None:
        # The grid's sizes (i32 scalars), for tpu.iteration_bound.
        self.grid_sizes: list[ir.Value] = []
        self.env: dict[ir.Value, object] = {}
        self.buffers: list[ir.Value | None] = []

    # values ------------------------------------------------------------------
    def value(self, v: ir.Value) -> ir.Value:
        got = self.env.get(v)
        if got is None:
            raise KernelError(f"value {v.get_name()} is used before it is defined")
        if isinstance(got, Ref):
            raise KernelError("a memref where a value was expected")
        return got

    def ref(self, v: ir.Value) -> Ref:
        got = self.env.get(v)
        if not isinstance(got, Ref):
            raise KernelError("a value where a memref was expected")
        return got

    def set(self, result: ir.Value, value) -> None:
        self.env[result] = value

    def read_buffer(self, buffer: "int | Reshaped") -> ir.Value:
        if isinstance(buffer, Reshaped):
            from passes.mosaic.memory import load_view

            return builders.reshape(load_view(self, buffer.source), buffer.shape)
        return self.buffers[buffer]

    def write_buffer(self, buffer: "int | Reshaped", value: ir.Value) -> None:
        if isinstance(buffer, Reshaped):
            from passes.mosaic.memory import store_view

            store_view(self, buffer.source, builders.reshape(value, buffer.source.shape))
        else:
            self.buffers[buffer] = value

    def new_buffer(self, value: ir.Value | None) -> int:
        self.buffers.append(value)
        return len(self.buffers) - 1

    # blocks and regions ------------------------------------------------------
    def run_block(self, block: ir.Block, args: Sequence[object]) -> list[ir.Value]:
        """Translate the ops of `block` with its arguments bound to `args`; the operands
        of its terminator (translated values) are returned."""
        if len(args) != len(block.arguments):
            raise KernelError(f"a block of {len(block.arguments)} arguments entered with {len(args)}")
        for a, v in zip(block.arguments, args):
            self.env[a] = v
        for op in block.operations:
            op = op.operation
            if op.name in ("scf.yield", "func.return", "scf.condition"):
                return [self.env[v] for v in op.operands]
            self.run_op(op)
        return []

    def run_op(self, op: ir.Operation) -> None:
        fn = RULES.get(op.name)
        if fn is None:
            raise KernelError(f"Mosaic op {op.name} is not supported yet", op)
        try:
            fn(self, op)
        except KernelError as e:
            if e.op is None:
                e.op = op
            raise

    def written_buffers(self, regions: Sequence[ir.Region]) -> list[int]:
        """Buffers that ops in `regions` may write, in order."""
        found: set[int] = set()

        def visit(o: ir.Operation) -> ir.WalkResult:
            target = WRITES.get(o.name)
            if target is not None:
                buf = self._root_buffer(target(o))
                if buf is not None:
                    found.add(buf)
            return ir.WalkResult.ADVANCE

        for region in regions:
            for block in region.blocks:
                for op in block.operations:
                    op.operation.walk(visit)
        return sorted(found)

    def _root_buffer(self, v: ir.Value) -> int | None:
        """The buffer a memref value views, following view ops defined inside regions
        not translated yet back to a memref already bound."""
        while True:
            got = self.env.get(v)
            if isinstance(got, Ref):
                buffer = got.buffer
                while isinstance(buffer, Reshaped):
                    buffer = buffer.source.buffer
                return buffer
            owner = v.owner
            op = getattr(owner, "operation", None)
            if op is None or not op.operands:
                raise KernelError("a store to a memref whose origin is unknown")
            v = op.operands[0]

    # control flow builders -----------------------------------------------------
    def build_if(self, pred: ir.Value, result_types: Sequence[ir.Type], written: Sequence[int],
                 branches: Sequence[Callable[[], list[ir.Value]]], name: str = "stablehlo.if") -> list[ir.Value]:
        """stablehlo.if (or stablehlo.case on an index); each branch returns its values
        and leaves `buffers` written; the results are the values, then the written buffers."""
        types = list(result_types) + [self.buffers[i].type for i in written]
        if_op = builders.op(name, types, [pred], regions=len(branches))
        saved = list(self.buffers)
        for region, branch in zip(if_op.regions, branches):
            self.buffers = list(saved)
            block = region.blocks.append()
            with ir.InsertionPoint(block):
                values = branch()
                stablehlo.ReturnOp(list(values) + [self.buffers[i] for i in written])
        self.buffers = list(saved)
        results = list(if_op.results)
        for k, i in enumerate(written):
            self.buffers[i] = results[len(result_types) + k]
        return results[:len(result_types)]

    def build_while(self, init: Sequence[ir.Value], written: Sequence[int],
                    cond: Callable[[list[ir.Value]], ir.Value],
                    body: Callable[[list[ir.Value]], list[ir.Value]]) -> list[ir.Value]:
        """stablehlo.while over `init` values plus the buffers in `written`."""
        n = len(init)
        carried = list(init) + [self.buffers[i] for i in written]
        saved = list(self.buffers)

        def bind(values) -> list[ir.Value]:
            self.buffers = list(saved)
            for k, i in enumerate(written):
                self.buffers[i] = values[n + k]
            return list(values[:n])

        def cond_fn(*values):
            return cond(bind(values))

        def body_fn(*values):
            out = body(bind(values))
            return list(out) + [self.buffers[i] for i in written]

        results = builders.while_loop(carried, cond_fn, body_fn)
        self.buffers = list(saved)
        for k, i in enumerate(written):
            self.buffers[i] = results[n + k]
        return results[:n]


def as_i32(x: ir.Value) -> ir.Value:
    """An integer scalar as i32 (index values are i32 already)."""
    return x if builders.element_type_of(x) == i32() else builders.convert(x, i32())


def index_value(v: ir.Value | int) -> ir.Value:
    """An offset (a Python int or an integer scalar) as an i32 scalar."""
    return builders.scalar_constant(v, i32()) if isinstance(v, int) else as_i32(v)


def dense_constant(a: ir.Attribute, t: ir.RankedTensorType) -> ir.Value:
    """A constant from an arith.constant's value (scalar, splat or dense elements)."""
    et = t.element_type
    if isinstance(a, ir.IntegerAttr):
        return builders.scalar_constant(ir.IntegerAttr(a).value, et, t.shape)
    if isinstance(a, ir.FloatAttr):
        return builders.scalar_constant(ir.FloatAttr(a).value, et, t.shape)
    if isinstance(a, ir.DenseElementsAttr):
        d = ir.DenseElementsAttr(a)
        if d.is_splat:
            return dense_constant(d.get_splat_value(), t)
        if isinstance(a, ir.DenseIntElementsAttr):
            arr = np.array(ir.DenseIntElementsAttr(a))
        elif isinstance(a, ir.DenseFPElementsAttr) and not isinstance(et, ir.BF16Type):
            arr = np.array(ir.DenseFPElementsAttr(a))
        else:
            raise KernelError(f"a dense constant of element type {et} is not supported")
        if isinstance(et, ir.IntegerType) and ir.IntegerType(et).width == 1:
            return builders.mask_constant(arr.astype(bool))
        return builders.op1("stablehlo.constant", t, [], {"value": ir.DenseElementsAttr.get(arr, type=et, shape=t.shape)})
    raise KernelError(f"constant attribute {a} is not supported")


# Control flow and functions --------------------------------------------------------

@rule("scf.if")
def _scf_if(t: Translator, op: ir.Operation) -> None:
    pred = t.value(op.operands[0])
    types = [tensor_type(r.type) for r in op.results]
    written = t.written_buffers(list(op.regions))

    def branch(region: ir.Region) -> Callable[[], list[ir.Value]]:
        def run() -> list[ir.Value]:
            if not region.blocks:
                return []
            return t.run_block(region.blocks[0], [])
        return run

    results = t.build_if(pred, types, written, [branch(op.regions[0]), branch(op.regions[1])])
    for r, v in zip(op.results, results):
        t.set(r, v)


@rule("scf.index_switch")
def _index_switch(t: Translator, op: ir.Operation) -> None:
    """The case whose value equals the argument, else the default region (the first
    region; the cases follow in `cases` order): stablehlo.case with the default last."""
    arg = as_i32(t.value(op.operands[0]))
    cases = int_list(op.attributes["cases"])
    index = builders.scalar_constant(len(cases), i32())
    for k, value in enumerate(cases):
        index = builders.select(builders.compare(arg, builders.scalar_constant(value, i32()), "EQ", "SIGNED"),
                         builders.scalar_constant(k, i32()), index)
    types = [tensor_type(r.type) for r in op.results]
    regions = list(op.regions)
    written = t.written_buffers(regions)

    def branch(region: ir.Region) -> Callable[[], list[ir.Value]]:
        return lambda: t.run_block(region.blocks[0], [])

    results = t.build_if(index, types, written, [branch(r) for r in regions[1:] + regions[:1]], "stablehlo.case")
    for r, v in zip(op.results, results):
        t.set(r, v)


@rule("tpu.assume_multiple")
def _assume_multiple(t: Translator, op: ir.Operation) -> None:
    """A promise to the compiler about the value (pl.multiple_of): the value itself."""
    t.set(op.results[0], t.value(op.operands[0]))


@rule("scf.for")
def _scf_for(t: Translator, op: ir.Operation) -> None:
    lb, ub, step, *inits = op.operands
    lb_v, ub_v, step_v = (t.value(x) for x in (lb, ub, step))
    body_block = op.regions[0].blocks[0]
    written = t.written_buffers([op.regions[0]])

    def cond(values):
        return builders.compare(values[0], ub_v, "LT", "SIGNED")

    def body(values):
        outs = t.run_block(body_block, values)
        return [builders.binary("add", values[0], step_v)] + outs

    results = t.build_while([lb_v] + [t.value(x) for x in inits], written, cond, body)
    for r, v in zip(op.results, results[1:]):
        t.set(r, v)


@rule("scf.while")
def _scf_while(t: Translator, op: ir.Operation) -> None:
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    if t.written_buffers([op.regions[0]]):
        raise KernelError("an scf.while whose condition region writes memory")
    written = t.written_buffers([op.regions[1]])

    def condition(values):
        outs = t.run_block(before, values)
        return outs[0], outs[1:]

    def body(values):
        _, forwarded = condition(values)
        return t.run_block(after, forwarded)

    results = t.build_while([t.value(x) for x in op.operands], written, lambda vs: condition(vs)[0], body)
    _, final = condition(results)
    for r, v in zip(op.results, final):
        t.set(r, v)


@rule("tpu.iteration_bound")
def _iteration_bound(t: Translator, op: ir.Operation) -> None:
    dim = int(ir.IntegerAttr(op.attributes["dim"]).value)
    if dim >= len(t.grid_sizes):
        raise KernelError(f"tpu.iteration_bound of grid axis {dim} in a grid of {len(t.grid_sizes)} axes")
    t.set(op.results[0], t.grid_sizes[dim])


@rule("tpu.trace_start", "tpu.trace_stop")
def _trace_marker(t: Translator, op: ir.Operation) -> None:
    """Profiler markers: no effect on values."""


@rule("func.call")
def _call(t: Translator, op: ir.Operation) -> None:
    raise KernelError("func.call inside a kernel is not supported")


# The op families register their rules in RULES; they import this module's helpers, so
# they are imported once those exist (the package's __init__ is kept light).
from passes.mosaic import arith, memory, vector  # noqa: E402,F401
