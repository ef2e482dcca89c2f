"""Indexing import rules (rules/indexing.py): slice, dynamic-slice, dynamic-update-slice,
gather and scatter.

Checked against XLA running the same HLO and against NumPy written from XLA's
definitions: start indices of (dynamic-)slices clamp so the slice stays in bounds;
gather clamps each start index the same way; scatter skips an update window that would
leave the operand.  Moves are exact; scatter-add of floats may add duplicates in another
order, so float sums get the dtype tolerance."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import assert_close, run_ours
from tests.importer.hlo_snippets import check_exact, differential_by_output

EXACT = {"rtol": 0.0, "atol": 0.0}


def _clamp_start(start: int, size: int, extent: int) -> int:
    return min(max(start, 0), extent - size)


# ----------------------------------------------------------- dynamic slices
@pytest.mark.parametrize("index_type", ["s32", "s64", "u32", "s8"])
def test_dynamic_slice_and_update_clamp_out_of_range_starts(index_type):
    hlo = f"""HloModule dynamic_slicing
ENTRY main {{
  x = f32[6,5] parameter(0)
  u = f32[2,3] parameter(1)
  i = {index_type}[] parameter(2)
  j = {index_type}[] parameter(3)
  s = f32[2,3] dynamic-slice(x, i, j), dynamic_slice_sizes={{2,3}}
  w = f32[6,5] dynamic-slice(x, i, j), dynamic_slice_sizes={{6,5}}
  d = f32[6,5] dynamic-update-slice(x, u, i, j)
  ROOT r = (f32[2,3], f32[6,5], f32[6,5]) tuple(s, w, d)
}}
"""
    x = np.arange(30, dtype=np.float32).reshape(6, 5)
    u = -np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    dtype = np.dtype({"s32": np.int32, "s64": np.int64, "u32": np.uint32, "s8": np.int8}[index_type])
    starts = [(0, 0), (4, 2), (5, 4), (100, 100), (3, 1)]
    if dtype.kind == "i":
        starts += [(-1, -7), (-100, 2)]
    else:
        starts += [(2**32 - 1, 1)]  # a huge unsigned start clamps to the last position
    for i, j in starts:
        ci, cj = _clamp_start(i, 2, 6), _clamp_start(j, 3, 5)
        updated = x.copy()
        updated[ci:ci + 2, cj:cj + 3] = u
        outs = differential_by_output(hlo, [x, u, np.array(i).astype(dtype), np.array(j).astype(dtype)],
                                      ["slice", "whole slice", "update"], [True] * 3)
        for out, want in zip(outs, [x[ci:ci + 2, cj:cj + 3], x, updated]):
            np.testing.assert_array_equal(out, want, err_msg=f"starts ({i}, {j})")


def test_dynamic_slice_with_one_index_vector_operand():
    """Old dumps pass the start indices as one rank-1 operand; the rule splits it.  XLA
    today only parses the scalar form, so NumPy is the oracle."""
    hlo = """HloModule dynamic_slice_vector
ENTRY main {
  x = s32[4,4] parameter(0)
  v = s32[2] parameter(1)
  ROOT s = s32[2,2] dynamic-slice(x, v), dynamic_slice_sizes={2,2}
}
"""
    x = np.arange(16, dtype=np.int32).reshape(4, 4)
    (out,) = run_ours(hlo, [x, np.array([1, 9], np.int32)])
    np.testing.assert_array_equal(out, x[1:3, 2:4])


# ---------------------------------------------------------------------- gather
def test_gather_rows_and_elements_with_clamped_indices():
    """Row gather (jnp.take), element gather (x[i, j]) and a window gather; indices past
    either end clamp to the last valid start, as XLA defines gather."""
    hlo = """HloModule gather
ENTRY main {
  x = f32[5,4] parameter(0)
  rows = s32[6] parameter(1)
  points = s32[3,2] parameter(2)
  starts = s32[2,2] parameter(3)
  g_rows = f32[6,4] gather(x, rows), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}
  g_points = f32[3] gather(x, points), offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}
  g_windows = f32[2,2,3] gather(x, starts), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={1,0}, index_vector_dim=1, slice_sizes={2,3}
  ROOT r = (f32[6,4], f32[3], f32[2,2,3]) tuple(g_rows, g_points, g_windows)
}
"""
    x = np.arange(20, dtype=np.float32).reshape(5, 4) * 1.5
    rows = np.array([0, 4, 2, -1, 9, 2], np.int32)
    points = np.array([[1, 1], [4, 3], [7, -2]], np.int32)
    # start_index_map={1,0}: index component 0 is the column, 1 the row.
    starts = np.array([[0, 0], [5, 5]], np.int32)
    outs = differential_by_output(hlo, [x, rows, points, starts], ["rows", "points", "windows"], [True] * 3)
    clamped_rows = np.clip(rows, 0, 4)
    expected_windows = []
    for col, row in starts:
        r0, c0 = _clamp_start(row, 2, 5), _clamp_start(col, 3, 4)
        expected_windows.append(x[r0:r0 + 2, c0:c0 + 3])
    for out, want in zip(outs, [x[clamped_rows], x[np.clip(points[:, 0], 0, 4), np.clip(points[:, 1], 0, 3)],
                                np.stack(expected_windows)]):
        np.testing.assert_array_equal(out, want)


def test_gather_with_batching_dims_and_index_vector_dim_last():
    """operand_batching_dims pair operand dim 0 with index dim 0 (take_along_axis per
    batch); the index vector dim may be the trailing implicit one."""
    hlo = """HloModule gather_batching
