"""rules/collectives.py: replica-id and partition-id (one and four devices, against XLA),
infeed/outfeed refused by line, and how many devices a collective's group holds in each
of XLA's group modes (where the groups are left empty, and replica groups that span every
partition), against NumPy (XLA's own importer refuses array all-to-all without groups)."""

from __future__ import annotations

import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.importer.core import HloImportError
from tests.helpers import run_ours
from tests.importer.hlo_snippets import differential_by_output


# ------------------------------------------------------------------ infeed/outfeed
FEEDS = {
    "infeed": """HloModule feeds
ENTRY main {
  tok = token[] after-all()
  feed = ((f32[2]), token[]) infeed(tok)
  ROOT r = token[] after-all(tok)
}
""",
    "outfeed": """HloModule feeds
ENTRY main {
  x = f32[2] parameter(0)
  tok = token[] after-all()
  feed = token[] outfeed(x, tok), outfeed_shape=f32[2]
  ROOT r = f32[2] negate(x)
}
""",
}


def test_replica_and_partition_ids_single_device():
    hlo = """HloModule ids
ENTRY main {
  r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (u32[], u32[]) tuple(r, p)
}
"""
    outs = differential_by_output(hlo, [], ["replica-id", "partition-id"], [True, True])
    np.testing.assert_array_equal(outs, [np.uint32(0), np.uint32(0)])


def test_replica_and_partition_ids_on_four_devices():
    """2 replicas x 2 partitions: device d = replica * 2 + partition holds replica-id
    d // 2 and partition-id d % 2 (the runtime's flattened device order)."""
    hlo = """HloModule ids, replica_count=2, num_partitions=2
ENTRY main {
  r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (u32[], u32[]) tuple(r, p)
}
"""
    replica, partition = run_ours(hlo, [])
    np.testing.assert_array_equal(replica, np.array([0, 0, 1, 1], np.uint32))
    np.testing.assert_array_equal(partition, np.array([0, 1, 0, 1], np.uint32))


@pytest.mark.parametrize("opcode,line", [("infeed", 4), ("outfeed", 5)])
def test_infeed_and_outfeed_raise_an_error_naming_instruction_and_line(opcode, line):
    with pytest.raises(HloImportError) as info:
        convert_text(FEEDS[opcode], "feeds.hlo", pipeline="none")
    message = str(info.value)
    assert message.startswith(f"feeds.hlo:{line}:3: error: %feed ({opcode}): "), message
    assert "host" in message


# ----------------------------------------------------------------- group modes
def _module(header: str, root: str) -> str:
    return f"""HloModule groups, {header}
ENTRY main {{
  x = f32[4] parameter(0)
  {root}
}}
"""


@pytest.mark.parametrize("header,attrs", [("replica_count=4", ""), ("num_partitions=4", "channel_id=1, ")],
                         ids=["cross-replica", "cross-partition"])
def test_all_to_all_without_groups_exchanges_among_every_device_of_its_mode(header, attrs):
    """Empty replica_groups: every replica (no channel) or every partition (a channel).
    StableHLO's all_to_all takes its groups written out (an empty one made its verifier
    divide by zero and kill the process)."""
    hlo = _module(header, f"ROOT y = f32[4] all-to-all(x), {attrs}replica_groups={{}}, dimensions={{0}}")
    x = np.arange(16, dtype=np.float32).reshape(4, 4)  # device d's operand is row d
    (out,) = run_ours(hlo, [x])
    np.testing.assert_array_equal(out, x.T)  # device d gets element d of every device's operand


def test_replica_groups_with_a_channel_span_every_partition():
    """With a channel and without use_global_device_ids, XLA reads replica_groups as replica
    ids whose group takes in every partition: {{0}} on 1 replica x 2 partitions gathers
    from both partitions."""
    hlo = _module("replica_count=1, num_partitions=2",
                  "ROOT y = f32[8] all-gather(x), channel_id=1, replica_groups={{0}}, dimensions={0}")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    (out,) = run_ours(hlo, [x])
    np.testing.assert_array_equal(out, np.stack([x.reshape(-1)] * 2))


