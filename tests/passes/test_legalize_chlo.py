"""legalize-chlo (passes/legalize_chlo.py): CHLO ops left in a module become StableHLO
through MLIR's own legalization, computing what the op means (erf against math.erf)."""

from __future__ import annotations

import math

import numpy as np

from converter.mlir.serialize import load_module
from converter.runtime.program import program_from_module
from passes import run_pipeline

MODULE = """
module @m {
  func.func @main(%x: tensor<5xf32>) -> tensor<5xf32> {
    %y = chlo.erf %x : tensor<5xf32> -> tensor<5xf32>
    return %y : tensor<5xf32>
  }
}
"""


def test_chlo_ops_become_stablehlo_with_their_meaning():
    module = load_module(MODULE.encode(), "<test>")
    run_pipeline(module, ["legalize-chlo"])
    assert "chlo." not in str(module)
    x = np.array([-3, -0.5, 0, 0.25, 2], np.float32)
    (out,) = program_from_module(module)(x)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    # f32 erf by a rational approximation: a few ulps of f32.
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-7)
