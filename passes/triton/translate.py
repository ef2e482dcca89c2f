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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

import passes.mosaic.arith  # noqa: F401  (registers the arith/math rules this translator reuses)
from converter.mlir import builders
from passes.mosaic import translate as mosaic
from passes.mosaic.kernel import KernelError
from passes.mosaic.translate import segments, tensor_type

RuleFn = Callable[["Translator", ir.Operation], None]
RULES: dict[str, RuleFn] = {}
# Ops the Mosaic translator's rules lower the same way in a Triton body.
SHARED_DIALECTS = ("arith.", "math.", "scf.")
WRITES = ("tt.store", "tt.atomic_rmw", "tt.atomic_cas")
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
            self.run_op(op)
        return []

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
            found = found or o.name in WRITES
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


@rule("tt.make_range")
def _make_range(t: Translator, op: ir.Operation) -> None:
    start = int(ir.IntegerAttr(op.attributes["start"]).value)
    end = int(ir.IntegerAttr(op.attributes["end"]).value)
    out = builders.iota(mosaic.i32(), [end - start], 0)
    if start:
        out = builders.binary("add", out, builders.scalar_constant(start, mosaic.i32(), [end - start]))
    t.set(op.results[0], out)


def _broadcast_to(x: ir.Value, shape: list[int]) -> ir.Value:
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
    lambda x, op: _broadcast_to(x, shape_of_type(op.results[0].type)))
RULES["tt.expand_dims"] = _shape_rule(lambda x, op: builders.reshape(x, shape_of_type(op.results[0].type)))


def _reshape(x: ir.Value, op: ir.Operation) -> ir.Value:
    if "allow_reorder" in op.attributes and ir.BoolAttr(op.attributes["allow_reorder"]).value:
        raise KernelError("tt.reshape with allow_reorder (elements in an unspecified order) is not supported")
    return builders.reshape(x, shape_of_type(op.results[0].type))


RULES["tt.reshape"] = _shape_rule(_reshape)
RULES["tt.trans"] = _shape_rule(lambda x, op: builders.transpose(x, mosaic.int_list(op.attributes["order"])))


@rule("tt.addptr")
def _addptr(t: Translator, op: ir.Operation) -> None:
    p = t.ptr(op.operands[0])
    offset = builders.convert(t.value(op.operands[1]), i64())
    shape = shape_of_type(op.results[0].type)
    t.set(op.results[0], p.with_offsets(builders.binary("add", _broadcast_to(p.offsets, shape),
                                                        _broadcast_to(offset, shape))))


def _flat_indices(t: Translator, p: Ptr, mask: ir.Value | None) -> ir.Value:
    """The buffer positions a pointer names (i64, of its shape): the trash slot where the
    mask is off or the offset is outside the buffer (an out-of-bounds access, undefined
    on the GPU, touches nothing here)."""
    size = t.sizes[p.buffer]
    shape = builders.shape_of(p.offsets)
    inside = builders.binary(
        "and", builders.compare(p.offsets, builders.scalar_constant(0, i64(), shape), "GE", "SIGNED"),
        builders.compare(p.offsets, builders.scalar_constant(size, i64(), shape), "LT", "SIGNED"))
    if mask is not None:
        inside = builders.binary("and", inside, mask)
    return builders.select(inside, p.offsets, builders.scalar_constant(size, i64(), shape))


def _gather(buffer: ir.Value, indices: ir.Value) -> ir.Value:
    shape = builders.shape_of(indices)
    return builders.gather(buffer, builders.reshape(indices, shape + [1]), shape, offset_dims=[],
                           collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=len(shape),
                           slice_sizes=[1])


