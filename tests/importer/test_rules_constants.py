"""Constant import rules (rules/constants.py): every element type, negative zero, nested tuples."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tests.helpers import run_ours
from tests.importer.hlo_snippets import differential_by_output


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
