"""Transformer Engine activation calls (te_act_lu_ffi, te_dact_dbias_quantize_ffi) in TE's
exact typed-FFI signatures (transformer_engine/jax/csrc/extensions/activation.cpp),
rewritten and run on CPU, against TE's own JAX reference (jax/cpp_extensions/
activation.py _jax_act_lu / _convert_to_activation_function, restated below) and jax.vjp
of it for the backward (what TE's _jax_quantize_dact_dbias does)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from converter.runtime.convert import convert_text
from passes import PassError
from tests.helpers import assert_close
from tests.passes.te.mxfp8_reference import mxfp8_reference, te_block_scale_shape
from tests.passes.te.te_hlo import T, dims, run, sweep

RNG = np.random.default_rng(29)
LIMIT, ALPHA, OFFSET = 7.0, 1.702, 1.0

# act_enum → TE's activation_type tuple (ActivationEnum in activation.py)
ACTS = {0: ("gelu",), 1: ("gelu", "linear"), 2: ("sigmoid", "linear"), 3: ("silu",), 4: ("silu", "linear"),
        5: ("relu",), 6: ("relu", "linear"), 7: ("quick_gelu",), 8: ("quick_gelu", "linear"),
        9: ("squared_relu",), 10: ("squared_relu", "linear"), 11: ("clamped_silu", "clamped_linear")}


def te_fn(name):
    """TE's _convert_to_activation_function (jax.nn.gelu is its tanh form by default)."""
    return {"linear": lambda x: x, "gelu": jax.nn.gelu, "sigmoid": jax.nn.sigmoid, "silu": jax.nn.silu,
            "relu": jax.nn.relu, "quick_gelu": lambda x: jax.nn.sigmoid(1.702 * x) * x,
            "squared_relu": lambda x: jax.nn.relu(x) * jax.nn.relu(x),
            "clamped_silu": lambda x: jax.nn.sigmoid(ALPHA * jnp.minimum(x, LIMIT)) * jnp.minimum(x, LIMIT),
            "clamped_linear": lambda x: jnp.clip(x, -LIMIT, LIMIT) + OFFSET}[name]


def te_act_lu(x, kinds):
    parts = jnp.split(x, len(kinds), axis=-2)
    out = te_fn(kinds[0])(parts[0])
    for k, p in zip(kinds[1:], parts[1:]):
        out = out * te_fn(k)(p)
    return jnp.squeeze(out, -2)


def params() -> str:
    return (f"act_params = {{clamped_swiglu = {{alpha = {ALPHA:e} : f32, glu_linear_offset = {OFFSET:e} : f32, "
            f"limit = {LIMIT:e} : f32}}}}")


def act_module(x_shape, dt, out_t, enum, mode, layout=0) -> str:
    out_shape = (*x_shape[:-2], x_shape[-1])
    col = dims((x_shape[-1], *x_shape[:-2])) if layout == 2 else "1"
    return f"""HloModule te_act
ENTRY main {{
  x = {dt}[{dims(x_shape)}] parameter(0)
  scale = f32[1] parameter(1)
  amax = f32[1] parameter(2)
  cc = ({out_t}[{dims(out_shape)}], {out_t}[{col}], f32[1], f32[1], f32[1]) custom-call(x, scale, amax), custom_call_target="te_act_lu_ffi", api_version=API_VERSION_TYPED_FFI, output_to_operand_aliasing={{{{4}}: (2, {{}})}}, backend_config={{act_enum = {enum} : i64, {params()}, output_amax_when_no_scaling = false, quantize_layout = {layout} : i64, scaling_mode = {mode} : i64}}
  o = {out_t}[{dims(out_shape)}] get-tuple-element(cc), index=0
  c = {out_t}[{col}] get-tuple-element(cc), index=1
  si = f32[1] get-tuple-element(cc), index=2
  am = f32[1] get-tuple-element(cc), index=4
  ROOT t = ({out_t}[{dims(out_shape)}], {out_t}[{col}], f32[1], f32[1]) tuple(o, c, si, am)
}}
"""


