"""arith and math ops (on scalars and vectors alike: both are tensors here)."""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from converter.mlir import builders as b
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
    width = ir.IntegerType(b.element_type_of(x)).width
    return b.op1("stablehlo.bitcast_convert", b.tensor_type_like(x, element=ir.IntegerType.get_unsigned(width)), [x])


def _signless(x: ir.Value, like: ir.Value) -> ir.Value:
    return b.op1("stablehlo.bitcast_convert", like.type, [x])


@rule("arith.constant")
def _constant(t: Translator, op: ir.Operation) -> None:
    t.set(op.results[0], dense_constant(op.attributes["value"], tensor_type(op.results[0].type)))


@rule(*BINARY)
def _binary(t: Translator, op: ir.Operation) -> None:
    x, y = (t.value(v) for v in op.operands)
    if op.name == "math.copysign":
        out = b.select(b.compare(y, b.scalar_constant(0, b.element_type_of(y), b.shape_of(y)), "LT", "FLOAT"),
                       b.unary("negate", b.unary("abs", x)), b.unary("abs", x))
    else:
        out = b.binary(BINARY[op.name], x, y)
    t.set(op.results[0], out)


@rule(*UNSIGNED_BINARY)
def _unsigned_binary(t: Translator, op: ir.Operation) -> None:
    x, y = (t.value(v) for v in op.operands)
    t.set(op.results[0], _signless(b.binary(UNSIGNED_BINARY[op.name], _unsigned(x), _unsigned(y)), x))


@rule("arith.floordivsi", "arith.ceildivsi")
def _round_div(t: Translator, op: ir.Operation) -> None:
    x, y = (t.value(v) for v in op.operands)
    et, shape = b.element_type_of(x), b.shape_of(x)
    zero, one = b.scalar_constant(0, et, shape), b.scalar_constant(1, et, shape)
    q = b.binary("divide", x, y)
    inexact = b.compare(b.binary("multiply", q, y), x, "NE", "SIGNED")
    negative = b.binary("xor", b.compare(x, zero, "LT", "SIGNED"), b.compare(y, zero, "LT", "SIGNED"))
    if op.name == "arith.floordivsi":
        adjust = b.binary("and", inexact, negative)
        out = b.select(adjust, b.binary("subtract", q, one), q)
    else:
        adjust = b.binary("and", inexact, b.unary("not", negative))
        out = b.select(adjust, b.binary("add", q, one), q)
    t.set(op.results[0], out)


@rule("arith.maxnumf", "arith.minnumf")
def _num_max_min(t: Translator, op: ir.Operation) -> None:
    """maxnumf/minnumf return the other operand when one is NaN."""
    x, y = (t.value(v) for v in op.operands)
    m = b.binary("maximum" if op.name == "arith.maxnumf" else "minimum", x, y)
    x_nan, y_nan = b.compare(x, x, "NE", "FLOAT"), b.compare(y, y, "NE", "FLOAT")
    t.set(op.results[0], b.select(x_nan, y, b.select(y_nan, x, m)))


@rule(*UNARY)
def _unary(t: Translator, op: ir.Operation) -> None:
    t.set(op.results[0], b.unary(UNARY[op.name], t.value(op.operands[0])))


@rule("math.exp2")
def _exp2(t: Translator, op: ir.Operation) -> None:
    x = t.value(op.operands[0])
    ln2 = b.scalar_constant(math.log(2.0), b.element_type_of(x), b.shape_of(x))
    t.set(op.results[0], b.unary("exponential", b.binary("multiply", x, ln2)))


@rule("math.log2")
def _log2(t: Translator, op: ir.Operation) -> None:
    x = t.value(op.operands[0])
    ln2 = b.scalar_constant(math.log(2.0), b.element_type_of(x), b.shape_of(x))
    t.set(op.results[0], b.binary("divide", b.unary("log", x), ln2))


@rule("math.fma")
def _fma(t: Translator, op: ir.Operation) -> None:
    x, y, z = (t.value(v) for v in op.operands)
    t.set(op.results[0], b.binary("add", b.binary("multiply", x, y), z))


@rule("arith.cmpi")
def _cmpi(t: Translator, op: ir.Operation) -> None:
    x, y = (t.value(v) for v in op.operands)
    direction, kind = CMPI[int(ir.IntegerAttr(op.attributes["predicate"]).value)]
    if b.element_type_of(x) == ir.IntegerType.get_signless(1):
        kind = "UNSIGNED"  # i1 compares as bits
    elif kind == "UNSIGNED":  # XLA compares by the element type's signedness
        x, y = _unsigned(x), _unsigned(y)
    t.set(op.results[0], b.compare(x, y, direction, kind))


