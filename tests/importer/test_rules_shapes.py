"""Data-movement import rules (rules/shapes.py): iota, broadcast, reshape, dynamic-reshape,
transpose, concatenate, pad, reverse, get-dimension-size.

Each module is checked against XLA running the same HLO (differential) and against the
op's definition written in NumPy.  These ops only move values, so every comparison is
exact (rtol=atol=0): there is exactly one right answer."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converter.hlo import dtypes
from tests.importer.hlo_snippets import check_exact


# ----------------------------------------------------------------------------- iota
@pytest.mark.parametrize("element_type", ["s32", "f32", "u8", "bf16", "s64", "f16"])
def test_iota_along_each_dimension(element_type):
    t = element_type
    hlo = f"""HloModule iota
ENTRY main {{
  a = {t}[2,3,4] iota(), iota_dimension=0
  b = {t}[2,3,4] iota(), iota_dimension=1
  c = {t}[2,3,4] iota(), iota_dimension=2
  d = {t}[5] iota(), iota_dimension=0
  ROOT r = ({t}[2,3,4], {t}[2,3,4], {t}[2,3,4], {t}[5]) tuple(a, b, c, d)
}}
"""
    dtype = dtypes.numpy_dtype(t)
    grids = np.indices((2, 3, 4))
    check_exact(hlo, [], {f"iota_dimension={i}": grids[i].astype(dtype) for i in range(3)}
           | {"rank 1": np.arange(5).astype(dtype)})


# ------------------------------------------------------------------------ broadcast
def test_broadcast_with_every_dimension_mapping():
    hlo = """HloModule broadcast
ENTRY main {
  s = f32[] parameter(0)
  v = f32[3] parameter(1)
  m = f32[2,3] parameter(2)
  a = f32[2,3] broadcast(s), dimensions={}
  b = f32[2,3] broadcast(v), dimensions={1}
  c = f32[3,5] broadcast(v), dimensions={0}
  d = f32[4,2,5,3] broadcast(m), dimensions={1,3}
  e = f32[3,4,2] broadcast(m), dimensions={2,0}
  ROOT r = (f32[2,3], f32[2,3], f32[3,5], f32[4,2,5,3], f32[3,4,2]) tuple(a, b, c, d, e)
}
"""
    s = np.float32(2.5)
    v = np.array([1, -2, 3], np.float32)
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    check_exact(hlo, [s, v, m], {
        "scalar": np.full((2, 3), s, np.float32),
        "vector to dim 1": np.broadcast_to(v, (2, 3)).copy(),
        "vector to dim 0": np.broadcast_to(v[:, None], (3, 5)).copy(),
        "matrix to dims 1,3": np.broadcast_to(m[None, :, None, :], (4, 2, 5, 3)).copy(),
        # dimensions={2,0}: operand dim 0 → result dim 2, operand dim 1 → result dim 0.
        "transposing broadcast": np.broadcast_to(m.T[:, None, :], (3, 4, 2)).copy(),
    })


# ------------------------------------------------------------- reshape and transpose
def test_reshape_and_transpose():
    hlo = """HloModule reshape_transpose
ENTRY main {
  x = s32[2,3,4] parameter(0)
  u = s32[1,1] parameter(1)
  a = s32[6,4] reshape(x)
  b = s32[24] reshape(x)
  c = s32[4,1,6] reshape(x)
  d = s32[] reshape(u)
  e = s32[4,2,3] transpose(x), dimensions={2,0,1}
  f = s32[3,2,4] transpose(x), dimensions={1,0,2}
  g = s32[2,3,4] transpose(x), dimensions={0,1,2}
  y = s32[2,3,4,5] iota(), iota_dimension=3
  z = s32[2,3,4,5] add(y, y)
  h = s32[5,3,2,4] transpose(z), dimensions={3,1,0,2}
  ROOT r = (s32[6,4], s32[24], s32[4,1,6], s32[], s32[4,2,3], s32[3,2,4], s32[2,3,4], s32[5,3,2,4]) tuple(a, b, c, d, e, f, g, h)
}
"""
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4) * 7 - 50
    u = np.array([[9]], np.int32)
    z = np.broadcast_to(np.arange(5, dtype=np.int32) * 2, (2, 3, 4, 5))
    check_exact(hlo, [x, u], {
        "reshape 6x4": x.reshape(6, 4), "reshape 24": x.reshape(24), "reshape 4x1x6": x.reshape(4, 1, 6),
        "reshape to scalar": np.int32(9).reshape(()), "transpose 2,0,1": x.transpose(2, 0, 1),
        "transpose 1,0,2": x.transpose(1, 0, 2), "identity transpose": x,
        "rank-4 transpose": np.ascontiguousarray(z.transpose(3, 1, 0, 2)),
    })


def test_dynamic_reshape_static_and_bounded_results():
    """dynamic-reshape reads the result's sizes from operands.  With a bounded result
    (`<=4`) the runtime returns the bounded buffer; the elements past the dynamic size
    are undefined, so only the leading sizes are compared."""
    hlo = """HloModule dynamic_reshape
ENTRY main {
  x = f32[24] parameter(0)
  a = s32[] parameter(1)
  b = s32[] parameter(2)
  s = f32[3,8] dynamic-reshape(x, a, b)
  m = f32[4,6] reshape(x)
  d = f32[<=4,<=6] dynamic-reshape(m, b, a)
  ROOT r = (f32[3,8], f32[<=4,<=6]) tuple(s, d)
}
"""
    x = np.arange(24, dtype=np.float32) - 3.5
    check_exact(hlo, [x, np.int32(6), np.int32(4)], {"static": x.reshape(3, 8), "bounded": x.reshape(4, 6)})


# ---------------------------------------------------------------------- concatenate
def test_concatenate_along_each_dimension():
    hlo = """HloModule concatenate