def dact_module(x_shape, dt, out_t, enum, mode, is_dbias=True) -> str:
    dz_shape = (*x_shape[:-2], x_shape[-1])
    db = dims(x_shape[-2:])
    return f"""HloModule te_dact
ENTRY main {{
  dz = {dt}[{dims(dz_shape)}] parameter(0)
  x = {dt}[{dims(x_shape)}] parameter(1)
  scale = f32[1] parameter(2)
  amax = f32[1] parameter(3)
  cc = ({out_t}[{dims(x_shape)}], {out_t}[1], f32[1], f32[1], f32[1], {dt}[{db}], u8[64]) custom-call(dz, x, scale, amax), custom_call_target="te_dact_dbias_quantize_ffi", api_version=API_VERSION_TYPED_FFI, output_to_operand_aliasing={{{{4}}: (3, {{}})}}, backend_config={{act_enum = {enum} : i64, {params()}, is_dbias = {str(is_dbias).lower()}, output_amax_when_no_scaling = false, quantize_layout = 0 : i64, scaling_mode = {mode} : i64}}
  o = {out_t}[{dims(x_shape)}] get-tuple-element(cc), index=0
  am = f32[1] get-tuple-element(cc), index=4
  db = {dt}[{db}] get-tuple-element(cc), index=5
  ROOT t = ({out_t}[{dims(x_shape)}], f32[1], {dt}[{db}]) tuple(o, am, db)
}}
"""


def inputs_for(enum, shape, dt):
    # Spread past the clamped-SwiGLU limit so the clamp is exercised.
    return (RNG.standard_normal(shape) * (4.0 if enum == 11 else 1.5)).astype(dt)


@pytest.mark.parametrize("enum", sweep(sorted(ACTS), {1, 2, 3, 5, 7, 10, 11}))
def test_act_lu_matches_te_reference(enum):
    kinds = ACTS[enum]
    shape = (3, 4, len(kinds), 16)
    x = inputs_for(enum, shape, np.float32)
    out, _, _, amax = run(act_module(shape, "f32", "f32", enum, 0), [x, np.ones(1, np.float32),
                                                                      np.zeros(1, np.float32)])
    # f32 on both sides; transcendental approximations differ by a few ulps (f32's
    # tolerance), with an absolute floor of 1e-6 where outputs cross zero.
    assert_close(out, np.asarray(te_act_lu(jnp.asarray(x), kinds)), atol=1e-6)
    assert amax[0] == 0  # NO_SCALING: amax passed through


@pytest.mark.parametrize("enum", sweep(sorted(ACTS), {0, 4, 6, 8, 9, 11}))
def test_dact_dbias_matches_jax_vjp(enum):
    kinds = ACTS[enum]
    shape = (2, 6, len(kinds), 8)
    x = inputs_for(enum, shape, np.float32)
    dz = RNG.standard_normal((2, 6, 8)).astype(np.float32)
    dx, amax, dbias = run(dact_module(shape, "f32", "f32", enum, 0),
                          [dz, x, np.ones(1, np.float32), np.zeros(1, np.float32)])
    want = np.asarray(jax.jit(lambda a, g: jax.vjp(lambda b: te_act_lu(b, kinds), a)[1](g)[0])(
        jnp.asarray(x), jnp.asarray(dz)))
    # f32 derivatives written from math.h vs JAX's autodiff of the same functions: a few
    # ulps per op (f32's tolerance) and an absolute floor for values near zero.
    assert_close(dx, want, atol=1e-5)
    assert_close(dbias, want.reshape(-1, len(kinds), 8).sum(0), atol=1e-4)


@pytest.mark.parametrize("enum, fp8_t", sweep([(1, ml_dtypes.float8_e4m3fn), (9, ml_dtypes.float8_e5m2),
                                               (4, ml_dtypes.float8_e4m3fn), (4, ml_dtypes.float8_e5m2)], {0, 1}))
