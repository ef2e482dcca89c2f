"""Triton compute ops → StableHLO: tt.dot (with Triton's input precisions), tt.reduce and
tt.scan (any combiner region), elementwise ops and libdevice functions
(tt.extern_elementwise), tt.fp_to_fp (with its rounding modes and fp8 saturation), and
the one inline PTX Pallas writes (approx_tanh).

Each op computes on tensors as Triton defines it; where the GPU computes differently
(MMA summation order, approximate tanh) the docstrings say by how much.  Registered into
passes.triton.translate.RULES (imported by it).
"""

from __future__ import annotations

import re
from typing import Callable

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.mosaic import translate as mosaic
from passes.mosaic.kernel import KernelError
from passes.mosaic.translate import tensor_type
from passes.triton.translate import Translator, rule, shape_of_type


# ------------------------------------------------------------------ tt.dot
def _round_to_tf32(x: ir.Value) -> ir.Value:
    """f32 → the nearest TF32 (10 mantissa bits; ties away from zero, as PTX's
    cvt.rna.tf32.f32 rounds), kept in f32.  Inf and NaN pass unchanged."""
    shape = builders.shape_of(x)
    u32 = ir.IntegerType.get_unsigned(32)
    bits = builders.op1("stablehlo.bitcast_convert", builders.tensor_type_like(x, element=u32), [x])
    rounded = builders.binary("and", builders.binary("add", bits, builders.scalar_constant(0x1000, u32, shape)),
                              builders.scalar_constant(0xFFFFE000, u32, shape))
    back = builders.op1("stablehlo.bitcast_convert", x.type, [rounded])
    finite = builders.op1("stablehlo.is_finite", builders.tensor_type_like(x, element=ir.IntegerType.get_signless(1)), [x])
    return builders.select(finite, back, x)


# Triton's InputPrecision enum (jaxlib/triton/_triton_enum_gen.py): TF32, TF32x3, IEEE,
# BF16x3, BF16x6; an absent attribute is its default, IEEE.
INPUT_PRECISIONS = {0: "tf32", 1: "tf32x3", 2: "ieee", 3: "bf16x3", 4: "bf16x6"}


def _round_to_bf16(x: ir.Value) -> ir.Value:
    return builders.convert(builders.convert(x, ir.BF16Type.get()), builders.element_type_of(x))


def _split_parts(x: ir.Value, rounding: Callable[[ir.Value], ir.Value], parts: int) -> list[ir.Value]:
    """x as a sum of `parts` values each exact in the narrow type (hi, then the rest)."""
    out = []
    for _ in range(parts - 1):
        hi = rounding(x)
        out.append(hi)
        x = builders.binary("subtract", x, hi)
    return out + [rounding(x)]


@rule("tt.dot")
def _dot(t: Translator, op: ir.Operation) -> None:
    """d = a·b + c, accumulated in c's type, with the input precision Triton defines for
    f32 operands (triton/include/triton/Dialect/Triton/IR/TritonAttrDefs.td):
    - ieee: exact f32 products;
    - tf32: each operand rounded to TF32 (10 mantissa bits) as the tensor cores read it;
    - tf32x3, bf16x3: each operand split in two narrow parts (hi + lo) and the three
      products hi·hi + hi·lo + lo·hi summed (lo·lo dropped), as Triton emulates them;
    - bf16x6: three parts each and the six products whose part indices sum to ≤ 2.
    bf16/f16/fp8 operands are widened to the accumulator type exactly (so fp8 products are
    exact; Hopper's fp8 MMA instead accumulates with fewer bits between the promotions
    that `maxNumImpreciseAcc` sets, so the GPU may be less exact than CPU).  CPU sums the products
    in f32 in its own order; the GPU's MMA order differs, so results agree to f32
    rounding of the sums, not bit for bit."""
    a, b, c = (t.value(v) for v in op.operands[:3])
    a_attr = op.attributes["inputPrecision"] if "inputPrecision" in op.attributes else None
    if a_attr is None:
        precision = "ieee"
    elif isinstance(a_attr, ir.IntegerAttr):
        precision = INPUT_PRECISIONS.get(int(ir.IntegerAttr(a_attr).value), str(a_attr))
    else:
        precision = str(a_attr).split()[-1].strip("<>")
    acc = builders.element_type_of(c)
    f32 = ir.F32Type.get()
    rank = len(builders.shape_of(a))
    batch = [0] if rank == 3 else []

    def product(x: ir.Value, y: ir.Value) -> ir.Value:
        x, y = (builders.convert(v, acc) if builders.element_type_of(v) != acc else v for v in (x, y))
        return builders.dot_general(x, y, acc, batch, batch, [rank - 1], [rank - 2])

    if builders.element_type_of(a) != f32 or precision == "ieee":
        d = product(a, b)
    elif precision == "tf32":
        d = product(_round_to_tf32(a), _round_to_tf32(b))
    elif precision in ("tf32x3", "bf16x3", "bf16x6"):
        rounding = _round_to_tf32 if precision.startswith("tf32") else _round_to_bf16
        parts = 3 if precision == "bf16x6" else 2
        sa, sb = _split_parts(a, rounding, parts), _split_parts(b, rounding, parts)
        pairs = sorted(((i, j) for i in range(parts) for j in range(parts) if i + j < parts),
                       key=lambda ij: -sum(ij))  # the small products first
        d = None
        for i, j in pairs:
            p = product(sa[i], sb[j])
            d = p if d is None else builders.binary("add", d, p)
    else:
        raise KernelError(f"tt.dot input precision {precision} is not supported")
    t.set(op.results[0], builders.binary("add", d, c))


