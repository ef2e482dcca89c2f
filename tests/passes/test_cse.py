"""cse (passes/cse.py): MLIR's common subexpression elimination computes identical ops
once; the numbers stay what XLA computes for the same HLO."""

from __future__ import annotations

import numpy as np

from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module
from passes import run_pipeline
from tests.helpers import run_xla

HLO = """HloModule twice
ENTRY main {
  x = f32[4] parameter(0)
  a = f32[4] multiply(x, x)
  b = f32[4] multiply(x, x)
  ROOT s = f32[4] add(a, b)
}
"""


def test_identical_ops_are_computed_once_with_xlas_numbers():
    module = convert_text(HLO, "<test>", pipeline="none")
    assert str(module).count("stablehlo.multiply") == 2
    run_pipeline(module, ["cse"])
    assert str(module).count("stablehlo.multiply") == 1
    x = np.array([1.5, -2, 0.25, 3], np.float32)
    (out,) = program_from_module(module)(x)
    # x*x + x*x of these values is exact in f32 on both paths.
    np.testing.assert_array_equal(out, run_xla(HLO, [x])[0])
