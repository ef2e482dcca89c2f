"""scaled-dot (converter/importer/rules/linalg.py) against a NumPy oracle: dequantize each
operand block by block with its scale (ml_dtypes decodes the fp8/fp4 and e8m0 values),
then the dot in float64.  The converter dequantizes exactly (power-of-two scales, few-bit
values) and accumulates in f32: results agree with the float64 oracle to f32 rounding
of a K-term sum (rtol 1e-5)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converter.common.errors import ConverterError
from tests.helpers import run_ours

RNG = np.random.default_rng(0)


def _values(shape, dtype) -> np.ndarray:
    return RNG.uniform(-6, 6, shape).astype(np.float32).astype(dtype)


def _scales(shape, dtype=ml_dtypes.float8_e8m0fnu) -> np.ndarray:
    # Powers of two from 2^-4 to 2^4, as MX scales are.
    return (2.0 ** RNG.integers(-4, 5, shape)).astype(np.float32).astype(dtype)


def _dequantize(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    wide = scale.astype(np.float64)
    for axis, (d, s) in enumerate(zip(x.shape, scale.shape)):
        wide = np.repeat(wide, d // s, axis=axis)
    return x.astype(np.float64) * wide


def _type(a: np.ndarray) -> str:
    return {"float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2", "float8_e8m0fnu": "f8e8m0fnu",
            "float4_e2m1fn": "f4e2m1fn", "bfloat16": "bf16", "float32": "f32"}[a.dtype.name]


def _module(arrays, result_shape, dims: str, result="f32") -> str:
    params = "\n".join(f"  p{i} = {_type(a)}[{','.join(map(str, a.shape))}] parameter({i})"
                       for i, a in enumerate(arrays))
    args = ", ".join(f"p{i}" for i in range(len(arrays)))
    return (f"HloModule scaled_dot\nENTRY main {{\n{params}\n"
            f"  ROOT r = {result}[{','.join(map(str, result_shape))}] scaled-dot({args}), {dims}\n}}\n")


@pytest.mark.parametrize("element", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float4_e2m1fn])
def test_mx_block_scaled_dot_matches_numpy(element):
    """The MX form: [M,K] x [N,K] with e8m0 scales per 32 elements along K."""
    m, n, k = 8, 12, 128
    lhs, rhs = _values((m, k), element), _values((n, k), element)
    ls, rs = _scales((m, k // 32)), _scales((n, k // 32))
    hlo = _module([lhs, rhs, ls, rs], (m, n), "lhs_contracting_dims={1}, rhs_contracting_dims={1}")
    (ours,) = run_ours(hlo, [lhs, rhs, ls, rs])
    expected = _dequantize(lhs, ls) @ _dequantize(rhs, rs).T
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_batched_scaled_dot_with_rhs_contracting_first_matches_numpy():
    b, m, n, k = 2, 4, 6, 64
    lhs, rhs = _values((b, m, k), ml_dtypes.float8_e4m3fn), _values((b, k, n), ml_dtypes.float8_e4m3fn)
    ls, rs = _scales((b, m, k // 32)), _scales((b, k // 32, n))
    hlo = _module([lhs, rhs, ls, rs], (b, m, n), "lhs_batch_dims={0}, rhs_batch_dims={0}, "
                  "lhs_contracting_dims={2}, rhs_contracting_dims={1}")
    (ours,) = run_ours(hlo, [lhs, rhs, ls, rs])
    expected = np.einsum("bmk,bkn->bmn", _dequantize(lhs, ls), _dequantize(rhs, rs))
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_per_tensor_scale_and_bf16_result():
    """A [1,1] scale scales the whole operand (XLA's weight-only form); a bf16 result is
    the f32 product rounded once (the oracle rounds the same way)."""
    m, n, k = 4, 8, 32
    lhs = _values((m, k), ml_dtypes.bfloat16)
    rhs = _values((n, k), ml_dtypes.float4_e2m1fn)
    ls = np.array([[0.5]], ml_dtypes.bfloat16)
    rs = _scales((n, k // 16), ml_dtypes.float8_e4m3fn)
    hlo = _module([lhs, rhs, ls, rs], (m, n), "lhs_contracting_dims={1}, rhs_contracting_dims={1}", "bf16")
    (ours,) = run_ours(hlo, [lhs, rhs, ls, rs])
    expected = (_dequantize(lhs, ls) @ _dequantize(rhs, rs).T).astype(np.float32).astype(ml_dtypes.bfloat16)
    assert ours.dtype == ml_dtypes.bfloat16
    # One bf16 rounding on each side of a value the f32 sum may already differ by an ulp.
    np.testing.assert_allclose(ours.astype(np.float64), expected.astype(np.float64), rtol=2 ** -7, atol=1e-3)


def test_global_scales_divide_by_the_weight_scale():
    m, n, k = 4, 4, 32
    lhs, rhs = _values((m, k), ml_dtypes.float4_e2m1fn), _values((n, k), ml_dtypes.float4_e2m1fn)
    ls, rs = _scales((m, 2), ml_dtypes.float8_e4m3fn), _scales((n, 2), ml_dtypes.float8_e4m3fn)
    igs, wgs = np.float32(3.0), np.float32(4.0)
    hlo = _module([lhs, rhs, ls, rs, np.zeros((), np.float32), np.zeros((), np.float32)], (m, n),
                  "lhs_contracting_dims={1}, rhs_contracting_dims={1}")
    (ours,) = run_ours(hlo, [lhs, rhs, ls, rs, igs, wgs])
    expected = _dequantize(lhs, ls) @ _dequantize(rhs, rs).T / 4.0
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_a_scale_that_does_not_block_the_operand_is_refused():
    lhs, rhs = _values((4, 96), ml_dtypes.float8_e4m3fn), _values((4, 96), ml_dtypes.float8_e4m3fn)
    ls, rs = _scales((4, 5)), _scales((4, 3))
    hlo = _module([lhs, rhs, ls, rs], (4, 4), "lhs_contracting_dims={1}, rhs_contracting_dims={1}")
    with pytest.raises(ConverterError, match=r"<test>:\d+:\d+.*does not block operand \[4, 96\]"):
        run_ours(hlo, [lhs, rhs, ls, rs])
