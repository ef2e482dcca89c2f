"""symbol-dce (passes/symbol_dce.py): private functions nothing calls are removed; what
@main computes does not change (NumPy)."""

from __future__ import annotations

import numpy as np

from converter.mlir.serialize import load_module
from converter.runtime.program import program_from_module
from passes import run_pipeline

MODULE = """
module @m {
  func.func private @unused(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = stablehlo.negate %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func private @used(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = stablehlo.multiply %x, %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = func.call @used(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
"""


def test_uncalled_private_functions_are_removed():
    module = load_module(MODULE.encode(), "<test>")
    run_pipeline(module, ["symbol-dce"])
    text = str(module)
    assert "@unused" not in text and "@used" in text
    x = np.array([1.5, -2, 0.25, 3], np.float32)
    (out,) = program_from_module(module)(x)
    np.testing.assert_array_equal(out, x * x)