def test_act_lu_fp8_delayed_scaling_bit_exact_with_transposed_colwise(enum, fp8_t):
    kinds = ACTS[enum]
    shape = (4, 8, len(kinds), 16)
    x = inputs_for(enum, shape, ml_dtypes.bfloat16)
    scale = np.array([96.0], np.float32)
    out, col, sinv, amax = run(act_module(shape, "bf16", T[np.dtype(fp8_t)], enum, 1, layout=2),
                               [x, scale, np.array([0.25], np.float32)])
    y = np.asarray(te_act_lu(jnp.asarray(x, jnp.float32), kinds)).astype(np.float64)
    limit = float(ml_dtypes.finfo(fp8_t).max)

    def cast(v):
        return np.clip(v, -limit, limit).astype(np.float32).astype(fp8_t).astype(np.float32)

    v = y * 96.0
    want = cast(v)
    # Exact wherever the fp8 value is not decided by the last f32 bit of y (a rounding tie
    # within 1e-5 relative): there the transcendental's last ulp may differ.
    clear = cast(v * (1 - 1e-5)) == cast(v * (1 + 1e-5))
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(out.astype(np.float32)[clear], want[clear])
    np.testing.assert_array_equal(col, out.reshape(32, 16).T.reshape(16, 4, 8))
    np.testing.assert_array_equal(sinv, np.float32(1) / scale)
    assert_close(amax, np.array([max(0.25, np.abs(y).max())], np.float32))


def test_dact_fp8_output_with_dbias():
    shape = (4, 2, 32)
    x = inputs_for(4, shape, ml_dtypes.bfloat16)
    dz = RNG.standard_normal((4, 32)).astype(ml_dtypes.bfloat16)
    dx, amax, dbias = run(dact_module(shape, "bf16", "f8e4m3fn", 4, 1),
                          [dz, x, np.array([16.0], np.float32), np.zeros(1, np.float32)])
    _, vjp = jax.vjp(lambda a: te_act_lu(a, ACTS[4]), jnp.asarray(x, jnp.float32))
    (want,) = vjp(jnp.asarray(dz, jnp.float32))
    want = np.asarray(want)
    # fp8 e4m3 has 3 mantissa bits: one rounding is ≤ 2^-4 relative; the f32 values feeding
    # it agree to a few ulps, so compare at e4m3's half-step (1/16 relative, 2^-9·16 abs).
    np.testing.assert_allclose(dx.astype(np.float32) / 16.0, want, rtol=1 / 16, atol=2 ** -9)
    assert_close(amax, np.array([np.abs(want).max()], np.float32))
    assert_close(dbias, want.sum(0).astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("change, what", [("act_enum = 4 ", "act_enum 12"),
                                          ("scaling_mode = 1 ", "NVFP4_1D_SCALING")])
def test_unsupported_activation_attributes_are_located_errors(change, what):
    text = act_module((2, 2, 32), "bf16", "f8e4m3fn", 4, 1)
    text = text.replace(change, "act_enum = 12 " if "act_enum" in change else "scaling_mode = 4 ")
    with pytest.raises(PassError, match=rf"te_act.hlo:\d+:\d+: error: .*te_act_lu_ffi.*{what}"):
        convert_text(text, "te_act.hlo")


def test_act_lu_mxfp8_rowwise_scales_and_data():
    """SwiGLU with an MXFP8 output (scaling_mode 2): e8m0 exponents per 32 outputs, data =
    saturate(y · 2^(127 − e)); compared where the fp8 value (and the block's exponent) is
    not decided by the last f32 bit of y."""
    shape = (4, 2, 64)
    x = inputs_for(4, shape, ml_dtypes.bfloat16)
    text = act_module(shape, "bf16", "f8e4m3fn", 4, 2).replace("f32[1], f32[1], f32[1]) custom-call",
                                                                "f8e8m0fnu[128,4], f32[1], f32[1]) custom-call")
    text = text.replace("si = f32[1] get-tuple-element(cc), index=2", "si = f8e8m0fnu[128,4] get-tuple-element(cc), index=2")
    text = text.replace("f32[1], f32[1]) tuple(o, c, si, am)", "f8e8m0fnu[128,4], f32[1]) tuple(o, c, si, am)")
    out, _, scales, _ = run(text, [x, np.ones(1, np.float32), np.zeros(1, np.float32)])
    y = np.asarray(te_act_lu(jnp.asarray(x, jnp.float32), ACTS[4])).astype(np.float32)
    # TE's kernel rounds y to the input type (bf16) before the block amax (gated_mxfp8.cuh
    # "numerical truncation").
    yb = y.astype(ml_dtypes.bfloat16).astype(np.float32)
    amax = np.abs(yb).reshape(4, 2, 32).max(-1)
    val = (amax * np.float32(1 / 448.0)).astype(np.float64)
    mant, ex = np.frexp(val)
    e = np.where(mant == 0.5, ex - 1, ex) + 127
    np.testing.assert_array_equal(scales.view(np.uint8)[:4, :2].astype(np.int64), e)
    factor = np.repeat(2.0 ** (127 - e), 32, axis=1)

    def cast(a):
        a = a.astype(ml_dtypes.bfloat16).astype(np.float64) * factor
        return np.clip(a, -448, 448).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)

    clear = cast(y * (1 - 1e-5)) == cast(y * (1 + 1e-5))
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(out.astype(np.float32)[clear], cast(y)[clear])


