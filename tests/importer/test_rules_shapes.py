"""Data-movement import rules (converter/importer/rules/shapes.py) and constants
(rules/structure.py): iota, broadcast, reshape, dynamic-reshape, transpose, slice,
concatenate, pad, reverse, get-dimension-size, constant literals of every element type.

Each module is checked against XLA running the same HLO (differential) and against the
op's definition written in NumPy.  These ops only move values, so every comparison is
exact (rtol=atol=0): there is exactly one right answer."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converter.hlo import dtypes
from tests.helpers import run_ours
from tests.importer.hlo_snippets import differential_by_output


def _check(hlo: str, inputs, expected: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Ours == XLA and ours == NumPy, exactly, for each labelled output."""
    outs = differential_by_output(hlo, inputs, list(expected), [True] * len(expected))
    for out, (label, want) in zip(outs, expected.items()):
        assert out.dtype == want.dtype, f"{label}: dtype {out.dtype} != {want.dtype}"
        np.testing.assert_array_equal(out, want, err_msg=label)
    return outs


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
    _check(hlo, [], {f"iota_dimension={i}": grids[i].astype(dtype) for i in range(3)}
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
    _check(hlo, [s, v, m], {
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
    _check(hlo, [x, u], {
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
    _check(hlo, [x, np.int32(6), np.int32(4)], {"static": x.reshape(3, 8), "bounded": x.reshape(4, 6)})


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
    _check(hlo, [x], {"strided": x[1:9:3, 0:7:2], "whole": x, "empty": x[5:5], "corner": x[9:10, 6:7],
                      "stride past end": x[2:10:5, 1:6:2]})


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
    _check(hlo, [a, b, c, e], {"dim 1": np.concatenate([a, b, a, b], 1), "dim 0 with empty": np.concatenate(
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
    _check(hlo, [x, value], expected)


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
    _check(hlo, [x], {"{0}": x[::-1], "{0,2}": x[::-1, :, ::-1], "{}": x, "all": x[::-1, ::-1, ::-1]})


def test_get_dimension_size_of_static_dimensions():
    hlo = """HloModule get_dimension_size
ENTRY main {
  x = f32[3,5] parameter(0)
  a = s32[] get-dimension-size(x), dimensions={0}
  b = s32[] get-dimension-size(x), dimensions={1}
  ROOT r = (s32[], s32[]) tuple(a, b)
}
"""
    _check(hlo, [np.zeros((3, 5), np.float32)], {"dim 0": np.array(3, np.int32), "dim 1": np.array(5, np.int32)})


# ------------------------------------------------------------------------ constants
# (HLO literal, NumPy value): every element type, nested literals, inf/nan, extremes.
CONSTANTS = [
    ("f32[2,3] constant({{1, -2.5, inf}, {-inf, nan, 3.4028235e+38}})",
     np.array([[1, -2.5, np.inf], [-np.inf, np.nan, 3.4028235e38]], np.float32)),
    ("f64[3] constant({1e300, -nan, 5e-324})", np.array([1e300, np.nan, 5e-324])),
    ("bf16[3] constant({1.5, -inf, 3.140625})", np.array([1.5, -np.inf, 3.140625], ml_dtypes.bfloat16)),
    ("f16[3] constant({65504, -0.0001, nan})", np.array([65504, -0.0001, np.nan], np.float16)),
    ("f8e4m3fn[3] constant({448, -1.5, nan})", np.array([448, -1.5, np.nan], ml_dtypes.float8_e4m3fn)),
    ("f8e5m2[3] constant({57344, -1.5, inf})", np.array([57344, -1.5, np.inf], ml_dtypes.float8_e5m2)),
    ("f8e4m3fnuz[2] constant({240, -1.5})", np.array([240, -1.5], ml_dtypes.float8_e4m3fnuz)),
    ("f8e5m2fnuz[2] constant({57344, -0.5})", np.array([57344, -0.5], ml_dtypes.float8_e5m2fnuz)),
    ("f8e4m3b11fnuz[2] constant({30, -1.5})", np.array([30, -1.5], ml_dtypes.float8_e4m3b11fnuz)),
    ("f8e4m3[2] constant({240, -1.5})", np.array([240, -1.5], ml_dtypes.float8_e4m3)),
    ("f8e3m4[2] constant({15.5, -1.5})", np.array([15.5, -1.5], ml_dtypes.float8_e3m4)),
    ("f8e8m0fnu[2] constant({1, 0.5})", np.array([1, 0.5], ml_dtypes.float8_e8m0fnu)),
    ("f4e2m1fn[2] constant({1.5, -6})", np.array([1.5, -6], ml_dtypes.float4_e2m1fn)),
    ("c64[2] constant({(1, -2), (3.5, inf)})", np.array([1 - 2j, complex(3.5, np.inf)], np.complex64)),
    ("c128[2] constant({(1, -2), (-0.5, 1e300)})", np.array([1 - 2j, complex(-0.5, 1e300)], np.complex128)),
    ("c64[] constant((0.25, -nan))", np.array(complex(0.25, np.nan), np.complex64)),
    ("pred[4] constant({true, false, 1, 0})", np.array([True, False, True, False])),
    ("pred[] constant(true)", np.array(True)),
    ("u64[3] constant({18446744073709551615, 0, 9223372036854775809})",
     np.array([2**64 - 1, 0, 2**63 + 1], np.uint64)),
    ("s64[3] constant({-9223372036854775808, 9223372036854775807, 9007199254740993})",
     np.array([-(2**63), 2**63 - 1, 2**53 + 1], np.int64)),
    ("u32[2] constant({4294967295, 7})", np.array([2**32 - 1, 7], np.uint32)),
    ("s8[3] constant({-128, 127, 0})", np.array([-128, 127, 0], np.int8)),
    ("u8[2] constant({255, 0})", np.array([255, 0], np.uint8)),
    ("s16[2] constant({-32768, 32767})", np.array([-32768, 32767], np.int16)),
    ("u16[2] constant({65535, 1})", np.array([65535, 1], np.uint16)),
    ("s4[3] constant({-8, 7, 3})", np.array([-8, 7, 3], ml_dtypes.int4)),
    ("u4[2] constant({15, 0})", np.array([15, 0], ml_dtypes.uint4)),
    ("f32[] constant(-nan)", np.array(np.nan, np.float32)),
    ("f32[2,2,2] constant({ { {1,2},{3,4} }, { {5,6},{7,8} } })", np.arange(1, 9, dtype=np.float32).reshape(2, 2, 2)),
    ("f32[0] constant({})", np.zeros(0, np.float32)),
    ("s32[2,0] constant({ {}, {} })", np.zeros((2, 0), np.int32)),
    ("s32[2,2] constant({{7, 7}, {7, 7}})", np.full((2, 2), 7, np.int32)),
]


def test_constants_of_every_element_type():
    lines = "\n".join(f"  c{i} = {text}" for i, (text, _) in enumerate(CONSTANTS))
    shapes = ", ".join(text.split(" constant")[0] for text, _ in CONSTANTS)
    hlo = f"""HloModule constants
ENTRY main {{
{lines}
  ROOT r = ({shapes}) tuple({', '.join(f'c{i}' for i in range(len(CONSTANTS)))})
}}
"""
    outs = differential_by_output(hlo, [], [t for t, _ in CONSTANTS], [True] * len(CONSTANTS))
    for out, (text, want) in zip(outs, CONSTANTS):
        assert out.dtype == want.dtype and out.shape == want.shape, text
        # Bit patterns, so that NaN, -0.0 and the sub-byte types compare exactly.
        if out.dtype.kind == "c" or out.dtype.kind == "f" or out.dtype.kind == "V":
            np.testing.assert_array_equal(np.isnan(out.astype(np.complex128)), np.isnan(want.astype(np.complex128)),
                                          err_msg=text)
            np.testing.assert_array_equal(np.nan_to_num(out.astype(np.complex128)),
                                          np.nan_to_num(want.astype(np.complex128)), err_msg=text)
        else:
            np.testing.assert_array_equal(out, want, err_msg=text)


def test_negative_zero_constant_keeps_its_sign():
    """XLA prints -0.0 as `-0`; its own parser reads that as the integer 0 and loses the
    sign, so XLA is no oracle here: the literal's meaning (and NumPy) is.  A division
    by the constant shows the sign."""
    hlo = """HloModule negative_zero
ENTRY main {
  z = f32[2] constant({-0, 0})
  one = f32[2] constant({1, 1})
  ROOT q = f32[2] divide(one, z)
}
"""
    (ours,) = run_ours(hlo, [])
    np.testing.assert_array_equal(ours, np.array([-np.inf, np.inf], np.float32))


def test_tuple_constants_nested():
    hlo = """HloModule tuple_constants
ENTRY main {
  t = (f32[2], (s32[], pred[2]), ()) constant(({1.5, -2}, (7, {true, false}), ()))
  a = f32[2] get-tuple-element(t), index=0
  inner = (s32[], pred[2]) get-tuple-element(t), index=1
  b = s32[] get-tuple-element(inner), index=0
  c = pred[2] get-tuple-element(inner), index=1
  ROOT r = (f32[2], s32[], pred[2]) tuple(a, b, c)
}
"""
    # XLA's HLO→MHLO import has no tuple constants ("Unsupported type: TUPLE"): NumPy only.
    outs = run_ours(hlo, [])
    for out, want in zip(outs, [np.array([1.5, -2], np.float32), np.array(7, np.int32), np.array([True, False])]):
        assert out.dtype == want.dtype
        np.testing.assert_array_equal(out, want)