def _scatter(buffer: ir.Value, indices: ir.Value, updates: ir.Value, combine: str | None = None) -> ir.Value:
    """Writes `updates` at `indices`: replacing, or combined with what is there by the
    StableHLO op `combine` (lanes aimed at the trash slot may collide with each other,
    which changes nothing that is read)."""
    shape = builders.shape_of(indices)
    dims = stablehlo.ScatterDimensionNumbers.get(
        update_window_dims=[], inserted_window_dims=[0], input_batching_dims=[], scatter_indices_batching_dims=[],
        scattered_dims_to_operand_dims=[0], index_vector_dim=len(shape))
    scatter = builders.op("stablehlo.scatter", [buffer.type], [buffer, builders.reshape(indices, shape + [1]), updates],
                          {"scatter_dimension_numbers": dims, "indices_are_sorted": ir.BoolAttr.get(False),
                           "unique_indices": ir.BoolAttr.get(False)}, regions=1)
    scalar = ir.RankedTensorType.get([], builders.element_type_of(buffer))
    block = scatter.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        new = block.arguments[1] if combine is None else builders.binary(combine, block.arguments[0],
                                                                           block.arguments[1])
        builders.op("stablehlo.return", [], [new])
    return scatter.results[0]


@rule("tt.load")
def _load(t: Translator, op: ir.Operation) -> None:
    groups = segments(op)
    p = t.ptr(groups[0][0])
    mask = t.value(groups[1][0]) if len(groups) > 1 and groups[1] else None
    other = t.value(groups[2][0]) if len(groups) > 2 and groups[2] else None
    if "boundaryCheck" in op.attributes and mosaic.int_list(op.attributes["boundaryCheck"]):
        raise KernelError("tt.load of a block pointer with a boundary check is not supported yet")
    buffer = t.buffers[p.buffer]
    values = _gather(buffer, _flat_indices(t, p, mask))
    if mask is not None:
        fill = other if other is not None else builders.scalar_constant(
            0, builders.element_type_of(values), builders.shape_of(values))
        values = builders.select(mask, values, _broadcast_to(fill, builders.shape_of(values)))
    t.set(op.results[0], values)


@rule("tt.store")
def _store(t: Translator, op: ir.Operation) -> None:
    groups = segments(op)
    p = t.ptr(groups[0][0])
    value = t.value(groups[1][0])
    mask = t.value(groups[2][0]) if len(groups) > 2 and groups[2] else None
    buffer = t.buffers[p.buffer]
    if builders.element_type_of(value) != builders.element_type_of(buffer):
        raise KernelError(f"a store of {builders.element_type_of(value)} to a buffer of "
                          f"{builders.element_type_of(buffer)}")
    t.buffers[p.buffer] = _scatter(buffer, _flat_indices(t, p, mask), value)


# ------------------------------------------------------------------ atomics
# Triton's RMWOp enum (jaxlib/triton/_triton_enum_gen.py) → the StableHLO op combining the
# stored value with the operand; "unsigned" ones compare as unsigned integers.
RMW_OPS = {1: "and", 2: "or", 3: "xor", 4: "add", 5: "add", 6: "maximum", 7: "minimum", 8: "umaximum",
           9: "uminimum", 10: None}


def _has_uses(v: ir.Value) -> bool:
    return any(True for _ in v.uses)


def _unsigned_view(x: ir.Value) -> ir.Value:
    width = ir.IntegerType(builders.element_type_of(x)).width
    return builders.op1("stablehlo.bitcast_convert",
                        builders.tensor_type_like(x, element=ir.IntegerType.get_unsigned(width)), [x])


@rule("tt.atomic_rmw")
def _atomic_rmw(t: Translator, op: ir.Operation) -> None:
    """Read-modify-write of every unmasked lane, programs in grid order.  Within one op,
    lanes that address the same element all apply (a scatter with the op as combiner).
    The old values a tensor op returns are refused where they are used (with repeated
    addresses the GPU returns each lane a different intermediate value); a scalar op's
    old value is the element before it."""
    kind = int(ir.IntegerAttr(op.attributes["atomic_rmw_op"]).value)
    if kind not in RMW_OPS:
        raise KernelError(f"tt.atomic_rmw operation {kind} is not supported")
    p = t.ptr(op.operands[0])
    scalar = not builders.shape_of(p.offsets)
    if _has_uses(op.results[0]) and not scalar:
        raise KernelError("tt.atomic_rmw on a tensor of pointers whose returned old values are used is not "
                          "supported yet")
    value = t.value(op.operands[1])
    mask = t.value(op.operands[2]) if len(op.operands) > 2 else None
    buffer = t.buffers[p.buffer]
    indices = _flat_indices(t, p, mask)
    # One element (a scalar pointer): the old value is what is there before the op (a
    # masked-off op reads the trash slot, whatever its value: the GPU returns no value).
    old = _gather(buffer, indices) if scalar else None
    combine = RMW_OPS[kind]
    if combine is not None and combine.startswith("u"):
        buffer = _scatter(_unsigned_view(buffer), indices, _unsigned_view(value), combine[1:])
        buffer = builders.op1("stablehlo.bitcast_convert", t.buffers[p.buffer].type, [buffer])
    else:
        buffer = _scatter(buffer, indices, value, combine)
    t.buffers[p.buffer] = buffer
    t.set(op.results[0], old)


