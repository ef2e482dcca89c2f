"""arith and math ops (on scalars and vectors alike: both are tensors here)."""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.mosaic.kernel import KernelError
from passes.mosaic.translate import Translator, dense_constant, rule, tensor_type

BINARY = {
    "arith.addf": "add", "arith.addi": "add", "arith.subf": "subtract", "arith.subi": "subtract",
    "arith.mulf": "multiply", "arith.muli": "multiply", "arith.divf": "divide",
    # StableHLO's integer divide and remainder truncate toward zero, as divsi/remsi do.
    "arith.divsi": "divide", "arith.remsi": "remainder", "arith.remf": "remainder",
    # maximum/minimum propagate NaN, as maximumf/minimumf do.
    "arith.maximumf": "maximum", "arith.minimumf": "minimum", "arith.maxsi": "maximum", "arith.minsi": "minimum",
    "arith.andi": "and", "arith.ori": "or", "arith.xori": "xor",
    "arith.shli": "shift_left", "arith.shrsi": "shift_right_arithmetic", "arith.shrui": "shift_right_logical",
    "math.powf": "power", "math.atan2": "atan2", "math.copysign": None,
}
UNSIGNED_BINARY = {"arith.divui": "divide", "arith.remui": "remainder", "arith.maxui": "maximum",
                   "arith.minui": "minimum"}
UNARY = {
    "arith.negf": "negate", "math.exp": "exponential", "math.log": "log", "math.log1p": "log_plus_one",
    "math.expm1": "exponential_minus_one", "math.tanh": "tanh", "math.sqrt": "sqrt", "math.rsqrt": "rsqrt",
    "math.sin": "sine", "math.cos": "cosine", "math.tan": "tan", "math.absf": "abs", "math.absi": "abs",
    "math.floor": "floor", "math.ceil": "ceil", "math.roundeven": "round_nearest_even",
    "math.round": "round_nearest_afz", "math.cbrt": "cbrt",
}
# arith.cmpi predicates (MLIR's CmpIPredicate numbering) → direction, compare type.
CMPI = {0: ("EQ", "SIGNED"), 1: ("NE", "SIGNED"), 2: ("LT", "SIGNED"), 3: ("LE", "SIGNED"), 4: ("GT", "SIGNED"),
        5: ("GE", "SIGNED"), 6: ("LT", "UNSIGNED"), 7: ("LE", "UNSIGNED"), 8: ("GT", "UNSIGNED"),
        9: ("GE", "UNSIGNED")}
# arith.cmpf predicates: the ordered ones are StableHLO's float comparisons (false on
# NaN) except NE, which is true on NaN (une).  Unordered ones are the negation of the
# opposite ordered one.
CMPF_ORDERED = {1: "EQ", 2: "GT", 3: "GE", 4: "LT", 5: "LE", 13: "NE"}
CMPF_NEGATED = {8: 6, 9: 5, 10: 4, 11: 3, 12: 2, 14: 7}  # ueq=!one, ugt=!ole, uge=!olt, ult=!oge, ule=!ogt, uno=!ord


def _unsigned(x: ir.Value) -> ir.Value:
    width = ir.IntegerType(builders.element_type_of(x)).width
    return builders.op1("stablehlo.bitcast_convert", builders.tensor_type_like(x, element=ir.IntegerType.get_unsigned(width)), [x])


def _signless(x: ir.Value, like: ir.Value) -> ir.Value:
    return builders.op1("stablehlo.bitcast_convert", like.type, [x])


@rule("arith.constant")
def _constant(t: Translator, op: ir.Operation) -> None:
    t.set(op.results[0], dense_constant(op.attributes["value"], tensor_type(op.results[0].type)))


@rule(*BINARY)
def _binary(t: Translator, op: ir.Operation) -> None:
    x, y = (t.value(v) for v in op.operands)
    if op.name == "math.copysign":
        out = builders.select(builders.compare(y, builders.scalar_constant(0, builders.element_type_of(y), builders.shape_of(y)), "LT", "FLOAT"),
                       builders.unary("negate", builders.unary("abs", x)), builders.unary("abs", x))
    else:
        out = builders.binary(BINARY[op.name], x, y)
    t.set(op.results[0], out)


