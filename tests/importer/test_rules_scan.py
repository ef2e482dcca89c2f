"""The `scan` opcode in the text XLA's tests write (xla/service/scan_expander_test.cc), run
after import and checked against NumPy (cumulative sums/maxima, and a step-by-step NumPy
loop of the body's math for bodies with several inputs, outputs and carries).

No XLA oracle: neither jaxlib 0.10.2's nor 0.12's XLA parses `scan` ("expects an HLO
opcode"), so the independent side is NumPy. Tolerances: f32 cumulative sums in the same
sequential order as NumPy's cumsum: 1e-6 relative; integer results exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from converter.common.errors import ConverterError
from tests.helpers import assert_close, convert_program

BODIES = {
    "add": ("add", np.cumsum),
    "maximum": ("maximum", np.maximum.accumulate),
}


def cumulative(op: str, dtype: str, shape: tuple[int, ...], dim: int, reverse: bool, carries_attr: bool) -> str:
    dims = ",".join(map(str, shape))
    rest = ",".join(str(n) for d, n in enumerate(shape) if d != dim)
    extra = ", num_carries=1" if carries_attr else ""
    return f"""HloModule scan_module
body {{
  input = {dtype}[{rest}] parameter(0)
  acc = {dtype}[{rest}] parameter(1)
  r = {dtype}[{rest}] {op}(acc, input)
  ROOT t = ({dtype}[{rest}], {dtype}[{rest}]) tuple(r, r)
}}
ENTRY main {{
  input = {dtype}[{dims}] parameter(0)
  init = {dtype}[{rest}] parameter(1)
  ROOT scan = ({dtype}[{dims}], {dtype}[{rest}]) scan(input, init), dimensions={{{dim}}}, is_reverse={str(reverse).lower()}{extra}, to_apply=body
}}
"""


def expected_cumulative(op: str, x: np.ndarray, init: np.ndarray, dim: int, reverse: bool):
    _, accumulate = BODIES[op]
    moved = np.moveaxis(x, dim, 0)
    if reverse:
        moved = moved[::-1]
    stacked = accumulate(np.concatenate([init[None], moved]), axis=0)[1:].astype(x.dtype)
    last = stacked[-1]
    if reverse:
        stacked = stacked[::-1]
    return np.moveaxis(stacked, 0, dim), last


def check_cumulative(op, dtype, shape, dim, reverse, carries_attr=False, seed=0):
    rng = np.random.default_rng(seed)
    np_t = np.float32 if dtype == "f32" else np.int32
    x = (rng.standard_normal(shape) * 4).astype(np_t)
    init = (rng.standard_normal(tuple(n for d, n in enumerate(shape) if d != dim)) * 4).astype(np_t)
    out, carry = convert_program(cumulative(op, dtype, shape, dim, reverse, carries_attr))(x, init)
    e_out, e_carry = expected_cumulative(op, x, init, dim, reverse)
    assert_close(out, e_out, rtol=1e-6, atol=1e-6, what="outputs")
    assert_close(carry, e_carry, rtol=1e-6, atol=1e-6, what="final carry")


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("op", sorted(BODIES))
def test_cumulative_scan_matches_numpy(op, reverse):
    """The scan_expander_test form (a cumulative sum, `tuple(add, add)`), forward and reverse."""
    check_cumulative(op, "f32", (6,), 0, reverse)


def test_scan_along_an_inner_dimension_with_num_carries():
    check_cumulative("add", "s32", (3, 5, 2), 1, True, carries_attr=True)


@settings(max_examples=6, deadline=None)
@given(st.data())
def test_generated_scans_match_numpy(data):
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    dim = data.draw(st.integers(0, rank - 1))
    check_cumulative(data.draw(st.sampled_from(sorted(BODIES))), data.draw(st.sampled_from(["f32", "s32"])), shape,
                     dim, data.draw(st.booleans()), carries_attr=data.draw(st.booleans()), seed=rank)


MULTI = """HloModule multi
body {
  a = f32[2] parameter(0)
  b = s32[] parameter(1)
  total = f32[2] parameter(2)
  count = s32[] parameter(3)
  prod = f32[2] multiply(a, total)
  total2 = f32[2] add(total, a)
  bf = f32[] convert(b)
  bb = f32[2] broadcast(bf), dimensions={}
  out = f32[2] add(prod, bb)
  count2 = s32[] add(count, b)
  ROOT t = (f32[2], s32[], f32[2], s32[]) tuple(out, count2, total2, count2)
}
ENTRY main {
  a = f32[5,2] parameter(0)
  b = s32[5] parameter(1)
  t0 = f32[2] parameter(2)
  c0 = s32[] parameter(3)
  ROOT scan = (f32[5,2], s32[5], f32[2], s32[]) scan(a, b, t0, c0), dimensions={0}, to_apply=body
}
"""


def test_two_inputs_two_outputs_two_carries_match_a_numpy_loop():
    """Outputs that differ from the carries, mixed types, no num_carries (inferred: 2)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 2)).astype(np.float32)
    b = rng.integers(-3, 4, 5).astype(np.int32)
    t0 = rng.standard_normal(2).astype(np.float32)
    c0 = np.int32(2)
    out, counts, total, count = convert_program(MULTI)(a, b, t0, c0)
    e_out, e_counts, t, c = [], [], t0.copy(), c0
    for i in range(5):
        e_out.append(a[i] * t + np.float32(b[i]))
        t = t + a[i]
        c = np.int32(c + b[i])
        e_counts.append(c)
    assert_close(out, np.stack(e_out).astype(np.float32), rtol=1e-6, atol=1e-6)
    assert_close(counts, np.asarray(e_counts, np.int32))
    assert_close(total, t.astype(np.float32), rtol=1e-6, atol=1e-6)
    assert_close(count, np.asarray(c, np.int32))


def test_two_scan_dimensions_are_a_located_error():
    text = cumulative("add", "f32", (4, 3), 0, False, False).replace("dimensions={0}", "dimensions={0,1}")
    with pytest.raises(ConverterError, match=r"<test>:\d+:\d+: .*exactly one scan dimension"):
        convert_program(text)