ENTRY main {
  a = bf16[2,3] parameter(0)
  b = bf16[2,1] parameter(1)
  c = bf16[4,3] parameter(2)
  e = bf16[0,3] parameter(3)
  x = bf16[2,8] concatenate(a, b, a, b), dimensions={1}
  y = bf16[8,3] concatenate(a, c, e, a), dimensions={0}
  z = bf16[2,3] concatenate(a), dimensions={0}
  ROOT r = (bf16[2,8], bf16[8,3], bf16[2,3]) tuple(x, y, z)
}
"""
    bf = ml_dtypes.bfloat16
    a = np.arange(6).reshape(2, 3).astype(bf)
    b = np.array([[-1], [-2]]).astype(bf)
    c = (np.arange(12).reshape(4, 3) + 100).astype(bf)
    e = np.zeros((0, 3), bf)
    check_exact(hlo, [a, b, c, e], {"dim 1": np.concatenate([a, b, a, b], 1), "dim 0 with empty": np.concatenate(
        [a, c, e, a], 0), "single operand": a})


# ------------------------------------------------------------------------------ pad
def _numpy_pad(x: np.ndarray, value, config: list[tuple[int, int, int]]) -> np.ndarray:
    """HLO pad: interior padding between elements, then edge padding, where a negative
    edge removes elements."""
    out = x
    for axis, (low, high, interior) in enumerate(config):
        n = out.shape[axis]
        size = n + max(n - 1, 0) * interior
        shape = list(out.shape)
        shape[axis] = size
        spread = np.full(shape, value, x.dtype)
        index = [slice(None)] * out.ndim
        index[axis] = slice(0, size, interior + 1)
        spread[tuple(index)] = out
        pad_width = [(0, 0)] * out.ndim
        pad_width[axis] = (max(low, 0), max(high, 0))
        spread = np.pad(spread, pad_width, constant_values=value)
        index = [slice(None)] * out.ndim
        index[axis] = slice(-min(low, 0), spread.shape[axis] + min(high, 0))
        out = spread[tuple(index)]
    return out


@pytest.mark.parametrize("element_type", ["f32", "s32", "pred"])
def test_pad_with_negative_edges_and_interior(element_type):
    t = element_type
    configs = {
        "edges": ([(1, 2, 0), (0, 3, 0)], "1_2x0_3"),
        "interior": ([(0, 0, 2), (1, 1, 1)], "0_0_2x1_1_1"),
        "negative": ([(-1, 0, 0), (0, -2, 0)], "-1_0x0_-2"),
        "negative and interior": ([(-2, 1, 1), (-1, -1, 3)], "-2_1_1x-1_-1_3"),
        "all removed": ([(-3, 0, 0), (0, 0, 0)], "-3_0x0_0"),
    }
    x = (np.arange(12).reshape(3, 4) % 3 == 0) if t == "pred" else (np.arange(12).reshape(3, 4) - 5).astype(
        dtypes.numpy_dtype(t))
    value = np.array(True if t == "pred" else 9).astype(x.dtype)
    expected = {label: _numpy_pad(x, value, config) for label, (config, _) in configs.items()}
    lines = "\n".join(
        f"  p{i} = {t}[{','.join(map(str, expected[label].shape))}] pad(x, v), padding={text}"
        for i, (label, (_, text)) in enumerate(configs.items()))
    shapes = ", ".join(f"{t}[{','.join(map(str, e.shape))}]" for e in expected.values())
    hlo = f"""HloModule pad
ENTRY main {{
  x = {t}[3,4] parameter(0)
  v = {t}[] parameter(1)
{lines}
  ROOT r = ({shapes}) tuple({', '.join(f'p{i}' for i in range(len(configs)))})
}}
"""
    check_exact(hlo, [x, value], expected)


# -------------------------------------------------------------------------- reverse
def test_reverse_any_set_of_dimensions():
    hlo = """HloModule reverse
ENTRY main {
  x = u16[2,3,4] parameter(0)
  a = u16[2,3,4] reverse(x), dimensions={0}
  b = u16[2,3,4] reverse(x), dimensions={0,2}
  c = u16[2,3,4] reverse(x), dimensions={}
  d = u16[2,3,4] reverse(x), dimensions={2,1,0}
  ROOT r = (u16[2,3,4], u16[2,3,4], u16[2,3,4], u16[2,3,4]) tuple(a, b, c, d)
}
"""
    x = np.arange(24, dtype=np.uint16).reshape(2, 3, 4) * 1000
    check_exact(hlo, [x], {"{0}": x[::-1], "{0,2}": x[::-1, :, ::-1], "{}": x, "all": x[::-1, ::-1, ::-1]})


def test_get_dimension_size_of_static_dimensions():
    hlo = """HloModule get_dimension_size
ENTRY main {
  x = f32[3,5] parameter(0)
  a = s32[] get-dimension-size(x), dimensions={0}
  b = s32[] get-dimension-size(x), dimensions={1}
  ROOT r = (s32[], s32[]) tuple(a, b)
}
"""
    check_exact(hlo, [np.zeros((3, 5), np.float32)], {"dim 0": np.array(3, np.int32), "dim 1": np.array(5, np.int32)})
