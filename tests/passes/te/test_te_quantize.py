"""Transformer Engine quantize / dequantize calls (te_dbias_quantize_ffi, te_dequantize_ffi)
in TE's exact typed-FFI signatures (transformer_engine/jax/csrc/extensions/quantization.cpp),
rewritten and run on CPU, against the fp8 cast (clamp to ±max, then ml_dtypes'
round-to-nearest-even cast) and MXFP8's e8m0 block exponents, bit for bit."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converter.runtime.convert import convert_text
from passes import PassError
from tests.helpers import assert_close
from tests.passes.te.te_hlo import T, dims, fp8_cast, run, sweep

RNG = np.random.default_rng(31)


def quantize_module(x_shape, dt, out_t, mode, flatten_axis, is_dbias, layout=0, extra="") -> str:
    m = int(np.prod(x_shape[:flatten_axis]))
    n = int(np.prod(x_shape[flatten_axis:]))
    col = dims((*x_shape[flatten_axis:], *x_shape[:flatten_axis])) if layout == 2 else "1"
    db = dims(x_shape[flatten_axis:]) if is_dbias else "1"
    del m, n
    return f"""HloModule te_quantize
ENTRY main {{
  x = {dt}[{dims(x_shape)}] parameter(0)
  scale = f32[1] parameter(1)
  amax = f32[1] parameter(2)
  sr = s64[0] constant({{}})
  ra = f32[0] constant({{}})
  rht = bf16[0] constant({{}})
  cc = ({out_t}[{dims(x_shape)}], {out_t}[{col}], f32[1], f32[1], f32[1], {dt}[{db}], u8[64]) custom-call(x, scale, amax, sr, ra, rht), custom_call_target="te_dbias_quantize_ffi", api_version=API_VERSION_TYPED_FFI, output_to_operand_aliasing={{{{4}}: (2, {{}})}}, backend_config={{flatten_axis = {flatten_axis} : i64, is_dbias = {str(is_dbias).lower()}, q_layout = {layout} : i64, scaling_mode = {mode} : i64, stochastic_rounding = false, use_rht = false{extra}}}
  q = {out_t}[{dims(x_shape)}] get-tuple-element(cc), index=0
  c = {out_t}[{col}] get-tuple-element(cc), index=1
  si = f32[1] get-tuple-element(cc), index=2
  am = f32[1] get-tuple-element(cc), index=4
  db = {dt}[{db}] get-tuple-element(cc), index=5
  dq = {dt}[{dims(x_shape)}] custom-call(q, am, scale, si), custom_call_target="te_dequantize_ffi", api_version=API_VERSION_TYPED_FFI
  ROOT t = ({out_t}[{dims(x_shape)}], {out_t}[{col}], f32[1], f32[1], {dt}[{db}], {dt}[{dims(x_shape)}]) tuple(q, c, si, am, db, dq)
}}
"""


# mode 1 delayed, 3 current (scale from amax, as TE's JAX side computes it)
@pytest.mark.parametrize("mode, fp8_t, dt", sweep(
    [(m, f, d) for m in (1, 3) for f in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2)
     for d in (ml_dtypes.bfloat16, np.float32)], {0, 7}))
def test_quantize_dequantize_bit_exact(mode, fp8_t, dt):
    shape, axis = (2, 3, 32), 2
    x = (RNG.standard_normal(shape) * 3).astype(dt)
    x.reshape(-1)[:3] = np.array([1e4, -1e4, 0], np.float32).astype(dt)  # saturating values
    x32 = x.astype(np.float32)
    amax = np.abs(x32).max()
    # current scaling: TE's compute_scale_from_amax (fp8 max / amax, margin 0)
    scale = np.array([float(ml_dtypes.finfo(fp8_t).max) / amax if mode == 3 else 20.0], np.float32)
    q, col, sinv, new_amax, dbias, dq = run(quantize_module(shape, T[np.dtype(dt)], T[np.dtype(fp8_t)], mode, axis,
                                                            True, layout=2), [x, scale, np.zeros(1, np.float32)])
    # x·scale is one f32 product on both sides: the fp8 values must match bit for bit.
    want = fp8_cast(x32 * scale[0], fp8_t)
    np.testing.assert_array_equal(q.view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(col, q.reshape(6, 32).T.reshape(32, 2, 3))
    np.testing.assert_array_equal(sinv, np.float32(1) / scale)
    np.testing.assert_array_equal(new_amax, np.array([amax], np.float32))
    # dbias: f32 sums of 6 rows, one rounding to dt.
    assert_close(dbias, x32.reshape(6, 32).sum(0).astype(dt))
    # dequantize: q · scale_inv, one f32 product, rounded to dt.
    want_dq = (want.astype(np.float32) * sinv[0]).astype(dt)
    np.testing.assert_array_equal(dq.astype(np.float32), want_dq.astype(np.float32))


@pytest.mark.parametrize("mode, extra, what", [(4, "", "NVFP4_1D_SCALING"),
                                               (1, ", stochastic_rounding = true", "stochastic_rounding")])
def test_unsupported_quantize_modes_are_located_errors(mode, extra, what):
    text = quantize_module((4, 32), "bf16", "f8e4m3fn", mode, 1, False, extra="")
    if extra:
        text = text.replace("stochastic_rounding = false", "stochastic_rounding = true")
    with pytest.raises(PassError, match=rf"te.hlo:\d+:\d+: error: .*te_dbias_quantize_ffi.*{what}"):
        convert_text(text, "te.hlo")


def mxfp8_module(x_shape, dt, out_t, scale_shape) -> str:
    return f"""HloModule te_mxfp8
