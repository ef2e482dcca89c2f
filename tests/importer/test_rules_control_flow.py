"""Control-flow import rules (rules/control_flow.py): call, fusion (inlined, and kept with keep_fusions=True),
while, conditional (predicate and index forms), optimization-barrier, after-all,
add-dependency, domain.

Checked against XLA running the same HLO where its HLO→MHLO import accepts the module,
and against NumPy everywhere.  The values these ops move are exact; the loops below
compute in integers or with exactly representable floats, so every check is exact."""

from __future__ import annotations

import re

import numpy as np

from converter.runtime.convert import convert_text
from tests.helpers import convert_program, run_ours
from tests.importer.hlo_snippets import differential_by_output, differential_runs

EXACT = {"rtol": 0.0, "atol": 0.0}


CALL_AND_FUSION = """HloModule call_and_fusion
square_plus {
  p = f32[4] parameter(0)
  q = (f32[4], s32[]) parameter(1)
  q0 = f32[4] get-tuple-element(q), index=0
  m = f32[4] multiply(p, p)
  ROOT s = f32[4] add(m, q0)
}
fused_pair {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  n = f32[4] negate(x)
  d = f32[4] subtract(x, y)
  ROOT t = (f32[4], f32[4]) tuple(n, d)
}
fused_one {
  x = f32[4] parameter(0)
  ROOT e = f32[4] add(x, x)
}
ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  i = s32[] constant(3)
  bt = (f32[4], s32[]) tuple(b, i)
  c = f32[4] call(a, bt), to_apply=square_plus
  f = (f32[4], f32[4]) fusion(c, a), kind=kLoop, calls=fused_pair
  f0 = f32[4] get-tuple-element(f), index=0
  f1 = f32[4] get-tuple-element(f), index=1
  g = f32[4] fusion(f1), kind=kInput, calls=fused_one
  ROOT r = (f32[4], f32[4], f32[4]) tuple(f0, f1, g)
}
"""


def _call_and_fusion_expected(a, b):
    c = a * a + b
    return [-c, c - a, 2 * (c - a)]


def test_call_inlines_and_matches_xla():
    hlo = CALL_AND_FUSION.split("ENTRY")[0] + """ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  i = s32[] constant(3)
  bt = (f32[4], s32[]) tuple(b, i)
  ROOT c = f32[4] call(a, bt), to_apply=square_plus
}
"""
    a = np.array([1, -2, 0.5, 3], np.float32)
    b = np.array([0.25, 4, -1, 2], np.float32)
    # Small exactly representable values: every step is exact in f32.
    (out,) = differential_by_output(hlo, [a, b], ["call"], [True])
    np.testing.assert_array_equal(out, a * a + b)


def test_fusions_inline():
    # XLA's CPU compiler aborts the process on pre-fused HLO: NumPy oracle.
    a = np.array([1, -2, 0.5, 3], np.float32)
    b = np.array([0.25, 4, -1, 2], np.float32)
    outs = run_ours(CALL_AND_FUSION, [a, b])
    for out, want in zip(outs, _call_and_fusion_expected(a, b)):
        np.testing.assert_array_equal(out, want)


def test_keep_fusions_calls_private_functions_with_the_same_results():
    module = convert_text(CALL_AND_FUSION, "<test>", pipeline="none", keep_fusions=True)
    text = str(module)
    # The faithful import keeps each fused computation as a private function, called
    # (a fusion with a tuple root returns several values).
    assert re.search(r"func\.func private @fused_pair\(.*\) -> \(tensor<4xf32>, tensor<4xf32>\)", text)
    assert re.search(r"func\.func private @fused_one", text)
    assert re.search(r"call @fused_pair\(.*\)\s*\{hlo\.fusion_kind = \"kLoop\"\}", text)
    a = np.array([1, -2, 0.5, 3], np.float32)
    b = np.array([0.25, 4, -1, 2], np.float32)
    outs = convert_program(CALL_AND_FUSION, keep_fusions=True)(a, b)
    for out, want in zip(outs, _call_and_fusion_expected(a, b)):
        np.testing.assert_array_equal(out, want)


