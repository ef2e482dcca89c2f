"""Device-identity and host-transfer rules in rules/collectives.py: replica-id and
partition-id (one and four devices, against XLA), infeed/outfeed refused by line."""

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
