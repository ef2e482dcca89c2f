"""dynamic-shape-calls (passes/dynamic_shape_calls.py): SliceToDynamic / PadToStatic as
bounded dynamic shapes, against NumPy on the valid region (and XLA itself where its CPU
runtime runs the call: SliceToDynamic).  Sums are over a handful of exactly representable
values: exact; exp is one correctly rounded op on either side: the f32 tolerance."""

from __future__ import annotations

import numpy as np
import pytest

from converter.common.errors import ConverterError
from tests.helpers import assert_close, run_ours, run_xla

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
"""


def _round_trip_module(dynamic_dim: int) -> str:
    """x f32[8,6] sliced to a bounded array dynamic in `dynamic_dim` (size n), summed
    over that dimension, exponentiated, then padded back to static."""
    bounded = "f32[<=8,6]" if dynamic_dim == 0 else "f32[8,<=6]"
    sizes = "n, six" if dynamic_dim == 0 else "eight, n"
    kept = 6 if dynamic_dim == 0 else 8
    return f"""HloModule dynamic_round_trip
{ADD}
ENTRY main {{
  x = f32[8,6] parameter(0)
  n = s32[] parameter(1)
  six = s32[] constant(6)
  eight = s32[] constant(8)
  d = {bounded} custom-call(x, {sizes}), custom_call_target="SliceToDynamic"
  z = f32[] constant(0)
  s = f32[{kept}] reduce(d, z), dimensions={{{dynamic_dim}}}, to_apply=add
  e = {bounded} exponential(d)
  p = (f32[8,6], s32[], s32[]) custom-call(e), custom_call_target="PadToStatic"
  p0 = f32[8,6] get-tuple-element(p), index=0
  p1 = s32[] get-tuple-element(p), index=1
  p2 = s32[] get-tuple-element(p), index=2
  ROOT t = (f32[{kept}], f32[8,6], s32[], s32[]) tuple(s, p0, p1, p2)
}}
"""


@pytest.mark.parametrize("dynamic_dim", [0, 1])
@pytest.mark.parametrize("size", [0, 1, 5, 6])
def test_slice_to_dynamic_then_pad_to_static_matches_numpy(dynamic_dim, size):
    rng = np.random.default_rng(size)
    x = rng.integers(-8, 8, (8, 6)).astype(np.float32)
    total, padded, size0, size1 = run_ours(_round_trip_module(dynamic_dim), [x, np.int32(size)])
    valid = x[:size] if dynamic_dim == 0 else x[:, :size]
    assert_close(total, valid.sum(axis=dynamic_dim), rtol=0, atol=0)
    expected = np.zeros_like(x)  # the padding is defined as zero
    if dynamic_dim == 0:
        expected[:size] = np.exp(valid)
    else:
        expected[:, :size] = np.exp(valid)
    assert_close(padded, expected)
    assert (int(size0), int(size1)) == ((size, 6) if dynamic_dim == 0 else (8, size))


def test_slice_to_dynamic_matches_xla_set_dimension_size():
    """XLA's CPU runtime cannot run these calls itself (its dynamic padder adds a
    PadToStatic it does not implement), but it runs `set-dimension-size`, which makes the
    same bounded array: XLA on that module is the oracle."""
    body = """  z = f32[] constant(0)
  ROOT s = f32[6] reduce(d, z), dimensions={0}, to_apply=add
}
"""
    head = f"HloModule slice_to_dynamic\n{ADD}\nENTRY main {{\n  x = f32[8,6] parameter(0)\n  n = s32[] parameter(1)\n"
    ours = head + '  six = s32[] constant(6)\n  d = f32[<=8,6] custom-call(x, n, six), custom_call_target="SliceToDynamic"\n'
    xla = head + "  d = f32[<=8,6] set-dimension-size(x, n), dimensions={0}\n"
    x = np.arange(48, dtype=np.float32).reshape(8, 6)
    for size in (0, 3, 8):
        assert_close(run_ours(ours + body, [x, np.int32(size)])[0], run_xla(xla + body, [x, np.int32(size)])[0],
                     rtol=0, atol=0)


def test_slice_to_dynamic_with_a_missing_size_is_refused():
    hlo = """HloModule bad
ENTRY main {
  x = f32[8,6] parameter(0)
  n = s32[] parameter(1)
  ROOT d = f32[<=8,6] custom-call(x, n), custom_call_target="SliceToDynamic"
}
"""
    with pytest.raises(ConverterError, match=r"<test>:5:\d+.*one s32\[\] size per dimension"):
        run_ours(hlo, [np.zeros((8, 6), np.float32), np.int32(1)])
