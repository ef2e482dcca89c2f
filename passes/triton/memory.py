"""Triton memory ops → StableHLO on flat buffers: tt.addptr, tt.load, tt.store and the
atomics (tt.atomic_rmw, tt.atomic_cas).

A pointer is a `Ptr` (a buffer and i64 offsets; passes/triton/translate.py): tt.addptr is
index arithmetic, tt.load a gather of the positions a pointer names (masked-off lanes take
`other`, or zero), tt.store a scatter into the buffer, which the translator then carries
as its new value (memory is SSA state).  A masked-off or out-of-bounds lane addresses the
buffer's trailing trash slot, so it reads nothing that matters and writes nothing read.
Registered into passes.triton.translate.RULES (imported by it).
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from passes.mosaic import translate as mosaic
from passes.mosaic.kernel import KernelError
from passes.mosaic.translate import segments
from passes.triton.translate import Ptr, Translator, broadcast_to, i64, rule, shape_of_type


@rule("tt.addptr")
def _addptr(t: Translator, op: ir.Operation) -> None:
    p = t.ptr(op.operands[0])
    offset = builders.convert(t.value(op.operands[1]), i64())
    shape = shape_of_type(op.results[0].type)
    t.set(op.results[0], p.with_offsets(builders.binary("add", broadcast_to(p.offsets, shape),
                                                        broadcast_to(offset, shape))))


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
        values = builders.select(mask, values, broadcast_to(fill, builders.shape_of(values)))
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
