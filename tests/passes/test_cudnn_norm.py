"""`__cudnn$norm` in the forms XLA's cudnn_norm_rewriter writes (the input bitcast to
[non-normalized elements, normalized dims..., 1s to rank 4], scale/bias to [1, ...]; the
training form adds mean and norm factor [N,1,1,1]; the backward form takes (x, scale, dy,
mean, norm factor) and returns (dx, dscale, dbias)), rewritten by the default pipeline.

Oracles: the forward against the plain layer-norm HLO the rewriter replaced, run by XLA on
CPU; the backward against jax.vjp of the same layer norm written in JAX on CPU.

Tolerances: f32 — sums of ≤ 48 terms in a different order, and a mean/variance computed
in another order: 1e-5 relative plus 1e-5 absolute (values ~1 after normalization, with
1/σ amplifying f32 rounding of x − mean a little); bf16/f16 outputs are rounded once from
f32 on both sides: one ulp of the type (bf16 2⁻⁷, f16 2⁻¹⁰) relative, same absolute.
"""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from converter.common.errors import ConverterError
from tests.helpers import assert_close, convert_program, run_xla

TYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
TOLERANCE = {"f32": (1e-5, 1e-5), "bf16": (2 ** -7, 2 ** -7), "f16": (2 ** -10, 2 ** -10)}
EPSILON = 0.001


def config(kind: str, epsilon: float = EPSILON) -> str:
    return json.dumps({"operation_queue_id": "0", "wait_on_operation_queues": [], "cudnn_norm_backend_config": {
        "epsilon": epsilon, "kind": kind, "algorithm": {"algo_id": "0", "math_type": "TENSOR_OP_MATH",
                                                        "workspace_size": "1096", "tuning_knobs": {},
                                                        "is_cudnn_frontend": True}}}, separators=(",", ":"))


def st(dtype, dims) -> str:
    return f"{dtype}[{','.join(map(str, dims))}]{{{','.join(map(str, reversed(range(len(dims)))))}}}"


def cudnn_shapes(x_shape, norm_rank):
    rows = math.prod(x_shape[:len(x_shape) - norm_rank])
    dims = [rows, *x_shape[len(x_shape) - norm_rank:]]
    dims += [1] * (4 - len(dims))
    return dims, [1, *dims[1:]], [rows, 1, 1, 1]


def fused_forward(dtype, x_shape, norm_rank, kind="LAYER_FWD_TRAIN", epsilon=EPSILON) -> str:
    """x [..., normalized dims], scale/bias [normalized dims] → (y, mean, norm factor)."""
    feat = x_shape[len(x_shape) - norm_rank:]
    cx, cs, stat = cudnn_shapes(x_shape, norm_rank)
    rows = stat[0]
    if kind == "LAYER_FWD_INFER":
        call = f"({st(dtype, cx)}, u8[1096]{{0}})"
        extra, root = "", f"ROOT y = {st(dtype, x_shape)} bitcast(y0)"
    else:
        call = f"({st(dtype, cx)}, {st('f32', stat)}, {st('f32', stat)}, u8[1096]{{0}})"
        extra = (f"  m0 = {st('f32', stat)} get-tuple-element(c), index=1\n"
                 f"  m = f32[{rows}]{{0}} bitcast(m0)\n"
                 f"  f0 = {st('f32', stat)} get-tuple-element(c), index=2\n"
                 f"  f = f32[{rows}]{{0}} bitcast(f0)\n  y = {st(dtype, x_shape)} bitcast(y0)\n")
        root = f"ROOT t = ({st(dtype, x_shape)}, f32[{rows}]{{0}}, f32[{rows}]{{0}}) tuple(y, m, f)"
    return f"""HloModule norm
ENTRY main {{
  x = {st(dtype, x_shape)} parameter(0)
  s = {st(dtype, feat)} parameter(1)
  b = {st(dtype, feat)} parameter(2)
  xb = {st(dtype, cx)} bitcast(x)
  sb = {st(dtype, cs)} bitcast(s)
  bb = {st(dtype, cs)} bitcast(b)
  c = {call} custom-call(xb, sb, bb), custom_call_target="__cudnn$norm", backend_config={config(kind, epsilon)}
  y0 = {st(dtype, cx)} get-tuple-element(c), index=0
{extra}  {root}
}}
"""


