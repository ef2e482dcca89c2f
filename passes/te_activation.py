"""te-activation: Transformer Engine's JAX activation calls → portable math.

`te_act_lu_ffi` (x [..., act_len, n], scale, amax) → (output [..., n], colwise_output,
scale_inv, colwise_scale_inv, updated_amax) {act_enum, scaling_mode, quantize_layout,
act_params {clamped_swiglu {limit, alpha, glu_linear_offset}}, output_amax_when_no_scaling}
and `te_dact_dbias_quantize_ffi` (dz [..., n], x [..., act_len, n], scale, amax) →
(dx [..., act_len, n], colwise, scale_inv, colwise_scale_inv, updated_amax, dbias
[act_len, n], workspace) {scaling_mode, act_enum, quantize_layout, is_dbias, act_params,
output_amax_when_no_scaling}, as in NVIDIA/TransformerEngine transformer_engine/jax/csrc/
extensions/activation.cpp and jax/cpp_extensions/activation.py (ActivationEnum,
_jax_act_lu: the activation on x[..., 0, :] times x[..., 1, :] for gated kinds), with
the functions of common/util/math.h in f32: NVTE_Activation_Type 0 GELU (tanh form),
1 GEGLU, 2 GLU (sigmoid), 3 SILU, 4 SWIGLU, 5 RELU, 6 REGLU, 7 QGELU x·σ(1.702x), 8 QGEGLU,
9 SRELU relu(x)², 10 SREGLU, 11 CLAMPED_SWIGLU (GPT-OSS: σ(α·min(x, limit))·min(x, limit)
times clip(gate, ±limit) + offset).  The backward is the activation's derivative times
dz (and the gate's), dbias the f32 sum over rows; quantization as passes.lib.te_common.
MXFP8 outputs (rowwise and colwise, y rounded to the input type before the block amax as
TE's kernels do) as passes.lib.te_common.mxfp8_both_layouts.
Refused by name: an act_enum outside this list, NVFP4 outputs."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker
from passes.lib.te_common import attr, f32, placeholder, quantized_results, reshape_to

FORWARD = ("te_act_lu_ffi",)
BACKWARD = ("te_dact_dbias_quantize_ffi",)

Fn = Callable[[ir.Value], ir.Value]


def _c(x: ir.Value, v: float) -> ir.Value:
    return builders.scalar_constant(v, f32(), builders.shape_of(x))


def _mul(*xs: ir.Value) -> ir.Value:
    out = xs[0]
    for x in xs[1:]:
        out = builders.binary("multiply", out, x)
    return out


def _add(a: ir.Value, b: ir.Value) -> ir.Value:
    return builders.binary("add", a, b)


def _sigmoid(x: ir.Value) -> ir.Value:
    return builders.binary("divide", _c(x, 1.0), _add(_c(x, 1.0), builders.unary("exponential",
                                                                               builders.unary("negate", x))))


def _dsigmoid(x: ir.Value) -> ir.Value:
    s = _sigmoid(x)
    return _mul(s, builders.binary("subtract", _c(x, 1.0), s))


def _gelu(x: ir.Value) -> ir.Value:
    # math.h gelu: x (0.5 + 0.5 tanh(x (0.79788456 + 0.03567741 x²)))
    t = builders.unary("tanh", _mul(x, _add(_c(x, 0.79788456), _mul(_c(x, 0.03567741), x, x))))
    return _mul(x, _add(_c(x, 0.5), _mul(_c(x, 0.5), t)))


def _dgelu(x: ir.Value) -> ir.Value:
    # math.h dgelu: 0.5x((1 − t²)(0.79788456 + 0.1070322243x²)) + 0.5(1 + t),
    # t = tanh(0.79788456x(1 + 0.044715x²))
    t = builders.unary("tanh", _mul(_c(x, 0.79788456), x, _add(_c(x, 1.0), _mul(_c(x, 0.044715), x, x))))
    one_minus = builders.binary("subtract", _c(x, 1.0), _mul(t, t))
    left = _mul(_c(x, 0.5), x, one_minus, _add(_c(x, 0.79788456), _mul(_c(x, 0.1070322243), x, x)))
    return _add(left, _mul(_c(x, 0.5), _add(_c(x, 1.0), t)))


def _qgelu(alpha: float) -> Fn:
    return lambda x: _mul(x, _sigmoid(_mul(_c(x, alpha), x)))


def _dqgelu(alpha: float) -> Fn:
    return lambda x: _add(_mul(_c(x, alpha), x, _dsigmoid(_mul(_c(x, alpha), x))), _sigmoid(_mul(_c(x, alpha), x)))


def _silu(x: ir.Value) -> ir.Value:
    return _mul(x, _sigmoid(x))


def _dsilu(x: ir.Value) -> ir.Value:
    return _add(_mul(x, _dsigmoid(x)), _sigmoid(x))


def _positive(x: ir.Value) -> ir.Value:
    return builders.compare(x, _c(x, 0.0), "GT")


def _relu(x: ir.Value) -> ir.Value:
    return builders.binary("maximum", x, _c(x, 0.0))


def _drelu(x: ir.Value) -> ir.Value:
    return builders.select(_positive(x), _c(x, 1.0), _c(x, 0.0))


def _srelu(x: ir.Value) -> ir.Value:
    return builders.select(_positive(x), _mul(x, x), _c(x, 0.0))


def _dsrelu(x: ir.Value) -> ir.Value:
    return builders.select(_positive(x), _mul(_c(x, 2.0), x), _c(x, 0.0))


@dataclass(frozen=True)
class Activation:
    name: str
    act: Fn
    dact: Fn
    gated: bool


ACTIVATIONS: dict[int, Activation] = {
    0: Activation("GELU", _gelu, _dgelu, False), 1: Activation("GEGLU", _gelu, _dgelu, True),
    2: Activation("GLU", _sigmoid, _dsigmoid, True), 3: Activation("SILU", _silu, _dsilu, False),
    4: Activation("SWIGLU", _silu, _dsilu, True), 5: Activation("RELU", _relu, _drelu, False),
    6: Activation("REGLU", _relu, _drelu, True), 7: Activation("QGELU", _qgelu(1.702), _dqgelu(1.702), False),
    8: Activation("QGEGLU", _qgelu(1.702), _dqgelu(1.702), True), 9: Activation("SRELU", _srelu, _dsrelu, False),
    10: Activation("SREGLU", _srelu, _dsrelu, True),
}
CLAMPED_SWIGLU = 11


@dataclass
class Parts:
    act: Fn
    dact: Fn
    gate: Fn      # the linear half (identity, or clip + offset)
    dgate: Fn
    gated: bool


def _parts(op: ir.Operation, cfg: dict) -> Parts:
    kind = int(attr(op, cfg, "act_enum"))
    identity: Fn = lambda x: x  # noqa: E731
    if kind in ACTIVATIONS:
        a = ACTIVATIONS[kind]
        return Parts(a.act, a.dact, identity, lambda x: _c(x, 1.0), a.gated)
    if kind == CLAMPED_SWIGLU:
        params = cfg.get("act_params", {}).get("clamped_swiglu", {})
        try:
            limit, alpha, offset = (float(params[k]) for k in ("limit", "alpha", "glu_linear_offset"))
        except KeyError as e:
            raise rewrite.op_error(op, f"CLAMPED_SWIGLU without act_params.clamped_swiglu.{e.args[0]}") from None

        def clamp_hi(x):
            return builders.binary("minimum", x, _c(x, limit))

        def act(x):
            return _qgelu(alpha)(clamp_hi(x))

        def dact(x):  # math.h clamped_dsilu: 0 above the limit
            return builders.select(builders.compare(x, _c(x, limit), "LE"), _dqgelu(alpha)(clamp_hi(x)), _c(x, 0.0))

        def gate(x):
            return _add(builders.clamp(_c(x, -limit), x, _c(x, limit)), _c(x, offset))

        def dgate(x):
            inside = builders.binary("and", builders.compare(x, _c(x, -limit), "GE"),
                                     builders.compare(x, _c(x, limit), "LE"))
            return builders.select(inside, _c(x, 1.0), _c(x, 0.0))

        return Parts(act, dact, gate, dgate, True)
    names = ", ".join(f"{k} {a.name}" for k, a in ACTIVATIONS.items())
    raise rewrite.op_error(op, f"act_enum {kind}: NVTE_Activation_Type values converted are {names}, "
                           f"{CLAMPED_SWIGLU} CLAMPED_SWIGLU")


def _halves(op: ir.Operation, x: ir.Value, gated: bool) -> tuple[ir.Value, ir.Value | None, int, int]:
    shape = builders.shape_of(x)
    if len(shape) < 2 or shape[-2] != (2 if gated else 1):
        raise rewrite.op_error(op, f"input {shape}: expected [..., {2 if gated else 1}, n] for this act_enum")
    m, n = math.prod(shape[:-2]), shape[-1]
    x3 = builders.convert(builders.reshape(x, [m, shape[-2], n]), f32())
    first = builders.reshape(builders.slice_(x3, [0, 0, 0], [m, 1, n]), [m, n])
    second = builders.reshape(builders.slice_(x3, [0, 1, 0], [m, 2, n]), [m, n]) if gated else None
    return first, second, m, n


def lower_act_lu(op: ir.Operation) -> None:
    cfg = rewrite.backend_config(op)
    parts = _parts(op, cfg)
    if len(op.operands) != 3 or len(op.results) != 5:
        raise rewrite.op_error(op, "expected 3 operands (x, scale, amax) and 5 results")
    x, scale, amax = op.operands
    with rewrite.at(op):
        first, second, m, n = _halves(op, x, parts.gated)
        y = parts.act(first)
        if second is not None:
            y = _mul(y, parts.gate(second))
        values = quantized_results(op, y, list(op.results), int(attr(op, cfg, "scaling_mode")), scale, amax,
                                   bool(cfg.get("output_amax_when_no_scaling", False)), scale_axis=-1,
                                   block_input_type=builders.element_type_of(x))
    rewrite.replace(op, values)


def lower_dact(op: ir.Operation) -> None:
    cfg = rewrite.backend_config(op)
    parts = _parts(op, cfg)
    if len(op.operands) != 4 or len(op.results) != 7:
        raise rewrite.op_error(op, "expected 4 operands (dz, x, scale, amax) and 7 results")
    dz, x, scale, amax = op.operands
    results = list(op.results)
    with rewrite.at(op):
        first, second, m, n = _halves(op, x, parts.gated)
        g = builders.convert(builders.reshape(dz, [m, n]), f32())
        if second is None:
            dx = _mul(g, parts.dact(first))
            k = 1
        else:
            d_first = _mul(g, parts.gate(second), parts.dact(first))
            d_second = _mul(g, parts.act(first), parts.dgate(second))
            dx = builders.concatenate([builders.reshape(d_first, [m, 1, n]), builders.reshape(d_second, [m, 1, n])], 1)
            k = 2
        dx2 = builders.reshape(dx, [m, k * n])
        # The scales' 2-D view splits before the act axis (activation.cpp: flatten_axis =
        # output rank − 2).
        values = quantized_results(op, dx2, results[:5], int(attr(op, cfg, "scaling_mode")), scale, amax,
                                   bool(cfg.get("output_amax_when_no_scaling", False)), scale_axis=-2,
                                   block_input_type=builders.element_type_of(dz))
        dbias_r = results[5]
        if bool(cfg.get("is_dbias", False)):
            values.append(reshape_to(builders.reduce(dx2, [0], "add", 0), dbias_r))
        else:
            values.append(placeholder(op, dbias_r))
        values.append(placeholder(op, results[6]))
    rewrite.replace(op, values)


@register_pass("te-activation", "Transformer Engine activation calls (te_act_lu_ffi, te_dact_dbias_quantize_ffi; "
               "plain and gated, fp8 tensor-scaled or MXFP8 outputs) → portable math", targets=FORWARD + BACKWARD,
               preserves={Fact.CALL_TARGETS, Fact.OPS_BUT_ITS_CALLS, Fact.USES})
def lower_te_activations(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    forward, backward = walks.custom_calls_of(FORWARD, BACKWARD)
    for op in forward:
        lower_act_lu(op)
    for op in backward:
        lower_dact(op)