# ------------------------------------------------------------------ reductions, scans
def _combine(t: Translator, region: ir.Region, lhs: list[ir.Value], rhs: list[ir.Value]) -> list[ir.Value]:
    """The combiner region applied elementwise to tensors.  One result: a stablehlo.map
    whose body is the region on rank-0 values (its ops are typed as scalars: a cast or a
    constant there, as Triton's tl.sum / tl.cumsum combiner `_sum_combine` has, takes its
    shape from that type).  Several (argmax's): the region's ops on the whole tensors
    (elementwise, typed shapes must not matter)."""
    if len(lhs) == 1:
        element = builders.element_type_of(lhs[0])
        scalar = ir.RankedTensorType.get([], element)
        map_op = builders.op("stablehlo.map", [lhs[0].type], lhs + rhs,
                             {"dimensions": builders.i64_array(range(len(builders.shape_of(lhs[0]))))}, regions=1)
        body = map_op.regions[0].blocks.append(scalar, scalar)
        with ir.InsertionPoint(body):
            out = t.run_block(region.blocks[0], list(body.arguments))
            if len(out) != 1 or not isinstance(out[0], ir.Value) or out[0].type != scalar:
                raise KernelError("a combiner region whose value is not a scalar of its operands' type")
            builders.op("stablehlo.return", [], out)
        return [map_op.results[0]]
    out = t.run_block(region.blocks[0], lhs + rhs)
    shape = builders.shape_of(lhs[0])
    if any(not isinstance(v, ir.Value) or builders.shape_of(v) != shape for v in out):
        raise KernelError("a combiner region whose values do not keep their operands' shape")
    return out


def _half(x: ir.Value, axis: int, start: int, size: int) -> ir.Value:
    shape = builders.shape_of(x)
    lo = [0] * len(shape)
    hi = list(shape)
    lo[axis], hi[axis] = start, start + size
    return builders.slice_(x, lo, hi)


@rule("tt.reduce")
def _reduce(t: Translator, op: ir.Operation) -> None:
    """A pairwise tree over the axis (Triton sizes are powers of two), the combiner
    applied to halves: any combiner region, several operands (argmax) included."""
    axis = int(ir.IntegerAttr(op.attributes["axis"]).value)
    values = [t.value(v) for v in op.operands]
    n = builders.shape_of(values[0])[axis]
    if n & (n - 1):
        raise KernelError(f"tt.reduce over an axis of {n} elements (not a power of two)")
    while n > 1:
        n //= 2
        values = _combine(t, op.regions[0], [_half(v, axis, 0, n) for v in values],
                          [_half(v, axis, n, n) for v in values])
    for r, v in zip(op.results, values):
        t.set(r, builders.reshape(v, shape_of_type(r.type)))


