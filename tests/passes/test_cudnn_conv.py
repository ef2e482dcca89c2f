"""cuDNN convolution custom-calls as XLA's GPU compiler writes them (conv_rewriter.cc: the
forward conv's window and dim_labels on every kind), rewritten by the default pipeline and
checked against jax.lax.conv_general_dilated and its jax.vjp gradients on CPU.

Tolerances: f32 convolutions whose reductions run in a different order (transposed
convolution vs XLA's own gradient) differ by a few f32 ulps of the sum of |terms|; 1e-4
relative to inputs of magnitude ~1 over at most ~150 terms leaves a wide margin."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from converter.runtime.convert import convert_text
from tests.helpers import assert_close, convert_program

RTOL = ATOL = 1e-4
FORWARD, BW_INPUT, BW_FILTER, FUSED = ("__cudnn$convForward", "__cudnn$convBackwardInput",
                                       "__cudnn$convBackwardFilter", "__cudnn$convBiasActivationForward")


def backend_config(scale=1.0, activation="kNone", side_scale=0.0, alpha=0.0) -> str:
    return json.dumps({"operation_queue_id": "0", "cudnn_conv_backend_config": {
        "activation_mode": activation, "conv_result_scale": scale, "side_input_scale": side_scale,
        "algorithm": {"algo_id": "-1", "math_type": "DEFAULT_MATH", "tuning_knobs": {}, "is_cudnn_frontend": False},
        "leakyrelu_alpha": alpha}}, separators=(",", ":"))


def shape_text(a: np.ndarray | tuple) -> str:
    dims = a.shape if isinstance(a, np.ndarray) else a
    return f"f32[{','.join(map(str, dims))}]{{{','.join(map(str, reversed(range(len(dims)))))}}}"


def conv_module(target: str, operands: list[np.ndarray], result: tuple, window: str, dim_labels: str,
                groups: int = 1, config: str | None = None) -> str:
    params = "\n".join(f"  p{i} = {shape_text(a)} parameter({i})" for i, a in enumerate(operands))
    names = ", ".join(f"p{i}" for i in range(len(operands)))
    group = f", feature_group_count={groups}" if groups > 1 else ""
    return f"""HloModule conv
ENTRY main {{
{params}
  c = ({shape_text(result)}, u8[0]{{0}}) custom-call({names}), window={{{window}}}, dim_labels={dim_labels}{group}, custom_call_target="{target}", backend_config={config or backend_config()}
  ROOT r = {shape_text(result)} get-tuple-element(c), index=0
}}
"""


def run(text: str, *inputs: np.ndarray) -> np.ndarray:
    assert "custom_call" not in str(convert_text(text))
    return convert_program(text)(*inputs)[0]


# (window text, strides, padding, rhs dilation) in XLA's and JAX's spellings.
WINDOWS = {
    "plain": ("size=3x3", (1, 1), ((0, 0), (0, 0)), (1, 1)),
    "padded": ("size=3x3 pad=1_1x1_1", (1, 1), ((1, 1), (1, 1)), (1, 1)),
    "strided": ("size=3x3 stride=2x2 pad=1_1x1_1", (2, 2), ((1, 1), (1, 1)), (1, 1)),
    "asymmetric": ("size=3x2 stride=2x1 pad=0_2x1_0", (2, 1), ((0, 2), (1, 0)), (1, 1)),
    "dilated": ("size=3x3 stride=1x2 pad=2_2x1_1 rhs_dilate=2x1", (1, 2), ((2, 2), (1, 1)), (2, 1)),
}


def jax_conv(x, w, strides, padding, dilation, groups=1):
    return jax.lax.conv_general_dilated(x, w, strides, padding, rhs_dilation=dilation,
                                        dimension_numbers=("NHWC", "OHWI", "NHWC"), feature_group_count=groups,
                                        precision=jax.lax.Precision.HIGHEST)


@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_forward_and_both_gradients_match_jax(name, groups):
    """Plain, grouped and depthwise (groups = input features) convolutions: the backward
    kinds of grouped convs need the filter regrouped (input) and batch groups (filter)."""
    window, strides, padding, dilation = WINDOWS[name]
    kernel = [int(s) for s in window.split()[0][len("size="):].split("x")]
    rng = np.random.default_rng(sorted(WINDOWS).index(name) * 10 + groups)
    x = rng.standard_normal((2, 9, 8, 4)).astype(np.float32)
    w = rng.standard_normal((8, *kernel, 4 // groups)).astype(np.float32)
    y, vjp = jax.vjp(lambda x, w: jax_conv(x, w, strides, padding, dilation, groups), x, w)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx, dw = vjp(dy)
    labels = "b01f_o01i->b01f"
    got_y = run(conv_module(FORWARD, [x, w], y.shape, window, labels, groups), x, w)
    assert_close(got_y, np.asarray(y), RTOL, ATOL, what="forward")
    got_dx = run(conv_module(BW_INPUT, [dy, w], x.shape, window, labels, groups), dy, w)
    assert_close(got_dx, np.asarray(dx), RTOL, ATOL, what="backward input")
    got_dw = run(conv_module(BW_FILTER, [x, dy], w.shape, window, labels, groups), x, dy)
    assert_close(got_dw, np.asarray(dw), RTOL, ATOL, what="backward filter")


def test_other_dim_orders():
    """NCHW / OIHW, as cuDNN gets them when XLA keeps JAX's default layout."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((5, 4, 3, 2)).astype(np.float32)
    f = lambda x, w: jax.lax.conv_general_dilated(x, w, (2, 1), ((1, 1), (0, 1)), precision="highest")  # noqa: E731
    y, vjp = jax.vjp(f, x, w)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx, dw = vjp(dy)
    window, labels = "size=3x2 stride=2x1 pad=1_1x0_1", "bf01_oi01->bf01"
    assert_close(run(conv_module(FORWARD, [x, w], y.shape, window, labels), x, w), np.asarray(y), RTOL, ATOL)
    assert_close(run(conv_module(BW_INPUT, [dy, w], x.shape, window, labels), dy, w), np.asarray(dx), RTOL, ATOL)
    assert_close(run(conv_module(BW_FILTER, [x, dy], w.shape, window, labels), x, dy), np.asarray(dw), RTOL, ATOL)


