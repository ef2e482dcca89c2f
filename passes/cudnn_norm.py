"""cudnn-norm: XLA GPU's `__cudnn$norm` (cuDNN layer norm, forward and backward) → plain ops.

Forms written by XLA's xla/service/gpu/transforms/cudnn_norm_rewriter.cc (CudnnNormRewriter-
Visitor::{MatchLayerNorm, MatchNormFactor, MatchLayerNormGradient}); the input is reshaped
so that dim 0 holds every non-normalized element and dims 1.. the normalized ones (padded
with 1s to rank 4); `cudnn_norm_backend_config` has `epsilon` and `kind`:

- LAYER_FWD_INFER (x, scale, bias) → (y, workspace)
- LAYER_FWD_TRAIN (x, scale, bias) → (y, mean, norm_factor, workspace)
      mean = E[x], var = E[(x − mean)²], norm_factor = (var + epsilon)^-½ (both [N,1,1,1]),
      y = (x − mean) · norm_factor · scale + bias; scale and bias are [1, normalized dims].
- LAYER_BWD (x, scale, dy, mean, norm_factor) → (dx, dscale, dbias, workspace), the
  rewriter's own formula: with xc = x − mean, F0 = Σ xc·scale·dy,
  F1 = xc · F0 · (−½ norm_factor³) · 2/n, F2 = norm_factor · scale · dy,
  dx = F1 + F2 − Σ(F1 + F2)/n (sums over the normalized dims, n their element count),
  dscale = Σ_N dy · xc · norm_factor, dbias = Σ_N dy.

Computed in f32 for f16/bf16 tensors (cuDNN's compute type for these graphs) and rounded once
to each result's type.
"""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

NORM = "__cudnn$norm"
# CudnnNormBackendConfig.Kind in XLA's xla/service/gpu/backend_configs.proto: LAYER_FWD_INFER = 0,
# LAYER_FWD_TRAIN = 1, LAYER_BWD = 2 (a JSON backend_config may print the number)
KINDS = ("LAYER_FWD_INFER", "LAYER_FWD_TRAIN", "LAYER_BWD")


@register_pass("cudnn-norm", "cuDNN layer norm custom-calls (forward inference/training, backward) → plain ops",
               targets=(NORM,), preserves={Fact.CALL_TARGETS, Fact.USES})
