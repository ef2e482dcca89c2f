"""Which devices a collective reaches (XLA's CollectiveOpGroupMode), written once for the
inspector, the partitions-to-replicas pass and the runtime.

Devices are numbered by flattened id `d = replica * num_partitions + partition`.
"""

from __future__ import annotations

from typing import Sequence

CROSS_REPLICA = "cross-replica"
CROSS_PARTITION = "cross-partition"
CROSS_REPLICA_AND_PARTITION = "cross-replica-and-partition"
FLATTENED_IDS = "flattened-ids"

# Ops whose instruction always carries use_global_device_ids (true or false): with a
# channel and without global ids they run across replicas *and* partitions.  The others
# (all-to-all, collective-permute, collective-broadcast, send/recv) have no such field:
# with a channel they run across partitions.  (xla/service/collective_ops_utils.cc,
# GetCollectiveOpGroupMode.)
REPLICA_FAMILY = frozenset({"all-reduce", "all-gather", "reduce-scatter", "all-reduce-start", "all-gather-start",
                            "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter"})


def group_mode(op: str, has_channel: bool, use_global_device_ids: bool) -> str:
    if not has_channel:
        if use_global_device_ids:
            raise ValueError("use_global_device_ids without a channel")
        return CROSS_REPLICA
    if op not in REPLICA_FAMILY:
        return CROSS_PARTITION
    return FLATTENED_IDS if use_global_device_ids else CROSS_REPLICA_AND_PARTITION


def flattened_groups(mode: str, groups: Sequence[Sequence[int]], replicas: int, partitions: int) -> list[list[int]]:
    """The groups of flattened device ids that the collective forms, one list per group."""
    n = replicas * partitions
    if mode == CROSS_REPLICA:
        gs = [list(g) for g in groups] or [list(range(replicas))]
        return [[r * partitions + p for r in g] for p in range(partitions) for g in gs]
    if mode == CROSS_PARTITION:
        gs = [list(g) for g in groups] or [list(range(partitions))]
        return [[r * partitions + p for p in g] for r in range(replicas) for g in gs]
    if mode == CROSS_REPLICA_AND_PARTITION:
        gs = [list(g) for g in groups] or [list(range(replicas))]
        return [[r * partitions + p for r in g for p in range(partitions)] for g in gs]
    if mode == FLATTENED_IDS:
        return [list(g) for g in groups] or [list(range(n))]
    raise ValueError(f"unknown collective mode {mode}")


def flattened_pairs(mode: str, pairs: Sequence[Sequence[int]], replicas: int, partitions: int) -> list[list[int]]:
    """collective-permute source→target pairs in flattened device ids."""
    if mode == CROSS_REPLICA:
        return [[s * partitions + p, t * partitions + p] for p in range(partitions) for s, t in pairs]
    if mode == CROSS_PARTITION:
        return [[r * partitions + s, r * partitions + t] for r in range(replicas) for s, t in pairs]
    if mode == FLATTENED_IDS:
        return [list(p) for p in pairs]
    raise ValueError(f"collective-permute cannot run in mode {mode}")