ACTIVATIONS = {
    "kNone": lambda y: y, "kRelu": jax.nn.relu, "kRelu6": jax.nn.relu6, "kTanh": jnp.tanh,
    "kSigmoid": jax.nn.sigmoid, "kElu": jax.nn.elu, "kLeakyRelu": lambda y: jax.nn.leaky_relu(y, 0.1),
}


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("side", [False, True])
def test_bias_activation_forward(activation, side):
    """act(conv_result_scale·conv(x, w) + side_input_scale·side + bias), bias along the
    output features (cudnn_fused_conv_rewriter.cc)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 5, 3)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bias = rng.standard_normal((4,)).astype(np.float32)
    y = jax_conv(x, w, (1, 1), ((1, 1), (1, 1)), (1, 1))
    side_input = rng.standard_normal(y.shape).astype(np.float32)
    want = 0.5 * y + bias + (1.5 * side_input if side else 0)
    want = ACTIVATIONS[activation](want)
    config = backend_config(scale=0.5, activation=activation, side_scale=1.5 if side else 0.0, alpha=0.1)
    ops = [x, w, bias] + ([side_input] if side else [])
    got = run(conv_module(FUSED, ops, y.shape, "size=3x3 pad=1_1x1_1", "b01f_o01i->b01f", config=config), *ops)
    assert_close(got, np.asarray(want), RTOL, ATOL, what=activation)


def test_unknown_activation_is_refused_by_name():
    rng = np.random.default_rng(0)
    x, w, bias = (rng.standard_normal(s).astype(np.float32) for s in [(1, 4, 4, 2), (2, 3, 3, 2), (2,)])
    text = conv_module(FUSED, [x, w, bias], (1, 4, 4, 2), "size=3x3 pad=1_1x1_1", "b01f_o01i->b01f",
                       config=backend_config(activation="kBandPass"))
    with pytest.raises(Exception, match=r"%c .*activation_mode kBandPass"):
        convert_text(text)


def _int8_module(target: str, result_type: str, config: str | None = None) -> str:
    bias = "\n  p2 = f32[2]{0} parameter(2)" if target == FUSED else ""
    names = "p0, p1, p2" if target == FUSED else "p0, p1"
    return f"""HloModule conv_s8
ENTRY main {{
  p0 = s8[1,4,4,8]{{3,2,1,0}} parameter(0)
  p1 = s8[2,3,3,8]{{3,2,1,0}} parameter(1){bias}
  c = ({result_type}[1,4,4,2]{{3,2,1,0}}, u8[0]{{0}}) custom-call({names}), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_o01i->b01f, custom_call_target="{target}", backend_config={config or backend_config()}
  ROOT r = {result_type}[1,4,4,2]{{3,2,1,0}} get-tuple-element(c), index=0
}}
"""


@pytest.mark.parametrize("target,result_type", [(FORWARD, "s8"), (FUSED, "s8"), (FUSED, "s32")])
def test_integer_convolutions_that_would_round_or_saturate_are_refused(target, result_type):
    """An s8 result (or a fused bias/activation on integers) is computed by cuDNN in s32/f32
    and rounded and saturated: computing it in the result type would overflow silently."""
    with pytest.raises(Exception, match=rf"%c .*integer cuDNN convolution with a i{result_type[1:]} result"):
        convert_text(_int8_module(target, result_type))


def test_an_s8_convolution_into_s32_is_exact():
    """s8 operands into an s32 result: every product and sum fits, the integers are exact
    (NumPy's int64 convolution is the oracle)."""
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 4, 4, 8), dtype=np.int8)
    w = rng.integers(-128, 128, (2, 3, 3, 8), dtype=np.int8)
    got = run(_int8_module(FORWARD, "s32"), x, w)
    xp = np.pad(x.astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros((1, 4, 4, 2), np.int64)
    for i in range(4):
        for j in range(4):
            want[0, i, j] = np.einsum("hwc,ohwc->o", xp[0, i:i + 3, j:j + 3], w.astype(np.int64))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