ENTRY main {{
  x = {dt}[{dims(x_shape)}] parameter(0)
  scale = f32[1] constant({{1}})
  amax = f32[1] constant({{0}})
  sr = s64[0] constant({{}})
  ra = f32[0] constant({{}})
  rht = bf16[0] constant({{}})
  cc = ({out_t}[{dims(x_shape)}], {out_t}[1], f8e8m0fnu[{dims(scale_shape)}], f8e8m0fnu[1], f32[1], {dt}[1], u8[64]) custom-call(x, scale, amax, sr, ra, rht), custom_call_target="te_dbias_quantize_ffi", api_version=API_VERSION_TYPED_FFI, output_to_operand_aliasing={{{{4}}: (2, {{}})}}, backend_config={{flatten_axis = -1 : i64, is_dbias = false, q_layout = 0 : i64, scaling_mode = 2 : i64, stochastic_rounding = false, use_rht = false}}
  q = {out_t}[{dims(x_shape)}] get-tuple-element(cc), index=0
  si = f8e8m0fnu[{dims(scale_shape)}] get-tuple-element(cc), index=2
  ROOT t = ({out_t}[{dims(x_shape)}], f8e8m0fnu[{dims(scale_shape)}]) tuple(q, si)
}}
"""


def numpy_e8m0(val):
    """Biased exponent of val (≥ 0) rounded toward +inf (cvt.rp.satfinite.ue8m0), from frexp."""
    val = val.astype(np.float64)
    mant, ex = np.frexp(val)  # val = mant · 2^ex, mant in [0.5, 1)
    e = np.where(mant == 0.5, ex - 1, ex) + 127
    e = np.where(val <= 2.0 ** -127, 0, np.maximum(e, 1))
    return np.where(val == 0, 0, e).astype(np.int64)


@pytest.mark.parametrize("fp8_t", sweep([ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2], {0}))
def test_mxfp8_quantize_bit_exact(fp8_t):
    """MXFP8 rowwise (scaling_mode 2): one e8m0 exponent per 32 elements along the last
    dim, data = saturate(x · 2^(127 − e)); scales padded to [round_up(rows, 128),
    round_up(blocks, 4)] (TE's get_scale_shape_2x), of which the real blocks are checked."""
    rows, cols = 6, 96
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    x *= np.repeat(2.0 ** RNG.integers(-20, 20, (rows, cols // 32)), 32, axis=1)  # per-block magnitudes
    x[0, :32] = 0  # an all-zero block
    x[1, 32:64] = 0
    x[1, 40] = float(ml_dtypes.finfo(fp8_t).max) * 2 ** 3  # a block whose amax / max is a power of two
    x = x.astype(ml_dtypes.bfloat16)
    q, scales = run(mxfp8_module((rows, cols), "bf16", T[np.dtype(fp8_t)], (128, 4)), [x])
    x32 = x.astype(np.float32)
    amax = np.abs(x32).reshape(rows, cols // 32, 32).max(-1)
    rcp = np.float32(1.0 / float(ml_dtypes.finfo(fp8_t).max))
    e = numpy_e8m0((amax * rcp).astype(np.float32))
    np.testing.assert_array_equal(scales.view(np.uint8)[:rows, :cols // 32].astype(np.int64), e)
    assert e[1, 1] == 127 + 3
    factor = np.repeat(2.0 ** (127 - e.astype(np.float64)), 32, axis=1)
    want = fp8_cast((x32 * factor).astype(np.float32), fp8_t)
    np.testing.assert_array_equal(q.view(np.uint8), want.view(np.uint8))


def test_mxfp8_colwise_output_is_a_located_error():
    """MXFP8's colwise output (blocks of 32 down the columns) is not converted: asking for it
    (quantize_layout ROWWISE_COLWISE, a colwise result of x's size) is refused by name."""
    text = mxfp8_module((4, 64), "bf16", "f8e4m3fn", (128, 4))
    text = text.replace("f8e4m3fn[1], f8e8m0fnu", "f8e4m3fn[4,64], f8e8m0fnu").replace("q_layout = 0", "q_layout = 2")
    text = text.replace("  ROOT t = (f8e4m3fn[4,64], f8e8m0fnu[128,4]) tuple(q, si)",
                        "  c = f8e4m3fn[4,64] get-tuple-element(cc), index=1\n"
                        "  ROOT t = (f8e4m3fn[4,64], f8e8m0fnu[128,4], f8e4m3fn[4,64]) tuple(q, si, c)")
    with pytest.raises(PassError, match=r"te.hlo:\d+:\d+: error: .*te_dbias_quantize_ffi.*MXFP8 with its colwise"):
        convert_text(text, "te.hlo")
