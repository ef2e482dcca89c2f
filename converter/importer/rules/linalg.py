"""Contractions and linear algebra: dot, scaled-dot, ragged-dot, convolution, fft, cholesky,
triangular-solve."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from converter.importer.registry import import_rule
from converter.mlir.context import mlir_element_type
from converter.mlir.ragged_dot import ragged_dot

# XLA's PrecisionConfig.Algorithm (as printed, `algorithm=dot_bf16_bf16_f32`; the parser
# takes only these and `unset`, written so: converter.hlo.attrs.ENUMS) →
# (lhs type, rhs type, accumulation type, lhs components, rhs components, primitive ops,
# allow imprecise accumulation), StableHLO's dot_algorithm.
DOT_ALGORITHMS = {
    "dot_any_f8_any_f8_f32": ("f8e5m2", "f8e5m2", "f32", 1, 1, 1, False),
    "dot_any_f8_any_f8_f32_fast_accum": ("f8e5m2", "f8e5m2", "f32", 1, 1, 1, True),
    "dot_f16_f16_f16": ("f16", "f16", "f16", 1, 1, 1, False),
    "dot_f16_f16_f32": ("f16", "f16", "f32", 1, 1, 1, False),
    "dot_bf16_bf16_bf16": ("bf16", "bf16", "bf16", 1, 1, 1, False),
    "dot_bf16_bf16_f32": ("bf16", "bf16", "f32", 1, 1, 1, False),
    "dot_bf16_bf16_f32_x3": ("bf16", "bf16", "f32", 1, 1, 3, False),
    "dot_bf16_bf16_f32_x6": ("bf16", "bf16", "f32", 1, 1, 6, False),
    "dot_bf16_bf16_f32_x9": ("bf16", "bf16", "f32", 1, 1, 9, False),
    "dot_tf32_tf32_f32": ("tf32", "tf32", "f32", 1, 1, 1, False),
    "dot_tf32_tf32_f32_x3": ("tf32", "tf32", "f32", 1, 1, 3, False),
    "dot_f32_f32_f32": ("f32", "f32", "f32", 1, 1, 1, False),
    "dot_f64_f64_f64": ("f64", "f64", "f64", 1, 1, 1, False),
}


def precision_config(ctx) -> ir.Attribute | None:
    names = ctx.attrs.get("operand_precision")
    if not names:
        return None
    # default, high or highest, as the parser writes them (converter.hlo.attrs.ENUMS).
    return ir.ArrayAttr.get([stablehlo.PrecisionAttr.get(p.upper()) for p in names])


def dot_algorithm(ctx) -> ir.Attribute | None:
    name = ctx.attrs.get("algorithm")
    if name is None or name == "unset":
        return None
    lhs, rhs, acc, lc, rc, nops, imprecise = DOT_ALGORITHMS[name]
    def t(name):
        return ir.FloatTF32Type.get() if name == "tf32" else mlir_element_type(name)
    return stablehlo.DotAlgorithm.get(t(lhs), t(rhs), t(acc), lc, rc, nops, imprecise)


def upcast_operands(ctx, lhs: ir.Value, rhs: ir.Value) -> tuple[ir.Value, ir.Value]:
    """HLO allows dot/convolution operands of different float types (TPU: f32 x bf16);
    StableHLO does not.  XLA's OperandUpcaster defines the meaning: operands are
    converted to the (wider) result type, which is exact."""
    lt, rt = builders.element_type_of(lhs), builders.element_type_of(rhs)
    if lt == rt:
        return lhs, rhs
    result = ir.RankedTensorType(ctx.result_type()).element_type
    if isinstance(result, ir.IntegerType):
        raise ctx.error(f"integer dot/convolution with operand types {lt} and {rt}")
    return builders.convert(lhs, result), builders.convert(rhs, result)


@import_rule("dot")
def import_dot(ctx, lhs, rhs):
    lhs, rhs = upcast_operands(ctx, lhs, rhs)
    a = ctx.attrs
    if "sparsity" in a:
        raise ctx.error("sparse dot (sparsity=) has no StableHLO equivalent")
    attrs = {"dot_dimension_numbers": stablehlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=a.get("lhs_batch_dims", []),
        rhs_batching_dimensions=a.get("rhs_batch_dims", []),
        lhs_contracting_dimensions=a.get("lhs_contracting_dims", []),
        rhs_contracting_dimensions=a.get("rhs_contracting_dims", []),
    )}
    precision = precision_config(ctx)
    if precision is not None:
        attrs["precision_config"] = precision
    algorithm = dot_algorithm(ctx)
    if algorithm is not None:
        attrs["algorithm"] = algorithm
    result = ctx.result_type()
    lhs, rhs = builders.dot_operands(lhs, rhs, ir.RankedTensorType(result).element_type, bool(a.get("lhs_batch_dims")))
    return builders.op1("stablehlo.dot_general", result, [lhs, rhs], attrs)


@import_rule("scaled-dot")
def import_scaled_dot(ctx, lhs, rhs, lhs_scale, rhs_scale, *global_scales):
    """Block-scaled dot (MX/NVFP4 formats): each operand times its scale, where a scale
    dimension that divides the operand's covers blocks of consecutive elements (a
    dimension of 1 covers all: a per-tensor scale), then the dot with the instruction's
    dimension numbers (XLA's reference dequantization, BlockScalingRewriter).  With the
    two NVFP4 global scales (input, weight) the result is divided by the weight global
    scale (ScaledDotGlobalScaleExpander).  Dequantized in f32 (f64 for f64 results): the
    e8m0 scales are powers of two and fp8/fp4 values have few bits, so the products are
    exact; the dot accumulates there and rounds once to the result type."""
    if len(global_scales) not in (0, 2):
        raise ctx.error(f"scaled-dot takes 4 or 6 operands, found {4 + len(global_scales)}")
    result_t = ir.RankedTensorType(ctx.result_type())
    wide = mlir_element_type("f64" if ctx.shape.element_type == "f64" else "f32")
    try:
        lhs, rhs = builders.block_dequantize(lhs, lhs_scale, wide), builders.block_dequantize(rhs, rhs_scale, wide)
    except ValueError as e:
        raise ctx.error(f"scaled-dot: {e}") from None
    a = ctx.attrs
    product = builders.dot_general(lhs, rhs, wide, a.get("lhs_batch_dims", []), a.get("rhs_batch_dims", []),
                            a.get("lhs_contracting_dims", []), a.get("rhs_contracting_dims", []))
    if builders.shape_of(product) != list(result_t.shape):
        raise ctx.error(f"scaled-dot result {builders.shape_of(product)} differs from the declared {list(result_t.shape)}")
    if global_scales:
        weight_scale = global_scales[1]
        if any(d != 1 for d in builders.shape_of(weight_scale)):
            raise ctx.error(f"scaled-dot weight global scale of shape {builders.shape_of(weight_scale)} (expected a scalar)")
        scale = builders.reshape(builders.convert(weight_scale, wide), [])
        product = builders.binary("divide", product, builders.broadcast_in_dim(scale, builders.shape_of(product), []))
    return builders.convert(product, result_t.element_type)


@import_rule("ragged-dot")
def import_ragged_dot(ctx, lhs, rhs, group_sizes):
    a = ctx.attrs
    ragged = a.get("lhs_ragged_dims") or []
    if len(ragged) != 1:
        raise ctx.error(f"ragged-dot lhs_ragged_dims={list(ragged)}: exactly one is supported")
    try:
        return ragged_dot(lhs, rhs, group_sizes, ir.RankedTensorType(ctx.result_type()), a.get("lhs_batch_dims", []),
                          a.get("rhs_batch_dims", []), a.get("lhs_contracting_dims", []),
                          a.get("rhs_contracting_dims", []), ragged[0], a.get("rhs_group_dims", []))
    except ValueError as e:
        raise ctx.error(f"ragged-dot: {e}") from None


@import_rule("convolution")
def import_convolution(ctx, lhs, rhs):
    lhs, rhs = upcast_operands(ctx, lhs, rhs)
    a = ctx.attrs
    labels = a.get("dim_labels")
    if labels is None:
        raise ctx.error("convolution without dim_labels")
    rank = len(labels.input_spatial)
    window = a.get("window")
    dims = window.dims if window is not None and window.dims else ()
    if dims and len(dims) != rank:
        raise ctx.error(f"window has {len(dims)} dimensions, dim_labels {rank} spatial ones")
    attrs = {
        "dimension_numbers": builders.conv_dimension_numbers(labels),
        "feature_group_count": builders.i64_attr(a.get("feature_group_count", 1)),
        "batch_group_count": builders.i64_attr(a.get("batch_group_count", 1)),
    }
    # Written even without spatial dims (TPU matmuls as convolutions): a portable artifact
    # writes the empty arrays back, and the module should print as its artifact does.
    dims = dims or ()
    get = (lambda f, default: [getattr(d, f) for d in dims] if dims else [default] * rank)
    attrs["window_strides"] = builders.i64_array(get("stride", 1))
    attrs["padding"] = builders.i64_elements([[d.pad_low, d.pad_high] for d in dims] if dims else [[0, 0]] * rank, shape=(rank, 2))
    attrs["lhs_dilation"] = builders.i64_array(get("lhs_dilation", 1))
    attrs["rhs_dilation"] = builders.i64_array(get("rhs_dilation", 1))
    attrs["window_reversal"] = builders.bool_array(get("reversal", False))
    precision = precision_config(ctx)
    if precision is not None:
        attrs["precision_config"] = precision
    return builders.op1("stablehlo.convolution", ctx.result_type(), [lhs, rhs], attrs)


@import_rule("fft")
def import_fft(ctx, x):
    fft_type = ctx.attrs.get("fft_type", "FFT")
    return builders.op1("stablehlo.fft", ctx.result_type(), [x], {
        "fft_type": stablehlo.FftTypeAttr.get(fft_type),
        "fft_length": builders.i64_array(ctx.attrs["fft_length"]),
    })


@import_rule("cholesky")
def import_cholesky(ctx, a):
    return builders.op1("stablehlo.cholesky", ctx.result_type(), [a],
                 {"lower": ir.BoolAttr.get(bool(ctx.attrs.get("lower", False)))})


@import_rule("triangular-solve")
def import_triangular_solve(ctx, a, rhs):
    at = ctx.attrs
    return builders.op1("stablehlo.triangular_solve", ctx.result_type(), [a, rhs], {
        "left_side": ir.BoolAttr.get(bool(at.get("left_side", False))),
        "lower": ir.BoolAttr.get(bool(at.get("lower", False))),
        "unit_diagonal": ir.BoolAttr.get(bool(at.get("unit_diagonal", False))),
        "transpose_a": stablehlo.TransposeAttr.get(at.get("transpose_a", "NO_TRANSPOSE")),
    })
