"""partitions-to-replicas: make a module of R replicas x P partitions run as N = R*P
replicas.

XLA's CPU compiler refuses num_partitions > 1 without SPMD partitioning, and a dump is
already partitioned.  Running it as N replicas, device d (flattened id
`replica * P + partition`) plays replica d, so:
- `partition_id` becomes `replica_id mod P` and `replica_id` becomes `replica_id / P`;
- every collective is rewritten to the groups of flattened ids it reached in the dump
  (by XLA's group mode: cross-replica, cross-partition, cross-replica-and-partition or
  flattened ids) and written in cross-replica form: explicit groups, no channel handle,
  no use_global_device_ids (the only form all of XLA's CPU collectives accept);
- shardings on the entry's arguments and results (which speak of partitions) move to
  `hlo.sharding`, where the runtime still reads them;
- the module's `mhlo.num_replicas` becomes N and `mhlo.num_partitions` 1.
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from converter.mlir.module_attributes import module_devices, set_module_devices
from converter.hlo.collectives import (CROSS_PARTITION, CROSS_REPLICA, CROSS_REPLICA_AND_PARTITION, flattened_groups,
                                       flattened_pairs, group_mode)
from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

_GROUP_OPS = ("stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter",
              "stablehlo.all_to_all", "stablehlo.collective_broadcast")


def int_matrix(attr: ir.Attribute) -> np.ndarray:
    """A 2-D integer DenseElementsAttr (replica groups, source-target pairs) as numpy."""
    shape = list(ir.DenseElementsAttr(attr).type.shape)
    if 0 in shape:
        return np.zeros(shape, np.int64)
    return np.array(ir.DenseIntElementsAttr(attr), dtype=np.int64).reshape(shape)


def replica_groups_of(op: ir.Operation) -> list[list[int]]:
    # Groups shorter than the widest are padded with -1.
    return [[int(x) for x in row if x >= 0] for row in int_matrix(op.attributes["replica_groups"])]


def _pairs(op: ir.Operation) -> list[list[int]]:
    return [[int(source), int(target)] for source, target in int_matrix(op.attributes["source_target_pairs"]).reshape(-1, 2)]


def _mode(op: ir.Operation) -> str:
    attrs = op.attributes
    return group_mode(op.name, "channel_handle" in attrs, "use_global_device_ids" in attrs)


def _check_ids(op: ir.Operation, mode: str, ids: list[int], replicas: int, partitions: int) -> None:
    """Refuse a group or pair naming a device the module does not have: flattened, it would
    silently name another device (replica 5 of 4, partition 0, is device 10 of 2x4)."""
    bound, what = {CROSS_REPLICA: (replicas, "replica"), CROSS_REPLICA_AND_PARTITION: (replicas, "replica"),
                   CROSS_PARTITION: (partitions, "partition")}.get(mode, (replicas * partitions, "device"))
    bad = sorted({x for x in ids if x >= bound})
    if bad:
        raise rewrite.op_error(op, f"its groups name {what} id(s) {bad} but the module has {bound} "
                                   f"{what}s (mhlo.num_replicas={replicas}, mhlo.num_partitions={partitions})")


def _drop_channel(op: ir.Operation) -> None:
    for name in ("channel_handle", "use_global_device_ids"):
        if name in op.attributes:
            del op.attributes[name]


@register_pass("partitions-to-replicas",
               "run an R-replica x P-partition module as R*P replicas: rewrite partition/replica ids and collective groups")
def partitions_to_replicas(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    replicas, partitions = module_devices(module)
    for op in walks.walk(_GROUP_OPS):
        _check_ids(op, _mode(op), [x for g in replica_groups_of(op) for x in g], replicas, partitions)
        groups = flattened_groups(_mode(op), replica_groups_of(op), replicas, partitions)
        if op.name == "stablehlo.all_to_all":
            sizes = {len(g) for g in groups}
            count = int(ir.IntegerAttr(op.attributes["split_count"]).value)
            if sizes != {count}:
                raise rewrite.op_error(op, f"all_to_all over groups of {sorted(sizes)} devices with split_count {count}")
        with op.context:
            op.attributes["replica_groups"] = builders.replica_groups_attr(groups)
        _drop_channel(op)
    for op in walks.walk("stablehlo.collective_permute"):
        _check_ids(op, _mode(op), [x for pair in _pairs(op) for x in pair], replicas, partitions)
        pairs = flattened_pairs(_mode(op), _pairs(op), replicas, partitions)
        with op.context:
            op.attributes["source_target_pairs"] = builders.i64_elements(pairs, shape=(len(pairs), 2))
        _drop_channel(op)
    for op in walks.walk(("stablehlo.partition_id", "stablehlo.replica_id")):
        with rewrite.at(op):
            rid = builders.op1("stablehlo.replica_id", op.results[0].type, [])
            p = builders.scalar_constant(partitions, ir.RankedTensorType(rid.type).element_type)
            value = builders.binary("remainder" if op.name == "stablehlo.partition_id" else "divide", rid, p)
        rewrite.replace(op, [value])
    for name in ("stablehlo.send", "stablehlo.recv"):
        for op in walks.walk(name):
            raise rewrite.op_error(op, "send/recv between devices has no CPU form; the importer turns matched "
                                  "pairs into collective_permute")
    set_module_devices(module, replicas * partitions, 1)
    with module.context:
        _move_shardings(module)


def _move_shardings(module: ir.Module) -> None:
    """`mhlo.sharding` on the entry's arguments/results → `hlo.sharding`."""
    for op in module.body.operations:
        if op.operation.name != "func.func":
            continue
        for key in ("arg_attrs", "res_attrs"):
            if key not in op.attributes:
                continue
            new = []
            for d in ir.ArrayAttr(op.attributes[key]):
                entries = {a.name: a.attr for a in ir.DictAttr(d)}
                if "mhlo.sharding" in entries:
                    entries["hlo.sharding"] = entries.pop("mhlo.sharding")
                new.append(ir.DictAttr.get(entries))
            op.attributes[key] = ir.ArrayAttr.get(new)
