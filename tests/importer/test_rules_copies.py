"""Copy import rules (rules/copies.py): copy between layouts and copy-start/copy-done are
the identity on values (NumPy; a plain layout-changing copy also through XLA)."""

from __future__ import annotations

import numpy as np

from tests.helpers import run_ours
from tests.importer.hlo_snippets import differential_by_output


def test_copy_between_layouts_is_the_identity():
    hlo = """HloModule copies
ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  a = f32[2,3]{0,1} copy(x)
  b = f32[2,3]{1,0} copy(a)
  ROOT r = (f32[2,3]{0,1}, f32[2,3]{1,0}) tuple(a, b)
}
"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    outs = differential_by_output(hlo, [x], ["to column-major", "back"], [True, True])
    for out in outs:
        np.testing.assert_array_equal(out, x)


def test_copy_start_and_copy_done_are_the_identity():
    hlo = """HloModule copy_start
ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  cs = (f32[2,3]{1,0:S(1)}, f32[2,3]{1,0}, u32[]) copy-start(x)
  y = f32[2,3]{1,0:S(1)} copy-done(cs)
  ROOT n = f32[2,3]{1,0} negate(y)
}
"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = run_ours(hlo, [x])
    np.testing.assert_array_equal(out, -x)