def lower_cudnn_norm(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(NORM):
        lower_norm_call(op)


def _kind(op: ir.Operation, cfg: dict) -> str:
    kind = cfg.get("kind", "LAYER_FWD_INFER")  # the proto default, omitted by some printers
    if isinstance(kind, int) and 0 <= kind < len(KINDS):
        kind = KINDS[kind]
    if kind not in KINDS:
        raise rewrite.op_error(op, f"cudnn_norm_backend_config.kind {kind} is not supported ({', '.join(KINDS)} are)")
    return kind


def lower_norm_call(op: ir.Operation) -> None:
    cfg = rewrite.backend_config(op).get("cudnn_norm_backend_config")
    if not isinstance(cfg, dict):
        raise rewrite.op_error(op, "backend_config has no cudnn_norm_backend_config")
    kind = _kind(op, cfg)
    operands, results = list(op.operands), list(op.results)
    expected = {"LAYER_FWD_INFER": (3, 2), "LAYER_FWD_TRAIN": (3, 4), "LAYER_BWD": (5, 4)}[kind]
    if (len(operands), len(results)) != expected:
        raise rewrite.op_error(op, f"a {kind} norm has {expected[0]} operands and {expected[1]} results (with the "
                              f"workspace); found {len(operands)} and {len(results)}")
    x_shape = builders.shape_of(operands[0])
    if len(x_shape) < 2:
        raise rewrite.op_error(op, f"the norm input has rank {len(x_shape)}; cuDNN's form has rank ≥ 2")
    with rewrite.at(op):
        if kind == "LAYER_BWD":
            values = _backward(op, operands, results)
        else:
            try:
                epsilon = float(cfg.get("epsilon", 0.0))
            except (TypeError, ValueError):
                raise rewrite.op_error(op, f"cudnn_norm_backend_config.epsilon is not a number: "
                                      f"{cfg.get('epsilon')!r}") from None
            values = _forward(operands, results, epsilon, kind == "LAYER_FWD_TRAIN")
    rest = [None if not rewrite.has_uses(r) else _zeros(op, r) for r in results[len(values):]]
    rewrite.replace(op, values + rest)


def _compute_type(*values: ir.Value) -> ir.Type:
    types = [builders.element_type_of(v) for v in values]
    if any(isinstance(t, ir.F64Type) for t in types):
        return ir.F64Type.get()
    return ir.F32Type.get()


def _stat_shape(x_shape: list[int]) -> list[int]:
    return [x_shape[0]] + [1] * (len(x_shape) - 1)


def _per_row(v: ir.Value, x_shape: list[int]) -> ir.Value:
    """A [N, 1, ...] statistic (any shape of N elements) broadcast to x's shape."""
    return builders.broadcast_in_dim(builders.reshape(v, [x_shape[0]]), x_shape, [0])


def _per_feature(v: ir.Value, x_shape: list[int]) -> ir.Value:
    """scale/bias ([1, normalized dims], any shape of their elements) broadcast to x's shape."""
    return builders.broadcast_in_dim(builders.reshape(v, x_shape[1:]), x_shape, list(range(1, len(x_shape))))


def _mean_rows(v: ir.Value, x_shape: list[int], et: ir.Type) -> ir.Value:
    """[N]: the mean over the normalized dims."""
    n = math.prod(x_shape[1:])
    total = builders.reduce(v, list(range(1, len(x_shape))))
    return builders.binary("divide", total, builders.scalar_constant(float(n), et, [x_shape[0]]))


def _forward(operands, results, epsilon: float, train: bool) -> list[ir.Value]:
    x, scale, bias = operands
    et = _compute_type(x, scale, bias)
    shape = builders.shape_of(x)
    xf, sf, bf = (builders.convert(v, et) for v in (x, scale, bias))
    mean = _mean_rows(xf, shape, et)
    xc = builders.binary("subtract", xf, builders.broadcast_in_dim(mean, shape, [0]))
    var = _mean_rows(builders.binary("multiply", xc, xc), shape, et)
    factor = builders.unary("rsqrt", builders.binary("add", var, builders.scalar_constant(epsilon, et, [shape[0]])))
    y = builders.binary("multiply", xc, builders.broadcast_in_dim(factor, shape, [0]))
    y = builders.binary("add", builders.binary("multiply", y, _per_feature(sf, shape)), _per_feature(bf, shape))
    values = [_as_result(y, results[0])]
    if train:
        values += [_as_result(mean, results[1]), _as_result(factor, results[2])]
    return values


def _backward(op, operands, results) -> list[ir.Value]:
    x, scale, dy, mean, factor = operands
    shape = builders.shape_of(x)
    if builders.shape_of(dy) != shape:
        raise rewrite.op_error(op, f"dy has shape {builders.shape_of(dy)}, x {shape}: they must match")
    et = _compute_type(x, scale, dy, mean, factor)
    xf, sf, dyf, mf, nf = (builders.convert(v, et) for v in (x, scale, dy, mean, factor))
    n = math.prod(shape[1:])
    norm_dims = list(range(1, len(shape)))
    xc = builders.binary("subtract", xf, _per_row(mf, shape))
    nf_b = _per_row(nf, shape)
    scale_dy = builders.binary("multiply", _per_feature(sf, shape), dyf)
    f0 = builders.reduce(builders.binary("multiply", xc, scale_dy), norm_dims)  # [N]
    nf_rows = builders.reshape(nf, [shape[0]])
    cube = builders.binary("multiply", builders.binary("multiply", nf_rows, nf_rows), nf_rows)
    coeff = builders.binary("multiply", builders.binary("multiply", cube, f0),
                            builders.scalar_constant(-0.5 * 2.0 / n, et, [shape[0]]))
    f1 = builders.binary("multiply", xc, builders.broadcast_in_dim(coeff, shape, [0]))
    f2 = builders.binary("multiply", nf_b, scale_dy)
    total = builders.binary("add", f1, f2)
    mean_total = _mean_rows(total, shape, et)
    dx = builders.binary("subtract", total, builders.broadcast_in_dim(mean_total, shape, [0]))
    dscale = builders.reduce(builders.binary("multiply", builders.binary("multiply", dyf, xc), nf_b), [0])
    dbias = builders.reduce(dyf, [0])
    return [_as_result(dx, results[0]), _as_result(dscale, results[1]), _as_result(dbias, results[2])]


def _as_result(v: ir.Value, result: ir.Value) -> ir.Value:
    """v reshaped (same element count) and rounded to the call result's type."""
    t = ir.RankedTensorType(result.type)
    if builders.shape_of(v) != list(t.shape):
        v = builders.reshape(v, list(t.shape))
    return builders.convert(v, t.element_type) if builders.element_type_of(v) != t.element_type else v


def _zeros(op: ir.Operation, result: ir.Value) -> ir.Value:
    with rewrite.at(op):
        return builders.zeros_like_type(result.type)
