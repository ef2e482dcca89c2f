"""Tuple (multi-operand) all-gathers, as XLA's GPU compiler writes them when it gathers
several weights at once (`all-gather-start` of a tuple, then `all-gather-done`).

XLA's CPU compiler gathers a tuple-shaped all-gather wrongly when an operand reaches it
in a layout whose most major dimension is not the gather dimension (after a transpose,
or the f32 round trip it gives bf16 collectives): its runtime concatenates buffers, and
only array-shaped all-gathers get the layout that makes that right.  The import writes
one all_gather per operand.  Oracle: NumPy concatenation of the devices' operands, in
group order; every check is exact (the values move, nothing is computed)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from converter.hlo import dtypes
from tests.helpers import run_ours

DEVICES = 4


def _module(element: str, count: int, dim: int, producer: str, form: str) -> str:
    """`count` operands f32/bf16/...[4,6] per device (made by `producer` from the
    parameter), gathered along `dim` over all 4 partitions."""
    local = [4, 6]
    gathered = list(local)
    gathered[dim] *= DEVICES
    loc, out = f"{element}[{local[0]},{local[1]}]", f"{element}[{gathered[0]},{gathered[1]}]"
    lines = []
    names = []
    for i in range(count):
        if producer == "transpose":
            lines.append(f"  p{i} = {element}[{local[1]},{local[0]}] parameter({i})")
            lines.append(f"  x{i} = {loc} transpose(p{i}), dimensions={{1,0}}")
        else:
            lines.append(f"  p{i} = {loc} parameter({i})")
            lines.append(f"  x{i} = {loc} negate(p{i})")
        names.append(f"x{i}")
    outs = ", ".join([out] * count)
    groups = "replica_groups={{0,1,2,3}}"
    attrs = f"channel_id=1, {groups}, dimensions={{{dim}}}, use_global_device_ids=true"
    if form == "async":
        ins = ", ".join([loc] * count)
        lines.append(f"  s = (({ins}), ({outs})) all-gather-start({', '.join(names)}), {attrs}")
        lines.append(f"  ROOT g = ({outs}) all-gather-done(s)")
    else:
        lines.append(f"  ROOT g = ({outs}) all-gather({', '.join(names)}), {attrs}")
    body = "\n".join(lines)
    return f"HloModule tuple_all_gather, num_partitions={DEVICES}\nENTRY main {{\n{body}\n}}\n"


CASES = [c for c in itertools.product(["f32", "bf16", "f16", "s8"], [2, 3], [0, 1], ["transpose", "negate"],
                                      ["sync", "async"])
         # Every dtype with every gather dim and producer; the async form on a subset (it
         # imports to the same ops).
         if c[4] == "sync" or (c[1] == 2 and c[0] in ("bf16", "f32"))]


@pytest.mark.parametrize("element, count, dim, producer, form", CASES,
                         ids=["-".join(map(str, c)) for c in CASES])
def test_tuple_all_gather_matches_numpy(element, count, dim, producer, form):
    rng = np.random.default_rng(count * 10 + dim)
    shape = (6, 4) if producer == "transpose" else (4, 6)
    dtype = dtypes.numpy_dtype(element)
    # Small integers: exact in every element type here, so the comparison is exact.
    inputs = [rng.integers(-50, 50, (DEVICES, *shape)).astype(dtype) for _ in range(count)]
    got = run_ours(_module(element, count, dim, producer, form), inputs)
    assert len(got) == count
    for i, (x, g) in enumerate(zip(inputs, got)):
        local = [np.swapaxes(x[d], 0, 1) if producer == "transpose" else -x[d] for d in range(DEVICES)]
        want = np.concatenate(local, axis=dim)
        for d in range(DEVICES):
            np.testing.assert_array_equal(np.asarray(g[d], np.float64), np.asarray(want, np.float64),
                                          err_msg=f"operand {i}, device {d}")
