"""collective-cleanup (passes/collective_cleanup.py) run alone on an imported 4-replica
module: collectives nothing reads go (and the ones that fed only them, in turn); identical
collectives on the same operand are merged into the first; collectives that differ in
groups, combiner or pairs stay apart.  The outputs, device by device, are NumPy's."""

from __future__ import annotations

import numpy as np

from converter.runtime.program import program_from_module
from passes.collective_cleanup import COLLECTIVES
from tests.helpers import convert_then, ops_named

HLO = """HloModule cleanup, replica_count=4
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
mul {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] multiply(a, b)
}
ENTRY main {
  x = f32[6]{0} parameter(0)
  dead = f32[6]{0} all-reduce(x), replica_groups={{0,1,2,3}}, to_apply=add
  dead1 = f32[24]{0} all-gather(x), replica_groups={{0,1,2,3}}, dimensions={0}
  dead2 = f32[24]{0} all-reduce(dead1), replica_groups={{0,1,2,3}}, to_apply=mul
  a = f32[6]{0} all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add
  b = f32[6]{0} all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add
  c = f32[6]{0} all-reduce(x), replica_groups={{0,2},{1,3}}, to_apply=add
  d = f32[6]{0} all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=mul
  g = f32[12]{0} all-gather(x), replica_groups={{0,1},{2,3}}, dimensions={0}
  h = f32[12]{0} all-gather(x), replica_groups={{0,1},{2,3}}, dimensions={0}
  p = f32[6]{0} collective-permute(x), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  q = f32[6]{0} collective-permute(x), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  r = f32[6]{0} collective-permute(x), source_target_pairs={{0,3},{3,2},{2,1},{1,0}}
  ROOT t = (f32[6]{0}, f32[6]{0}, f32[6]{0}, f32[6]{0}, f32[12]{0}, f32[12]{0}, f32[6]{0}, f32[6]{0}, f32[6]{0}) tuple(a, b, c, d, g, h, p, q, r)
}
"""


def _collectives(module) -> dict[str, int]:
    return {name.split(".")[1]: len(ops_named(module, name)) for name in COLLECTIVES
            if ops_named(module, name)}


def test_unread_collectives_go_and_identical_ones_merge():
    assert _collectives(convert_then(HLO, [])) == {"all_gather": 3, "all_reduce": 6, "collective_permute": 3}
    module = convert_then(HLO, ["collective-cleanup"])
    # dead, dead2 and then dead1 (read only by dead2) go; b merges into a, h into g, q into p.
    assert _collectives(module) == {"all_gather": 1, "all_reduce": 3, "collective_permute": 2}
    returned = list(ops_named(module, "func.return")[0].operands)
    assert returned[0] == returned[1] and returned[4] == returned[5] and returned[6] == returned[7]
    assert len(set(returned)) == 6


def _numpy_outputs(x: np.ndarray) -> list[np.ndarray]:
    """x: [4 devices, 6].  Device d's value of each output, stacked over d."""
    def over(groups, combine):
        out = np.empty_like(x)
        for g in groups:
            out[g] = combine(x[g], axis=0)
        return out

    pairs = over([[0, 1], [2, 3]], np.sum)
    gathered = np.stack([np.concatenate(x[[0, 1]]), np.concatenate(x[[0, 1]]),
                         np.concatenate(x[[2, 3]]), np.concatenate(x[[2, 3]])])
    forward = x[[3, 0, 1, 2]]  # device d receives from d - 1
    backward = x[[1, 2, 3, 0]]  # device d receives from d + 1
    return [pairs, pairs, over([[0, 2], [1, 3]], np.sum), over([[0, 1], [2, 3]], np.prod), gathered, gathered,
            forward, forward, backward]


def test_the_cleaned_module_computes_numpys_collectives():
    module = convert_then(HLO, ["collective-cleanup"])
    program = program_from_module(module)
    # Small integers: every sum and product is exact in f32, in any order.
    x = np.random.default_rng(0).integers(-4, 5, size=(4, 6)).astype(np.float32)
    got = program(x)
    want = _numpy_outputs(x)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=f"output {i}")


def test_a_module_without_collectives_to_clean_is_unchanged():
    kept = HLO.split("  dead =")[0] + "  ROOT a = f32[6]{0} all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add\n}\n"
    before = str(convert_then(kept, []))
    assert str(convert_then(kept, ["collective-cleanup"])) == before