@pytest.mark.parametrize("root,message", [
    ("ROOT y = f32[0] collective-permute(x), source_target_pairs={{0,1},{1,0}}",
     "collective-permute result 0 is tensor<0xf32> but its operand is tensor<4xf32>"),
    ("ROOT y = f32[4] all-to-all(x), replica_groups={{0,1}}, dimensions={-4}",
     "all-to-all dimension -4 is out of range for its rank-1 operand"),
], ids=["permute-result-shape", "all-to-all-dimension"])
def test_a_collective_the_dump_states_inconsistently_is_an_error_at_its_line(root, message):
    """A typo in a dump (mutated dims, a negative dimension) is the user's to fix: a located
    error naming it, not a module that fails verification as if the importer were wrong."""
    hlo = _module("replica_count=2", root)
    with pytest.raises(HloImportError) as info:
        convert_text(hlo, "bad.hlo", pipeline="none")
    text = str(info.value)
    assert text.startswith("bad.hlo:4:3: error: %y (") and message in text, text
    assert "importer bug" not in text


def _participants_by_xla_mode(mode: str, replicas: int, partitions: int, groups: list[list[int]]):
    """Per flattened device d = replica * partitions + partition, the devices whose
    operands an all-gather concatenates, in order, as XLA's GetParticipatingDevices reads
    replica_groups in each group mode (written from its definition, not from the rule)."""
    out = []
    for d in range(replicas * partitions):
        r, p = divmod(d, partitions)
        if mode == "flattened":
            group = next(g for g in groups if d in g)
            out.append(list(group))
            continue
        replica_groups = groups or [list(range(replicas))]
        group = next(g for g in replica_groups if r in g)
        if mode == "cross-replica":
            out.append([q * partitions + p for q in group])
        else:  # cross-replica-and-partition: each replica of the group on every partition
            out.append([q * partitions + pp for q in group for pp in range(partitions)])
    return out


GROUP_MODES = [
    (mode, replicas, partitions, groups)
    for replicas, partitions in [(4, 1), (2, 2), (1, 4)]
    for mode, groups in [
        ("cross-replica", []),
        ("cross-replica", [[1, 0]] if replicas == 2 else [[3, 1], [0, 2]] if replicas == 4 else [[0]]),
        ("cross-replica-and-partition", []),
        ("cross-replica-and-partition", [[1, 0]] if replicas == 2 else [[2, 0], [1, 3]] if replicas == 4 else [[0]]),
        ("flattened", [[3, 1], [0, 2]]),
        ("flattened", [[2, 0, 3, 1]]),
    ]
]


@pytest.mark.parametrize("mode,replicas,partitions,groups", GROUP_MODES,
                         ids=[f"{m}-{r}x{p}-{'_'.join(''.join(map(str, g)) for g in gs) or 'all'}"
                              for m, r, p, gs in GROUP_MODES])
def test_all_gather_concatenates_the_participants_of_each_group_mode(mode, replicas, partitions, groups):
    """Every group mode x device layout x groups (empty, permuted): the all-gather's result
    is the participants' operands in XLA's order (NumPy from the mode's definition; a
    participant order swapped in the oracle fails it)."""
    participants = _participants_by_xla_mode(mode, replicas, partitions, groups)
    size = len(participants[0])
    attrs = {"cross-replica": "", "cross-replica-and-partition": "channel_id=1, ",
             "flattened": "channel_id=1, use_global_device_ids=true, "}[mode]
    text = "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"
    hlo = _module(f"replica_count={replicas}, num_partitions={partitions}",
                  f"ROOT y = f32[{4 * size}] all-gather(x), {attrs}replica_groups={text}, dimensions={{0}}")
    x = np.arange(4 * replicas * partitions, dtype=np.float32).reshape(replicas * partitions, 4)
    (out,) = run_ours(hlo, [x])
    np.testing.assert_array_equal(out, np.stack([x[devices].reshape(-1) for devices in participants]))
