"""Transformer Engine softmax calls (te_scaled*_softmax_{forward,backward}_ffi) and the
quantize / dequantize calls (te_dbias_quantize_ffi, te_dequantize_ffi) in TE's exact
typed-FFI signatures (transformer_engine/jax/csrc/extensions/{softmax,quantization}.cpp),
rewritten and run on CPU, against TE's JAX references (jax/cpp_extensions/softmax.py
jax_scaled_*softmax, jax.vjp of them) and the fp8 cast (clamp to ±max, then ml_dtypes'
round-to-nearest-even cast) bit for bit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module
from passes import PassError
from tests.helpers import assert_close

RNG = np.random.default_rng(30)
T = {np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(np.float32): "f32", np.dtype(np.float16): "f16",
     np.dtype(ml_dtypes.float8_e4m3fn): "f8e4m3fn", np.dtype(ml_dtypes.float8_e5m2): "f8e5m2"}


def sweep(values, keep):
    """The cases outside `keep` run with `pytest -m slow` (the default run keeps one of each
    kind, within the suite's time budget)."""
    return [v if i in keep else pytest.param(*(v if isinstance(v, tuple) else (v,)), marks=pytest.mark.slow)
            for i, v in enumerate(values)]


def dims(shape) -> str:
    return ",".join(map(str, shape))


def run(text, inputs, name="te.hlo"):
    module = convert_text(text, name)
    assert "custom_call" not in str(module)
    return [np.asarray(v) for v in program_from_module(module)(*inputs)]


def softmax_module(kind, shape, dt, scale, mask_shape=None) -> str:
    mask = f"\n  mask = u8[{dims(mask_shape)}] parameter(2)" if mask_shape else ""
    fwd_args = "x, mask" if mask_shape else "x"
    return f"""HloModule te_softmax
ENTRY main {{
  x = {dt}[{dims(shape)}] parameter(0)
  dy = {dt}[{dims(shape)}] parameter(1){mask}
  y = {dt}[{dims(shape)}] custom-call({fwd_args}), custom_call_target="te_{kind}_softmax_forward_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{scale_factor = {scale:e} : f64}}
  dx = {dt}[{dims(shape)}] custom-call(dy, y), custom_call_target="te_{kind}_softmax_backward_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{scale_factor = {scale:e} : f64}}
  ROOT t = ({dt}[{dims(shape)}], {dt}[{dims(shape)}]) tuple(y, dx)
}}
"""


def te_softmax_reference(kind, x, scale, mask=None):
    """TE's jax_scaled_*softmax, with the CUDA kernel's fully masked rows (all -10000:
    zeros) written out."""
    s = x * scale
    if kind == "scaled":
        return jax.nn.softmax(s)
    if kind == "scaled_masked":
        keep = mask != 1
        y = jax.nn.softmax(s, where=keep)
        return jnp.where(keep.any(-1, keepdims=True), jnp.where(keep, y, 0.0), 0.0)
    sq, sk = x.shape[-2:]
    causal = jnp.arange(sk)[None, :] <= jnp.arange(sq)[:, None]
    return jnp.where(causal, jax.nn.softmax(s, where=causal), 0.0)


@pytest.mark.parametrize("kind, mask_batch", [("scaled", None), ("scaled_masked", 2), ("scaled_masked", 1),
                                              ("scaled_upper_triang_masked", None)])
def test_softmax_forward_backward_match_te_reference(kind, mask_batch):
    shape, scale = (2, 3, 8, 8), 0.125
    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    dy = RNG.standard_normal(shape).astype(np.float32)
    inputs = [x, dy]
    mask = None
    if mask_batch:
        mask = (RNG.random((mask_batch, 1, 8, 8)) < 0.4).astype(np.uint8)
        mask[0, 0, 3, :] = 1  # one fully masked row: the kernel writes zeros
        inputs.append(mask)
    y, dx = run(softmax_module(kind, shape, "f32", scale, mask.shape if mask is not None else None), inputs)
    @jax.jit
    def reference_and_vjp(a, g):
        out, vjp = jax.vjp(lambda b: te_softmax_reference(kind, b, scale, None if mask is None else jnp.asarray(mask)), a)
        return out, vjp(g)[0]

    want, want_dx = reference_and_vjp(jnp.asarray(x), jnp.asarray(dy))
    # f32 exp and sums over 8 terms on both sides: f32's tolerance.
    assert_close(y, np.asarray(want), atol=1e-6)
    # TE's backward is y·(dy − Σ dy·y)·scale from the forward's output (for masked
    # entries y = 0, so their gradient is 0 as in jax.vjp).
    assert_close(dx, np.asarray(want_dx), atol=1e-6)
    if mask_batch:
        assert not y[0, :, 3].any()


def test_softmax_bf16_rounds_once():
    shape = (1, 2, 4, 16)
    x = RNG.standard_normal(shape).astype(ml_dtypes.bfloat16)
    y, _ = run(softmax_module("scaled", shape, "bf16", 0.5), [x, np.zeros(shape, ml_dtypes.bfloat16)])
    want = np.asarray(jax.nn.softmax(jnp.asarray(x, jnp.float32) * 0.5)).astype(ml_dtypes.bfloat16)
    assert_close(y, want)  # f32 inside, one rounding to bf16: bf16's tolerance


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


def fp8_cast(v, fp8_t):
    limit = float(ml_dtypes.finfo(fp8_t).max)
    return np.clip(v.astype(np.float32), -limit, limit).astype(fp8_t)


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


@pytest.mark.parametrize("target, why", [("te_ep_dispatch_ffi", "expert-parallel"),
                                         ("te_grouped_gemm_ffi", "grouped"),
                                         ("te_grouped_quantize_v2_ffi", "grouped")])
def test_refused_te_calls_name_the_call_and_reason(target, why):
    text = f"""HloModule te_refused
ENTRY main {{
  x = bf16[4,8] parameter(0)
  ROOT y = bf16[4,8] custom-call(x), custom_call_target="{target}", api_version=API_VERSION_TYPED_FFI
}}
"""
    with pytest.raises(PassError, match=rf"te.hlo:\d+:\d+: error: .*{target}.*not converted: .*{why}"):
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
