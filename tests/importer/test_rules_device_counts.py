"""How many devices a module runs on when its header is silent, and a clear refusal
when its collectives name more devices than the header declares
(converter/hlo/collectives.py: implied_device_counts, device_id_conflict).

XLA's own test modules leave replica_count to the runner; run with the count their
groups imply, they must match XLA run on that many replicas.  Values are small integers
in f32: every sum is exact in any order."""

from __future__ import annotations

import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.common.errors import ConverterError
from converter.hlo.parser import parse_hlo
from converter.runtime.xla_oracle import run_with_xla
from tests.helpers import assert_all_close, convert_program

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
"""


def module(header: str, body: str) -> str:
    return f"HloModule counts{header}\n{ADD}ENTRY main {{\n  x = f32[4] parameter(0)\n  {body}\n}}\n"


# (header, body, devices the module must run on)
IMPLIED = [
    ("", "ROOT r = f32[4] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add", 4),
    ("", "ROOT r = f32[4] all-reduce(x), replica_groups={}, to_apply=add", 1),
    ("", "ROOT r = f32[12] all-gather(x), replica_groups={{0,2,1}}, dimensions={0}", 3),
    ("", "ROOT r = f32[4] collective-permute(x), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}", 4),
    ("", "ROOT r = f32[2] reduce-scatter(x), replica_groups={{1,0}}, dimensions={0}, to_apply=add", 2),
    (", replica_count=4", "ROOT r = f32[4] all-reduce(x), replica_groups={{0,3},{1,2}}, to_apply=add", 4),
]


@pytest.mark.parametrize("header,body,devices", IMPLIED, ids=[f"{b.split()[3]}-{d}" for _, b, d in IMPLIED])
def test_a_silent_header_runs_on_the_devices_the_groups_name(header, body, devices):
    hlo = module(header, body)
    program = convert_program(hlo)
    assert program.num_devices == devices
    assert parse_hlo(hlo).replica_count == devices
    x = np.random.default_rng(devices).integers(-8, 8, (devices, 4) if devices > 1 else (4,)).astype(np.float32)
    assert_all_close(program(x), run_with_xla(hlo, [x], devices), rtol=0, atol=0)


def test_partitions_implied_by_cross_partition_permute():
    """A channel permute names partitions: a silent header means that many partitions."""
    hlo = module("", "ROOT r = f32[4] collective-permute(x), channel_id=1, source_target_pairs={{0,1},{1,0}}")
    parsed = parse_hlo(hlo)
    assert (parsed.replica_count, parsed.num_partitions) == (1, 2)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    (out,) = convert_program(hlo)(x)
    np.testing.assert_array_equal(out, x[::-1])


CONFLICTS = [
    (", replica_count=2", "ROOT r = f32[4] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add",
     "names replica 3 .* replica_count=2"),
    (", num_partitions=2", "ROOT r = f32[4] collective-permute(x), channel_id=1, source_target_pairs={{0,2}}",
     "names partition 2 .* num_partitions=2"),
    (", replica_count=2, num_partitions=2",
     "ROOT r = f32[4] all-reduce(x), channel_id=1, replica_groups={{0,1,2,3,4}}, use_global_device_ids=true, "
     "to_apply=add", "names device 4 .* 4 devices"),
    (", replica_count=1", "ROOT r = f32[4] collective-permute(x), source_target_pairs={{0,1}}",
     "names replica 1 .* replica_count=1"),
]


@pytest.mark.parametrize("header,body,message", CONFLICTS, ids=[m.split()[1] + m.split()[2] for *_, m in CONFLICTS])
def test_groups_beyond_the_declared_counts_are_refused_by_line(header, body, message):
    with pytest.raises(ConverterError, match=message) as err:
        convert_text(module(header, body), "dump.hlo")
    assert "dump.hlo:9:" in str(err.value)
