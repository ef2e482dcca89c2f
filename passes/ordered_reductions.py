"""ordered-reductions: floating-point all-reduce and reduce-scatter combine the devices'
values in group order, so a run over several processes rounds as one process does.

XLA's in-process CPU collectives fold the participants' values in group order
((x0 + x1) + x2) + ...; gloo, which carries them between processes, adds in an order of its
own, and a float sum can then differ in its last bits.  XLA's CPU compiler may also
reassociate native all-reduces (all-reduce(x) + all-reduce(y) -> all-reduce(x + y)), which
it cannot do to a fold.  So the runtime runs this pass on every multi-device module, in one
process or several, and both compile the same module.  It writes each such all-reduce as an all-gather, or a reduce-scatter as an
all-to-all of its blocks (both move bits without arithmetic), followed by that fold with
the collective's own combiner (passes/lib/collective_folds.py).  An all-reduce so written needs
its operand's memory times the group size, so one whose gathered operands would exceed
`ORDERED_LIMIT_BYTES` is left native (it may then round differently) and reported.
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from converter.hlo.ir import ELEMENT_BITS
from converter.mlir.context import hlo_element_type
from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.collective_folds import all_reduce_by_gather, group_size, reduce_scatter_by_exchange
from passes.partitions_to_replicas import replica_groups_of
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker


ORDERED_LIMIT_BYTES = 256 << 20
# Combiners whose result does not depend on the order of the operands.
_ORDER_FREE_BODIES = {"stablehlo.maximum", "stablehlo.minimum", "stablehlo.and", "stablehlo.or"}


def _element_bytes(t: ir.RankedTensorType) -> int:
    return max(1, ELEMENT_BITS[hlo_element_type(t.element_type)] // 8)


def _order_matters(op: ir.Operation) -> bool:
    """A float or complex combiner other than max/min: its rounding depends on the order."""
    for v in op.operands:
        et = ir.RankedTensorType(v.type).element_type
        if not isinstance(et, (ir.FloatType, ir.ComplexType)):
            return False
    body = op.regions[0].blocks[0]
    ops = [o.operation.name for o in body.operations]
    return not (len(ops) == 2 and ops[0] in _ORDER_FREE_BODIES)


def ordered_collectives(module: ir.Module, num_devices: int) -> list[str]:
    """Rewrite the order-sensitive all-reduces and reduce-scatters; return the locations of
    those kept native because gathering them would take too much memory."""
    kept, folded = [], 0
    for op in rewrite.walk(module, ("stablehlo.all_reduce", "stablehlo.reduce_scatter")):
        # An async_start holds exactly its collective (XLA's own importer writes them; this
        # converter's importer makes async pairs synchronous): left as it is.
        if not _order_matters(op) or op.parent.name == "stablehlo.async_start":
            continue
        # Named by kind and reason in the runner's warning (a reduce-scatter is no all-reduce).
        kind = "all-reduce" if op.name == "stablehlo.all_reduce" else "reduce-scatter"
        groups = replica_groups_of(op)
        if len({len(g) for g in groups}) > 1:
            kept.append(f"{rewrite.location_text(op)} ({kind}, replica groups of different sizes)")
            continue
        # all-reduce gathers every participant's operand; reduce-scatter exchanges blocks
        # (its operand's size)
        k = group_size(op, num_devices) if op.name == "stablehlo.all_reduce" else 1
        moved = sum(k * int(np.prod(builders.shape_of(v))) * _element_bytes(ir.RankedTensorType(v.type))
                    for v in op.operands)
        if moved > ORDERED_LIMIT_BYTES:
            kept.append(f"{rewrite.location_text(op)} ({kind}, {moved} bytes to move > {ORDERED_LIMIT_BYTES})")
            continue
        with rewrite.at(op):
            results = (all_reduce_by_gather(op, num_devices) if op.name == "stablehlo.all_reduce"
                       else reduce_scatter_by_exchange(op, num_devices))
        rewrite.replace(op, results)
        folded += 1
    if folded:  # for the runner to say that XLA's own order may round differently
        with module.context:
            module.operation.attributes[FOLDED_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), folded)
    return kept


NATIVE_ATTR = "hlo.unordered_reductions"
FOLDED_ATTR = "hlo.ordered_reductions"


def ordered_reduction_count(module: ir.Module) -> int:
    """How many float all-reduces / reduce-scatters `ordered-reductions` folded in group order."""
    attrs = module.operation.attributes
    return int(ir.IntegerAttr(attrs[FOLDED_ATTR]).value) if FOLDED_ATTR in attrs else 0


@register_pass("ordered-reductions", "float all-reduce / reduce-scatter folded in group order (multi-device runs)")
def ordered_reductions(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    from converter.mlir.module_attributes import module_devices

    replicas, partitions = module_devices(module)
    kept = ordered_collectives(module, replicas * partitions)
    if kept:  # for the runner to warn about
        module.operation.attributes[NATIVE_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(k) for k in kept])


def unordered_reductions(module: ir.Module) -> list[str]:
    """The reductions left native by `ordered-reductions`: each's location, kind (all-reduce
    or reduce-scatter) and why (too large to gather, groups of different sizes)."""
    attrs = module.operation.attributes
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(attrs[NATIVE_ATTR])] if NATIVE_ATTR in attrs else []