ENTRY main {
  x = s32[3,5] parameter(0)
  idx = s32[3,4] parameter(1)
  ROOT g = s32[3,4] gather(x, idx), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1}
}
"""
    x = np.arange(15, dtype=np.int32).reshape(3, 5) * 10
    idx = np.array([[0, 4, 4, 1], [2, 2, 7, 0], [3, -1, 1, 0]], np.int32)
    (out,) = differential_by_output(hlo, [x, idx], ["batched gather"], [True])
    np.testing.assert_array_equal(out, np.take_along_axis(x, np.clip(idx, 0, 4), axis=1))


# --------------------------------------------------------------------- scatter
SCATTER_COMBINERS = {
    "add": ("add", np.add), "max": ("maximum", np.maximum), "min": ("minimum", np.minimum),
    "mul": ("multiply", np.multiply),
}


@pytest.mark.parametrize("combiner", sorted(SCATTER_COMBINERS))
def test_scatter_rows_with_duplicates_unsorted_and_out_of_bounds_indices(combiner):
    """Rows scattered with a combiner: duplicate indices combine (in some order, so only
    commutative combiners here), and an index whose window would leave the operand
    (negative, or past the end) is skipped, not clamped."""
    opcode, numpy_op = SCATTER_COMBINERS[combiner]
    hlo = f"""HloModule scatter_{combiner}
combine {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] {opcode}(a, b)
}}
ENTRY main {{
  x = f32[5,3] parameter(0)
  idx = s32[7,1] parameter(1)
  upd = f32[7,3] parameter(2)
  ROOT s = f32[5,3] scatter(x, idx, upd), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=combine
}}
"""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    idx = np.array([[3], [1], [3], [-1], [5], [0], [3]], np.int32)
    upd = rng.standard_normal((7, 3)).astype(np.float32)
    (out,) = differential_by_output(hlo, [x, idx, upd], [combiner])
    expected = x.copy()
    for i, row in zip(idx[:, 0], upd):
        if 0 <= i < 5:
            expected[i] = numpy_op(expected[i], row)
    # Float add/multiply of duplicates may associate differently: dtype tolerance.
    assert_close(out, expected)


def test_scatter_overwrite_and_window_that_would_leave_the_operand():
    """A combiner returning the update overwrites (unique indices: the result is
    defined); a 2x2 window starting at row 3 of 4 rows would leave the operand and is
    skipped entirely, unlike gather which clamps."""
    hlo = """HloModule scatter_overwrite