def mxfp8_2x_text(kind, x_shape, out_shape, dt, enum, is_dbias=False) -> str:
    """te_act_lu_ffi / te_dact_dbias_quantize_ffi with MXFP8 outputs in both layouts
    (quantize_layout ROWWISE_COLWISE); the scale shapes are TE's padded ones (restated in
    mxfp8_reference), the forward's split at −1, the backward's at −2 (before the act axis)."""
    axis = -1 if kind == "act" else -2
    rs, cs = te_block_scale_shape(out_shape, axis, False), te_block_scale_shape(out_shape, axis, True)
    o, r, c = dims(out_shape), dims(rs), dims(cs)
    results = f"f8e4m3fn[{o}], f8e4m3fn[{o}], f8e8m0fnu[{r}], f8e8m0fnu[{c}], f32[1]"
    if kind == "act":
        head = f"  x = {dt}[{dims(x_shape)}] parameter(0)\n  scale = f32[1] constant({{1}})\n  amax = f32[1] constant({{0}})\n"
        call = (f"  cc = ({results}) custom-call(x, scale, amax), custom_call_target=\"te_act_lu_ffi\", "
                f"api_version=API_VERSION_TYPED_FFI, backend_config={{act_enum = {enum} : i64, {params()}, "
                "output_amax_when_no_scaling = false, quantize_layout = 2 : i64, scaling_mode = 2 : i64}\n")
    else:
        dz_shape = (*x_shape[:-2], x_shape[-1])
        head = (f"  dz = {dt}[{dims(dz_shape)}] parameter(0)\n  x = {dt}[{dims(x_shape)}] parameter(1)\n"
                "  scale = f32[1] constant({1})\n  amax = f32[1] constant({0})\n")
        call = (f"  cc = ({results}, {dt}[{dims(x_shape[-2:])}], u8[64]) custom-call(dz, x, scale, amax), "
                "custom_call_target=\"te_dact_dbias_quantize_ffi\", api_version=API_VERSION_TYPED_FFI, "
                f"backend_config={{act_enum = {enum} : i64, {params()}, is_dbias = {str(is_dbias).lower()}, "
                "output_amax_when_no_scaling = false, quantize_layout = 2 : i64, scaling_mode = 2 : i64}\n")
    return (f"HloModule te_mxfp8_act\nENTRY main {{\n{head}{call}"
            f"  q = f8e4m3fn[{o}] get-tuple-element(cc), index=0\n  cq = f8e4m3fn[{o}] get-tuple-element(cc), index=1\n"
            f"  si = f8e8m0fnu[{r}] get-tuple-element(cc), index=2\n  ci = f8e8m0fnu[{c}] get-tuple-element(cc), index=3\n"
            f"  ROOT t = (f8e4m3fn[{o}], f8e4m3fn[{o}], f8e8m0fnu[{r}], f8e8m0fnu[{c}]) tuple(q, cq, si, ci)\n}}\n")


