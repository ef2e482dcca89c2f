"""Transformer Engine norm calls (te_norm_forward_ffi / te_norm_backward_ffi) in TE's exact
typed-FFI signatures (transformer_engine/jax/csrc/extensions/normalization.cpp), rewritten
and run on CPU, against TE's own JAX reference math (tests/jax/utils.py layernorm /
rmsnorm: f32 statistics, γ+1 when zero-centered) written in NumPy f64, jax.vjp of it for
the backward, and the fp8 cast (saturate(y·scale) → fp8) bit for bit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from converter.runtime.convert import convert_text
from passes import PassError
from tests.helpers import assert_close
from tests.passes.te.te_hlo import T, dims, run, sweep

RNG = np.random.default_rng(28)


def forward_module(x_shape, dt, out_t, kind, zero_centered, eps, mode, amax_flag=False) -> str:
    h = x_shape[-1]
    rows = x_shape[:-1]
    mu = dims(rows) if kind == 0 else "1"
    return f"""HloModule te_norm_fwd
ENTRY main {{
  x = {dt}[{dims(x_shape)}] parameter(0)
  scale = f32[1] parameter(1)
  amax = f32[1] parameter(2)
  gamma = {dt}[{h}] parameter(3)
  beta = {dt}[{h}] parameter(4)
  cc = ({out_t}[{dims(x_shape)}], {out_t}[1], f32[1], f32[1], f32[1], f32[{mu}], f32[{dims(rows)}], u8[256]) custom-call(x, scale, amax, gamma, beta), custom_call_target="te_norm_forward_ffi", api_version=API_VERSION_TYPED_FFI, output_to_operand_aliasing={{{{4}}: (2, {{}})}}, backend_config={{epsilon = {eps:e} : f64, norm_type = {kind} : i64, output_amax_when_no_scaling = {str(amax_flag).lower()}, quantize_layout = 0 : i64, scaling_mode = {mode} : i64, sm_margin = 0 : i64, zero_centered_gamma = {str(zero_centered).lower()}}}
  o = {out_t}[{dims(x_shape)}] get-tuple-element(cc), index=0
  si = f32[1] get-tuple-element(cc), index=2
  am = f32[1] get-tuple-element(cc), index=4
  mu = f32[{mu}] get-tuple-element(cc), index=5
  rs = f32[{dims(rows)}] get-tuple-element(cc), index=6
  ROOT t = ({out_t}[{dims(x_shape)}], f32[1], f32[1], f32[{mu}], f32[{dims(rows)}]) tuple(o, si, am, mu, rs)
}}
"""


def backward_module(x_shape, dt, kind, zero_centered) -> str:
    h = x_shape[-1]
    rows = dims(x_shape[:-1])
    mu = rows if kind == 0 else "1"
    return f"""HloModule te_norm_bwd
ENTRY main {{
  dz = {dt}[{dims(x_shape)}] parameter(0)
  x = {dt}[{dims(x_shape)}] parameter(1)
  mu = f32[{mu}] parameter(2)
  rs = f32[{rows}] parameter(3)
  gamma = {dt}[{h}] parameter(4)
  cc = ({dt}[{dims(x_shape)}], {dt}[{h}], {dt}[{h}], u8[64]) custom-call(dz, x, mu, rs, gamma), custom_call_target="te_norm_backward_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{norm_type = {kind} : i64, sm_margin = 0 : i64, zero_centered_gamma = {str(zero_centered).lower()}}}
  dx = {dt}[{dims(x_shape)}] get-tuple-element(cc), index=0
  dg = {dt}[{h}] get-tuple-element(cc), index=1
  db = {dt}[{h}] get-tuple-element(cc), index=2
  ROOT t = ({dt}[{dims(x_shape)}], {dt}[{h}], {dt}[{h}]) tuple(dx, dg, db)
}}
"""


def numpy_norm(x, gamma, beta, kind, zero_centered, eps):
    """TE's reference (tests/jax/utils.py): statistics over the last dim in high precision."""
    x = x.astype(np.float64)
    g = gamma.astype(np.float64) + (1.0 if zero_centered else 0.0)
    if kind == 0:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        rs = 1 / np.sqrt(var + eps)
        return (x - mu) * rs * g + beta.astype(np.float64), mu[..., 0], rs[..., 0]
    rs = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return x * rs * g, None, rs[..., 0]