@rule("tt.atomic_cas")
def _atomic_cas(t: Translator, op: ir.Operation) -> None:
    """Compare-and-swap of one element (a scalar pointer, as locks use it): returns the
    old value and stores `val` where it equals `cmp`."""
    p = t.ptr(op.operands[0])
    if builders.shape_of(p.offsets):
        raise KernelError("tt.atomic_cas on a tensor of pointers is not supported yet")
    cmp, val = t.value(op.operands[1]), t.value(op.operands[2])
    buffer = t.buffers[p.buffer]
    indices = _flat_indices(t, p, None)
    old = _gather(buffer, indices)
    new = builders.select(builders.compare(old, cmp, "EQ"), val, old)
    t.buffers[p.buffer] = _scatter(buffer, indices, new)
    t.set(op.results[0], old)


# ------------------------------------------------------------------ tt.dot
def _round_to_tf32(x: ir.Value) -> ir.Value:
    """f32 → the nearest TF32 (10 mantissa bits; ties away from zero, as PTX's
    cvt.rna.tf32.f32 rounds), kept in f32.  Inf and NaN pass unchanged."""
    shape = builders.shape_of(x)
    u32 = ir.IntegerType.get_unsigned(32)
    bits = builders.op1("stablehlo.bitcast_convert", builders.tensor_type_like(x, element=u32), [x])
    rounded = builders.binary("and", builders.binary("add", bits, builders.scalar_constant(0x1000, u32, shape)),
                              builders.scalar_constant(0xFFFFE000, u32, shape))
    back = builders.op1("stablehlo.bitcast_convert", x.type, [rounded])
    finite = builders.op1("stablehlo.is_finite", builders.tensor_type_like(x, element=ir.IntegerType.get_signless(1)), [x])
    return builders.select(finite, back, x)


# Triton's InputPrecision enum (jaxlib/triton/_triton_enum_gen.py): TF32, TF32x3, IEEE,
# BF16x3, BF16x6; an absent attribute is its default, IEEE.
INPUT_PRECISIONS = {0: "tf32", 1: "tf32x3", 2: "ieee", 3: "bf16x3", 4: "bf16x6"}


def _round_to_bf16(x: ir.Value) -> ir.Value:
    return builders.convert(builders.convert(x, ir.BF16Type.get()), builders.element_type_of(x))


def _split_parts(x: ir.Value, rounding: Callable[[ir.Value], ir.Value], parts: int) -> list[ir.Value]:
    """x as a sum of `parts` values each exact in the narrow type (hi, then the rest)."""
    out = []
    for _ in range(parts - 1):
        hi = rounding(x)
        out.append(hi)
        x = builders.binary("subtract", x, hi)
    return out + [rounding(x)]


