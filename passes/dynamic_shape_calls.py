"""dynamic-shape-calls: XLA's dynamic padder calls `SliceToDynamic` and `PadToStatic` →
StableHLO's bounded dynamic shapes (`tensor<?x..., #stablehlo.bounds<...>>`).

XLA (xla/service/dynamic_padder.cc, dynamic_dimension_inference.cc) writes:
- `f32[<=8,4] custom-call(f32[8,4] data, s32[] size0, s32[] size1), custom_call_target="SliceToDynamic"`:
  the bounded array whose valid region is data[:size0, :size1], one size per dimension
  (the sizes of static dimensions are their extents).  → `set_dimension_size` on each
  dimension the result declares dynamic.
- `(f32[8,4], s32[], s32[]) custom-call(f32[<=8,4] x), custom_call_target="PadToStatic"`:
  the data at static extents, valid elements at their logical positions, then the size of
  every dimension.  XLA leaves the padding's contents unspecified; here it is zero, so
  the portable module computes one defined answer.  → `get_dimension_size` per dimension,
  `set_dimension_size` to the bound, and a select against an iota mask.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

TARGETS = ("SliceToDynamic", "PadToStatic")


@register_pass("dynamic-shape-calls", "SliceToDynamic / PadToStatic custom-calls → bounded dynamic shapes "
               "(set/get_dimension_size)", targets=TARGETS, preserves={Fact.CALL_TARGETS, Fact.USES})
def lower_dynamic_shape_calls(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(TARGETS):
        if rewrite.call_target(op) == "SliceToDynamic":
            _slice_to_dynamic(op)
        else:
            _pad_to_static(op)


def _dynamic_dims(t: ir.RankedTensorType) -> tuple[list[int], list[bool]]:
    """(bounds or extents, which dimensions are dynamic) of a possibly bounded type."""
    dynamic = [t.is_dynamic_dim(i) for i in range(t.rank)]
    if not any(dynamic):
        return list(t.shape), dynamic
    encoding = str(t.encoding)
    inner = encoding[encoding.index("<") + 1:encoding.rindex(">")]
    bounds = [bound.strip() for bound in inner.split(",")]
    dims = [int(bounds[i]) if dynamic[i] else t.shape[i] for i in range(t.rank)]
    return dims, dynamic


def _slice_to_dynamic(op: ir.Operation) -> None:
    data, sizes = op.operands[0], list(op.operands[1:])
    result_t = ir.RankedTensorType(op.results[0].type)
    dims, dynamic = _dynamic_dims(result_t)
    if len(op.results) != 1 or len(sizes) != result_t.rank:
        raise rewrite.op_error(op, f"expected the data and one s32[] size per dimension ({result_t.rank}), "
                              f"found {len(sizes)} sizes")
    if builders.shape_of(data) != dims:
        raise rewrite.op_error(op, f"data shape {builders.shape_of(data)} differs from the result's bounds {dims}")
    with rewrite.at(op):
        value, done = data, [False] * len(dims)
        for d in range(len(dims)):
            if dynamic[d]:
                done[d] = True
                value = builders.op1("stablehlo.set_dimension_size", builders.bounded_type(dims, done, result_t.element_type),
                              [value, _as_i32(sizes[d])], {"dimension": builders.i64_attr(d)})
    rewrite.replace(op, [value])


def _pad_to_static(op: ir.Operation) -> None:
    x = op.operands[0]
    operand_t = ir.RankedTensorType(x.type)
    dims, dynamic = _dynamic_dims(operand_t)
    if len(op.operands) != 1 or len(op.results) != 1 + len(dims):
        raise rewrite.op_error(op, f"expected one operand and (data, one size per dimension) results, found "
                              f"{len(op.operands)} operand(s) and {len(op.results)} results")
    element = operand_t.element_type
    size_types = [r.type for r in op.results[1:]]
    i32 = ir.IntegerType.get_signless(32)
    with rewrite.at(op):
        sizes = []
        for d in range(len(dims)):
            size = builders.op1("stablehlo.get_dimension_size", ir.RankedTensorType.get([], i32), [x],
                         {"dimension": builders.i64_attr(d)})
            sizes.append(builders.convert(size, ir.RankedTensorType(size_types[d]).element_type))
        value, remaining = x, list(dynamic)
        mask = None
        for d in range(len(dims)):
            if not dynamic[d]:
                continue
            remaining[d] = False
            bound = builders.scalar_constant(dims[d], i32)
            size_i32 = builders.op1("stablehlo.get_dimension_size", ir.RankedTensorType.get([], i32), [x],
                             {"dimension": builders.i64_attr(d)})
            value = builders.op1("stablehlo.set_dimension_size", builders.bounded_type(dims, remaining, element),
                          [value, bound], {"dimension": builders.i64_attr(d)})
            valid = builders.compare(builders.iota(i32, dims, d), builders.broadcast_in_dim(size_i32, dims, []), "LT", "SIGNED")
            mask = valid if mask is None else builders.binary("and", mask, valid)
        if mask is not None:
            value = builders.select(mask, value, builders.scalar_constant(0, element, dims))
    rewrite.replace(op, [value, *sizes])


def _as_i32(size: ir.Value) -> ir.Value:
    i32 = ir.IntegerType.get_signless(32)
    return builders.convert(size, i32)
