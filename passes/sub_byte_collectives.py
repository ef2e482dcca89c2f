"""sub-byte-collectives: collectives on sub-byte element types (s2, u2, s4, u4, f4...)
written as collectives on a byte-wide type.

XLA's CPU runtime moves sub-byte arrays as if each element had a byte of its own: a
2-bit all-gather returns the wrong elements, a 2-bit all-to-all kills the process, and
all-reduce / reduce-scatter refuse 2-bit types.  Widening is exact for values
(conversion to s8 / u8 / f32 and back loses nothing):
- all_gather, all_to_all, collective_permute, collective_broadcast move the widened
  values and convert back;
- all_reduce gathers every participant's widened operand along a new leading axis and
  folds the gathered values with the op's own reducer in the narrow type;
- reduce_scatter exchanges the blocks with an all_to_all (participant k receives every
  participant's block k) and folds them the same way.
The fold applies the reducer in group order; XLA leaves the order of a reduction open.
Run after partitions-to-replicas, whose explicit groups it reads.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.collective_folds import all_reduce_by_gather, reduce_scatter_by_exchange
from converter.mlir.module_attributes import module_devices
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker


MOVES = ("stablehlo.all_gather", "stablehlo.all_to_all", "stablehlo.collective_permute",
         "stablehlo.collective_broadcast")
FOLDS = ("stablehlo.all_reduce", "stablehlo.reduce_scatter")


def _wide(element: ir.Type) -> ir.Type | None:
    """The byte-wide type to move `element` as, None when it is a byte or wider."""
    if isinstance(element, ir.IntegerType):
        t = ir.IntegerType(element)
        if t.width >= 8 or t.width == 1:  # pred moves as a byte already
            return None
        return ir.IntegerType.get_unsigned(8) if t.is_unsigned else ir.IntegerType.get_signless(8)
    if isinstance(element, ir.FloatType) and ir.FloatType(element).width < 8:
        return ir.F32Type.get()
    return None


def is_sub_byte_collective(op: ir.Operation) -> bool:
    # An async_start holds exactly its collective (XLA's own importer writes them; this
    # converter's importer makes async pairs synchronous): left as it is.
    if op.name not in MOVES + FOLDS or op.parent.name == "stablehlo.async_start":
        return False
    with op.context:
        return any(_wide(ir.RankedTensorType(v.type).element_type) is not None for v in op.operands)


def _attrs(op: ir.Operation, keep: tuple[str, ...] | None = None) -> dict[str, ir.Attribute]:
    return {name: op.attributes[name] for name in op.attributes if keep is None or name in keep}


def _retyped(t: ir.Type, element: ir.Type) -> ir.Type:
    return ir.RankedTensorType.get(ir.RankedTensorType(t).shape, element)


def _move(op: ir.Operation) -> list[ir.Value]:
    """The same op on widened operands, its results converted back."""
    narrow = [ir.RankedTensorType(v.type).element_type for v in op.operands]
    wide = [_wide(e) or e for e in narrow]
    operands = [builders.convert(v, w) if w != e else v for v, e, w in zip(op.operands, narrow, wide)]
    types = [_retyped(r.type, w) for r, w in zip(op.results, wide)]
    moved = builders.op(op.name, types, operands, _attrs(op))
    return [builders.convert(v, ir.RankedTensorType(r.type).element_type) if v.type != r.type else v
            for v, r in zip(moved.results, op.results)]


@register_pass("sub-byte-collectives",
               "collectives on sub-byte types (s2, u2, s4, u4, f4) done on a byte-wide type, which XLA's CPU runtime moves right")
def sub_byte_collectives(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    replicas, partitions = module_devices(module)
    for op in walks.walk(MOVES + FOLDS):
        if not is_sub_byte_collective(op):
            continue
        with rewrite.at(op):
            if op.name == "stablehlo.all_reduce":
                values = all_reduce_by_gather(op, replicas * partitions, _wide)
            elif op.name == "stablehlo.reduce_scatter":
                values = reduce_scatter_by_exchange(op, replicas * partitions, _wide)
            else:
                values = _move(op)
        rewrite.replace(op, values)
