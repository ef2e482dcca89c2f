"""A first differential check: a few opcodes through our importer and through XLA."""

import numpy as np

from tests.helpers import differential, random_array


def test_elementwise_reduce_and_dot_match_xla():
    hlo = """HloModule smoke
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4,8]{1,0} parameter(0)
  w = f32[8,3]{1,0} parameter(1)
  d = f32[4,3]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[4,3]{1,0} tanh(d)
  z = f32[] constant(0)
  r = f32[4]{0} reduce(t, z), dimensions={1}, to_apply=add
  ROOT out = (f32[4,3]{1,0}, f32[4]{0}) tuple(t, r)
}
"""
    rng = np.random.default_rng(0)
    differential(hlo, [random_array(rng, (4, 8), np.float32), random_array(rng, (8, 3), np.float32)])