def plain_forward(dtype, x_shape, norm_rank, epsilon=EPSILON) -> str:
    """The layer norm the rewriter matched (expectation, variance, norm factor), in f32."""
    r = len(x_shape)
    nd = list(range(r - norm_rank, r))
    keep = list(range(r - norm_rank))
    feat = x_shape[r - norm_rank:]
    rest = x_shape[:r - norm_rank]
    n = math.prod(feat)
    ks = ",".join(map(str, keep))
    fs = ",".join(map(str, nd))
    return f"""HloModule plain
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
ENTRY main {{
  xi = {st(dtype, x_shape)} parameter(0)
  si = {st(dtype, feat)} parameter(1)
  bi = {st(dtype, feat)} parameter(2)
  x = {st('f32', x_shape)} convert(xi)
  s = {st('f32', feat)} convert(si)
  b = {st('f32', feat)} convert(bi)
  zero = f32[] constant(0)
  rn = f32[] constant({1.0 / n!r})
  rnb = {st('f32', rest)} broadcast(rn), dimensions={{}}
  sum = {st('f32', rest)} reduce(x, zero), dimensions={{{fs}}}, to_apply=add
  mean = {st('f32', rest)} multiply(sum, rnb)
  meanb = {st('f32', x_shape)} broadcast(mean), dimensions={{{ks}}}
  xc = {st('f32', x_shape)} subtract(x, meanb)
  sq = {st('f32', x_shape)} multiply(xc, xc)
  sqs = {st('f32', rest)} reduce(sq, zero), dimensions={{{fs}}}, to_apply=add
  var = {st('f32', rest)} multiply(sqs, rnb)
  eps = f32[] constant({epsilon!r})
  epsb = {st('f32', rest)} broadcast(eps), dimensions={{}}
  ve = {st('f32', rest)} add(var, epsb)
  nf = {st('f32', rest)} rsqrt(ve)
  nfb = {st('f32', x_shape)} broadcast(nf), dimensions={{{ks}}}
  xn = {st('f32', x_shape)} multiply(xc, nfb)
  sb = {st('f32', x_shape)} broadcast(s), dimensions={{{fs}}}
  bb = {st('f32', x_shape)} broadcast(b), dimensions={{{fs}}}
  ys = {st('f32', x_shape)} multiply(xn, sb)
  y0 = {st('f32', x_shape)} add(ys, bb)
  y = {st(dtype, x_shape)} convert(y0)
  ROOT t = ({st(dtype, x_shape)}, {st('f32', rest)}, {st('f32', rest)}) tuple(y, mean, nf)
}}
"""


CASES = [((6, 8), 1), ((2, 4, 6, 8), 2), ((3, 2, 5), 1), ((2, 3, 4, 2, 2), 3)]


def inputs(dtype, x_shape, norm_rank, seed=0):
    rng = np.random.default_rng(seed)
    t = TYPES[dtype]
    feat = x_shape[len(x_shape) - norm_rank:]
    x = (rng.standard_normal(x_shape) * 2 + 0.5).astype(np.float32).astype(t)
    s = rng.standard_normal(feat).astype(np.float32).astype(t)
    b = rng.standard_normal(feat).astype(np.float32).astype(t)
    return x, s, b


FORWARD_CASES = [("f32", *c) for c in CASES] + [("bf16", *CASES[1]), ("f16", *CASES[2])]


@pytest.mark.parametrize("dtype,x_shape,norm_rank", FORWARD_CASES, ids=str)
def test_forward_training_matches_plain_hlo_on_xla(dtype, x_shape, norm_rank):
    args = inputs(dtype, x_shape, norm_rank)
    ours = convert_program(fused_forward(dtype, x_shape, norm_rank))(*args)
    theirs = run_xla(plain_forward(dtype, x_shape, norm_rank), list(args))
    rows = ours[1].shape[0]
    rtol, atol = TOLERANCE[dtype]
    assert_close(ours[0], theirs[0], rtol=rtol, atol=atol, what="y")
    # The statistics are f32 on both sides, from the same (rounded) inputs.
    assert_close(ours[1], theirs[1].reshape(rows), rtol=1e-5, atol=1e-6, what="mean")
    assert_close(ours[2], theirs[2].reshape(rows), rtol=1e-5, atol=1e-6, what="norm factor")