def jax_norm(x, gamma, beta, kind, zero_centered, eps):
    g = gamma + (1.0 if zero_centered else 0.0)
    if kind == 0:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + eps) * g + beta
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + eps) * g


CASES = [(kind, zc, dt) for kind in (0, 1) for zc in (False, True) for dt in (np.float32, ml_dtypes.bfloat16)]


@pytest.mark.parametrize("kind, zero_centered, dt", sweep(CASES, {1, 6}))
def test_norm_forward_matches_reference(kind, zero_centered, dt):
    shape, eps = (2, 3, 64), 1e-5
    x = (RNG.standard_normal(shape) * 3 + 0.5).astype(dt)
    gamma = RNG.standard_normal(64).astype(dt)
    beta = RNG.standard_normal(64).astype(dt)
    text = forward_module(shape, T[np.dtype(dt)], T[np.dtype(dt)], kind, zero_centered, eps, 0)
    out, _, amax, mu, rs = run(text, [x, np.ones(1, np.float32), np.zeros(1, np.float32), gamma, beta])
    y, want_mu, want_rs = numpy_norm(x, gamma, beta, kind, zero_centered, eps)
    # f32 statistics over 64 terms vs f64: f32's tolerance; the output rounds once to dt.
    assert_close(out, y.astype(dt))
    assert_close(rs, want_rs.astype(np.float32))
    if kind == 0:
        assert_close(mu, want_mu.astype(np.float32))
    # amax not requested (NO_SCALING, output_amax_when_no_scaling false): passed through.
    assert amax[0] == 0


@pytest.mark.parametrize("kind, fp8_t", sweep([(0, ml_dtypes.float8_e4m3fn), (1, ml_dtypes.float8_e5m2),
                                               (1, ml_dtypes.float8_e4m3fn), (0, ml_dtypes.float8_e5m2)], {0, 1}))
def test_norm_forward_fp8_delayed_scaling_is_bit_exact(kind, fp8_t):
    """fp8 output: saturate(y · scale) cast to fp8 (round to nearest even), checked bit for
    bit against ml_dtypes' cast of the clamped f64 reference wherever that is unambiguous:
    the converted program's f32 y may differ from f64's in its last bit, which moves the fp8
    value only when y·scale sits within 1e-5 (relative) of a rounding tie."""
    shape, eps = (4, 32), 1e-6
    x = RNG.standard_normal(shape).astype(np.float32)
    gamma = RNG.standard_normal(32).astype(np.float32)
    beta = RNG.standard_normal(32).astype(np.float32)
    scale = np.array([300.0], np.float32)  # pushes the tails past e4m3's 448: saturation
    text = forward_module(shape, "f32", T[np.dtype(fp8_t)], kind, False, eps, 1)
    out, sinv, amax, _, _ = run(text, [x, scale, np.array([0.5], np.float32), gamma, beta])
    y, _, _ = numpy_norm(x, gamma, beta, kind, False, eps)
    limit = float(ml_dtypes.finfo(fp8_t).max)

    def cast(v):
        return np.clip(v, -limit, limit).astype(np.float32).astype(fp8_t)

    v = y * float(scale[0])
    want = cast(v)
    unambiguous = cast(v * (1 - 1e-5)).astype(np.float32) == cast(v * (1 + 1e-5)).astype(np.float32)
    assert unambiguous.mean() > 0.9
    np.testing.assert_array_equal(out.astype(np.float32)[unambiguous], want.astype(np.float32)[unambiguous])
    if fp8_t == ml_dtypes.float8_e4m3fn:
        assert (np.abs(out.astype(np.float32)) == limit).any(), "the case should saturate"
    np.testing.assert_array_equal(sinv, np.float32(1) / scale)
    # updated_amax = max(amax operand, max|y|) in f32
    assert_close(amax, np.maximum(0.5, np.abs(y).max()).reshape(1).astype(np.float32))