@rule("tt.dot")
def _dot(t: Translator, op: ir.Operation) -> None:
    """d = a·b + c, accumulated in c's type, with the input precision Triton defines for
    f32 operands (triton/include/triton/Dialect/Triton/IR/TritonAttrDefs.td):
    - ieee: exact f32 products;
    - tf32: each operand rounded to TF32 (10 mantissa bits) as the tensor cores read it;
    - tf32x3, bf16x3: each operand split in two narrow parts (hi + lo) and the three
      products hi·hi + hi·lo + lo·hi summed (lo·lo dropped), as Triton emulates them;
    - bf16x6: three parts each and the six products whose part indices sum to ≤ 2.
    bf16/f16/fp8 operands are widened to the accumulator type exactly (so fp8 products are
    exact; Hopper's fp8 MMA instead accumulates with fewer bits between the promotions
    that `maxNumImpreciseAcc` sets, so the GPU may be less exact than CPU).  CPU sums the products
    in f32 in its own order; the GPU's MMA order differs, so results agree to f32
    rounding of the sums, not bit for bit."""
    a, b, c = (t.value(v) for v in op.operands[:3])
    a_attr = op.attributes["inputPrecision"] if "inputPrecision" in op.attributes else None
    if a_attr is None:
        precision = "ieee"
    elif isinstance(a_attr, ir.IntegerAttr):
        precision = INPUT_PRECISIONS.get(int(ir.IntegerAttr(a_attr).value), str(a_attr))
    else:
        precision = str(a_attr).split()[-1].strip("<>")
    acc = builders.element_type_of(c)
    f32 = ir.F32Type.get()
    rank = len(builders.shape_of(a))
    batch = [0] if rank == 3 else []

    def product(x: ir.Value, y: ir.Value) -> ir.Value:
        x, y = (builders.convert(v, acc) if builders.element_type_of(v) != acc else v for v in (x, y))
        return builders.dot_general(x, y, acc, batch, batch, [rank - 1], [rank - 2])

    if builders.element_type_of(a) != f32 or precision == "ieee":
        d = product(a, b)
    elif precision == "tf32":
        d = product(_round_to_tf32(a), _round_to_tf32(b))
    elif precision in ("tf32x3", "bf16x3", "bf16x6"):
        rounding = _round_to_tf32 if precision.startswith("tf32") else _round_to_bf16
        parts = 3 if precision == "bf16x6" else 2
        sa, sb = _split_parts(a, rounding, parts), _split_parts(b, rounding, parts)
        pairs = sorted(((i, j) for i in range(parts) for j in range(parts) if i + j < parts),
                       key=lambda ij: -sum(ij))  # the small products first
        d = None
        for i, j in pairs:
            p = product(sa[i], sb[j])
            d = p if d is None else builders.binary("add", d, p)
    else:
        raise KernelError(f"tt.dot input precision {precision} is not supported")
    t.set(op.results[0], builders.binary("add", d, c))


# ------------------------------------------------------------------ reductions, scans
def _combine(t: Translator, region: ir.Region, lhs: list[ir.Value], rhs: list[ir.Value]) -> list[ir.Value]:
    """The combiner region applied elementwise to tensors (its arith ops are elementwise)."""
    out = t.run_block(region.blocks[0], lhs + rhs)
    shape = builders.shape_of(lhs[0])
    if any(not isinstance(v, ir.Value) or builders.shape_of(v) != shape for v in out):
        raise KernelError("a combiner region whose values do not keep their operands' shape")
    return out


def _half(x: ir.Value, axis: int, start: int, size: int) -> ir.Value:
    shape = builders.shape_of(x)
    lo = [0] * len(shape)
    hi = list(shape)
    lo[axis], hi[axis] = start, start + size
    return builders.slice_(x, lo, hi)


@rule("tt.reduce")
def _reduce(t: Translator, op: ir.Operation) -> None:
    """A pairwise tree over the axis (Triton sizes are powers of two), the combiner
    applied to halves: any combiner region, several operands (argmax) included."""
    axis = int(ir.IntegerAttr(op.attributes["axis"]).value)
    values = [t.value(v) for v in op.operands]
    n = builders.shape_of(values[0])[axis]
    if n & (n - 1):
        raise KernelError(f"tt.reduce over an axis of {n} elements (not a power of two)")
    while n > 1:
        n //= 2
        values = _combine(t, op.regions[0], [_half(v, axis, 0, n) for v in values],
                          [_half(v, axis, n, n) for v in values])
    for r, v in zip(op.results, values):
        t.set(r, builders.reshape(v, shape_of_type(r.type)))


