"""te-norm: Transformer Engine's JAX LayerNorm / RMSNorm calls → portable math.

`te_norm_forward_ffi` (x, scale, amax, gamma, beta) → (output, colwise_output, scale_inv,
colwise_scale_inv, updated_amax, mu, rsigma, workspace) {norm_type, zero_centered_gamma,
epsilon, sm_margin, scaling_mode, quantize_layout, output_amax_when_no_scaling} and
`te_norm_backward_ffi` (dz, x, mu, rsigma, gamma) → (dx, dgamma, dbeta, workspace)
{norm_type, zero_centered_gamma, sm_margin}, as in NVIDIA/TransformerEngine
transformer_engine/jax/csrc/extensions/normalization.cpp (NormForwardFFI,
NormBackwardFFI) and common/normalization/{layernorm,rmsnorm}/*_kernels.cuh: rows are
x collapsed to [x.size / gamma.size, gamma.size]; all math in f32 (compute_t);
NVTE_Norm_Type 0 LayerNorm y = γ·(x − μ)·rsigma + β, 1 RMSNorm y = γ·x·rsigma, rsigma =
rsqrt(mean + ε), γ + 1 when zero_centered_gamma.  An fp8 output (delayed tensor scaling)
is saturate(y · scale) in the fp8 type, scale_inv = 1/scale; updated_amax (aliased to
the amax operand, atomically max-ed by the kernel) = max(amax, max|y|), where y is the
f32 value for fp8 outputs and the output-typed value otherwise, written when scaling is
delayed or output_amax_when_no_scaling.

Refused by name: MXFP8 / NVFP4 fused norms (block scales), and a used colwise
(transposed) output."""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker
from passes.lib.te_common import (DELAYED_TENSOR_SCALING, NO_SCALING, amax_of, attr, broadcast_scalar, f32,
                                  fp8_cast, is_fp8, placeholder, reshape_to, scalar_of, scaling_mode_name)

FORWARD = ("te_norm_forward_ffi",)
BACKWARD = ("te_norm_backward_ffi",)
NORM_TYPES = {0: "LayerNorm", 1: "RMSNorm"}


def _norm_type(op: ir.Operation, cfg: dict) -> int:
    kind = int(attr(op, cfg, "norm_type"))
    if kind not in NORM_TYPES:
        raise rewrite.op_error(op, f"norm_type {kind}: NVTE_Norm_Type has 0 (LayerNorm) and 1 (RMSNorm)")
    return kind


def _rows(x: ir.Value, gamma: ir.Value) -> tuple[ir.Value, int, int]:
    hidden = math.prod(builders.shape_of(gamma))
    batch = math.prod(builders.shape_of(x)) // hidden
    return builders.convert(builders.reshape(x, [batch, hidden]), f32()), batch, hidden


def _gamma(gamma: ir.Value, hidden: int, batch: int, zero_centered: bool) -> ir.Value:
    g = builders.convert(builders.reshape(gamma, [hidden]), f32())
    if zero_centered:
        g = builders.binary("add", g, builders.scalar_constant(1.0, f32(), [hidden]))
    return builders.broadcast_in_dim(g, [batch, hidden], [1])


def _row_mean(x: ir.Value, batch: int, hidden: int) -> ir.Value:
    total = builders.reduce(x, [1], "add", 0)
    return builders.binary("divide", total, builders.scalar_constant(float(hidden), f32(), [batch]))


def _per_row(v: ir.Value, batch: int, hidden: int) -> ir.Value:
    return builders.broadcast_in_dim(v, [batch, hidden], [0])


