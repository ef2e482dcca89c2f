"""Which devices a collective reaches (XLA's CollectiveOpGroupMode), written once for the
inspector, the partitions-to-replicas pass and the runtime.

Devices are numbered by flattened id `d = replica * num_partitions + partition`.
"""

from __future__ import annotations

from typing import Sequence

# Device lists (meshes, iota tile assignments and replica groups) are expanded to their
# ids, and collectives' ids imply the device counts of a module whose header has none:
# more devices than this is no module's (the largest TPU pods hold thousands), and a
# typo'd 2147483648 would exhaust memory, or make a module of that many devices, instead
# of being named.
MAX_DEVICES = 1 << 20

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


# Opcodes whose replica_groups / source_target_pairs name devices (with their async starts).
COLLECTIVE_OPCODES = frozenset({"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                                "collective-broadcast", "ragged-all-to-all"})
_NAMING_OPCODES = COLLECTIVE_OPCODES | {opcode + "-start" for opcode in COLLECTIVE_OPCODES}


def named_device(opcode: str, attrs: dict) -> tuple[str, int] | None:
    """(group mode, the largest id it names) for a collective instruction whose groups or
    pairs name ids; None for any other instruction."""
    base = opcode.removesuffix("-start")
    if base not in COLLECTIVE_OPCODES:
        return None
    groups = attrs.get("replica_groups")
    ids = [i for g in (groups.groups if groups is not None else ()) for i in g]
    ids += [i for pair in attrs.get("source_target_pairs") or () for i in pair]
    if not ids:
        return None
    try:
        mode = group_mode(base, "channel_id" in attrs, bool(attrs.get("use_global_device_ids")))
    except ValueError:  # global ids without a channel: the import rule reports it
        return None
    return mode, max(ids)


def implied_device_counts(instructions, replicas: int | None, partitions: int | None) -> tuple[int, int]:
    """(replica count, partition count) as XLA's runner would run a module whose header
    leaves them out (XLA's own tests set them in the runner): the given count where the
    header has one, else one more than the largest id the collectives name in that role
    (1 when none does)."""
    need = {CROSS_REPLICA: 1, CROSS_PARTITION: 1, FLATTENED_IDS: 1}
    for instr in instructions:
        if instr.opcode not in _NAMING_OPCODES:  # named_device's first test, without the call
            continue
        named = named_device(instr.opcode, instr.attrs)
        if named is not None:
            mode = CROSS_REPLICA if named[0] == CROSS_REPLICA_AND_PARTITION else named[0]
            need[mode] = max(need[mode], named[1] + 1)
    p = partitions if partitions is not None else need[CROSS_PARTITION]
    r = replicas if replicas is not None else max(need[CROSS_REPLICA], -(-need[FLATTENED_IDS] // p))
    return r, p


def device_id_conflict(opcode: str, attrs: dict, replicas: int, partitions: int) -> str | None:
    """Why a collective cannot run on the module's devices (it names an id beyond them),
    or None."""
    named = named_device(opcode, attrs)
    if named is None:
        return None
    mode, top = named
    if top >= MAX_DEVICES:
        return f"{opcode} names device id {top}: more devices than any module has (at most {MAX_DEVICES})"
    role, count, what = {
        CROSS_REPLICA: ("replica", replicas, f"replica_count={replicas}"),
        CROSS_REPLICA_AND_PARTITION: ("replica", replicas, f"replica_count={replicas}"),
        CROSS_PARTITION: ("partition", partitions, f"num_partitions={partitions}"),
        FLATTENED_IDS: ("device", replicas * partitions,
                        f"{replicas * partitions} devices (replica_count={replicas} x num_partitions={partitions})"),
    }[mode]
    if top < count:
        return None
    return f"{opcode} names {role} {top} ({mode}) but the module declares {what}"
