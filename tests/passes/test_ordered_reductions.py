"""ordered-reductions (passes/ordered_reductions.py) run alone on imported 4-replica
modules: float sums become an all_gather (all-reduce) or an all_to_all (reduce-scatter)
and a fold in group order; reductions whose result does not depend on the order (max,
integers) stay native.  The outputs are, bit for bit, NumPy's float32 fold
((x_g0 + x_g1) + x_g2) + x_g3 in the order each group lists its devices, on inputs chosen
so that another order rounds differently."""

from __future__ import annotations

import numpy as np
import pytest

from converter.runtime.program import program_from_module
from passes import ordered_reductions as ordered
from tests.helpers import convert_then, ops_named

HLO = """HloModule ordered, replica_count=4
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
add_s32 {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
ENTRY main {
  x = f32[8]{0} parameter(0)
  i = s32[8]{0} parameter(1)
  whole = f32[8]{0} all-reduce(x), replica_groups={{2,0,3,1}}, to_apply=add
  pairs = f32[8]{0} all-reduce(x), replica_groups={{0,3},{2,1}}, to_apply=add
  scattered = f32[2]{0} reduce-scatter(x), replica_groups={{1,3,0,2}}, dimensions={0}, to_apply=add
  largest = f32[8]{0} all-reduce(x), replica_groups={{0,1,2,3}}, to_apply=max
  count = s32[8]{0} all-reduce(i), replica_groups={{0,1,2,3}}, to_apply=add_s32
  ROOT t = (f32[8]{0}, f32[8]{0}, f32[2]{0}, f32[8]{0}, s32[8]{0}) tuple(whole, pairs, scattered, largest, count)
}
"""


def _fold(values: list[np.ndarray]) -> np.ndarray:
    acc = values[0]
    for v in values[1:]:
        acc = (acc + v).astype(np.float32)  # one float32 rounding per addition
    return acc


def _expected(x: np.ndarray, i: np.ndarray) -> list[np.ndarray]:
    whole = np.stack([_fold([x[d] for d in (2, 0, 3, 1)])] * 4)
    pairs = np.empty_like(x)
    for group in ([0, 3], [2, 1]):
        pairs[group] = _fold([x[d] for d in group])
    order = [1, 3, 0, 2]  # participant k of the group receives block k of the sum
    total = _fold([x[d] for d in order])
    scattered = np.empty((4, 2), np.float32)
    for k, d in enumerate(order):
        scattered[d] = total[2 * k: 2 * k + 2]
    return [whole, pairs, scattered, np.stack([x.max(axis=0)] * 4), np.stack([i.sum(axis=0)] * 4)]


def _inputs(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    # Magnitudes from 1e-4 to 1e4: the order of the additions shows in the last bits.
    x = (rng.standard_normal((4, 8)) * 10.0 ** rng.integers(-4, 5, size=(4, 8))).astype(np.float32)
    # And one column where orders surely differ: in the group order 2, 0, 3, 1,
    # (1 + 2^-24) + 2^-24 rounds to 1 twice, then - 1 gives 0; in device order
    # (2^-24 - 1) + 1 + 2^-24 is exact: 2^-23.
    x[:, seed] = [2.0**-24, -1.0, 1.0, 2.0**-24]
    return x, rng.integers(-100, 100, size=(4, 8)).astype(np.int32)


def test_float_sums_become_data_movement_and_a_fold_the_rest_stay():
    before = convert_then(HLO, [])
    assert len(ops_named(before, "stablehlo.all_reduce")) == 4 and len(ops_named(before, "stablehlo.reduce_scatter")) == 1
    module = convert_then(HLO, ["ordered-reductions"])
    assert not ops_named(module, "stablehlo.reduce_scatter")
    remaining = ops_named(module, "stablehlo.all_reduce")
    bodies = sorted(list(op.regions[0].blocks[0].operations)[0].name for op in remaining)
    assert bodies == ["stablehlo.add", "stablehlo.maximum"]  # the s32 sum and the f32 max
    assert [str(r.type) for op in remaining for r in op.results] in (
        ["tensor<8xf32>", "tensor<8xi32>"], ["tensor<8xi32>", "tensor<8xf32>"])
    assert len(ops_named(module, "stablehlo.all_gather")) == 2
    assert len(ops_named(module, "stablehlo.all_to_all")) == 1
    assert ordered.unordered_reductions(module) == []


@pytest.mark.parametrize("seed", [0, 1])
def test_the_outputs_are_numpys_fold_in_group_order_bit_for_bit(seed):
    module = convert_then(HLO, ["ordered-reductions"])
    x, i = _inputs(seed)
    got = program_from_module(module)(x, i)
    want = _expected(x, i)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=f"output {k}")
    # The inputs tell orders apart: device order 0, 1, 2, 3 rounds differently somewhere.
    assert not np.array_equal(want[0][0], _fold([x[d] for d in range(4)]))


def test_a_reduction_too_large_to_gather_stays_native_and_is_reported(monkeypatch):
    monkeypatch.setattr(ordered, "ORDERED_LIMIT_BYTES", 64)  # an f32[8] gathered 4 times is 128 bytes
    module = convert_then(HLO, ["ordered-reductions"])
    kept = ordered.unordered_reductions(module)
    # whole (4 x 32 bytes) stays; pairs (2 x 32) and the reduce-scatter (its 32 bytes) fit.
    # named by its dump line, kind and reason, for the runner's warning
    assert kept == ["<test>:20:3: %whole (all-reduce, 128 bytes to move > 64)"]
    assert len(ops_named(module, "stablehlo.all_reduce")) == 3
    assert not ops_named(module, "stablehlo.reduce_scatter")


def test_a_reduce_scatter_kept_native_is_named_a_reduce_scatter(monkeypatch):
    monkeypatch.setattr(ordered, "ORDERED_LIMIT_BYTES", 16)  # the reduce-scatter moves its 32 bytes
    kept = ordered.unordered_reductions(convert_then(HLO, ["ordered-reductions"]))
    scatters = [k for k in kept if "reduce-scatter" in k]
    assert len(scatters) == 1 and scatters[0].endswith("(reduce-scatter, 32 bytes to move > 16)")
    assert all("(all-reduce, " in k for k in kept if k not in scatters)