def check_mxfp8_2x(y, q, cq, si, ci, split_rows):
    """Both layouts of MXFP8(y) against mxfp8_reference.  TE's kernels round the computed
    activation to the input type (bf16) before the block amax (common/cast/mxfp8/
    quantize_mxfp8.cuh, gated_mxfp8.cuh: "numerical truncation"), so the oracle does too.
    Scales bit for bit; data exact wherever the fp8 value is not decided by the last f32
    bit of y (the transcendental's last ulp may differ between the two programs)."""
    m, n = y.shape
    yb = y.astype(ml_dtypes.bfloat16).astype(np.float32)
    for along, data, scales in ((1, q, si), (0, cq, ci)):
        want, e = mxfp8_reference(yb, ml_dtypes.float8_e4m3fn, along)
        view = scales.view(np.uint8).reshape(split_rows(along), -1)
        real = view[:m, :n // 32] if along == 1 else view[:m // 32, :n]
        np.testing.assert_array_equal(real.astype(np.int64), e)
        lo, _ = mxfp8_reference((y * (1 - 1e-5)).astype(ml_dtypes.bfloat16).astype(np.float32),
                                ml_dtypes.float8_e4m3fn, along)
        hi, _ = mxfp8_reference((y * (1 + 1e-5)).astype(ml_dtypes.bfloat16).astype(np.float32),
                                ml_dtypes.float8_e4m3fn, along)
        clear = lo.view(np.uint8) == hi.view(np.uint8)
        assert clear.mean() > 0.9
        got = data.reshape(m, n).view(np.uint8)
        np.testing.assert_array_equal(got[clear], want.view(np.uint8)[clear])


@pytest.mark.parametrize("enum", sweep([4, 0, 9], {0, 1}))
def test_act_lu_mxfp8_rowwise_and_colwise(enum):
    """MXFP8 outputs in both layouts (scaling_mode 2, quantize_layout 2): rowwise blocks of 32
    along n, colwise blocks of 32 down the rows, the colwise data not transposed."""
    kinds = ACTS[enum]
    shape = (2, 32, len(kinds), 64)
    x = inputs_for(enum, shape, ml_dtypes.bfloat16)
    q, cq, si, ci = run(mxfp8_2x_text("act", shape, (2, 32, 64), "bf16", enum),
                        [x], "te_act.hlo")
    y = np.asarray(te_act_lu(jnp.asarray(x, jnp.float32), kinds)).astype(np.float32).reshape(64, 64)
    check_mxfp8_2x(y, q, cq, si, ci, lambda along: 128 if along == 1 else 4)


def test_dact_mxfp8_rowwise_and_colwise():
    """The backward's MXFP8 outputs in both layouts, [m, act_len·n] blocks, scales split
    before the act axis (TE's scale shapes (128, 4, 1) and (4, 4, 32) here)."""
    shape = (64, 2, 32)
    x = inputs_for(4, shape, ml_dtypes.bfloat16)
    dz = RNG.standard_normal((64, 32)).astype(ml_dtypes.bfloat16)
    q, cq, si, ci = run(mxfp8_2x_text("dact", shape, shape, "bf16", 4), [dz, x], "te_dact.hlo")
    _, vjp = jax.vjp(lambda a: te_act_lu(a, ACTS[4]), jnp.asarray(x, jnp.float32))
    (want,) = vjp(jnp.asarray(dz, jnp.float32))
    check_mxfp8_2x(np.asarray(want).reshape(64, 64), q, cq, si, ci, lambda along: 128 if along == 1 else 4)
