"""Asynchronous pairs (rules/async_ops.py, rules/collectives.py): async-start /
async-update / async-done wrapping a computation (`calls=`), XLA's `<opcode>-start` /
`-done` sugar for any wrapped opcode (slice, dynamic-slice, reduce-scatter), and the
dedicated all-reduce / all-gather / collective-permute start/done pairs.

XLA's CPU compiler rejects these async forms (and copy-start), so NumPy, computing what
the pairs mean (the value the wrapped op computes), is the oracle; a plain layout-changing copy also runs through XLA.
Everything here moves values or adds small integers: exact."""

from __future__ import annotations

import numpy as np

from tests.helpers import run_ours


def test_async_start_update_done_with_a_called_computation():
    """async-start's value is ((operands), results, context); the wrapped computation
    computes the results, async-done takes them."""
    hlo = """HloModule async_calls
wrapped {
  p = f32[4] parameter(0)
  q = s32[] parameter(1)
  n = f32[4] negate(p)
  c = f32[] convert(q)
  b = f32[4] broadcast(c), dimensions={}
  ROOT s = f32[4] add(n, b)
}
ENTRY main {
  x = f32[4] parameter(0)
  k = s32[] parameter(1)
  st = ((f32[4], s32[]), f32[4], s32[]) async-start(x, k), calls=wrapped
  up = ((f32[4], s32[]), f32[4], s32[]) async-update(st), calls=wrapped
  ROOT d = f32[4] async-done(up), calls=wrapped
}
"""
    x = np.array([1, -2, 3.5, 0], np.float32)
    (out,) = run_ours(hlo, [x, np.int32(10)])
    np.testing.assert_array_equal(out, 10 - x)


def test_async_sugar_for_slice_and_dynamic_slice():
    """`slice-start` / `slice-done` and `dynamic-slice-start` / `-done`: the start holds
    the wrapped op's operands, result and a context; done yields the result."""
    hlo = """HloModule async_sugar
ENTRY main {
  x = f32[8] parameter(0)
  i = s32[] parameter(1)
  ss = ((f32[8]), f32[3], s32[]) slice-start(x), slice={[2:8:2]}
  s = f32[3] slice-done(ss)
  ds = ((f32[8], s32[]), f32[4], s32[]) dynamic-slice-start(x, i), dynamic_slice_sizes={4}
  du = ((f32[8], s32[]), f32[4], s32[]) dynamic-slice-update(ds)
  d = f32[4] dynamic-slice-done(du)
  ROOT r = (f32[3], f32[4]) tuple(s, d)
}
"""
    x = np.arange(8, dtype=np.float32) * 1.5
    for start in (1, 6, -3):
        s, d = run_ours(hlo, [x, np.int32(start)])
        np.testing.assert_array_equal(s, x[2:8:2])
        clamped = min(max(start, 0), 4)  # dynamic-slice clamps its start
        np.testing.assert_array_equal(d, x[clamped:clamped + 4])


REPLICAS = 4


def _per_device(rng: np.random.Generator, shape) -> np.ndarray:
    # Small integers in f32: sums are exact whatever order the devices add in.
    return rng.integers(-8, 8, (REPLICAS, *shape)).astype(np.float32)


def test_reduce_scatter_start_sugar_on_four_replicas():
    hlo = f"""HloModule reduce_scatter_start, replica_count={REPLICAS}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
ENTRY main {{
  x = f32[8,2] parameter(0)
  rs = ((f32[8,2]), f32[2,2], u32[]) reduce-scatter-start(x), replica_groups={{{{0,1,2,3}}}}, dimensions={{0}}, to_apply=add
  ROOT d = f32[2,2] reduce-scatter-done(rs)
}}
"""
    x = _per_device(np.random.default_rng(0), (8, 2))
    (out,) = run_ours(hlo, [x])
    total = x.sum(0)
    # Device d receives block d of the sum along dimension 0.
    np.testing.assert_array_equal(out, total.reshape(REPLICAS, 2, 2))


