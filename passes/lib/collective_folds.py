"""All-reduce and reduce-scatter written as data movement plus a fold in group order.

Two passes need a reduction whose order is fixed rather than left to the runtime: sub-byte
collectives (XLA's CPU runtime cannot reduce them) and float reductions run over several
processes (gloo adds in an order of its own).  The participants' values are moved without
arithmetic (an all_gather for all-reduce; an all_to_all that hands participant k every
participant's block k for reduce-scatter), optionally in a wider type that holds them
exactly, and folded with the collective's own reducer in its own type, in group order:
reducer(...reducer(reducer(x0, x1), x2)..., xG-1), as XLA's in-process CPU collectives fold.
"""

from __future__ import annotations

from typing import Callable

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from passes.lib import rewrite
from passes.partitions_to_replicas import replica_groups_of



def _attrs(op: ir.Operation, keep: tuple[str, ...]) -> dict[str, ir.Attribute]:
    return {name: op.attributes[name] for name in op.attributes if name in keep}


def fold(reducer: ir.Operation, stacked: ir.Value) -> ir.Value:
    """reducer(...reducer(reducer(s[0], s[1]), s[2])..., s[G-1]) elementwise, in the narrow
    type, with the collective's own reducer region (through stablehlo.map)."""
    shape = builders.shape_of(stacked)
    count, rest = shape[0], shape[1:]
    element = builders.element_type_of(stacked)
    scalar = ir.RankedTensorType.get([], element)

    def part(k: int) -> ir.Value:
        return builders.reshape(builders.slice_(stacked, [k] + [0] * len(rest), [k + 1] + rest), rest)

    acc = part(0)
    for k in range(1, count):
        mapped = builders.op("stablehlo.map", [acc.type], [acc, part(k)],
                      {"dimensions": builders.i64_array(range(len(rest)))}, regions=1)
        block = mapped.regions[0].blocks.append(scalar, scalar)
        with ir.InsertionPoint(block):
            stablehlo.ReturnOp(rewrite.clone_function_body(reducer, list(block.arguments)))
        acc = mapped.results[0]
    return acc


def group_size(op: ir.Operation, devices: int) -> int:
    groups = replica_groups_of(op)
    return len(groups[0]) if groups else devices


def all_reduce_by_gather(op: ir.Operation, devices: int, widen: Callable[[ir.Type], ir.Type | None] = lambda element: None) -> list[ir.Value]:
    """Each operand gathered from every participant (in `widen(element)` where that is not
    None) and folded in group order."""
    g = group_size(op, devices)
    out = []
    gather_attrs = _attrs(op, ("replica_groups", "channel_handle", "use_global_device_ids"))
    gather_attrs["all_gather_dim"] = builders.i64_attr(0)
    for x in op.operands:
        narrow = builders.element_type_of(x)
        wide = widen(narrow) or narrow
        shape = builders.shape_of(x)
        lifted = builders.reshape(builders.convert(x, wide) if wide != narrow else x, [1, *shape])
        gathered = builders.op1("stablehlo.all_gather", ir.RankedTensorType.get([g, *shape], wide), [lifted], gather_attrs)
        out.append(fold(op, builders.convert(gathered, narrow) if wide != narrow else gathered))
    return out


def reduce_scatter_by_exchange(op: ir.Operation, devices: int, widen: Callable[[ir.Type], ir.Type | None] = lambda element: None) -> list[ir.Value]:
    """Every participant's block k exchanged to participant k (in `widen(element)` where
    that is not None) and folded in group order."""
    (x,) = op.operands
    g = group_size(op, devices)
    dim = int(ir.IntegerAttr(op.attributes["scatter_dimension"]).value)
    narrow = builders.element_type_of(x)
    wide = widen(narrow) or narrow
    shape = builders.shape_of(x)
    split = shape[:dim] + [g, shape[dim] // g] + shape[dim + 1:]
    perm = [dim] + [i for i in range(len(split)) if i != dim]
    blocks = builders.transpose(builders.reshape(builders.convert(x, wide) if wide != narrow else x, split), perm)
    attrs = _attrs(op, ("replica_groups", "channel_handle"))
    attrs.update(split_dimension=builders.i64_attr(0), concat_dimension=builders.i64_attr(0), split_count=builders.i64_attr(g))
    exchanged = builders.op1("stablehlo.all_to_all", blocks.type, [blocks], attrs)
    return [fold(op, builders.convert(exchanged, narrow) if wide != narrow else exchanged)]