def test_norm_forward_amax_when_no_scaling_is_of_the_output_typed_value():
    shape = (3, 16)
    x = RNG.standard_normal(shape).astype(ml_dtypes.bfloat16)
    gamma = RNG.standard_normal(16).astype(ml_dtypes.bfloat16)
    beta = RNG.standard_normal(16).astype(ml_dtypes.bfloat16)
    text = forward_module(shape, "bf16", "bf16", 0, False, 1e-5, 0, amax_flag=True)
    out, _, amax, _, _ = run(text, [x, np.ones(1, np.float32), np.zeros(1, np.float32), gamma, beta])
    np.testing.assert_array_equal(amax, np.abs(out.astype(np.float32)).max(keepdims=True).reshape(1))


@pytest.mark.parametrize("kind, zero_centered, dt", sweep(
    [(k, z, d) for k, z in ((0, True), (1, False), (0, False)) for d in (np.float32, ml_dtypes.bfloat16)], {0, 3}))
def test_norm_backward_matches_jax_vjp(kind, zero_centered, dt):
    shape, eps = (2, 4, 48), 1e-5
    x = RNG.standard_normal(shape).astype(dt)
    gamma = (RNG.standard_normal(48) * 0.5).astype(dt)
    beta = RNG.standard_normal(48).astype(dt)
    dz = RNG.standard_normal(shape).astype(dt)
    _, mu, rs = numpy_norm(x, gamma, beta, kind, zero_centered, eps)
    mu = (mu if mu is not None else np.zeros(1)).astype(np.float32)
    text = backward_module(shape, T[np.dtype(dt)], kind, zero_centered)
    dx, dg, db = run(text, [dz, x, mu, rs.astype(np.float32), gamma])
    @jax.jit
    def vjp_of_reference(a, g, b, d):
        return jax.vjp(lambda a, g, b: jax_norm(a, g, b, kind, zero_centered, eps), a, g, b)[1](d)

    want_dx, want_dg, want_db = (np.asarray(v) for v in vjp_of_reference(
        *(jnp.asarray(v, jnp.float32) for v in (x, gamma, beta, dz))))
    # f32 sums over 8 rows / 48 columns on both sides, one rounding to dt at the end:
    # dt's tolerance; absolute floor 1e-4·scale for the cancellations in dx's mean terms.
    atol = 1e-4 if dt == np.float32 else 4e-2
    assert_close(dx, want_dx.astype(dt), atol=atol)
    assert_close(dg, want_dg.astype(dt), atol=atol)
    if kind == 0:
        assert_close(db, want_db.astype(dt), atol=atol)


@settings(max_examples=3, deadline=None)
@given(rows=st.integers(1, 5), hidden=st.sampled_from([8, 24, 40]), kind=st.sampled_from([0, 1]),
       eps=st.sampled_from([1e-6, 1e-3, 0.5]))
def test_norm_forward_property(rows, hidden, kind, eps):
    x = RNG.standard_normal((rows, hidden)).astype(np.float32)
    gamma = RNG.standard_normal(hidden).astype(np.float32)
    beta = RNG.standard_normal(hidden).astype(np.float32)
    text = forward_module((rows, hidden), "f32", "f32", kind, False, eps, 0)
    out, *_ = run(text, [x, np.ones(1, np.float32), np.zeros(1, np.float32), gamma, beta])
    assert_close(out, numpy_norm(x, gamma, beta, kind, False, eps)[0].astype(np.float32), atol=1e-5)


@pytest.mark.parametrize("mode, what", [(2, "MXFP8_1D_SCALING"), (3, "CURRENT_TENSOR_SCALING")])
def test_unsupported_norm_scaling_modes_are_located_errors(mode, what):
    text = forward_module((2, 32), "bf16", "f8e4m3fn", 0, False, 1e-5, mode)
    with pytest.raises(PassError, match=rf"te_norm.hlo:\d+:\d+: error: .*te_norm_forward_ffi.*{what}"):
        convert_text(text, "te_norm.hlo")


def test_unknown_norm_type_is_a_located_error():
    text = forward_module((2, 32), "bf16", "bf16", 0, False, 1e-5, 0).replace("norm_type = 0", "norm_type = 7")
    with pytest.raises(PassError, match=r"norm_type 7"):
        convert_text(text, "te_norm.hlo")
