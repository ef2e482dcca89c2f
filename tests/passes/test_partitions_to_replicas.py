"""partitions-to-replicas (passes/partitions_to_replicas.py) run alone on an imported
2-replica x 2-partition module: partition/replica ids become arithmetic on the replica id,
every collective gets the explicit groups of flattened ids (d = replica * 2 + partition)
that XLA's group mode of the HLO instruction reaches, channels go, and the module is 4
replicas of 1 partition.  XLA's CPU runtime cannot run the 2 x 2 module itself, so the
oracle is NumPy applying XLA's documented group modes to the HLO as written:
no channel_id: cross-replica; channel_id on all-reduce/all-gather/reduce-scatter:
cross-replica-and-partition (or flattened ids with use_global_device_ids=true);
channel_id on all-to-all/collective-permute: cross-partition."""

from __future__ import annotations

import numpy as np

from converter.runtime.program import program_from_module
from converter.runtime.xla_oracle import run_with_xla
from passes.partitions_to_replicas import int_matrix, module_devices
from tests.helpers import convert_then, ops_named

HLO = """HloModule p2r, replica_count=2, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4]{0} parameter(0), sharding={replicated}
  pid = u32[] partition-id()
  rid = u32[] replica-id()
  cross_replica = f32[4]{0} all-reduce(x), replica_groups={{0,1}}, to_apply=add
  whole_replicas = f32[4]{0} all-reduce(x), channel_id=1, replica_groups={{0},{1}}, to_apply=add
  all_devices = f32[4]{0} all-reduce(x), channel_id=2, replica_groups={{0,1}}, use_global_device_ids=false, to_apply=add
  flattened = f32[4]{0} all-reduce(x), channel_id=3, replica_groups={{0,3},{1,2}}, use_global_device_ids=true, to_apply=add
  gathered = f32[8]{0} all-gather(x), channel_id=4, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, dimensions={0}
  exchanged = f32[4]{0} all-to-all(x), channel_id=5, replica_groups={{0,1}}, dimensions={0}
  swapped = f32[4]{0} collective-permute(x), channel_id=6, source_target_pairs={{0,1},{1,0}}
  shifted = f32[4]{0} collective-permute(x), source_target_pairs={{0,1}}
  ROOT t = (u32[], u32[], f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[8]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}) tuple(pid, rid, cross_replica, whole_replicas, all_devices, flattened, gathered, exchanged, swapped, shifted)
}
"""

# Flattened groups (d = replica * 2 + partition) each collective must reach.
GROUPS = {
    "cross_replica": [[0, 2], [1, 3]],  # replicas {0, 1} of each partition
    "whole_replicas": [[0, 1], [2, 3]],  # each replica with all its partitions
    "all_devices": [[0, 1, 2, 3]],
    "flattened": [[0, 3], [1, 2]],
    "gathered": [[0, 1], [2, 3]],
    "exchanged": [[0, 1], [2, 3]],  # the partitions of each replica
}
PAIRS = {"swapped": [[0, 1], [1, 0], [2, 3], [3, 2]], "shifted": [[0, 2], [1, 3]]}


def test_ids_groups_channels_and_device_counts_are_rewritten():
    module = convert_then(HLO, ["partitions-to-replicas"])
    assert module_devices(module) == (4, 1)
    assert not ops_named(module, "stablehlo.partition_id")
    collectives = [op for name in ("all_reduce", "all_gather", "all_to_all") for op in ops_named(module, f"stablehlo.{name}")]
    groups = sorted(int_matrix(op.attributes["replica_groups"]).tolist() for op in collectives)
    assert groups == sorted(GROUPS.values())
    pairs = sorted(int_matrix(op.attributes["source_target_pairs"]).tolist()
                   for op in ops_named(module, "stablehlo.collective_permute"))
    assert pairs == sorted(PAIRS.values())
    for op in collectives + ops_named(module, "stablehlo.collective_permute"):
        assert "channel_handle" not in op.attributes and "use_global_device_ids" not in op.attributes
    # The entry's sharding (which speaks of partitions) is kept for the runtime under hlo.sharding.
    main = ops_named(module, "func.func")[0]
    assert 'hlo.sharding = "{replicated}"' in str(main.attributes["arg_attrs"])
    assert "mhlo.sharding" not in str(main.attributes["arg_attrs"])


def _numpy_outputs(x: np.ndarray) -> list[np.ndarray]:
    """x: [4 devices, 4].  Each output, device by device."""
    def summed(groups):
        out = np.empty_like(x)
        for g in groups:
            out[g] = x[g].sum(axis=0)
        return out

    gathered = np.stack([np.concatenate(x[g]) for g in ([0, 1], [0, 1], [2, 3], [2, 3])])
    # all-to-all over 2 partitions: partition p receives block p of each partition, in order.
    exchanged = np.stack([np.concatenate([x[2 * (d // 2) + s, 2 * (d % 2): 2 * (d % 2) + 2] for s in range(2)])
                          for d in range(4)])
    swapped = x[[1, 0, 3, 2]]
    shifted = np.stack([np.zeros(4, np.float32), np.zeros(4, np.float32), x[0], x[1]])  # no source: zeros
    return [np.array([0, 1, 0, 1], np.uint32), np.array([0, 0, 1, 1], np.uint32),
            summed(GROUPS["cross_replica"]), summed(GROUPS["whole_replicas"]), summed(GROUPS["all_devices"]),
            summed(GROUPS["flattened"]), gathered, exchanged, swapped, shifted]


def test_the_4_replica_module_computes_numpys_device_values():
    program = program_from_module(convert_then(HLO, ["partitions-to-replicas"]))
    assert program.num_devices == 4
    # Distinct small integers: sums are exact in any order, and a wrong group shows.
    x = (np.arange(16, dtype=np.float32).reshape(4, 4) * 3 + 1) ** 2
    got = program(x)
    want = _numpy_outputs(x)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=f"output {i}")


REPLICAS_ONLY = """HloModule replicas, replica_count=4
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4]{0} parameter(0)
  rid = u32[] replica-id()
  pid = u32[] partition-id()
  summed = f32[4]{0} all-reduce(x), replica_groups={{0,2},{3,1}}, to_apply=add
  flattened = f32[4]{0} all-reduce(x), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add
  ROOT t = (u32[], u32[], f32[4]{0}, f32[4]{0}) tuple(rid, pid, summed, flattened)
}
"""


def test_a_replicas_only_module_keeps_its_groups_and_computes_what_xla_does():
    """With one partition every mode names the same devices: the groups stay as written,
    and XLA itself can run the module, so it is the oracle here."""
    module = convert_then(REPLICAS_ONLY, ["partitions-to-replicas"])
    assert module_devices(module) == (4, 1)
    groups = [int_matrix(op.attributes["replica_groups"]).tolist() for op in ops_named(module, "stablehlo.all_reduce")]
    assert groups == [[[0, 2], [3, 1]], [[0, 1, 2, 3]]]
    x = (np.arange(16, dtype=np.float32).reshape(4, 4) - 5) ** 3
    got = program_from_module(module)(x)
    want = run_with_xla(REPLICAS_ONLY, [x], num_replicas=4)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=f"output {i}")  # integer-valued sums: exact
    np.testing.assert_array_equal(got[0], np.arange(4, dtype=np.uint32))
    np.testing.assert_array_equal(got[1], np.zeros(4, np.uint32))