@rule("tt.scan")
def _scan(t: Translator, op: ir.Operation) -> None:
    """An inclusive scan along the axis in log2(n) steps (Hillis-Steele): at distance d
    each element combines with the one d before it (after it, for `reverse`)."""
    axis = int(ir.IntegerAttr(op.attributes["axis"]).value)
    reverse = "reverse" in op.attributes and ir.BoolAttr(op.attributes["reverse"]).value
    values = [t.value(v) for v in op.operands]
    n = builders.shape_of(values[0])[axis]
    if reverse:
        values = [builders.op1("stablehlo.reverse", v.type, [v], {"dimensions": builders.i64_array([axis])})
                  for v in values]
    d = 1
    while d < n:
        combined = _combine(t, op.regions[0], [_half(v, axis, 0, n - d) for v in values],
                            [_half(v, axis, d, n - d) for v in values])
        values = [builders.concatenate([_half(v, axis, 0, d), c], axis) for v, c in zip(values, combined)]
        d *= 2
    if reverse:
        values = [builders.op1("stablehlo.reverse", v.type, [v], {"dimensions": builders.i64_array([axis])})
                  for v in values]
    for r, v in zip(op.results, values):
        t.set(r, v)


# ------------------------------------------------------------------ elementwise
# libdevice functions Pallas emits (jax/_src/pallas/triton/lowering.py `_make_dispatch_table`)
# → a StableHLO (or CHLO) op of the same function, by name without the `__nv_` prefix and
# the f32 `f` suffix.
LIBDEVICE_UNARY = {
    "exp": "exponential", "log": "log", "log1p": "log_plus_one", "expm1": "exponential_minus_one", "tanh": "tanh",
    "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sine", "cos": "cosine", "tan": "tan", "fabs": "abs", "abs": "abs",
    "floor": "floor", "ceil": "ceil", "rint": "round_nearest_even", "nearbyint": "round_nearest_even",
    "round": "round_nearest_afz", "cbrt": "cbrt",
}
LIBDEVICE_CHLO = {"erf": "chlo.erf", "erfinv": "chlo.erf_inv", "asin": "chlo.asin", "acos": "chlo.acos",
                  "atan": "chlo.atan", "sinh": "chlo.sinh", "cosh": "chlo.cosh", "asinh": "chlo.asinh",
                  "acosh": "chlo.acosh", "atanh": "chlo.atanh", "lgamma": "chlo.lgamma", "digamma": "chlo.digamma"}
LIBDEVICE_BINARY = {"pow": "power", "atan2": "atan2", "fmod": "remainder", "nextafter": "next_after",
                    "fmax": None, "fmin": None}


def _libdevice_name(symbol: str) -> str:
    name = symbol.removeprefix("__nv_").removeprefix("fast_")
    for suffix in ("f", ""):
        stem = name[:-1] if suffix and name.endswith("f") else name
        if stem in LIBDEVICE_UNARY or stem in LIBDEVICE_CHLO or stem in LIBDEVICE_BINARY \
                or stem in ("exp2", "log2", "log10", "trunc", "signbit", "isnan", "isinf", "isfinited"):
            return stem
    return name


@rule("tt.extern_elementwise")
def _extern_elementwise(t: Translator, op: ir.Operation) -> None:
    symbol = ir.StringAttr(op.attributes["symbol"]).value
    name = _libdevice_name(symbol)
    args = [t.value(v) for v in op.operands]
    x = args[0]
    shape, et = builders.shape_of(x), builders.element_type_of(x)
    if name in LIBDEVICE_UNARY and len(args) == 1:
        out = builders.unary(LIBDEVICE_UNARY[name], x)
    elif name in LIBDEVICE_CHLO and len(args) == 1:
        out = builders.op1(LIBDEVICE_CHLO[name], x.type, [x])
    elif name == "exp2" and len(args) == 1:
        out = builders.binary("power", builders.scalar_constant(2.0, et, shape), x)
    elif name in ("log2", "log10") and len(args) == 1:
        base = 2.0 if name == "log2" else 10.0
        out = builders.binary("divide", builders.unary("log", x),
                              builders.unary("log", builders.scalar_constant(base, et, shape)))
    elif name == "trunc" and len(args) == 1:
        out = builders.select(builders.compare(x, builders.scalar_constant(0, et, shape), "LT", "FLOAT"),
                              builders.unary("ceil", x), builders.unary("floor", x))
    elif name in ("fmax", "fmin") and len(args) == 2:
        # fmax/fmin return the other operand where one is NaN (C's fmax), like arith.maxnumf.
        y = args[1]
        m = builders.binary("maximum" if name == "fmax" else "minimum", x, y)
        out = builders.select(builders.compare(x, x, "NE", "FLOAT"), y,
                              builders.select(builders.compare(y, y, "NE", "FLOAT"), x, m))
    elif name in LIBDEVICE_BINARY and LIBDEVICE_BINARY[name] and len(args) == 2:
        out = builders.binary(LIBDEVICE_BINARY[name], x, args[1])
    else:
        raise KernelError(f"tt.extern_elementwise {symbol} (libdevice) has no StableHLO equivalent here yet")
    t.set(op.results[0], out)


