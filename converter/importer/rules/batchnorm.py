"""Batch normalization, decomposed into plain ops as XLA's BatchNormExpander does
(statistics over every dimension but `feature_index`, biased variance, computed in the
operand's element type)."""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.importer import build as b
from converter.importer.registry import import_rule


def _stats_dims(x: ir.Value, feature_index: int) -> tuple[list[int], int]:
    dims = b.shape_of(x)
    reduce_dims = [i for i in range(len(dims)) if i != feature_index]
    count = 1
    for i in reduce_dims:
        count *= dims[i]
    return reduce_dims, count


def _per_feature(v: ir.Value, like: ir.Value, feature_index: int) -> ir.Value:
    return b.broadcast_in_dim(v, b.shape_of(like), [feature_index])


def _mean(x: ir.Value, reduce_dims: list[int], count: int) -> ir.Value:
    total = b.reduce(x, reduce_dims)
    return b.binary("divide", total, b.scalar_constant(count, b.element_type_of(x), b.shape_of(total)))


def _normalize(x, scale, offset, mean, variance, epsilon, feature_index):
    et = b.element_type_of(x)
    eps = b.scalar_constant(epsilon, et, b.shape_of(variance))
    rsqrt = b.unary("rsqrt", b.binary("add", variance, eps))
    centered = b.binary("subtract", x, _per_feature(mean, x, feature_index))
    scaled = b.binary("multiply", centered, _per_feature(b.binary("multiply", rsqrt, scale), x, feature_index))
    return b.binary("add", scaled, _per_feature(offset, x, feature_index))


@import_rule("batch-norm-training")
def import_batch_norm_training(ctx, x, scale, offset):
    fi = ctx.attrs["feature_index"]
    reduce_dims, count = _stats_dims(x, fi)
    mean = _mean(x, reduce_dims, count)
    centered = b.binary("subtract", x, _per_feature(mean, x, fi))
    variance = _mean(b.binary("multiply", centered, centered), reduce_dims, count)
    out = _normalize(x, scale, offset, mean, variance, ctx.attrs.get("epsilon", 0.001), fi)
    return [out, mean, variance]


@import_rule("batch-norm-inference")
def import_batch_norm_inference(ctx, x, scale, offset, mean, variance):
    return _normalize(x, scale, offset, mean, variance, ctx.attrs.get("epsilon", 0.001), ctx.attrs["feature_index"])


@import_rule("batch-norm-grad")
def import_batch_norm_grad(ctx, x, scale, mean, variance, grad_output):
    """grad_x = scale·rsqrt(var+ε)·(dy − mean(dy) − (x−μ)·mean(dy·(x−μ))/(var+ε)),
    grad_scale = Σ dy·(x−μ)·rsqrt(var+ε), grad_offset = Σ dy."""
    fi = ctx.attrs["feature_index"]
    eps_value = ctx.attrs.get("epsilon", 0.001)
    et = b.element_type_of(x)
    reduce_dims, count = _stats_dims(x, fi)
    fshape = b.shape_of(variance)
    var_eps = b.binary("add", variance, b.scalar_constant(eps_value, et, fshape))
    rsqrt = b.unary("rsqrt", var_eps)
    centered = b.binary("subtract", x, _per_feature(mean, x, fi))
    grad_offset = b.reduce(grad_output, reduce_dims)
    sum_dy_centered = b.reduce(b.binary("multiply", grad_output, centered), reduce_dims)
    grad_scale = b.binary("multiply", sum_dy_centered, rsqrt)
    n = b.scalar_constant(count, et, fshape)
    mean_dy = b.binary("divide", grad_offset, n)
    mean_dy_centered = b.binary("divide", sum_dy_centered, n)
    term = b.binary("multiply", centered, _per_feature(b.binary("divide", mean_dy_centered, var_eps), x, fi))
    inner = b.binary("subtract", b.binary("subtract", grad_output, _per_feature(mean_dy, x, fi)), term)
    grad_x = b.binary("multiply", inner, _per_feature(b.binary("multiply", scale, rsqrt), x, fi))
    return [grad_x, grad_scale, grad_offset]
