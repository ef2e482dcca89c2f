"""Import rules with a computation applied (rules/reductions.py): reduce (variadic),
reduce-window (strides, padding, base and window dilation), select-and-scatter.

Checked against XLA running the same HLO and against NumPy.  Max/min/select results and
integer sums are exact; float sums may associate differently on the two paths, so
they get the dtype tolerance."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import assert_close
from tests.importer.hlo_snippets import differential_by_output

ADD_F32 = """HloModule reduce
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b)
}
"""


# ------------------------------------------------------------------------ reduce
def test_reduce_over_dimension_sets_with_nonidentity_init():
    hlo = ADD_F32 + """ENTRY main {
  x = f32[2,3,4] parameter(0)
  zero = f32[] constant(0)
  ten = f32[] constant(10)
  ninf = f32[] constant(-inf)
  a = f32[2,4] reduce(x, zero), dimensions={1}, to_apply=add
  b = f32[3] reduce(x, ten), dimensions={0,2}, to_apply=add
  c = f32[] reduce(x, ninf), dimensions={0,1,2}, to_apply=max
  d = f32[2,3,4] reduce(x, zero), dimensions={}, to_apply=add
  ROOT r = (f32[2,4], f32[3], f32[], f32[2,3,4]) tuple(a, b, c, d)
}
"""
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    outs = differential_by_output(hlo, [x], ["sum dim 1", "sum dims 0,2 + 10", "max all", "no dims"],
                                  [False, False, True, True])
    # The init value joins the reduction once per output element.
    for out, want in zip(outs, [x.sum(1), x.sum((0, 2)) + 10, x.max(), x]):
        assert_close(out, np.asarray(want, np.float32))


def test_variadic_reduce_argmax_with_nan_and_ties():
    """(value, index) reduced together: the larger value wins, NaN wins over numbers
    (jnp.argmax's convention), ties keep the lower index."""
    hlo = """HloModule argmax
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT
  nan0 = pred[] compare(v0, v0), direction=NE
  eq = pred[] compare(v0, v1), direction=EQ
  lower = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, lower)
  a = pred[] or(gt, nan0)
  keep = pred[] or(a, tie)
  v = f32[] select(keep, v0, v1)
  i = s32[] select(keep, i0, i1)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY main {
  x = f32[4,6] parameter(0)
  idx = s32[4,6] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  neg = s32[] constant(-1)
  ROOT r = (f32[4], s32[4]) reduce(x, idx, ninf, neg), dimensions={1}, to_apply=argmax
}
"""
    x = np.array([[1, 5, 2, 5, 0, -1], [np.nan, 1, 2, 3, 4, 5], [-np.inf] * 6, [0, -0.0, 3, 7, 7, np.nan]],
                 np.float32)
    values, indices = differential_by_output(hlo, [x], ["values", "indices"], [True, True])
    # An all -inf row ties with the init value (-inf, -1), whose index is lower: -1.
    np.testing.assert_array_equal(indices, np.array([1, 0, -1, 5], np.int32))
    np.testing.assert_array_equal(values, np.array([5, np.nan, -np.inf, np.nan], np.float32))


def test_reduce_of_integers_and_predicates():
    hlo = """HloModule int_reduce
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] add(a, b)
}
any {
  a = pred[] parameter(0)
  b = pred[] parameter(1)
  ROOT c = pred[] or(a, b)
}
ENTRY main {
  x = s32[3,5] parameter(0)
  p = pred[3,5] parameter(1)
  zero = s32[] constant(0)
  f = pred[] constant(false)
  a = s32[5] reduce(x, zero), dimensions={0}, to_apply=add
  b = pred[3] reduce(p, f), dimensions={1}, to_apply=any
  ROOT r = (s32[5], pred[3]) tuple(a, b)
}
"""
    x = np.array([[2**31 - 1, 1, -5, 3, 0], [1, 2, 3, 4, 5], [7, 7, 7, 7, 7]], np.int32)
    p = np.zeros((3, 5), bool)
    p[1, 3] = True
    total, anything = differential_by_output(hlo, [x, p], ["sum (wraps)", "any"], [True, True])
    np.testing.assert_array_equal(total, x.sum(0, dtype=np.int64).astype(np.int32))
    np.testing.assert_array_equal(anything, p.any(1))


# ------------------------------------------------------------------ reduce-window
def _numpy_reduce_window(x, init, op, size, stride, pad, base_dilation, window_dilation):
    """reduce-window by definition: dilate the base (holes hold init), pad with init,
    slide a dilated window with strides, reduce what it covers."""
    dilated_shape = [(n - 1) * d + 1 for n, d in zip(x.shape, base_dilation)]
    base = np.full(dilated_shape, init, x.dtype)
    base[tuple(slice(None, None, d) for d in base_dilation)] = x
    padded = np.pad(base, [(max(lo, 0), max(hi, 0)) for lo, hi in pad], constant_values=init)
    # Negative padding removes elements.
    padded = padded[tuple(slice(-min(lo, 0), n - max(-hi, 0)) for n, (lo, hi) in zip(padded.shape, pad))]
    extent = [(k - 1) * d + 1 for k, d in zip(size, window_dilation)]
    out_shape = [(n - e) // s + 1 if n >= e else 0 for n, e, s in zip(padded.shape, extent, stride)]
    out = np.full(out_shape, init, x.dtype)
    for pos in np.ndindex(*out_shape):
        window = padded[tuple(slice(p * s, p * s + e, d) for p, s, e, d in zip(pos, stride, extent, window_dilation))]
        out[pos] = op.reduce(window.reshape(-1), initial=init)
    return out


REDUCE_WINDOW_CASES = [
    # size, stride, (pad low, pad high), base dilation, window dilation
    ((2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)),
    ((3, 2), (2, 3), ((1, 1), (0, 2)), (1, 1), (1, 1)),
    ((2, 2), (1, 1), ((0, 0), (0, 0)), (2, 1), (1, 1)),
    ((2, 3), (1, 2), ((1, 0), (2, 1)), (1, 1), (2, 2)),
    ((3, 3), (2, 1), ((2, 2), (1, 1)), (2, 3), (1, 2)),
    ((1, 5), (1, 1), ((0, 0), (-1, 0)), (1, 1), (1, 1)),
]


def _window_text(size, stride, pad, base, dil):
    text = f"size={'x'.join(map(str, size))} stride={'x'.join(map(str, stride))}"
    text += f" pad={'x'.join(f'{lo}_{hi}' for lo, hi in pad)}"
    text += f" lhs_dilate={'x'.join(map(str, base))} rhs_dilate={'x'.join(map(str, dil))}"
    return "{" + text + "}"


@pytest.mark.parametrize("element_type", ["f32", "s32"])
def test_reduce_window_strides_padding_and_dilations(element_type):
    t = element_type
    dtype = np.float32 if t == "f32" else np.int32
    x = (np.random.default_rng(1).standard_normal((5, 7)) * 10).astype(dtype)
    expected, lines = {}, []
    for i, case in enumerate(REDUCE_WINDOW_CASES):
        for name, op, init in (("max", np.maximum, -np.inf if t == "f32" else -(2**31)), ("add", np.add, 0)):
            want = _numpy_reduce_window(x, dtype(init), op, *case)
            label = f"{name} {case}"
            expected[label] = want
            lines.append(f"  r{len(lines)} = {t}[{','.join(map(str, want.shape))}] reduce-window(x, {name}_init), "
                         f"window={_window_text(*case)}, to_apply={name}")
    hlo = f"""HloModule reduce_window
add {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = {t}[] add(a, b)
}}
max {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = {t}[] maximum(a, b)
}}
ENTRY main {{
  x = {t}[5,7] parameter(0)
  add_init = {t}[] constant(0)
  max_init = {t}[] constant({'-inf' if t == 'f32' else -(2**31)})
{chr(10).join(lines)}
  ROOT r = ({', '.join(f"{t}[{','.join(map(str, e.shape))}]" for e in expected.values())}) tuple({', '.join(f'r{i}' for i in range(len(lines)))})
}}
"""
    outs = differential_by_output(hlo, [x], list(expected), [t == "s32" or "max" in k for k in expected])
    for out, (label, want) in zip(outs, expected.items()):
        assert_close(out, want, what=label)


def test_variadic_reduce_window_max_with_index():
    hlo = """HloModule reduce_window_variadic
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  ge = pred[] compare(v0, v1), direction=GE
  v = f32[] select(ge, v0, v1)
  i = s32[] select(ge, i0, i1)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY main {
  x = f32[8] parameter(0)
  idx = s32[8] iota(), iota_dimension=0
  ninf = f32[] constant(-inf)
  neg = s32[] constant(-1)
  ROOT r = (f32[3], s32[3]) reduce-window(x, idx, ninf, neg), window={size=3 stride=3 pad=0_1}, to_apply=argmax
}
"""
    x = np.array([1, 9, 3, 4, 4, 2, 7, 0], np.float32)
    values, indices = differential_by_output(hlo, [x], ["values", "indices"], [True, True])
    np.testing.assert_array_equal(values, np.array([9, 4, 7], np.float32))
    np.testing.assert_array_equal(indices, np.array([1, 3, 6], np.int32))


# -------------------------------------------------------------- select-and-scatter
@pytest.mark.parametrize("size,stride,pad", [((2, 2), (2, 2), ((0, 0), (0, 0))), ((3, 3), (2, 2), ((1, 1), (1, 1))),
                                             ((2, 3), (1, 2), ((0, 1), (1, 0)))])
def test_select_and_scatter_is_the_max_pool_gradient(size, stride, pad):
    """Each window selects its first maximal element (GE keeps the earlier one) and
    the source value for that window is added at the selected position."""
    x = np.random.default_rng(2).integers(0, 4, (6, 7)).astype(np.float32)  # many ties
    padded = np.pad(x, pad, constant_values=-np.inf)
    out_shape = [(n - k) // s + 1 for n, k, s in zip(padded.shape, size, stride)]
    source = np.random.default_rng(3).standard_normal(out_shape).astype(np.float32)
    hlo = f"""HloModule select_and_scatter
ge {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
ENTRY main {{
  x = f32[6,7] parameter(0)
  s = f32[{out_shape[0]},{out_shape[1]}] parameter(1)
  zero = f32[] constant(0)
  ROOT r = f32[6,7] select-and-scatter(x, s, zero), window={{size={size[0]}x{size[1]} stride={stride[0]}x{stride[1]} pad={pad[0][0]}_{pad[0][1]}x{pad[1][0]}_{pad[1][1]}}}, select=ge, scatter=add
}}
"""
    (out,) = differential_by_output(hlo, [x, source], ["select-and-scatter"])
    expected = np.zeros_like(padded)
    for i, j in np.ndindex(*out_shape):
        window = padded[i * stride[0]:i * stride[0] + size[0], j * stride[1]:j * stride[1] + size[1]]
        # Row-major scan, first maximal element (padding is never selected over a value).
        a, b = np.unravel_index(int(np.argmax(window)), window.shape)
        expected[i * stride[0] + a, j * stride[1] + b] += source[i, j]
    assert_close(out, expected[pad[0][0]:pad[0][0] + 6, pad[1][0]:pad[1][0] + 7])