overwrite {
  a = s32[] parameter(0)
  ROOT b = s32[] parameter(1)
}
ENTRY main {
  x = s32[4,4] parameter(0)
  idx = s32[3,2] parameter(1)
  upd = s32[3,2,2] parameter(2)
  ROOT s = s32[4,4] scatter(x, idx, upd), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, unique_indices=true, to_apply=overwrite
}
"""
    x = np.zeros((4, 4), np.int32)
    idx = np.array([[0, 0], [3, 1], [2, 2]], np.int32)
    upd = np.arange(1, 13, dtype=np.int32).reshape(3, 2, 2)
    (out,) = differential_by_output(hlo, [x, idx, upd], ["overwrite"], [True])
    expected = x.copy()
    expected[0:2, 0:2] = upd[0]
    expected[2:4, 2:4] = upd[2]
    np.testing.assert_array_equal(out, expected)


def test_scatter_of_unit_windows_over_indexed_dims():
    """XLA's CPU select-and-scatter expansion writes one-element update windows over
    every indexed dimension (update_window_dims={1,2,3}, updates [n,1,1,1]); the importer
    writes the same scatter with those dims inserted (updates [n]), the form IREE also
    compiles.  Same results as XLA on the original, out-of-bounds windows skipped."""
    hlo = """HloModule scatter_unit_windows
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY main {
  x = f32[3,4,2] parameter(0)
  idx = s32[6,3] parameter(1)
  upd = f32[6,1,1,1] parameter(2)
  ROOT s = f32[3,4,2] scatter(x, idx, upd), update_window_dims={1,2,3}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1,2}, index_vector_dim=1, to_apply=add
}
"""
    from converter.runtime.convert import convert_text

    module = str(convert_text(hlo, pipeline="none"))
    assert "inserted_window_dims = [0, 1, 2]" in module and "tensor<6xf32>" in module
    x = np.zeros((3, 4, 2), np.float32)
    idx = np.array([[0, 0, 0], [2, 3, 1], [0, 0, 0], [1, 2, 1], [3, 0, 0], [1, -1, 0]], np.int32)
    upd = np.arange(1, 7, dtype=np.float32).reshape(6, 1, 1, 1)
    (out,) = differential_by_output(hlo, [x, idx, upd], ["add"], [True])
    expected = x.copy()
    for (i, j, k), u in zip(idx, upd.ravel()):
        if 0 <= i < 3 and 0 <= j < 4 and 0 <= k < 2:
            expected[i, j, k] += u
    assert_close(out, expected)


def test_variadic_scatter_with_a_two_operand_combiner():
    """Two operands scattered together; the combiner keeps the (value, index) pair with
    the larger value, the lower index on ties: an argmax scatter."""
    hlo = """HloModule scatter_variadic
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT
  eq = pred[] compare(v0, v1), direction=EQ
  lt = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(gt, tie)
  v = f32[] select(keep, v0, v1)
  i = s32[] select(keep, i0, i1)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY main {
  x = f32[4] parameter(0)
  xi = s32[4] parameter(1)
  idx = s32[6,1] parameter(2)
  upd = f32[6] parameter(3)
  updi = s32[6] parameter(4)
  ROOT s = (f32[4], s32[4]) scatter(x, xi, idx, upd, updi), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=argmax
}
"""
    x = np.full(4, -np.inf, np.float32)
    xi = np.full(4, -1, np.int32)
    idx = np.array([[2], [0], [2], [9], [0], [2]], np.int32)
    upd = np.array([1.0, 5.0, 3.0, 100.0, 5.0, 3.0], np.float32)
    updi = np.arange(6, dtype=np.int32)
    values, indices = differential_by_output(hlo, [x, xi, idx, upd, updi], ["values", "indices"], [True, True])
    np.testing.assert_array_equal(values, np.array([5.0, -np.inf, 3.0, -np.inf], np.float32))
    np.testing.assert_array_equal(indices, np.array([1, -1, 2, -1], np.int32))


def test_scatter_with_batching_dims():
    """input_batching_dims pair operand dim 0 with index dim 0: a per-batch scatter-add
    (put_along_axis with accumulation)."""
    hlo = """HloModule scatter_batching
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] add(a, b)
}
ENTRY main {
  x = s32[2,5] parameter(0)
  idx = s32[2,3] parameter(1)
  upd = s32[2,3] parameter(2)
  ROOT s = s32[2,5] scatter(x, idx, upd), update_window_dims={}, inserted_window_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, scatter_dims_to_operand_dims={1}, index_vector_dim=2, to_apply=add
}
"""
    x = np.zeros((2, 5), np.int32)
    idx = np.array([[0, 4, 0], [2, 7, 1]], np.int32)
    upd = np.array([[1, 2, 3], [10, 20, 30]], np.int32)
    (out,) = differential_by_output(hlo, [x, idx, upd], ["batched scatter"], [True])
    expected = x.copy()
    for b in range(2):
        for i, u in zip(idx[b], upd[b]):
            if 0 <= i < 5:
                expected[b, i] += u
    np.testing.assert_array_equal(out, expected)


# ---------------------------------------------------------------------------- slice
def test_slice_with_strides_and_empty_ranges():
    hlo = """HloModule slices
ENTRY main {
  x = f32[10,7] parameter(0)
  a = f32[3,4] slice(x), slice={[1:9:3], [0:7:2]}
  b = f32[10,7] slice(x), slice={[0:10], [0:7]}
  c = f32[0,7] slice(x), slice={[5:5], [0:7]}
  d = f32[1,1] slice(x), slice={[9:10], [6:7]}
  e = f32[2,3] slice(x), slice={[2:10:5], [1:6:2]}
  ROOT r = (f32[3,4], f32[10,7], f32[0,7], f32[1,1], f32[2,3]) tuple(a, b, c, d, e)
}
"""
    x = np.arange(70, dtype=np.float32).reshape(10, 7) / 4
    check_exact(hlo, [x], {"strided": x[1:9:3, 0:7:2], "whole": x, "empty": x[5:5], "corner": x[9:10, 6:7],
                      "stride past end": x[2:10:5, 1:6:2]})
