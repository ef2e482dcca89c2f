"""`__cudnn$blockScaledDot` in the exact form XLA's block_scaling_rewriter writes for cuDNN
(its test CudnnScaledDotTransforms: batch dim added, rhs rows padded to 128, scales padded to
[128k, 4k] and swizzled by reshape/transpose{0,1,4,3,2,5}/reshape, the result sliced back),
rewritten by the default pipeline and checked against NumPy: dequantize each operand with
its plain (unswizzled) block scales, then an f64 dot.

Tolerances: every dequantized value is exact in f32 and the products of two are exact in
f64; the GEMM sums ≤ 96 products in f32 (relative error ≲ 96·2⁻²⁴ of Σ|terms|) and rounds
once to f16 (2⁻¹¹) or stays f32: 2⁻¹⁰ relative for f16, 1e-5 for f32, absolute the same
times the largest |term| sum.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converter.common.errors import ConverterError
from tests.helpers import assert_close, convert_program

FP8, E8M0, FP4, E4M3 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn


def module(m: int, n: int, k: int, block: int, out: str, x_type: str = "f8e4m3fn", s_type: str = "f8e8m0fnu") -> str:
    """The rewriter's output for lhs [m,k], rhs [n,k] (m a multiple of 128, n ≤ 128)."""
    kb = k // block
    kbp = -(-kb // 4) * 4
    return f"""HloModule block_scaled
ENTRY main {{
  lhs = {x_type}[{m},{k}]{{1,0}} parameter(0)
  lhs_rs = {x_type}[1,{m},{k}]{{2,1,0}} reshape(lhs)
  rhs = {x_type}[{n},{k}]{{1,0}} parameter(1)
  rhs_rs = {x_type}[1,{n},{k}]{{2,1,0}} reshape(rhs)
  zx = {x_type}[] constant(0)
  rhs_pad = {x_type}[1,128,{k}]{{2,1,0}} pad(rhs_rs, zx), padding=0_0x0_{128 - n}x0_0
  ls = {s_type}[{m},{kb}]{{1,0}} parameter(2)
  ls_rs = {s_type}[1,{m},{kb}]{{2,1,0}} reshape(ls)
  zs = {s_type}[] constant(1)
  ls_pad = {s_type}[1,{m},{kbp}]{{2,1,0}} pad(ls_rs, zs), padding=0_0x0_0x0_{kbp - kb}
  ls_rs2 = {s_type}[1,{m // 128},4,32,{kbp // 4},4]{{5,4,3,2,1,0}} reshape(ls_pad)
  ls_tr = {s_type}[1,{m // 128},{kbp // 4},32,4,4]{{5,2,3,4,1,0}} transpose(ls_rs2), dimensions={{0,1,4,3,2,5}}
  ls_sw = {s_type}[1,{m},{kbp}]{{2,1,0}} reshape(ls_tr)
  rs = {s_type}[{n},{kb}]{{1,0}} parameter(3)
  rs_rs = {s_type}[1,{n},{kb}]{{2,1,0}} reshape(rs)
  rs_pad = {s_type}[1,128,{kbp}]{{2,1,0}} pad(rs_rs, zs), padding=0_0x0_{128 - n}x0_{kbp - kb}
  rs_rs2 = {s_type}[1,1,4,32,{kbp // 4},4]{{5,4,3,2,1,0}} reshape(rs_pad)
  rs_tr = {s_type}[1,1,{kbp // 4},32,4,4]{{5,2,3,4,1,0}} transpose(rs_rs2), dimensions={{0,1,4,3,2,5}}
  rs_sw = {s_type}[1,128,{kbp}]{{2,1,0}} reshape(rs_tr)
  call = ({out}[1,{m},128]{{2,1,0}}, u8[0]{{0}}) custom-call(lhs_rs, rhs_pad, ls_sw, rs_sw), custom_call_target="__cudnn$blockScaledDot"
  gte = {out}[1,{m},128]{{2,1,0}} get-tuple-element(call), index=0
  sl = {out}[1,{m},{n}]{{2,1,0}} slice(gte), slice={{[0:1], [0:{m}], [0:{n}]}}
  ROOT r = {out}[{m},{n}]{{1,0}} reshape(sl)
}}
"""


def numpy_reference(lhs, rhs, ls, rs, block):
    def dequantize(x, s):
        return x.astype(np.float64) * np.repeat(s.astype(np.float64), block, axis=1)
    a, b = dequantize(lhs, ls), dequantize(rhs, rs)
    return a @ b.T, np.abs(a) @ np.abs(b).T


def inputs(rng, m, n, k, block, x_dtype, s_dtype, s_range):
    lhs = rng.standard_normal((m, k)).astype(np.float32).astype(x_dtype)
    rhs = rng.standard_normal((n, k)).astype(np.float32).astype(x_dtype)
    ls = np.exp2(rng.integers(*s_range, (m, k // block))).astype(np.float32).astype(s_dtype)
    rs = np.exp2(rng.integers(*s_range, (n, k // block))).astype(np.float32).astype(s_dtype)
    return lhs, rhs, ls, rs


@pytest.mark.parametrize("m,n,k,out", [(128, 120, 96, "f16"), (256, 128, 128, "f32"), (128, 40, 224, "f32")],
                         ids=str)
def test_mxfp8_matches_numpy_dequantized_dot(m, n, k, out):
    """K/32 = 3, 4 and 7 scale blocks (padded to 4 and 8), rhs rows padded to 128, two
    row tiles of the swizzle (m = 256)."""
    rng = np.random.default_rng(m + n + k)
    lhs, rhs, ls, rs = inputs(rng, m, n, k, 32, FP8, E8M0, (-3, 4))
    ours = convert_program(module(m, n, k, 32, out))(lhs, rhs, ls, rs)[0]
    expected, magnitude = numpy_reference(lhs, rhs, ls, rs, 32)
    rtol = 2 ** -10 if out == "f16" else 1e-5
    np.testing.assert_array_less(np.abs(ours.astype(np.float64) - expected), rtol * (magnitude + 1e-30) + 1e-30)
    assert_close(ours, expected.astype(ours.dtype), rtol=rtol, atol=rtol * magnitude.max())


def test_nvfp4_matches_numpy_dequantized_dot():
    rng = np.random.default_rng(4)
    lhs, rhs, ls, rs = inputs(rng, 128, 64, 64, 16, FP4, E4M3, (-2, 3))
    ours = convert_program(module(128, 64, 64, 16, "f32", "f4e2m1fn", "f8e4m3fn"))(lhs, rhs, ls, rs)[0]
    expected, magnitude = numpy_reference(lhs, rhs, ls, rs, 16)
    assert_close(ours, expected.astype(np.float32), rtol=1e-5, atol=1e-5 * magnitude.max())


def test_unsupported_scale_type_is_a_located_error():
    text = module(128, 120, 96, 32, "f32").replace("f8e8m0fnu", "bf16")
    with pytest.raises(ConverterError, match=r"<test>:\d+:\d+: .*lhs of type f8e4m3fn with scales of type bf16"):
        convert_program(text)