@rule("tt.scan")
def _scan(t: Translator, op: ir.Operation) -> None:
    """An inclusive scan along the axis in log2(n) steps (Hillis-Steele): at distance d
    each element combines with the one d before it (after it, for `reverse`)."""
    axis = int(ir.IntegerAttr(op.attributes["axis"]).value)
    reverse = "reverse" in op.attributes and ir.BoolAttr(op.attributes["reverse"]).value
    values = [t.value(v) for v in op.operands]
    n = builders.shape_of(values[0])[axis]
    if reverse:
        values = [builders.op1("stablehlo.reverse", v.type, [v], {"dimensions": builders.i64_array([axis])})
                  for v in values]
    d = 1
    while d < n:
        combined = _combine(t, op.regions[0], [_half(v, axis, 0, n - d) for v in values],
                            [_half(v, axis, d, n - d) for v in values])
        values = [builders.concatenate([_half(v, axis, 0, d), c], axis) for v, c in zip(values, combined)]
        d *= 2
    if reverse:
        values = [builders.op1("stablehlo.reverse", v.type, [v], {"dimensions": builders.i64_array([axis])})
                  for v in values]
    for r, v in zip(op.results, values):
        t.set(r, v)


# ------------------------------------------------------------------ elementwise
# libdevice functions Pallas emits (jax/_src/pallas/triton/lowering.py `_make_dispatch_table`)
# → a StableHLO (or CHLO) op of the same function, by name without the `__nv_` prefix and
# the f32 `f` suffix.
LIBDEVICE_UNARY = {
    "exp": "exponential", "log": "log", "log1p": "log_plus_one", "expm1": "exponential_minus_one", "tanh": "tanh",
    "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sine", "cos": "cosine", "tan": "tan", "fabs": "abs", "abs": "abs",
    "floor": "floor", "ceil": "ceil", "rint": "round_nearest_even", "nearbyint": "round_nearest_even",
    "round": "round_nearest_afz", "cbrt": "cbrt",
}
LIBDEVICE_CHLO = {"erf": "chlo.erf", "erfinv": "chlo.erf_inv", "asin": "chlo.asin", "acos": "chlo.acos",
                  "atan": "chlo.atan", "sinh": "chlo.sinh", "cosh": "chlo.cosh", "asinh": "chlo.asinh",
                  "acosh": "chlo.acosh", "atanh": "chlo.atanh", "lgamma": "chlo.lgamma", "digamma": "chlo.digamma"}
LIBDEVICE_BINARY = {"pow": "power", "atan2": "atan2", "fmod": "remainder", "nextafter": "next_after",
                    "fmax": None, "fmin": None}


def _libdevice_name(symbol: str) -> str:
    name = symbol.removeprefix("__nv_").removeprefix("fast_")
    for suffix in ("f", ""):
        stem = name[:-1] if suffix and name.endswith("f") else name
        if stem in LIBDEVICE_UNARY or stem in LIBDEVICE_CHLO or stem in LIBDEVICE_BINARY \
                or stem in ("exp2", "log2", "log10", "trunc", "signbit", "isnan", "isinf", "isfinited"):
            return stem
    return name


@rule("tt.extern_elementwise")
def _extern_elementwise(t: Translator, op: ir.Operation) -> None:
    symbol = ir.StringAttr(op.attributes["symbol"]).value
    name = _libdevice_name(symbol)
    args = [t.value(v) for v in op.operands]
    x = args[0]
    shape, et = builders.shape_of(x), builders.element_type_of(x)
    if name in LIBDEVICE_UNARY and len(args) == 1:
        out = builders.unary(LIBDEVICE_UNARY[name], x)
    elif name in LIBDEVICE_CHLO and len(args) == 1:
        out = builders.op1(LIBDEVICE_CHLO[name], x.type, [x])
    elif name == "exp2" and len(args) == 1:
        out = builders.binary("power", builders.scalar_constant(2.0, et, shape), x)
    elif name in ("log2", "log10") and len(args) == 1:
        base = 2.0 if name == "log2" else 10.0
        out = builders.binary("divide", builders.unary("log", x),
                              builders.unary("log", builders.scalar_constant(base, et, shape)))
    elif name == "trunc" and len(args) == 1:
        out = builders.select(builders.compare(x, builders.scalar_constant(0, et, shape), "LT", "FLOAT"),
                              builders.unary("ceil", x), builders.unary("floor", x))
    elif name in ("fmax", "fmin") and len(args) == 2:
        # fmax/fmin return the other operand where one is NaN (C's fmax), like arith.maxnumf.
        y = args[1]
        m = builders.binary("maximum" if name == "fmax" else "minimum", x, y)
        out = builders.select(builders.compare(x, x, "NE", "FLOAT"), y,
                              builders.select(builders.compare(y, y, "NE", "FLOAT"), x, m))
    elif name in LIBDEVICE_BINARY and LIBDEVICE_BINARY[name] and len(args) == 2:
        out = builders.binary(LIBDEVICE_BINARY[name], x, args[1])
    else:
        raise KernelError(f"tt.extern_elementwise {symbol} (libdevice) has no StableHLO equivalent here yet")
    t.set(op.results[0], out)