def _cmpf(x: ir.Value, y: ir.Value, predicate: int) -> ir.Value:
    shape = b.shape_of(x)
    i1 = ir.IntegerType.get_signless(1)
    if predicate in (0, 15):
        return b.scalar_constant(predicate == 15, i1, shape)
    if predicate in CMPF_ORDERED:
        return b.compare(x, y, CMPF_ORDERED[predicate], "FLOAT")
    if predicate == 6:  # one: ordered and unequal
        return b.binary("or", b.compare(x, y, "LT", "FLOAT"), b.compare(x, y, "GT", "FLOAT"))
    if predicate == 7:  # ord: neither is NaN
        return b.binary("and", b.compare(x, x, "EQ", "FLOAT"), b.compare(y, y, "EQ", "FLOAT"))
    if predicate in CMPF_NEGATED:
        return b.unary("not", _cmpf(x, y, CMPF_NEGATED[predicate]))
    raise KernelError(f"arith.cmpf predicate {predicate}")


@rule("arith.cmpf")
def _cmpf_rule(t: Translator, op: ir.Operation) -> None:
    x, y = (t.value(v) for v in op.operands)
    t.set(op.results[0], _cmpf(x, y, int(ir.IntegerAttr(op.attributes["predicate"]).value)))


@rule("arith.select")
def _select(t: Translator, op: ir.Operation) -> None:
    pred, x, y = (t.value(v) for v in op.operands)
    if b.shape_of(pred) != b.shape_of(x):  # a scalar condition choosing between vectors
        pred = b.broadcast_in_dim(pred, b.shape_of(x), [])
    t.set(op.results[0], b.select(pred, x, y))


@rule("arith.extf", "arith.truncf", "arith.extsi", "arith.trunci", "arith.sitofp", "arith.fptosi",
      "arith.index_cast", "arith.index_castui")
def _convert(t: Translator, op: ir.Operation) -> None:
    out = tensor_type(op.results[0].type)
    x = t.value(op.operands[0])
    t.set(op.results[0], x if x.type == out else b.op1("stablehlo.convert", out, [x]))


@rule("arith.extui", "arith.uitofp")
def _convert_unsigned(t: Translator, op: ir.Operation) -> None:
    out = tensor_type(op.results[0].type)
    x = t.value(op.operands[0])
    if b.element_type_of(x) != ir.IntegerType.get_signless(1):  # i1 converts as 0/1 already
        x = _unsigned(x)
    t.set(op.results[0], b.op1("stablehlo.convert", out, [x]))


@rule("arith.fptoui")
def _fptoui(t: Translator, op: ir.Operation) -> None:
    out = tensor_type(op.results[0].type)
    width = ir.IntegerType(out.element_type).width
    unsigned = ir.RankedTensorType.get(out.shape, ir.IntegerType.get_unsigned(width))
    t.set(op.results[0], b.op1("stablehlo.bitcast_convert", out,
                               [b.op1("stablehlo.convert", unsigned, [t.value(op.operands[0])])]))


@rule("arith.bitcast")
def _bitcast(t: Translator, op: ir.Operation) -> None:
    t.set(op.results[0], b.op1("stablehlo.bitcast_convert", tensor_type(op.results[0].type), [t.value(op.operands[0])]))


@rule("tpu.bitcast")
def _tpu_bitcast(t: Translator, op: ir.Operation) -> None:
    """Same-width reinterpretation; across widths Mosaic packs along the second-minor
    dim, which is not supported yet."""
    out = tensor_type(op.results[0].type)
    x = t.value(op.operands[0])
    if b.shape_of(x) != list(out.shape):
        raise KernelError(f"tpu.bitcast from {x.type} to {out} changes the element width")
    t.set(op.results[0], b.op1("stablehlo.bitcast_convert", out, [x]))


@rule("tpu.reciprocal")
def _reciprocal(t: Translator, op: ir.Operation) -> None:
    """Exact on CPU; the TPU's approximate reciprocal (approx=True) is a faster estimate."""
    x = t.value(op.operands[0])
    t.set(op.results[0], b.binary("divide", b.scalar_constant(1, b.element_type_of(x), b.shape_of(x)), x))