@rule(*UNSIGNED_BINARY)
def _unsigned_binary(t: Translator, op: ir.Operation) -> None:
    x, y = (t.value(v) for v in op.operands)
    t.set(op.results[0], _signless(builders.binary(UNSIGNED_BINARY[op.name], _unsigned(x), _unsigned(y)), x))


@rule("arith.floordivsi", "arith.ceildivsi")
def _round_div(t: Translator, op: ir.Operation) -> None:
    x, y = (t.value(v) for v in op.operands)
    et, shape = builders.element_type_of(x), builders.shape_of(x)
    zero, one = builders.scalar_constant(0, et, shape), builders.scalar_constant(1, et, shape)
    q = builders.binary("divide", x, y)
    inexact = builders.compare(builders.binary("multiply", q, y), x, "NE", "SIGNED")
    negative = builders.binary("xor", builders.compare(x, zero, "LT", "SIGNED"), builders.compare(y, zero, "LT", "SIGNED"))
    if op.name == "arith.floordivsi":
        adjust = builders.binary("and", inexact, negative)
        out = builders.select(adjust, builders.binary("subtract", q, one), q)
    else:
        adjust = builders.binary("and", inexact, builders.unary("not", negative))
        out = builders.select(adjust, builders.binary("add", q, one), q)
    t.set(op.results[0], out)


@rule("arith.maxnumf", "arith.minnumf")
def _num_max_min(t: Translator, op: ir.Operation) -> None:
    """maxnumf/minnumf return the other operand when one is NaN."""
    x, y = (t.value(v) for v in op.operands)
    m = builders.binary("maximum" if op.name == "arith.maxnumf" else "minimum", x, y)
    x_nan, y_nan = builders.compare(x, x, "NE", "FLOAT"), builders.compare(y, y, "NE", "FLOAT")
    t.set(op.results[0], builders.select(x_nan, y, builders.select(y_nan, x, m)))


@rule(*UNARY)
def _unary(t: Translator, op: ir.Operation) -> None:
    t.set(op.results[0], builders.unary(UNARY[op.name], t.value(op.operands[0])))


@rule("math.exp2")
def _exp2(t: Translator, op: ir.Operation) -> None:
    x = t.value(op.operands[0])
    ln2 = builders.scalar_constant(math.log(2.0), builders.element_type_of(x), builders.shape_of(x))
    t.set(op.results[0], builders.unary("exponential", builders.binary("multiply", x, ln2)))


@rule("math.log2")
def _log2(t: Translator, op: ir.Operation) -> None:
    x = t.value(op.operands[0])
    ln2 = builders.scalar_constant(math.log(2.0), builders.element_type_of(x), builders.shape_of(x))
    t.set(op.results[0], builders.binary("divide", builders.unary("log", x), ln2))


@rule("math.fma")
def _fma(t: Translator, op: ir.Operation) -> None:
    x, y, z = (t.value(v) for v in op.operands)
    t.set(op.results[0], builders.binary("add", builders.binary("multiply", x, y), z))


@rule("arith.cmpi")
def _cmpi(t: Translator, op: ir.Operation) -> None:
    x, y = (t.value(v) for v in op.operands)
    direction, kind = CMPI[int(ir.IntegerAttr(op.attributes["predicate"]).value)]
    if builders.element_type_of(x) == ir.IntegerType.get_signless(1):
        kind = "UNSIGNED"  # i1 compares as bits
    elif kind == "UNSIGNED":  # XLA compares by the element type's signedness
        x, y = _unsigned(x), _unsigned(y)
    t.set(op.results[0], builders.compare(x, y, direction, kind))


