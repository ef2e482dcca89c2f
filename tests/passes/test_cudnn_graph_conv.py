"""`__cudnn$convForwardGraph` in the form XLA's cudnn_fused_conv_rewriter writes (F8GraphConv:
operands input, filter, then one per graph op with an external operand; results the graph's
tensor, the amax scalars, the workspace; `serialized_graph` in GraphString's syntax),
rewritten by the default pipeline and checked against the plain HLO the rewriter matched
(convert, convolution, scales, activation, saturating fp8 cast, amax), run by XLA on CPU.

Tolerances: the fp8 result is compared exactly where both sides round the same f32 value;
the f32 convolution sums ≤ 36 exact products (fp8 × fp8 is exact in f32) in another order,
so the f32 value differs by a few f32 ulps and may round to the neighbouring fp8 value: one
fp8 e4m3 ulp (2⁻³ relative). f32 results: 1e-5 relative to sums of ~1.
"""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from converter.common.errors import ConverterError
from tests.helpers import assert_close, convert_program, run_xla

WINDOW = "size=3x3 pad=1_1x1_1"
LABELS = "b01f_01io->b01f"


def config(graph: str) -> str:
    return json.dumps({"operation_queue_id": "0", "wait_on_operation_queues": [], "cudnn_conv_backend_config": {
        "activation_mode": "kNone", "conv_result_scale": 1, "side_input_scale": 0, "leakyrelu_alpha": 0,
        "serialized_graph": graph}}, separators=(",", ":"))


F8_GRAPH = "28:[f32]conv();30:[f32]scale(28);32:[f32]scale(30);33:[f32]relu(32);16:[f8e4m3fn]invscale(33);25:[f32]amax(33);"


def f8_fused(graph: str = F8_GRAPH) -> str:
    return f"""HloModule graph_conv
ENTRY main {{
  x = f8e4m3fn[2,6,6,4]{{3,2,1,0}} parameter(0)
  w = f8e4m3fn[3,3,4,8]{{3,2,1,0}} parameter(1)
  xs = f32[] parameter(2)
  ws = f32[] parameter(3)
  zs = f32[] parameter(4)
  c = (f8e4m3fn[2,6,6,8]{{3,2,1,0}}, f32[], u8[0]{{0}}) custom-call(x, w, xs, ws, zs), window={{{WINDOW}}}, dim_labels={LABELS}, custom_call_target="__cudnn$convForwardGraph", backend_config={config(graph)}
  y = f8e4m3fn[2,6,6,8]{{3,2,1,0}} get-tuple-element(c), index=0
  a = f32[] get-tuple-element(c), index=1
  ROOT t = (f8e4m3fn[2,6,6,8]{{3,2,1,0}}, f32[]) tuple(y, a)
}}
"""


F8_PLAIN = f"""HloModule plain
max {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}
ENTRY main {{
  x = f8e4m3fn[2,6,6,4] parameter(0)
  w = f8e4m3fn[3,3,4,8] parameter(1)
  xs = f32[] parameter(2)
  ws = f32[] parameter(3)
  zs = f32[] parameter(4)
  xf = f32[2,6,6,4] convert(x)
  wf = f32[3,3,4,8] convert(w)
  conv = f32[2,6,6,8] convolution(xf, wf), window={{{WINDOW}}}, dim_labels={LABELS}
  xsb = f32[2,6,6,8] broadcast(xs), dimensions={{}}
  sc1 = f32[2,6,6,8] multiply(conv, xsb)
  wsb = f32[2,6,6,8] broadcast(ws), dimensions={{}}
  sc2 = f32[2,6,6,8] multiply(sc1, wsb)
  zero = f32[] constant(0)
  zb = f32[2,6,6,8] broadcast(zero), dimensions={{}}
  r = f32[2,6,6,8] maximum(sc2, zb)
  zsb = f32[2,6,6,8] broadcast(zs), dimensions={{}}
  d = f32[2,6,6,8] divide(r, zsb)
  lo = f32[] constant(-448)
  hi = f32[] constant(448)
  lob = f32[2,6,6,8] broadcast(lo), dimensions={{}}
  hib = f32[2,6,6,8] broadcast(hi), dimensions={{}}
  cl = f32[2,6,6,8] clamp(lob, d, hib)
  y = f8e4m3fn[2,6,6,8] convert(cl)
  ab = f32[2,6,6,8] abs(r)
  amax = f32[] reduce(ab, zero), dimensions={{0,1,2,3}}, to_apply=max
  ROOT t = (f8e4m3fn[2,6,6,8], f32[]) tuple(y, amax)
}}
"""


