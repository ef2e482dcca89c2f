"""Elementwise HLO opcodes: unary, binary, compare, select, clamp and conversions."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.hlo.ir import FLOAT_TYPES, SIGNED_TYPES
from converter.importer import build as b
from converter.importer.registry import import_rule
from converter.mlir_context import mlir_element_type

UNARY = {
    "abs": "stablehlo.abs", "ceil": "stablehlo.ceil", "floor": "stablehlo.floor",
    "cosine": "stablehlo.cosine", "sine": "stablehlo.sine", "tan": "stablehlo.tan",
    "tanh": "stablehlo.tanh", "exponential": "stablehlo.exponential",
    "exponential-minus-one": "stablehlo.exponential_minus_one", "log": "stablehlo.log",
    "log-plus-one": "stablehlo.log_plus_one", "logistic": "stablehlo.logistic",
    "negate": "stablehlo.negate", "not": "stablehlo.not", "sqrt": "stablehlo.sqrt",
    "rsqrt": "stablehlo.rsqrt", "cbrt": "stablehlo.cbrt", "sign": "stablehlo.sign",
    "is-finite": "stablehlo.is_finite", "popcnt": "stablehlo.popcnt",
    "count-leading-zeros": "stablehlo.count_leading_zeros",
    "round-nearest-afz": "stablehlo.round_nearest_afz",
    "round-nearest-even": "stablehlo.round_nearest_even",
    "real": "stablehlo.real", "imag": "stablehlo.imag",
}
# Opcodes without a StableHLO op: imported through CHLO and legalized to StableHLO
# (chlo-legalize-to-stablehlo) before the importer returns.
CHLO_UNARY = {
    "erf": "chlo.erf", "acos": "chlo.acos", "acosh": "chlo.acosh", "asin": "chlo.asin",
    "asinh": "chlo.asinh", "atan": "chlo.atan", "atanh": "chlo.atanh", "cosh": "chlo.cosh",
    "sinh": "chlo.sinh",
}
BINARY = {
    "add": "stablehlo.add", "subtract": "stablehlo.subtract", "multiply": "stablehlo.multiply",
    "divide": "stablehlo.divide", "remainder": "stablehlo.remainder",
    "maximum": "stablehlo.maximum", "minimum": "stablehlo.minimum", "power": "stablehlo.power",
    "atan2": "stablehlo.atan2", "and": "stablehlo.and", "or": "stablehlo.or",
    "xor": "stablehlo.xor", "shift-left": "stablehlo.shift_left",
    "shift-right-arithmetic": "stablehlo.shift_right_arithmetic",
    "shift-right-logical": "stablehlo.shift_right_logical", "complex": "stablehlo.complex",
}


@import_rule(*UNARY)
def import_unary(ctx, x):
    return b.op1(UNARY[ctx.opcode], ctx.result_type(), [x])


@import_rule("copy")
def import_copy(ctx, x):
    # Copies change layout or memory space only: the identity on values.
    return x


@import_rule(*CHLO_UNARY)
def import_chlo_unary(ctx, x):
    ctx.mi.uses_chlo = True
    return b.op1(CHLO_UNARY[ctx.opcode], ctx.result_type(), [x])


@import_rule(*BINARY)
def import_binary(ctx, lhs, rhs):
    return b.op1(BINARY[ctx.opcode], ctx.result_type(), [lhs, rhs])


@import_rule("compare")
def import_compare(ctx, lhs, rhs):
    direction = ctx.attrs.get("direction") or ctx.attrs.get("comparison_direction")
    if direction is None:
        raise ctx.error("compare has no direction=")
    attrs = {"comparison_direction": stablehlo.ComparisonDirectionAttr.get(direction)}
    compare_type = ctx.attrs.get("type")
    if compare_type is None:
        etype = ctx.operand_shape(0).element_type
        compare_type = "FLOAT" if etype in FLOAT_TYPES or etype in ("c64", "c128") else (
            "SIGNED" if etype in SIGNED_TYPES else "UNSIGNED")
    attrs["compare_type"] = stablehlo.ComparisonTypeAttr.get(compare_type)
    return b.op1("stablehlo.compare", ctx.result_type(), [lhs, rhs], attrs)


@import_rule("select")
def import_select(ctx, pred, on_true, on_false):
    return b.op1("stablehlo.select", ctx.result_type(), [pred, on_true, on_false])


@import_rule("clamp")
def import_clamp(ctx, lo, x, hi):
    return b.op1("stablehlo.clamp", ctx.result_type(), [lo, x, hi])


@import_rule("convert")
def import_convert(ctx, x):
    return b.op1("stablehlo.convert", ctx.result_type(), [x])


@import_rule("bitcast-convert")
def import_bitcast_convert(ctx, x):
    return b.op1("stablehlo.bitcast_convert", ctx.result_type(), [x])


@import_rule("reduce-precision")
def import_reduce_precision(ctx, x):
    return b.op1("stablehlo.reduce_precision", ctx.result_type(), [x], {
        "exponent_bits": b.i32_attr(ctx.attrs["exponent_bits"]),
        "mantissa_bits": b.i32_attr(ctx.attrs["mantissa_bits"]),
    })


@import_rule("mulhi")
def import_mulhi(ctx, lhs, rhs):
    """High half of the double-width product (XLA's kMulhi), by widening."""
    etype = ctx.shape.element_type
    bits = int(etype[1:])
    if bits > 32:
        raise ctx.error(f"mulhi on {etype} needs 128-bit arithmetic, which StableHLO lacks")
    wide = mlir_element_type(etype[0] + str(2 * bits))
    wl, wr = b.convert(lhs, wide), b.convert(rhs, wide)
    product = b.binary("multiply", wl, wr)
    shift = b.scalar_constant(bits, wide, b.shape_of(product))
    name = "shift_right_arithmetic" if etype.startswith("s") else "shift_right_logical"
    return b.convert(b.binary(name, product, shift), ir.RankedTensorType(ctx.result_type()).element_type)


@import_rule("stochastic-convert")
def import_stochastic_convert(ctx, x, random):
    """Float → integer with stochastic rounding, as XLA's StochasticConvertDecomposer:
    round |x| up when the random bits, read as a fraction of 2^bits, fall below the
    fractional part of |x|; restore the sign; saturate to the target's range (NaN → 0)."""
    src = ctx.operand_shape(0).element_type
    dst = ctx.shape.element_type
    if dst not in SIGNED_TYPES and not dst.startswith("u"):
        raise ctx.error(f"stochastic-convert to {dst} (only float → integer is defined)")
    ft = mlir_element_type(src)
    shape = b.shape_of(x)
    out_t = ctx.result_type()
    out_e = ir.RankedTensorType(out_t).element_type
    bits = int(ctx.operand_shape(1).element_type[1:])
    absx = b.unary("abs", x)
    floor = b.unary("floor", absx)
    frac = b.binary("subtract", absx, floor)
    # random / 2^bits in the operand's float type.
    scale = b.scalar_constant(2.0 ** -bits, ft, shape)
    rand_f = b.binary("multiply", b.convert(random, ft), scale)
    round_up = b.compare(rand_f, frac, "LT", "FLOAT")
    one = b.scalar_constant(1.0, ft, shape)
    magnitude = b.select(round_up, b.binary("add", floor, one), floor)
    signed = b.select(b.compare(x, b.scalar_constant(0.0, ft, shape), "LT", "FLOAT"),
                      b.unary("negate", magnitude), magnitude)
    info_bits = int(dst[1:])
    lo = -(2 ** (info_bits - 1)) if dst.startswith("s") else 0
    hi = 2 ** (info_bits - 1) - 1 if dst.startswith("s") else 2 ** info_bits - 1
    clamped = b.op1("stablehlo.clamp", signed.type,
                    [b.scalar_constant(lo, ft, shape), signed, b.scalar_constant(hi, ft, shape)])
    converted = b.op1("stablehlo.convert", out_t, [clamped])
    is_nan = b.compare(x, x, "NE", "FLOAT")
    return b.select(is_nan, b.scalar_constant(0, out_e, shape), converted)