# ------------------------------------------------------------------------- while
def test_while_with_tuple_state_and_nested_loop():
    """sum_{i<n} sum_{j<i} j, with the outer loop counter, an accumulator and a
    passthrough array in the state, and a nested while with array (non-tuple) state."""
    hlo = """HloModule loops
inner_cond {
  s = s32[2] parameter(0)
  j = s32[1] slice(s), slice={[0:1]}
  lim = s32[1] slice(s), slice={[1:2]}
  jr = s32[] reshape(j)
  lr = s32[] reshape(lim)
  ROOT lt = pred[] compare(jr, lr), direction=LT
}
inner_body {
  s = s32[2] parameter(0)
  one = s32[2] constant({1, 0})
  ROOT n = s32[2] add(s, one)
}
outer_cond {
  t = (s32[], s32[], f32[3], s32[]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  n = s32[] get-tuple-element(t), index=3
  ROOT lt = pred[] compare(i, n), direction=LT
}
outer_body {
  t = (s32[], s32[], f32[3], s32[]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  acc = s32[] get-tuple-element(t), index=1
  x = f32[3] get-tuple-element(t), index=2
  n = s32[] get-tuple-element(t), index=3
  zero = s32[] constant(0)
  zi = s32[1] reshape(zero)
  ii = s32[1] reshape(i)
  start = s32[2] concatenate(zi, ii), dimensions={0}
  w = s32[2] while(start), condition=inner_cond, body=inner_body
  jw = s32[1] slice(w), slice={[0:1]}
  j = s32[] reshape(jw)
  tri = s32[] multiply(j, i)
  acc2 = s32[] add(acc, tri)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[3] add(x, x)
  ROOT r = (s32[], s32[], f32[3], s32[]) tuple(i2, acc2, x2, n)
}
ENTRY main {
  n = s32[] parameter(0)
  x = f32[3] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], s32[], f32[3], s32[]) tuple(zero, zero, x, n)
  ROOT w = (s32[], s32[], f32[3], s32[]) while(init), condition=outer_cond, body=outer_body
}
"""
    x = np.array([1, -0.5, 3], np.float32)
    runs = [[np.int32(n), x] for n in (0, 1, 5)]
    results = differential_runs(hlo, runs, ["i", "acc", "x", "n"], [True] * 4)
    for (n, _), outs in zip(runs, results):
        n = int(n)
        # The inner loop counts j up to i, so each outer step adds i * i.
        expected = [np.int32(n), np.int32(sum(i * i for i in range(n))), x * np.float32(2.0 ** n), np.int32(n)]
        for out, want in zip(outs, expected):
            np.testing.assert_array_equal(out, want)


# ------------------------------------------------------------------- conditional
def test_conditional_predicate_form():
    hlo = """HloModule cond_pred
on_true {
  t = (f32[2], s32[]) parameter(0)
  a = f32[2] get-tuple-element(t), index=0
  ROOT n = f32[2] negate(a)
}
on_false {
  b = f32[2] parameter(0)
  ROOT d = f32[2] add(b, b)
}
ENTRY main {
  p = pred[] parameter(0)
  x = f32[2] parameter(1)
  k = s32[] constant(1)
  tx = (f32[2], s32[]) tuple(x, k)
  ROOT c = f32[2] conditional(p, tx, x), true_computation=on_true, false_computation=on_false
}
"""
    x = np.array([1.5, -3], np.float32)
    results = differential_runs(hlo, [[np.bool_(True), x], [np.bool_(False), x]], ["result"], [True])
    np.testing.assert_array_equal(results[0][0], -x)
    np.testing.assert_array_equal(results[1][0], 2 * x)


def test_conditional_index_form_out_of_range_runs_the_last_branch():
    """branch_computations: index i runs branch i; an index below 0 or at/after N runs
    branch N-1 (XLA's definition).  Branches return tuples of two leaves."""
    branches = []
    for k in range(3):
        branches.append(f"""branch{k} {{
  x = s32[3] parameter(0)
  c = s32[3] constant({{{k * 10}, {k * 10}, {k * 10}}})
  a = s32[3] add(x, c)
  s = s32[] constant({k})
  ROOT t = (s32[3], s32[]) tuple(a, s)
}}""")
    hlo = "HloModule cond_index\n" + "\n".join(branches) + """
ENTRY main {
  i = s32[] parameter(0)
  x = s32[3] parameter(1)
  ROOT c = (s32[3], s32[]) conditional(i, x, x, x), branch_computations={branch0, branch1, branch2}
}
"""
    x = np.array([1, 2, 3], np.int32)
    indices = [0, 1, 2, 3, 7, -1, -100, 2**31 - 1]
    results = differential_runs(hlo, [[np.int32(i), x] for i in indices], ["array", "branch"], [True, True])
    for i, (array, branch) in zip(indices, results):
        k = i if 0 <= i < 3 else 2
        np.testing.assert_array_equal(branch, np.int32(k))
        np.testing.assert_array_equal(array, x + 10 * k)


# ------------------------------------------------------------ ordering-only ops
def test_optimization_barrier_after_all_add_dependency():
    hlo = """HloModule ordering
ENTRY main {
  x = f32[3] parameter(0)
  y = s32[] parameter(1)
  t = (f32[3], s32[]) tuple(x, y)
  b = (f32[3], s32[]) opt-barrier(t)
  bx = f32[3] get-tuple-element(b), index=0
  by = s32[] get-tuple-element(b), index=1
  tok0 = token[] after-all()
  tok1 = token[] after-all(tok0, tok0)
  d = f32[3] add-dependency(bx, tok1)
  ROOT r = (f32[3], s32[]) tuple(d, by)
}
"""
    x = np.array([1, 2, 3], np.float32)
    # All identities on values.
    outs = differential_by_output(hlo, [x, np.int32(-4)], ["barrier+dependency", "barrier"], [True, True])
    np.testing.assert_array_equal(outs[0], x)
    np.testing.assert_array_equal(outs[1], np.int32(-4))


def test_domain_is_the_identity():
    # XLA's HLO→MHLO import has no domain op: NumPy (the identity) is the oracle.
    hlo = """HloModule domain
ENTRY main {
  x = f32[3] parameter(0)
  d = f32[3] domain(x), domain={kind="sharding", entry={maximal device=0}, exit={replicated}}
  ROOT n = f32[3] negate(d)
}
"""
    x = np.array([1, -2, 3], np.float32)
    (out,) = run_ours(hlo, [x])
    np.testing.assert_array_equal(out, -x)