def _cmpf(x: ir.Value, y: ir.Value, predicate: int) -> ir.Value:
    shape = builders.shape_of(x)
    i1 = ir.IntegerType.get_signless(1)
    if predicate in (0, 15):
        return builders.scalar_constant(predicate == 15, i1, shape)
    if predicate in CMPF_ORDERED:
        return builders.compare(x, y, CMPF_ORDERED[predicate], "FLOAT")
    if predicate == 6:  # one: ordered and unequal
        return builders.binary("or", builders.compare(x, y, "LT", "FLOAT"), builders.compare(x, y, "GT", "FLOAT"))
    if predicate == 7:  # ord: neither is NaN
        return builders.binary("and", builders.compare(x, x, "EQ", "FLOAT"), builders.compare(y, y, "EQ", "FLOAT"))
    if predicate in CMPF_NEGATED:
        return builders.unary("not", _cmpf(x, y, CMPF_NEGATED[predicate]))
    raise KernelError(f"arith.cmpf predicate {predicate}")


@rule("arith.cmpf")
def _cmpf_rule(t: Translator, op: ir.Operation) -> None:
    x, y = (t.value(v) for v in op.operands)
    t.set(op.results[0], _cmpf(x, y, int(ir.IntegerAttr(op.attributes["predicate"]).value)))


@rule("arith.select")
def _select(t: Translator, op: ir.Operation) -> None:
    pred, x, y = (t.value(v) for v in op.operands)
    if builders.shape_of(pred) != builders.shape_of(x):  # a scalar condition choosing between vectors
        pred = builders.broadcast_in_dim(pred, builders.shape_of(x), [])
    t.set(op.results[0], builders.select(pred, x, y))


@rule("arith.extf", "arith.truncf", "arith.extsi", "arith.trunci", "arith.sitofp", "arith.fptosi",
      "arith.index_cast", "arith.index_castui")
def _convert(t: Translator, op: ir.Operation) -> None:
    out = tensor_type(op.results[0].type)
    x = t.value(op.operands[0])
    t.set(op.results[0], x if x.type == out else builders.op1("stablehlo.convert", out, [x]))


@rule("arith.extui", "arith.uitofp")
def _convert_unsigned(t: Translator, op: ir.Operation) -> None:
    out = tensor_type(op.results[0].type)
    x = t.value(op.operands[0])
    if builders.element_type_of(x) != ir.IntegerType.get_signless(1):  # i1 converts as 0/1 already
        x = _unsigned(x)
    t.set(op.results[0], builders.op1("stablehlo.convert", out, [x]))


@rule("arith.fptoui")
def _fptoui(t: Translator, op: ir.Operation) -> None:
    out = tensor_type(op.results[0].type)
    width = ir.IntegerType(out.element_type).width
    unsigned = ir.RankedTensorType.get(out.shape, ir.IntegerType.get_unsigned(width))
    t.set(op.results[0], builders.op1("stablehlo.bitcast_convert", out,
                               [builders.op1("stablehlo.convert", unsigned, [t.value(op.operands[0])])]))


@rule("arith.bitcast")
def _bitcast(t: Translator, op: ir.Operation) -> None:
    t.set(op.results[0], builders.op1("stablehlo.bitcast_convert", tensor_type(op.results[0].type), [t.value(op.operands[0])]))


@rule("tpu.bitcast")
def _tpu_bitcast(t: Translator, op: ir.Operation) -> None:
    """Same-width reinterpretation; across widths Mosaic packs along the second-minor
    dim, which is not supported yet."""
    out = tensor_type(op.results[0].type)
    x = t.value(op.operands[0])
    if builders.shape_of(x) != list(out.shape):
        raise KernelError(f"tpu.bitcast from {x.type} to {out} changes the element width")
    t.set(op.results[0], builders.op1("stablehlo.bitcast_convert", out, [x]))


@rule("tpu.reciprocal")
def _reciprocal(t: Translator, op: ir.Operation) -> None:
    """Exact on CPU; the TPU's approximate reciprocal (approx=True) is a faster estimate."""
    x = t.value(op.operands[0])
    t.set(op.results[0], builders.binary("divide", builders.scalar_constant(1, builders.element_type_of(x), builders.shape_of(x)), x))