@rule("tt.precise_sqrt")
def _precise_sqrt(t: Translator, op: ir.Operation) -> None:
    """IEEE-rounded sqrt: StableHLO's sqrt on CPU is correctly rounded."""
    t.set(op.results[0], builders.unary("sqrt", t.value(op.operands[0])))


@rule("tt.precise_divf")
def _precise_divf(t: Translator, op: ir.Operation) -> None:
    t.set(op.results[0], builders.binary("divide", *(t.value(v) for v in op.operands)))


@rule("tt.clampf")
def _clampf(t: Translator, op: ir.Operation) -> None:
    """min(max(x, lo), hi); with propagateNan = all a NaN x stays NaN (maximum/minimum
    propagate NaN), with none a NaN x becomes lo (maxnum semantics)."""
    x, lo, hi = (t.value(v) for v in op.operands)
    a = op.attributes["propagateNan"] if "propagateNan" in op.attributes else None
    # Triton's PropagateNan enum: NONE = 0, ALL = 0xffff.
    propagate = a is not None and (int(ir.IntegerAttr(a).value) != 0 if isinstance(a, ir.IntegerAttr)
                                   else "all" in str(a))
    clamped = builders.binary("minimum", builders.binary("maximum", x, lo), hi)
    if not propagate:
        clamped = builders.select(builders.compare(x, x, "NE", "FLOAT"), lo, clamped)
    t.set(op.results[0], clamped)


@rule("tt.join")
def _join(t: Translator, op: ir.Operation) -> None:
    """Two tensors stacked along a new minor dimension of size 2."""
    a, b = (t.value(v) for v in op.operands)
    shape = builders.shape_of(a)
    t.set(op.results[0], builders.concatenate([builders.reshape(a, shape + [1]), builders.reshape(b, shape + [1])],
                                              len(shape)))


@rule("tt.split")
def _split_op(t: Translator, op: ir.Operation) -> None:
    x = t.value(op.operands[0])
    shape = builders.shape_of(x)
    for k, r in enumerate(op.results):
        lo = [0] * len(shape)
        hi = list(shape)
        lo[-1], hi[-1] = k, k + 1
        t.set(r, builders.reshape(builders.slice_(x, lo, hi), shape[:-1]))


@rule("tt.assert")
def _assert(t: Translator, op: ir.Operation) -> None:
    """A device-side assertion: it stops a GPU program where the condition is false; on
    CPU the condition is computed by nothing (StableHLO has no assertion), so it is dropped."""


@rule("tt.bitcast")
def _bitcast(t: Translator, op: ir.Operation) -> None:
    x = t.value(op.operands[0])
    t.set(op.results[0], builders.op1("stablehlo.bitcast_convert", tensor_type(op.results[0].type), [x]))


@rule("arith.constant")
def _constant(t: Translator, op: ir.Operation) -> None:
    """A boolean constant (`true`, a BoolAttr, which Pallas writes for masks), else the
    Mosaic translator's rule (integers, floats, dense elements)."""
    value = op.attributes["value"]
    if isinstance(value, ir.BoolAttr):
        t.set(op.results[0], builders.scalar_constant(bool(ir.BoolAttr(value).value), ir.IntegerType.get_signless(1),
                                                      shape_of_type(op.results[0].type)))
        return
    mosaic.RULES["arith.constant"](t, op)


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
        offsets = builders.select(_broadcast_to(c, shape) if builders.shape_of(c) != shape else c,
                                  _broadcast_to(a.offsets, shape), _broadcast_to(b.offsets, shape))
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


# ------------------------------------------------------------------ float conversions
# Triton's RoundingMode enum (jaxlib/triton/_triton_enum_gen.py): RTZ = 0, RTNE = 1.
ROUNDING = {"0": "rtz", "1": "rtne", "rtz": "rtz", "rtne": "rtne"}


