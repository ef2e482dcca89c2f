"""Batch normalization, decomposed into plain ops as XLA's BatchNormExpander does (the
CPU and GPU compilers run it): the same formulas, in the same order, in the operand's
element type, so that the imported module computes what the dump's backend computed.

The order matters more than it looks: the expander takes the variance as
max(E[x²] − E[x]², 0) (not the centered two-pass sum), normalizes as ((x − mean) · rsqrt) ·
scale, and folds inference into x · scale' + shift'; each choice rounds differently,
visibly so in f16.  An earlier version of these rules used the textbook forms and
differed from XLA by several ulps.

The CPU and GPU pipelines normalize bf16 (and fp8) batch norms to f32 before expanding
them (FloatNormalization runs first: their float support has no bf16 batch norm), so
such operands are computed in f32 and only the results rounded back; f16, f32 and f64
compute in their own type."""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from converter.mlir import builders
from converter.importer.registry import import_rule


def _computed_in_f32(x: ir.Value) -> bool:
    et = builders.element_type_of(x)
    return isinstance(et, ir.BF16Type) or ir.FloatType(et).width < 16


def _widened(rule):
    """Run `rule` on f32 copies of bf16/fp8 operands and round its results back."""
    def run(ctx, x, *rest):
        if not _computed_in_f32(x):
            return rule(ctx, x, *rest)
        narrow = builders.element_type_of(x)
        f32 = ir.F32Type.get()
        results = rule(ctx, *(builders.convert(v, f32) for v in (x, *rest)))
        if isinstance(results, ir.Value):
            return builders.convert(results, narrow)
        return [builders.convert(v, narrow) for v in results]
    run.__doc__ = rule.__doc__
    return run


def _stats_dims(x: ir.Value, feature_index: int) -> tuple[list[int], int]:
    dims = builders.shape_of(x)
    reduce_dims = [i for i in range(len(dims)) if i != feature_index]
    count = 1
    for i in reduce_dims:
        count *= dims[i]
    return reduce_dims, count


def _per_feature(v: ir.Value, like: ir.Value, feature_index: int) -> ir.Value:
    return builders.broadcast_in_dim(v, builders.shape_of(like), [feature_index])


def _epsilon(ctx, et: ir.Type, shape: list[int]) -> ir.Value:
    # XLA keeps epsilon as an f32 attribute and converts that to the operand's type:
    # round through f32 first (0.001 in f64 is not f32(0.001) widened).
    return builders.scalar_constant(float(np.float32(ctx.attrs.get("epsilon", 0.001))), et, shape)


def _count(count: int, et: ir.Type, shape: list[int]) -> ir.Value:
    # The element count per feature, an s32 converted to the operand's type.
    return builders.scalar_constant(float(count), et, shape)


@import_rule("batch-norm-training")
@_widened
def import_batch_norm_training(ctx, x, scale, offset):
    fi = ctx.attrs["feature_index"]
    et = builders.element_type_of(x)
    reduce_dims, count = _stats_dims(x, fi)
    fshape = builders.shape_of(scale)
    xshape = builders.shape_of(x)
    n = _count(count, et, fshape)
    mean = builders.binary("divide", builders.reduce(x, reduce_dims), n)
    mean_of_squares = builders.binary("divide", builders.reduce(builders.binary("multiply", x, x), reduce_dims), n)
    variance = builders.binary("subtract", mean_of_squares, builders.binary("multiply", mean, mean))
    # E[x²] − E[x]² cancels, and rounds below zero when a feature's values barely spread
    # (rsqrt(var + ε) is then NaN): newer XLA's expander (jaxlib 0.12's) clamps it at 0,
    # as here; jaxlib 0.10.2's did not (NaN there, 0 here: tests/importer/test_rules_batchnorm.py).
    variance = builders.binary("maximum", variance, builders.scalar_constant(0.0, et, fshape))
    rsqrt = builders.unary("rsqrt", builders.binary("add", _per_feature(variance, x, fi), _epsilon(ctx, et, xshape)))
    normalized = builders.binary("multiply", builders.binary("subtract", x, _per_feature(mean, x, fi)), rsqrt)
    scaled = builders.binary("multiply", normalized, _per_feature(scale, x, fi))
    return [builders.binary("add", scaled, _per_feature(offset, x, fi)), mean, variance]


@import_rule("batch-norm-inference")
@_widened
def import_batch_norm_inference(ctx, x, scale, offset, mean, variance):
    fi = ctx.attrs["feature_index"]
    et = builders.element_type_of(x)
    fshape = builders.shape_of(scale)
    true_scale = builders.binary("multiply", scale, builders.unary("rsqrt", builders.binary("add", variance, _epsilon(ctx, et, fshape))))
    true_shift = builders.binary("subtract", offset, builders.binary("multiply", mean, true_scale))
    return builders.binary("add", builders.binary("multiply", x, _per_feature(true_scale, x, fi)), _per_feature(true_shift, x, fi))


@import_rule("batch-norm-grad")
@_widened
def import_batch_norm_grad(ctx, x, scale, mean, variance, grad_output):
    """grad_x = scale·rsqrt(var+ε)/N · (N·dy − Σdy − (x−μ)·Σ(dy·(x−μ))/(var+ε)),
    grad_scale = Σ(dy·(x−μ))·rsqrt(var+ε), grad_offset = Σdy, with the sums over
    every dimension but the feature's."""
    fi = ctx.attrs["feature_index"]
    et = builders.element_type_of(x)
    reduce_dims, count = _stats_dims(x, fi)
    fshape = builders.shape_of(variance)
    xshape = builders.shape_of(x)
    var_eps_x = builders.binary("add", _per_feature(variance, x, fi), _epsilon(ctx, et, xshape))
    rsqrt_x = builders.unary("rsqrt", var_eps_x)
    rsqrt_f = builders.unary("rsqrt", builders.binary("add", variance, _epsilon(ctx, et, fshape)))
    centered = builders.binary("subtract", x, _per_feature(mean, x, fi))
    sum_dy_centered = builders.reduce(builders.binary("multiply", grad_output, centered), reduce_dims)
    grad_offset = builders.reduce(grad_output, reduce_dims)
    grad_scale = builders.binary("multiply", sum_dy_centered, rsqrt_f)
    # The expander divides by broadcast(var + ε); XLA's simplifier then multiplies by the
    # broadcast reciprocal instead, which rounds differently: write that form.
    reciprocal = builders.binary("divide", builders.scalar_constant(1.0, et, fshape),
                          builders.binary("add", variance, _epsilon(ctx, et, fshape)))
    term = builders.binary("multiply", builders.binary("multiply", _per_feature(sum_dy_centered, x, fi), centered),
                    _per_feature(reciprocal, x, fi))
    n_dy = builders.binary("multiply", grad_output, _count(count, et, xshape))
    inner = builders.binary("subtract", builders.binary("subtract", n_dy, _per_feature(grad_offset, x, fi)), term)
    factor = builders.binary("divide", builders.binary("multiply", _per_feature(scale, x, fi), rsqrt_x), _count(count, et, xshape))
    return [builders.binary("multiply", factor, inner), grad_scale, grad_offset]