def test_dedicated_collective_start_done_pairs_on_four_replicas():
    """all-reduce-start/done, all-gather-start/done (groups {0,1},{2,3}) and
    collective-permute-start/done (a ring) are their synchronous collectives."""
    hlo = f"""HloModule collective_pairs, replica_count={REPLICAS}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
ENTRY main {{
  x = f32[3] parameter(0)
  ars = f32[3] all-reduce-start(x), replica_groups={{}}, to_apply=add
  ar = f32[3] all-reduce-done(ars)
  ags = (f32[3], f32[6]) all-gather-start(x), replica_groups={{{{0,1}},{{2,3}}}}, dimensions={{0}}
  ag = f32[6] all-gather-done(ags)
  cps = (f32[3], f32[3], u32[], u32[]) collective-permute-start(x), source_target_pairs={{{{0,1}},{{1,2}},{{2,3}},{{3,0}}}}
  cp = f32[3] collective-permute-done(cps)
  ROOT r = (f32[3], f32[6], f32[3]) tuple(ar, ag, cp)
}}
"""
    x = _per_device(np.random.default_rng(1), (3,))
    ar, ag, cp = run_ours(hlo, [x])
    np.testing.assert_array_equal(ar, np.broadcast_to(x.sum(0), (REPLICAS, 3)))
    pairs = np.concatenate([x[0], x[1]]), np.concatenate([x[2], x[3]])
    np.testing.assert_array_equal(ag, np.stack([pairs[0], pairs[0], pairs[1], pairs[1]]))
    np.testing.assert_array_equal(cp, np.roll(x, 1, axis=0))  # device d receives from d - 1


def test_async_done_of_a_computation_with_a_tuple_result():
    hlo = """HloModule async_tuple
wrapped {
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  k = s32[] constant(7)
  ROOT t = (f32[4], s32[]) tuple(n, k)
}
ENTRY main {
  x = f32[4] parameter(0)
  st = ((f32[4]), (f32[4], s32[]), s32[]) async-start(x), calls=wrapped
  d = (f32[4], s32[]) async-done(st), calls=wrapped
  a = f32[4] get-tuple-element(d), index=0
  b = s32[] get-tuple-element(d), index=1
  ROOT r = (s32[], f32[4]) tuple(b, a)
}
"""
    x = np.array([1, -2, 3.5, 0], np.float32)
    b, a = run_ours(hlo, [x])
    np.testing.assert_array_equal(b, np.int32(7))
    np.testing.assert_array_equal(a, -x)


def test_in_place_all_reduce_start_of_newer_xla_on_four_replicas():
    """jax 0.12's GPU dumps print all-reduce-start as `((operands), results)` with the
    results aliasing the operands; the done gives the results.  Variadic too."""
    hlo = f"""HloModule in_place_all_reduce, replica_count={REPLICAS}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
ENTRY main {{
  x = f32[3] parameter(0)
  y = f32[2,2] parameter(1)
  st1 = ((f32[3]), f32[3]) all-reduce-start(x), replica_groups={{{{0,1}},{{2,3}}}}, to_apply=add, output_to_operand_aliasing={{{{1}}: (0, {{}})}}
  d1 = f32[3] all-reduce-done(st1)
  st2 = ((f32[3], f32[2,2]), f32[3], f32[2,2]) all-reduce-start(x, y), replica_groups={{}}, to_apply=add
  d2 = (f32[3], f32[2,2]) all-reduce-done(st2)
  g0 = f32[3] get-tuple-element(d2), index=0
  g1 = f32[2,2] get-tuple-element(d2), index=1
  ROOT r = (f32[3], f32[3], f32[2,2]) tuple(d1, g0, g1)
}}
"""
    rng = np.random.default_rng(3)
    x, y = _per_device(rng, (3,)), _per_device(rng, (2, 2))
    d1, g0, g1 = run_ours(hlo, [x, y])
    pairs = x[0] + x[1], x[2] + x[3]
    np.testing.assert_array_equal(d1, np.stack([pairs[0], pairs[0], pairs[1], pairs[1]]))
    np.testing.assert_array_equal(g0, np.broadcast_to(x.sum(0), (REPLICAS, 3)))
    np.testing.assert_array_equal(g1, np.broadcast_to(y.sum(0), (REPLICAS, 2, 2)))