def f8_inputs(seed: int, z_scale: float):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((2, 6, 6, 4)) * 2).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    w = rng.standard_normal((3, 3, 4, 8)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    return [x, w, np.float32(0.5), np.float32(1.5), np.float32(z_scale)]


@pytest.mark.parametrize("z_scale", [1.0, 0.05], ids=["in_range", "saturating"])
def test_fp8_scaled_relu_amax_graph_matches_plain_hlo_on_xla(z_scale):
    """The rewriter test TestConvScaledOutputF8's graph with ReLU and amax; a small z scale
    pushes values past 448 to check the saturating cast."""
    args = f8_inputs(1, z_scale)
    ours = convert_program(f8_fused())(*args)
    theirs = run_xla(F8_PLAIN, args)
    assert_close(ours[1], theirs[1], rtol=1e-5, atol=1e-5, what="amax")
    y, e = ours[0].astype(np.float32), theirs[0].astype(np.float32)
    assert_close(y, e, rtol=2 ** -3, atol=2 ** -9, what="y")
    assert np.mean(y == e) > 0.95
    if z_scale < 1:
        assert (e == 448).any() and (y == 448).any()


GENERIC_GRAPH = "1:[f32]conv();2:[f32]add(1);3:[f32]elu(2);4:[f32]min(3);5:[f32]max(4,1);"


def test_add_elu_min_max_graph_matches_plain_hlo_on_xla():
    """A graph with a tensor addend, ELU, min with an external operand and a max of two
    graph values (the convolution read twice)."""
    fused = f"""HloModule graph_conv
ENTRY main {{
  x = f32[1,5,5,3]{{3,2,1,0}} parameter(0)
  w = f32[3,3,3,4]{{3,2,1,0}} parameter(1)
  side = f32[1,5,5,4]{{3,2,1,0}} parameter(2)
  six = f32[] constant(0.75)
  sixb = f32[1,5,5,4]{{3,2,1,0}} broadcast(six), dimensions={{}}
  c = (f32[1,5,5,4]{{3,2,1,0}}, u8[0]{{0}}) custom-call(x, w, side, sixb), window={{{WINDOW}}}, dim_labels={LABELS}, custom_call_target="__cudnn$convForwardGraph", backend_config={config(GENERIC_GRAPH)}
  ROOT y = f32[1,5,5,4]{{3,2,1,0}} get-tuple-element(c), index=0
}}
"""
    plain = f"""HloModule plain
ENTRY main {{
  x = f32[1,5,5,3] parameter(0)
  w = f32[3,3,3,4] parameter(1)
  side = f32[1,5,5,4] parameter(2)
  conv = f32[1,5,5,4] convolution(x, w), window={{{WINDOW}}}, dim_labels={LABELS}
  a = f32[1,5,5,4] add(conv, side)
  zero = f32[] constant(0)
  zb = f32[1,5,5,4] broadcast(zero), dimensions={{}}
  gt = pred[1,5,5,4] compare(a, zb), direction=GT
  em = f32[1,5,5,4] exponential-minus-one(a)
  e = f32[1,5,5,4] select(gt, a, em)
  six = f32[] constant(0.75)
  sixb = f32[1,5,5,4] broadcast(six), dimensions={{}}
  m = f32[1,5,5,4] minimum(e, sixb)
  ROOT r = f32[1,5,5,4] maximum(m, conv)
}}
"""
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((1, 5, 5, 3), (3, 3, 3, 4), (1, 5, 5, 4))]
    assert_close(convert_program(fused)(*args)[0], run_xla(plain, args)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("graph,message", [
    ("1:[f32]conv();2:[f32]tanh(1);", "op 'tanh'"),
    ("1:[f32]conv();2:[f32]scale(1);", "takes 1 operands besides input and filter; the call has 3"),
    ("2:[f32]scale(1);", "does not start with the convolution"),
])
def test_unsupported_graph_is_a_located_error(graph, message):
    with pytest.raises(ConverterError, match=r"<test>:\d+:\d+: .*" + message):
        convert_program(f8_fused(graph))


def test_int8x32_vectorized_convolution_is_a_located_error():
    """cudnn_vectorize_convolutions' int8x32 form (a `?` vector dim; the filter possibly
    reordered by `__cudnn$convReorderFilter`) is refused by name, not mis-verified."""
    text = """HloModule vect
ENTRY main {
  x = s8[1,1,6,6,32]{4,3,2,1,0} parameter(0)
  w = s8[32,1,3,3,32]{4,3,2,1,0} parameter(1)
  b = f32[32]{0} parameter(2)
  c = (s8[1,1,4,4,32]{4,3,2,1,0}, u8[0]{0}) custom-call(x, w, b), window={size=3x3}, dim_labels=bf01?_oi01?->bf01?, custom_call_target="__cudnn$convBiasActivationForward", backend_config={"cudnn_conv_backend_config":{"activation_mode":"kNone","conv_result_scale":1,"side_input_scale":0,"reordered_int8_nchw_vect":true}}
  ROOT y = s8[1,1,4,4,32]{4,3,2,1,0} get-tuple-element(c), index=0
}
"""
    with pytest.raises(ConverterError, match=r"<test>:6:3: .*int8 vectorized convolution \(dim_labels=bf01\?_oi01\?->"
                                             r"bf01\?, i8 result\) is not supported: XLA vectorizes only int8 → int8 .*"
                                             r"does not document how it rounds and saturates .*make the convolution's "
                                             r"result s32 or f32"):
        convert_program(text)