def lower_norm_forward(op: ir.Operation) -> None:
    cfg = rewrite.backend_config(op)
    kind = _norm_type(op, cfg)
    mode = int(attr(op, cfg, "scaling_mode"))
    if mode not in (NO_SCALING, DELAYED_TENSOR_SCALING):
        raise rewrite.op_error(op, f"scaling_mode {scaling_mode_name(mode)}: fused norm + quantize is converted for "
                               "NO_SCALING and DELAYED_TENSOR_SCALING (TE itself refuses current scaling here)")
    if len(op.operands) != 5 or len(op.results) != 8:
        raise rewrite.op_error(op, "expected 5 operands (x, scale, amax, gamma, beta) and 8 results")
    x, scale, amax_in, gamma, beta = op.operands
    out, col_out, scale_inv, col_scale_inv, updated_amax, mu_r, rsigma_r, _ = op.results
    layout = int(cfg.get("quantize_layout", 0))
    if layout != 0 and (rewrite.has_uses(col_out) or rewrite.has_uses(col_scale_inv)):
        raise rewrite.op_error(op, f"quantize_layout {layout} with its colwise (transposed) output used: not converted")
    zero_centered = bool(attr(op, cfg, "zero_centered_gamma"))
    epsilon = float(attr(op, cfg, "epsilon"))
    out_element = ir.RankedTensorType(out.type).element_type
    fp8_out = is_fp8(out_element)
    with rewrite.at(op):
        xf, batch, hidden = _rows(x, gamma)
        if kind == 0:
            mu = _row_mean(xf, batch, hidden)
            centered = builders.binary("subtract", xf, _per_row(mu, batch, hidden))
        else:
            mu = None
            centered = xf
        second = _row_mean(builders.binary("multiply", centered, centered), batch, hidden)
        rsigma = builders.unary("rsqrt", builders.binary("add", second,
                                                         builders.scalar_constant(epsilon, f32(), [batch])))
        normed = builders.binary("multiply", _per_row(rsigma, batch, hidden), centered)
        y = builders.binary("multiply", _gamma(gamma, hidden, batch, zero_centered), normed)
        if kind == 0:
            b = builders.convert(builders.reshape(beta, [hidden]), f32())
            y = builders.binary("add", y, builders.broadcast_in_dim(b, [batch, hidden], [1]))
        if fp8_out:
            if mode != DELAYED_TENSOR_SCALING:
                raise rewrite.op_error(op, f"an fp8 output ({out_element}) with scaling_mode {scaling_mode_name(mode)}")
            s = scalar_of(scale)
            output = fp8_cast(op, y, s, out_element)
            amax_source = y
        else:
            output = builders.convert(y, out_element)
            amax_source = builders.convert(output, f32())
        values: list[ir.Value | None] = [builders.reshape(output, list(ir.RankedTensorType(out.type).shape)),
                                         placeholder(op, col_out)]
        if fp8_out:
            inv = builders.binary("divide", builders.scalar_constant(1.0, f32()), scalar_of(scale))
            values.append(reshape_to(broadcast_scalar(inv, [1]), scale_inv))
        else:
            values.append(placeholder(op, scale_inv))
        values.append(placeholder(op, col_scale_inv))
        if mode == DELAYED_TENSOR_SCALING or bool(cfg.get("output_amax_when_no_scaling", False)):
            new = builders.binary("maximum", scalar_of(amax_in), amax_of(amax_source))
            values.append(reshape_to(broadcast_scalar(new, [1]), updated_amax))
        else:
            values.append(builders.reshape(amax_in, list(ir.RankedTensorType(updated_amax.type).shape)))
        values.append(reshape_to(mu, mu_r) if mu is not None else placeholder(op, mu_r))
        values.append(reshape_to(rsigma, rsigma_r))
        values.extend(placeholder(op, r) for r in op.results[len(values):])
    rewrite.replace(op, values)


def lower_norm_backward(op: ir.Operation) -> None:
    cfg = rewrite.backend_config(op)
    kind = _norm_type(op, cfg)
    if len(op.operands) != 5 or len(op.results) != 4:
        raise rewrite.op_error(op, "expected 5 operands (dz, x, mu, rsigma, gamma) and 4 results")
    dz, x, mu, rsigma, gamma = op.operands
    dx_r, dgamma_r, dbeta_r, _ = op.results
    zero_centered = bool(attr(op, cfg, "zero_centered_gamma"))
    with rewrite.at(op):
        xf, batch, hidden = _rows(x, gamma)
        dzf = builders.convert(builders.reshape(dz, [batch, hidden]), f32())
        rs = _per_row(builders.convert(builders.reshape(rsigma, [batch]), f32()), batch, hidden)
        if kind == 0:
            centered = builders.binary("subtract", xf, _per_row(builders.convert(builders.reshape(mu, [batch]), f32()),
                                                                 batch, hidden))
        else:
            centered = xf
        xhat = builders.binary("multiply", centered, rs)
        dy = builders.binary("multiply", dzf, _gamma(gamma, hidden, batch, zero_centered))
        # dx = rsigma · (dy − mean(dy) − x̂ · mean(dy · x̂)); RMSNorm has no mean(dy) term.
        mdyy = _per_row(_row_mean(builders.binary("multiply", dy, xhat), batch, hidden), batch, hidden)
        inner = builders.binary("subtract", dy, builders.binary("multiply", xhat, mdyy))
        if kind == 0:
            inner = builders.binary("subtract", inner, _per_row(_row_mean(dy, batch, hidden), batch, hidden))
        dx = builders.binary("multiply", rs, inner)
        dgamma = builders.reduce(builders.binary("multiply", dzf, xhat), [0], "add", 0)
        values: list[ir.Value | None] = [reshape_to(dx, dx_r), reshape_to(dgamma, dgamma_r)]
        if kind == 0:
            values.append(reshape_to(builders.reduce(dzf, [0], "add", 0), dbeta_r))
        else:
            values.append(placeholder(op, dbeta_r))
        values.append(placeholder(op, op.results[3]))
    rewrite.replace(op, values)


@register_pass("te-norm", "Transformer Engine LayerNorm/RMSNorm forward and backward calls (bf16/f32, fp8 delayed-"
               "scaled output) → portable math", targets=FORWARD + BACKWARD,
               preserves={Fact.CALL_TARGETS, Fact.OPS_BUT_ITS_CALLS, Fact.USES})
def lower_te_norms(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    forward, backward = walks.custom_calls_of(FORWARD, BACKWARD)
    for op in forward:
        lower_norm_forward(op)
    for op in backward:
        lower_norm_backward(op)
