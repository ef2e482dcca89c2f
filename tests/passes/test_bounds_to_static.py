"""bounds-to-static (passes/bounds_to_static.py) run alone on imported modules with bounded
dynamic entry arrays: every bounded type — entry arguments, results, values in regions and
loop-carried block arguments — becomes its bound, and the module computes what XLA
computes for the same HLO (and NumPy).  Sizes set from constants should be refined to
static sizes; they are not yet (strict xfail below)."""

from __future__ import annotations

import numpy as np
import pytest

from converter.runtime.program import program_from_module
from converter.runtime.xla_oracle import run_with_xla
from passes import PassError, PassOptions, run_pipeline
from tests.helpers import assert_all_close, assert_close, convert_then

# A while loop carrying a bounded array (block arguments of both regions), a reduce whose
# region sees bounded values' elements, and sizes read back.
LOOP = """HloModule bounded_loop
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
cond {
  s = (s32[], f32[<=6,2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
body {
  s = (s32[], f32[<=6,2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[<=6,2] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[<=6,2] multiply(x, x)
  half = f32[] constant(0.5)
  h = f32[<=6,2] broadcast(half), dimensions={}
  z = f32[<=6,2] multiply(y, h)
  ROOT t = (s32[], f32[<=6,2]) tuple(j, z)
}
ENTRY main {
  x = f32[<=6,2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[<=6,2]) tuple(zero, x)
  w = (s32[], f32[<=6,2]) while(init), condition=cond, body=body
  out = f32[<=6,2] get-tuple-element(w), index=1
  fz = f32[] constant(0)
  r = f32[<=6] reduce(out, fz), dimensions={1}, to_apply=add
  n = s32[] get-dimension-size(x), dimensions={0}
  ROOT t = (f32[<=6,2], f32[<=6], s32[]) tuple(out, r, n)
}
"""


def _dynamic(module) -> bool:
    text = str(module)
    return "?" in text or "#stablehlo.bounds" in text


def test_every_bounded_type_becomes_its_bound_and_the_loop_computes_xlas_numbers():
    assert _dynamic(convert_then(LOOP, []))
    module = convert_then(LOOP, ["bounds-to-static"])
    assert not _dynamic(module), str(module)
    program = program_from_module(module)
    assert [p.shape for p in program.params] == [(6, 2)]
    x = np.random.default_rng(0).uniform(-1.5, 1.5, (6, 2)).astype(np.float32)
    got = program(x)
    assert_all_close(got, run_with_xla(LOOP, [x]))
    want = x.astype(np.float64)
    for _ in range(3):
        want = want * want * 0.5
    assert_close(got[0], want.astype(np.float32))
    assert_close(got[1], want.sum(axis=1).astype(np.float32))
    assert int(got[2]) == 6


SET_FROM_CONSTANT = """HloModule set_constant
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY main {
  x = f32[<=8] parameter(0)
  five = s32[] constant(5)
  d = f32[<=8] set-dimension-size(x, five), dimensions={0}
  z = f32[] constant(0)
  s = f32[] reduce(d, z), dimensions={0}, to_apply=add
  n = s32[] get-dimension-size(d), dimensions={0}
  ROOT t = (f32[], s32[]) tuple(s, n)
}
"""


RESHAPE_FROM_CONSTANTS = """HloModule reshape_constants
ENTRY main {
  x = f32[<=8] parameter(0)
  two = s32[] constant(2)
  four = s32[] constant(4)
  ROOT r = f32[<=2,<=4] dynamic-reshape(x, two, four)
}
"""


# The refinement (StableHLO's, through jaxlib 0.10.2's refine_polymorphic_shapes) leaves
# these ops dynamic on a bounded type, so the pass refuses modules it means to run.  XLA
# cannot be the oracle either (its import goes through the same runtime), so NumPy is.
@pytest.mark.xfail(strict=True, raises=PassError,
                   reason="bounds-to-static: shape refinement does not fold a constant size set on a bounded type")
@pytest.mark.parametrize("hlo, want", [
    # set-dimension-size(x, 5): the first 5 of the 8 elements are the array; the sum and
    # the size read back see 5.
    (SET_FROM_CONSTANT, lambda x: [np.float32(x[:5].sum()), np.int32(5)]),
    (RESHAPE_FROM_CONSTANTS, lambda x: [x.reshape(2, 4)]),
], ids=["set-dimension-size", "dynamic-reshape"])
def test_a_size_set_from_constants_is_refined_to_that_static_size(hlo, want):
    module = convert_then(hlo, ["bounds-to-static"])
    assert not _dynamic(module), str(module)
    x = np.arange(1, 9, dtype=np.float32)
    got = program_from_module(module)(x)
    for g, w in zip(got, want(x)):
        np.testing.assert_array_equal(g, w)


def test_a_static_module_is_left_as_it_is():
    hlo = "HloModule s\nENTRY main {\n  x = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(x)\n}\n"
    before = str(convert_then(hlo, []))
    assert str(convert_then(hlo, ["bounds-to-static"])) == before


def test_an_unbounded_dynamic_entry_is_refused_naming_the_file():
    from converter.mlir.serialize import load_module

    text = """module @m {
  func.func public @main(%arg0: tensor<?x3xf32>) -> tensor<?x3xf32> {
    %0 = stablehlo.negate %arg0 : tensor<?x3xf32>
    return %0 : tensor<?x3xf32>
  }
}
"""
    module = load_module(text.encode(), "m.mlir")
    with pytest.raises(PassError, match=r"m\.mlir: dimension 0 of tensor<\?x3xf32> is dynamic without a bound"):
        run_pipeline(module, ["bounds-to-static"], PassOptions(path="m.mlir"))