@rule("tt.precise_sqrt")
def _precise_sqrt(t: Translator, op: ir.Operation) -> None:
    """IEEE-rounded sqrt: StableHLO's sqrt on CPU is correctly rounded."""
    t.set(op.results[0], builders.unary("sqrt", t.value(op.operands[0])))


@rule("tt.precise_divf")
def _precise_divf(t: Translator, op: ir.Operation) -> None:
    t.set(op.results[0], builders.binary("divide", *(t.value(v) for v in op.operands)))


@rule("tt.clampf")
def _clampf(t: Translator, op: ir.Operation) -> None:
    """min(max(x, lo), hi); with propagateNan = all a NaN x stays NaN (maximum/minimum
    propagate NaN), with none a NaN x becomes lo (maxnum semantics)."""
    x, lo, hi = (t.value(v) for v in op.operands)
    a = op.attributes["propagateNan"] if "propagateNan" in op.attributes else None
    # Triton's PropagateNan enum: NONE = 0, ALL = 0xffff.
    propagate = a is not None and (int(ir.IntegerAttr(a).value) != 0 if isinstance(a, ir.IntegerAttr)
                                   else "all" in str(a))
    clamped = builders.binary("minimum", builders.binary("maximum", x, lo), hi)
    if not propagate:
        clamped = builders.select(builders.compare(x, x, "NE", "FLOAT"), lo, clamped)
    t.set(op.results[0], clamped)


@rule("tt.join")
def _join(t: Translator, op: ir.Operation) -> None:
    """Two tensors stacked along a new minor dimension of size 2."""
    a, b = (t.value(v) for v in op.operands)
    shape = builders.shape_of(a)
    t.set(op.results[0], builders.concatenate([builders.reshape(a, shape + [1]), builders.reshape(b, shape + [1])],
                                              len(shape)))


@rule("tt.split")
def _split_op(t: Translator, op: ir.Operation) -> None:
    x = t.value(op.operands[0])
    shape = builders.shape_of(x)
    for k, r in enumerate(op.results):
        lo = [0] * len(shape)
        hi = list(shape)
        lo[-1], hi[-1] = k, k + 1
        t.set(r, builders.reshape(builders.slice_(x, lo, hi), shape[:-1]))


@rule("tt.assert")
def _assert(t: Translator, op: ir.Operation) -> None:
    """A device-side assertion: it stops a GPU program where the condition is false;
    StableHLO has no assertion, so it is dropped here, and triton-kernels names each
    kernel's assertions in one UncheckedAssertWarning (never silently)."""


@rule("tt.bitcast")
def _bitcast(t: Translator, op: ir.Operation) -> None:
    x = t.value(op.operands[0])
    t.set(op.results[0], builders.op1("stablehlo.bitcast_convert", tensor_type(op.results[0].type), [x]))


@rule("arith.constant")
def _constant(t: Translator, op: ir.Operation) -> None:
    """A boolean constant (`true`, a BoolAttr, which Pallas writes for masks; or a splat of
    one, `dense<true>`, in jax-triton's IR text), else the Mosaic translator's rule
    (integers, floats, dense elements)."""
    value = op.attributes["value"]
    if isinstance(value, ir.DenseElementsAttr) and ir.DenseElementsAttr(value).is_splat:
        splat = ir.DenseElementsAttr(value).get_splat_value()
        value = splat if isinstance(splat, ir.BoolAttr) else value
    if isinstance(value, ir.BoolAttr):
        t.set(op.results[0], builders.scalar_constant(bool(ir.BoolAttr(value).value), ir.IntegerType.get_signless(1),
                                                      shape_of_type(op.results[0].type)))
        return
    mosaic.RULES["arith.constant"](t, op)


