"""canonicalize (passes/canonicalize.py): MLIR's canonicalization removes what does not
change the results (values nothing uses) and leaves the numbers XLA
computes."""

from __future__ import annotations

import numpy as np

from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module
from passes import run_pipeline
from tests.helpers import run_xla

HLO = """HloModule identities
ENTRY main {
  x = f32[2,3] parameter(0)
  unused = f32[2,3] negate(x)
  also_unused = f32[2,3] exponential(unused)
  ROOT m = f32[2,3] multiply(x, x)
}
"""


def test_unused_values_go_and_the_numbers_stay_xlas():
    module = convert_text(HLO, "<test>", pipeline="none")
    assert "stablehlo.negate" in str(module) and "stablehlo.exponential" in str(module)
    run_pipeline(module, ["canonicalize"])
    assert "stablehlo.negate" not in str(module) and "stablehlo.exponential" not in str(module)
    x = np.array([[1.5, -2, 0.25], [3, 0, -0.5]], np.float32)
    (out,) = program_from_module(module)(x)
    np.testing.assert_array_equal(out, run_xla(HLO, [x])[0])  # x * x of these values: exact
