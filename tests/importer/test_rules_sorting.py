"""Sorting import rules (rules/sorting.py): variadic stable sort with NaN, topk with ties."""

from __future__ import annotations

import numpy as np
import pytest

from tests.importer.hlo_snippets import differential_by_output


# -------------------------------------------------------------------------- sort
def test_sort_variadic_stable_descending_and_nan():
    """Key/value sorts: ascending with NaN last (total-order comparator, as jnp.sort),
    descending with GT, and a stable sort whose comparator only looks at the key, so
    equal keys keep their input order."""
    hlo = """HloModule sort
lt_total {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
gt {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GT
}
lt_key {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  i = f32[] parameter(2)
  j = f32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=LT
}
ENTRY main {
  x = f32[2,8] parameter(0)
  k = s32[2,8] parameter(1)
  idx = s32[2,8] iota(), iota_dimension=1
  kv = (f32[2,8], s32[2,8]) sort(x, idx), dimensions={1}, to_apply=lt_total
  d = s32[2,8] sort(k), dimensions={1}, to_apply=gt
  st = (s32[2,8], f32[2,8]) sort(k, x), dimensions={1}, is_stable=true, to_apply=lt_key
  d0 = s32[2,8] sort(k), dimensions={0}, to_apply=gt
  a = f32[2,8] get-tuple-element(kv), index=0
  b = s32[2,8] get-tuple-element(kv), index=1
  c = s32[2,8] get-tuple-element(st), index=0
  e = f32[2,8] get-tuple-element(st), index=1
  ROOT r = (f32[2,8], s32[2,8], s32[2,8], s32[2,8], f32[2,8], s32[2,8]) tuple(a, b, d, c, e, d0)
}
"""
    x = np.array([[3, np.nan, -1, 0, -0.0, 2, np.inf, -np.inf], [5, 4, 3, 2, 1, 0, -1, -2]], np.float32)
    k = np.array([[2, 1, 2, 1, 3, 1, 0, 2], [0, 0, 0, 0, 1, 1, 1, 1]], np.int32)
    outs = differential_by_output(hlo, [x, k], ["sorted keys", "sorted indices", "descending", "stable keys",
                                                "stable values", "along dim 0"], [True] * 6)
    order = np.argsort(x, axis=1, kind="stable")  # NumPy sorts NaN last; -0.0 before 0.0 only in total order
    expected_order = order.copy()
    expected_order[0] = [7, 2, 4, 3, 5, 0, 6, 1]  # -inf, -1, -0.0, 0, 2, 3, inf, nan
    stable = np.argsort(k, axis=1, kind="stable")
    for out, want in zip(outs, [np.take_along_axis(x, expected_order, 1), expected_order, -np.sort(-k, axis=1),
                                np.take_along_axis(k, stable, 1), np.take_along_axis(x, stable, 1),
                                -np.sort(-k, axis=0)]):
        np.testing.assert_array_equal(out, want)


# -------------------------------------------------------------------------- topk
@pytest.mark.parametrize("element_type", ["f32", "bf16", "s32"])
def test_topk_values_and_indices_with_ties_and_nan(element_type):
    """TopK: the k largest along the last dimension, ties by lower index; NaN ranks
    above +inf (XLA's topk sorts floats in total order)."""
    import ml_dtypes

    t = element_type
    hlo = f"""HloModule topk
ENTRY main {{
  x = {t}[3,7] parameter(0)
  ROOT r = ({t}[3,3], s32[3,3]) topk(x), k=3, largest=true
}}
"""
    if t == "s32":
        x = np.array([[1, 5, 5, -2, 7, 5, 0], [2**31 - 1, -(2**31), 0, 0, 0, 1, 1], [3, 3, 3, 3, 3, 3, 3]], np.int32)
    else:
        x = np.array([[1, 5, 5, -2, np.inf, 5, 0], [np.nan, -np.inf, 0, -0.0, 0, 1, 1],
                      [3, 3, 3, 3, 3, 3, 3]], np.float32).astype(np.float32 if t == "f32" else ml_dtypes.bfloat16)
    values, indices = differential_by_output(hlo, [x], ["values", "indices"], [True, True])
    if t == "s32":
        expected_indices = [[4, 1, 2], [0, 5, 6], [0, 1, 2]]
    else:
        expected_indices = [[4, 1, 2], [0, 5, 6], [0, 1, 2]]
    np.testing.assert_array_equal(indices, np.array(expected_indices, np.int32))
    np.testing.assert_array_equal(values.astype(np.float64), np.take_along_axis(x, indices, 1).astype(np.float64))