# ------------------------------------------------------------------ float conversions
# Triton's RoundingMode enum (jaxlib/triton/_triton_enum_gen.py): RTZ = 0, RTNE = 1.
ROUNDING = {"0": "rtz", "1": "rtne", "rtz": "rtz", "rtne": "rtne"}


def _fp8_max(element: ir.Type) -> float | None:
    """The largest finite value of an fp8 type (None for other types)."""
    import ml_dtypes

    name = {"f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2", "f8E4M3FNUZ": "float8_e4m3fnuz",
            "f8E5M2FNUZ": "float8_e5m2fnuz", "f8E4M3B11FNUZ": "float8_e4m3b11fnuz"}.get(str(element))
    return float(ml_dtypes.finfo(getattr(ml_dtypes, name)).max) if name else None


def _float_width(element: ir.Type) -> int:
    return ir.FloatType(element).width


@rule("tt.fp_to_fp")
def _fp_to_fp(t: Translator, op: ir.Operation) -> None:
    """Float ↔ float conversions (fp8 among them).  Widening is exact.  Narrowing rounds
    as `rounding` says: rtne is StableHLO's convert; rtz is that, stepped one ulp toward
    zero wherever it rounded away from zero (the integer view of a sign-magnitude float
    minus one is its neighbour toward zero), which also turns an overflow to ±inf into the
    largest finite value, as round-toward-zero does.  An fp8 result saturates first: on
    SM90 Triton narrows to fp8 with `cvt.rn.satfinite` (its test
    test/Conversion/tritongpu_to_llvm_hopper.mlir), so out-of-range values become ±max,
    not inf or NaN; NaN stays NaN."""
    x = t.value(op.operands[0])
    out_type = tensor_type(op.results[0].type)
    src, dst = builders.element_type_of(x), out_type.element_type
    if _float_width(dst) >= _float_width(src):
        t.set(op.results[0], builders.convert(x, dst))
        return
    mode = None
    if "rounding" in op.attributes:
        text = str(op.attributes["rounding"])
        m = re.search(r"rtne|rtz|^\d+", text.split(":")[0].strip())
        mode = ROUNDING.get(m.group(0)) if m else None
        if mode is None:
            raise KernelError(f"tt.fp_to_fp with rounding {text}")
    if mode is None:
        raise KernelError(f"tt.fp_to_fp narrowing {src} to {dst} without a rounding mode")
    shape = builders.shape_of(x)
    limit = _fp8_max(dst)
    if limit is not None:
        x = builders.clamp(builders.scalar_constant(-limit, src, shape), x, builders.scalar_constant(limit, src, shape))
    y = builders.convert(x, dst)
    if mode == "rtz":
        back = builders.convert(y, src)
        away = builders.compare(builders.unary("abs", back), builders.unary("abs", x), "GT", "FLOAT")
        int_type = ir.IntegerType.get_signless(_float_width(dst))
        bits = builders.op1("stablehlo.bitcast_convert", ir.RankedTensorType.get(shape, int_type), [y])
        stepped = builders.binary("subtract", bits, builders.scalar_constant(1, int_type, shape))
        y = builders.select(away, builders.op1("stablehlo.bitcast_convert", out_type, [stepped]), y)
    t.set(op.results[0], y)


# ------------------------------------------------------------------ inline assembly
# The PTX Pallas' approx_tanh writes (jax/_src/pallas/triton/primitives.py approx_tanh):
# tanh.approx for f32, f16, bf16 (and their packed x2 forms).  CPU computes the exact tanh;
# the GPU's approximation is off by up to about 2^-11 relative (PTX ISA, tanh.approx.f32).
_TANH_APPROX = re.compile(r"\s*tanh\.approx\.(f32|f16|bf16)(x2)?\s+\$0\s*,\s*\$1\s*;\s*")


@rule("tt.elementwise_inline_asm")
def _inline_asm(t: Translator, op: ir.Operation) -> None:
    asm = ir.StringAttr(op.attributes["asm_string"]).value
    if len(op.operands) == 1 and len(op.results) == 1 and _TANH_APPROX.fullmatch(asm):
        t.set(op.results[0], builders.unary("tanh", t.value(op.operands[0])))
        return
    raise KernelError(f"tt.elementwise_inline_asm {asm.strip()!r}: inline PTX has no StableHLO equivalent "
                      "(only Pallas' approx_tanh, tanh.approx, is known)")