def test_forward_inference_matches_plain_hlo_on_xla():
    args = inputs("f32", (4, 5, 6), 1, seed=3)
    ours = convert_program(fused_forward("f32", (4, 5, 6), 1, kind="LAYER_FWD_INFER", epsilon=1e-5))(*args)[0]
    theirs = run_xla(plain_forward("f32", (4, 5, 6), 1, epsilon=1e-5), list(args))[0]
    assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def backward_module(dtype, x_shape, norm_rank) -> str:
    """Forward (training) then backward calls, as the rewriter leaves a layer norm's
    forward and gradient: returns (y, dx, dscale, dbias)."""
    feat = x_shape[len(x_shape) - norm_rank:]
    cx, cs, stat = cudnn_shapes(x_shape, norm_rank)
    return f"""HloModule norm_grad
ENTRY main {{
  x = {st(dtype, x_shape)} parameter(0)
  s = {st(dtype, feat)} parameter(1)
  b = {st(dtype, feat)} parameter(2)
  dy = {st(dtype, x_shape)} parameter(3)
  xb = {st(dtype, cx)} bitcast(x)
  sb = {st(dtype, cs)} bitcast(s)
  bb = {st(dtype, cs)} bitcast(b)
  dyb = {st(dtype, cx)} bitcast(dy)
  c = ({st(dtype, cx)}, {st('f32', stat)}, {st('f32', stat)}, u8[1096]{{0}}) custom-call(xb, sb, bb), custom_call_target="__cudnn$norm", backend_config={config("LAYER_FWD_TRAIN")}
  y0 = {st(dtype, cx)} get-tuple-element(c), index=0
  m = {st('f32', stat)} get-tuple-element(c), index=1
  f = {st('f32', stat)} get-tuple-element(c), index=2
  g = ({st(dtype, cx)}, {st(dtype, cs)}, {st(dtype, cs)}, u8[1096]{{0}}) custom-call(xb, sb, dyb, m, f), custom_call_target="__cudnn$norm", backend_config={config("LAYER_BWD")}
  dx0 = {st(dtype, cx)} get-tuple-element(g), index=0
  ds0 = {st(dtype, cs)} get-tuple-element(g), index=1
  db0 = {st(dtype, cs)} get-tuple-element(g), index=2
  y = {st(dtype, x_shape)} bitcast(y0)
  dx = {st(dtype, x_shape)} bitcast(dx0)
  ds = {st(dtype, feat)} bitcast(ds0)
  db = {st(dtype, feat)} bitcast(db0)
  ROOT t = ({st(dtype, x_shape)}, {st(dtype, x_shape)}, {st(dtype, feat)}, {st(dtype, feat)}) tuple(y, dx, ds, db)
}}
"""


def jax_layer_norm(x, s, b, norm_rank):
    axes = tuple(range(x.ndim - norm_rank, x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + EPSILON) * s + b


@pytest.mark.parametrize("dtype,x_shape,norm_rank", [("f32", *CASES[1]), ("bf16", *CASES[2])],
                         ids=str)
def test_backward_matches_jax_vjp(dtype, x_shape, norm_rank):
    x, s, b = inputs(dtype, x_shape, norm_rank, seed=7)
    dy = np.random.default_rng(8).standard_normal(x_shape).astype(np.float32).astype(TYPES[dtype])
    y, dx, ds, db = convert_program(backward_module(dtype, x_shape, norm_rank))(x, s, b, dy)
    f32 = [a.astype(np.float32) for a in (x, s, b, dy)]
    ey, vjp = jax.vjp(lambda *a: jax_layer_norm(*a, norm_rank), *f32[:3])
    edx, eds, edb = vjp(f32[3])
    t = TYPES[dtype]
    # f32: the gradient's sums (≤ 48 terms, ~1 each) in another order, with dx a difference
    # of such sums: 1e-4. bf16: one bf16 ulp of each result's magnitude.
    rtol, atol = (1e-4, 1e-4) if dtype == "f32" else (2 ** -7, 2 ** -7 * 4)
    for name, ours, expected in (("y", y, ey), ("dx", dx, edx), ("dscale", ds, eds), ("dbias", db, edb)):
        assert_close(ours, np.asarray(expected).astype(t), rtol=rtol, atol=atol, what=name)


def test_unknown_kind_is_a_located_error():
    text = fused_forward("f32", (6, 8), 1).replace('"kind":"LAYER_FWD_TRAIN"', '"kind":"RMS_FWD"')
    with pytest.raises(ConverterError, match=r"<test>:\d+:\d+: .*kind RMS_FWD"):
        convert_program(text)


@pytest.mark.parametrize("number, name", [(0, "LAYER_FWD_INFER"), (1, "LAYER_FWD_TRAIN")])
def test_kind_by_number_is_the_proto_enum(number, name):
    """A JSON backend_config may carry the enum's number: CudnnNormBackendConfig.Kind in XLA's
    backend_configs.proto numbers LAYER_FWD_INFER 0, LAYER_FWD_TRAIN 1, LAYER_BWD 2.  The
    numbered call gives what the named one gives, and that matches the plain HLO on XLA."""
    args = inputs("f32", (6, 8), 1, seed=5)
    named = fused_forward("f32", (6, 8), 1, kind=name)
    numbered = named.replace(f'"kind":"{name}"', f'"kind":{number}')
    assert numbered != named
    by_number = convert_program(numbered)(*args)
    by_name = convert_program(named)(*args)
    for a, b in zip(by_number, by_name):
        np.testing.assert_array_equal(a, b)
    theirs = run_xla(plain_forward("f32", (6, 8), 1), list(args))
    assert_close(by_number[0], theirs[0], rtol=1e-5, atol=1e-5)
