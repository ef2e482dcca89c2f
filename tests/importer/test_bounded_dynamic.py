"""Bounded dynamic shapes (`f32[<=4]`): run at the bound (passes/bounds_to_static.py
and the runtime's random inputs).  XLA lays a bounded dimension out at its bound; given
arrays of the bound's size, every dynamic size is the bound, so `get-dimension-size`
returns the bound and every op sees full arrays.

Oracles: XLA's own import of the same HLO run at the same inputs, and NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.common.errors import ConverterError
from converter.runtime.program import program_from_module
from converter.runtime.xla_oracle import run_with_xla
from tests.helpers import assert_all_close, convert_program

HLO = """HloModule bounded
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY main {
  x = f32[<=4,3] parameter(0)
  w = f32[3,<=5] parameter(1)
  k = s32[<=6] parameter(2)
  n = f32[<=4,3] negate(x)
  d = f32[<=4,<=5] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  zero = f32[] constant(0)
  r = f32[<=4] reduce(x, zero), dimensions={1}, to_apply=add
  size0 = s32[] get-dimension-size(x), dimensions={0}
  size1 = s32[] get-dimension-size(w), dimensions={1}
  kk = s32[<=6] multiply(k, k)
  ROOT t = (f32[<=4,3], f32[<=4,<=5], f32[<=4], s32[], s32[], s32[<=6]) tuple(n, d, r, size0, size1, kk)
}
"""


@pytest.mark.parametrize("pipeline", ["default", "none"])
def test_bounded_dynamic_module_runs_at_its_bounds(pipeline):
    program = convert_program(HLO, pipeline)
    assert [p.shape for p in program.params] == [(4, 3), (3, 5), (6,)]
    x, w, k = program.random_inputs(seed=3)
    assert (x.shape, w.shape, k.shape) == ((4, 3), (3, 5), (6,))
    ours = program(x, w, k)
    assert_all_close(ours, run_with_xla(HLO, [x, w, k]))
    n, d, r, size0, size1, kk = ours
    np.testing.assert_array_equal(n, -x)
    np.testing.assert_allclose(d, x @ w, rtol=1e-5, atol=1e-5)  # f32 dot of 3 terms
    np.testing.assert_allclose(r, x.sum(1), rtol=1e-6, atol=1e-6)
    assert (int(size0), int(size1)) == (4, 5)
    np.testing.assert_array_equal(kk, k * k)


def test_an_unbounded_dynamic_entry_is_refused_by_name():
    text = """module @m {
  func.func public @main(%arg0: tensor<?xf32>) -> tensor<?xf32> {
    %0 = stablehlo.negate %arg0 : tensor<?xf32>
    return %0 : tensor<?xf32>
  }
}
"""
    from converter.mlir.serialize import load_module

    with pytest.raises(ConverterError, match="dynamic without a bound"):
        program_from_module(load_module(text.encode(), "m.mlir"))


def test_faithful_import_keeps_the_bounds():
    text = str(convert_text(HLO, "<t>", pipeline="none"))
    assert "tensor<?x3xf32, #stablehlo.bounds<4, ?>>" in text


def test_a_size_set_from_values_is_refused_not_run_at_the_bound():
    """set-dimension-size can make a size smaller than its bound: running at the bound
    would reduce the padding too, so the runtime refuses and names the op."""
    hlo = """HloModule set_size
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY main {
  x = f32[<=4] parameter(0)
  n = s32[] parameter(1)
  d = f32[<=4] set-dimension-size(x, n), dimensions={0}
  z = f32[] constant(0)
  ROOT r = f32[] reduce(d, z), dimensions={0}, to_apply=add
}
"""
    with pytest.raises(ConverterError, match="sets dynamic sizes from values.*set_dimension_size"):
        convert_program(hlo)