def _fp8_max(element: ir.Type) -> float | None:
    """The largest finite value of an fp8 type (None for other types)."""
    import ml_dtypes

    name = {"f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2", "f8E4M3FNUZ": "float8_e4m3fnuz",
            "f8E5M2FNUZ": "float8_e5m2fnuz", "f8E4M3B11FNUZ": "float8_e4m3b11fnuz"}.get(str(element))
    return float(ml_dtypes.finfo(getattr(ml_dtypes, name)).max) if name else None


def _float_width(element: ir.Type) -> int:
    return ir.FloatType(element).width


@rule("tt.fp_to_fp")
def _fp_to_fp(t: Translator, op: ir.Operation) -> None:
    """Float ↔ float conversions (fp8 among them).  Widening is exact.  Narrowing rounds
    as `rounding` says: rtne is StableHLO's convert; rtz is that, stepped one ulp toward
    zero wherever it rounded away from zero (the integer view of a sign-magnitude float
    minus one is its neighbour toward zero), which also turns an overflow to ±inf into the
    largest finite value, as round-toward-zero does.  An fp8 result saturates first: on
    SM90 Triton narrows to fp8 with `cvt.rn.satfinite` (its test
    test/Conversion/tritongpu_to_llvm_hopper.mlir), so out-of-range values become ±max,
    not inf or NaN; NaN stays NaN."""
    x = t.value(op.operands[0])
    out_type = tensor_type(op.results[0].type)
    src, dst = builders.element_type_of(x), out_type.element_type
    if _float_width(dst) >= _float_width(src):
        t.set(op.results[0], builders.convert(x, dst))
        return
    mode = None
    if "rounding" in op.attributes:
        text = str(op.attributes["rounding"])
        m = re.search(r"rtne|rtz|^\d+", text.split(":")[0].strip())
        mode = ROUNDING.get(m.group(0)) if m else None
        if mode is None:
            raise KernelError(f"tt.fp_to_fp with rounding {text}")
    if mode is None:
        raise KernelError(f"tt.fp_to_fp narrowing {src} to {dst} without a rounding mode")
    shape = builders.shape_of(x)
    limit = _fp8_max(dst)
    if limit is not None:
        x = builders.clamp(builders.scalar_constant(-limit, src, shape), x, builders.scalar_constant(limit, src, shape))
    y = builders.convert(x, dst)
    if mode == "rtz":
        back = builders.convert(y, src)
        away = builders.compare(builders.unary("abs", back), builders.unary("abs", x), "GT", "FLOAT")
        int_type = ir.IntegerType.get_signless(_float_width(dst))
        bits = builders.op1("stablehlo.bitcast_convert", ir.RankedTensorType.get(shape, int_type), [y])
        stepped = builders.binary("subtract", bits, builders.scalar_constant(1, int_type, shape))
        y = builders.select(away, builders.op1("stablehlo.bitcast_convert", out_type, [stepped]), y)
    t.set(op.results[0], y)


# ------------------------------------------------------------------ inline assembly
# The PTX Pallas' approx_tanh writes (jax/_src/pallas/triton/primitives.py approx_tanh):
# tanh.approx for f32, f16, bf16 (and their packed x2 forms).  CPU computes the exact tanh;
# the GPU's approximation is off by up to about 2^-11 relative (PTX ISA, tanh.approx.f32).
_TANH_APPROX = re.compile(r"\s*tanh\.approx\.(f32|f16|bf16)(x2)?\s+\$0\s*,\s*\$1\s*;\s*")


@rule("tt.elementwise_inline_asm")
def _inline_asm(t: Translator, op: ir.Operation) -> None:
    asm = ir.StringAttr(op.attributes["asm_string"]).value
    if len(op.operands) == 1 and len(op.results) == 1 and _TANH_APPROX.fullmatch(asm):
        t.set(op.results[0], builders.unary("tanh", t.value(op.operands[0])))
        return
    raise KernelError(f"tt.elementwise_inline_asm {asm.strip()!r}: inline PTX has no StableHLO equivalent "
                      "(only Pallas' approx_tanh, tanh.approx, is known)")
