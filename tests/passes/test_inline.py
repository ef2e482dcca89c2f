"""inline (passes/inline.py): every func.call (fusions kept as functions by
keep_fusions) inlined and the private functions dropped, with the same numbers (NumPy:
XLA's CPU compiler refuses pre-fused HLO)."""

from __future__ import annotations

import numpy as np

from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module
from passes import run_pipeline

HLO = """HloModule fused
fused_square_plus {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  m = f32[4] multiply(p0, p0)
  ROOT a = f32[4] add(m, p1)
}
ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  ROOT f = f32[4] fusion(a, b), kind=kLoop, calls=fused_square_plus
}
"""


def test_calls_are_inlined_and_private_functions_dropped():
    module = convert_text(HLO, "<test>", pipeline="none", keep_fusions=True)
    assert "call @fused_square_plus" in str(module)
    run_pipeline(module, ["inline"])
    text = str(module)
    assert "call @" not in text and "private" not in text
    a = np.array([1, -2, 0.5, 3], np.float32)
    b = np.array([0.25, 4, -1, 2], np.float32)
    (out,) = program_from_module(module)(a, b)
    np.testing.assert_array_equal(out, a * a + b)  # exact for these values
