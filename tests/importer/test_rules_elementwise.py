"""Elementwise import rules (converter/importer/rules/elementwise.py), each checked against
XLA running the same HLO (tests/helpers.py: differential) on inputs full of the values
where semantics differ: signed zeros, infinities, NaN, halves, integer extremes, shift
amounts at and beyond the bit width.

Tolerances: the dtype table (tests/helpers.py TOLERANCES: a few ulps) where the two
paths may evaluate a transcendental function differently; exact (rtol=atol=0) where the
op has exactly one correct answer (rounding, conversion, integer arithmetic, bit
manipulation), said at each test."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converter.hlo import dtypes
from converter.importer.core import HloImportError
from tests.helpers import assert_close, differential, run_ours, run_xla
from tests.importer.hlo_snippets import (binary_module, differential_by_output, elementwise_module, flush_subnormals,
                                         integer_info, pairs, special_values, unary_module, xla_integer_division,
                                         xla_integer_power_is_the_old_one)

EXACT = {"rtol": 0.0, "atol": 0.0}


def _with_random(element_type: str, seed: int = 0, count: int = 32, scale: float = 3.0) -> np.ndarray:
    """Special values followed by random ones (normal * scale for floats)."""
    special = special_values(element_type)
    rng = np.random.default_rng(seed)
    dtype = dtypes.numpy_dtype(element_type)
    if element_type.startswith("c"):
        extra = (rng.standard_normal(count) + 1j * rng.standard_normal(count)) * scale
    elif element_type.startswith(("s", "u")):
        info = integer_info(element_type)
        wide = np.uint64 if element_type.startswith("u") else np.int64
        extra = rng.integers(int(info.min), int(info.max), size=count, endpoint=True, dtype=wide)
    else:
        extra = rng.standard_normal(count) * scale
    return np.concatenate([special, np.asarray(extra).astype(dtype)])


# ----------------------------------------------------------------------------- unary
FLOAT_UNARY = ["abs", "ceil", "floor", "cosine", "sine", "tan", "tanh", "exponential", "exponential-minus-one",
               "log", "log-plus-one", "logistic", "negate", "sqrt", "rsqrt", "cbrt", "sign", "round-nearest-afz",
               "round-nearest-even", "erf"]
# Exactly-rounded or sign/bit ops: one correct answer, so the paths must agree exactly.
EXACT_UNARY = {"abs", "ceil", "floor", "negate", "sign", "round-nearest-afz", "round-nearest-even", "sqrt"}


@pytest.mark.parametrize("element_type", ["f32", "f16", "bf16", "f64"])
def test_float_unary_matches_xla(element_type):
    x = _with_random(element_type)
    hlo = elementwise_module("float_unary", [element_type], x.size, [(element_type, op, "") for op in FLOAT_UNARY])
    differential_by_output(hlo, [x], FLOAT_UNARY, [op in EXACT_UNARY for op in FLOAT_UNARY])


INTEGER_UNARY = ["negate", "not", "popcnt", "count-leading-zeros"]
# abs and sign take signed operands only (XLA's shape inference rejects unsigned ones).
SIGNED_UNARY = INTEGER_UNARY + ["abs", "sign"]


@pytest.mark.parametrize("element_type", ["s8", "s32", "u32", "s64", "u8", "u16", "s4", "u64"])
def test_integer_unary_matches_xla(element_type):
    # Integers are compared exactly (assert_close); INT_MIN's abs and negation wrap.
    x = _with_random(element_type)
    ops = SIGNED_UNARY if element_type.startswith("s") else INTEGER_UNARY
    if element_type == "s4":
        # XLA's CPU backend counts the bits of s4 values sign-extended to a byte
        # (popcnt(-8) = 5); the op counts the operand's own 4 bits, checked in
        # test_rules_integer_semantics.py against NumPy.
        ops = [op for op in ops if op != "popcnt"]
    hlo = elementwise_module("integer_unary", [element_type], x.size, [(element_type, op, "") for op in ops])
    outs = differential_by_output(hlo, [x], ops)
    if element_type == "s32":
        # popcnt and clz from their definitions, on the 32-bit patterns.
        bits = x.view(np.uint32)
        popcount = np.array([bin(int(v)).count("1") for v in bits], np.int32)
        leading = np.array([32 - int(v).bit_length() for v in bits], np.int32)
        np.testing.assert_array_equal(outs[ops.index("popcnt")], popcount)
        np.testing.assert_array_equal(outs[ops.index("count-leading-zeros")], leading)


def test_pred_not_matches_xla():
    x = special_values("pred")
    differential(unary_module("not", "pred", x.shape), [x])


@pytest.mark.parametrize("element_type", ["f32", "f16", "bf16", "f64"])
def test_is_finite_matches_xla_and_numpy(element_type):
    x = _with_random(element_type)
    (ours,) = differential(unary_module("is-finite", element_type, x.shape, "pred"), [x])
    np.testing.assert_array_equal(ours, np.isfinite(x.astype(np.float64)))


COMPLEX_UNARY = [("f32", "abs"), ("f32", "real"), ("f32", "imag"), ("c64", "negate"), ("c64", "sqrt"),
                 ("c64", "rsqrt"), ("c64", "exponential"), ("c64", "exponential-minus-one"), ("c64", "log"),
                 ("c64", "log-plus-one"), ("c64", "sign"), ("c64", "tanh"), ("c64", "sine"), ("c64", "cosine"),
                 ("c64", "tan")]


def test_complex_unary_matches_xla():
    # Finite complex inputs: XLA's complex kernels and ours are the same expansions; the
    # dtype tolerance covers the few ulps either could differ by.  real/imag/negate
    # only move bits: exact.
    rng = np.random.default_rng(1)
    x = ((rng.standard_normal(24) + 1j * rng.standard_normal(24)) * 2).astype(np.complex64)
    x[:4] = [0, 1j, -1, -2 - 0j]
    labels = [op for _, op in COMPLEX_UNARY]
    hlo = elementwise_module("complex_unary", ["c64"], x.size, [(rt, op, "") for rt, op in COMPLEX_UNARY])
    outs = differential_by_output(hlo, [x], labels, [op in ("real", "imag", "negate") for op in labels])
    assert_close(outs[labels.index("real")], x.real, **EXACT)
    assert_close(outs[labels.index("imag")], x.imag, **EXACT)
    assert_close(outs[labels.index("exponential")], np.exp(x))


def test_complex128_real_imag_abs_match_numpy():
    x = np.array([3 + 4j, -1.5 - 2j, 0j, 1e300 + 1e300j], np.complex128)
    hlo = """HloModule complex_parts
ENTRY main {
  x = c128[4] parameter(0)
  re = f64[4] real(x)
  im = f64[4] imag(x)
  ab = f64[4] abs(x)
  ROOT t = (f64[4], f64[4], f64[4]) tuple(re, im, ab)
}
"""
    re, im, ab = differential(hlo, [x])
    # real/imag select exactly; abs (hypot) is within an ulp of NumPy's, without overflow.
    assert_close(re, x.real, **EXACT)
    assert_close(im, x.imag, **EXACT)
    assert_close(ab, np.abs(x))


# ---------------------------------------------------------------------------- binary
FLOAT_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2"]


@pytest.mark.parametrize("element_type", ["f32", "f16", "bf16", "f64"])
def test_float_binary_matches_xla(element_type):
    # Every pair of special values: NaN propagation of maximum/minimum, remainder's sign
    # (that of the dividend), power's and atan2's special cases (±0, ±inf).  Exact but
    # for power and atan2 (libm-style approximations).
    x, y = pairs(special_values(element_type))
    hlo = elementwise_module("float_binary", [element_type] * 2, x.size,
                             [(element_type, op, "") for op in FLOAT_BINARY])
    differential_by_output(hlo, [x, y], FLOAT_BINARY, [op not in ("power", "atan2") for op in FLOAT_BINARY])


INTEGER_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "and", "or",
                  "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical"]


@pytest.mark.parametrize("element_type", ["s8", "s32", "u32", "s64", "u8", "u64", "s16"])
def test_integer_binary_matches_xla(element_type):
    # Pairs of extremes and small values: division by zero, INT_MIN / -1, negative
    # remainders, negative powers, shift amounts >= the bit width and negative ones.
    x, y = pairs(special_values(element_type))
    ops = [op for op in INTEGER_BINARY if op != "power" or xla_integer_power_is_the_old_one()]
    hlo = elementwise_module("integer_binary", [element_type] * 2, x.size, [(element_type, op, "") for op in ops])
    outs = differential_by_output(hlo, [x, y], ops)
    quotient, remainder = xla_integer_division(x, y)
    np.testing.assert_array_equal(outs[ops.index("divide")], quotient)
    np.testing.assert_array_equal(outs[ops.index("remainder")], remainder)


def test_pred_binary_matches_xla():
    ops = ["and", "or", "xor", "maximum", "minimum"]
    x, y = pairs(np.array([False, True]))
    outs = differential_by_output(elementwise_module("pred_binary", ["pred"] * 2, x.size,
                                                     [("pred", op, "") for op in ops]), [x, y], ops)
    for out, expected in zip(outs, [x & y, x | y, x ^ y, x | y, x & y]):
        np.testing.assert_array_equal(out, expected)


def test_shifts_saturate_at_the_bit_width_like_xla():
    """XLA: shifting by >= the bit width (or a negative amount, read as unsigned) gives 0
    for the left and logical shifts and the sign fill for the arithmetic shift."""
    x = np.array([1, -1, 0x40000000, -0x80000000, 12345, -12345], np.int32)
    amounts = np.array([31, 32, 33, -1, 100, 0], np.int32)
    hlo = """HloModule shifts
ENTRY main {
  x = s32[6] parameter(0)
  n = s32[6] parameter(1)
  l = s32[6] shift-left(x, n)
  a = s32[6] shift-right-arithmetic(x, n)
  g = s32[6] shift-right-logical(x, n)
  ROOT t = (s32[6], s32[6], s32[6]) tuple(l, a, g)
}
"""
    left, arith, logical = differential(hlo, [x, amounts])
    big = (amounts < 0) | (amounts >= 32)
    safe = np.where(big, 0, amounts)
    np.testing.assert_array_equal(left, np.where(big, 0, x << safe))
    np.testing.assert_array_equal(arith, np.where(big, np.where(x < 0, -1, 0), x >> safe))
    np.testing.assert_array_equal(logical, np.where(big, 0, (x.view(np.uint32) >> safe.astype(np.uint32)).view(np.int32)))


def test_complex_binary_matches_xla():
    ops = ["add", "subtract", "multiply", "divide", "power"]
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(16) + 1j * rng.standard_normal(16)).astype(np.complex64)
    y = (rng.standard_normal(16) + 1j * rng.standard_normal(16)).astype(np.complex64)
    outs = differential_by_output(elementwise_module("complex_binary", ["c64"] * 2, x.size,
                                                     [("c64", op, "") for op in ops]), [x, y], ops)
    assert_close(outs[2], x * y)
    assert_close(outs[3], x / y)


@pytest.mark.parametrize("part_type,complex_type", [("f32", "c64"), ("f64", "c128")])
def test_complex_from_parts_matches_numpy(part_type, complex_type):
    x, y = pairs(special_values(part_type)[:12])
    (ours,) = differential(binary_module("complex", part_type, x.shape, complex_type), [x, y])
    # Building a complex number copies both parts bit for bit (NaN and inf included).
    expected = np.empty(x.shape, ours.dtype)
    expected.real, expected.imag = x, y
    np.testing.assert_array_equal(ours.view(x.dtype), expected.view(x.dtype))


# --------------------------------------------------------------------------- compare
DIRECTIONS = ["EQ", "NE", "LT", "LE", "GT", "GE"]


@pytest.mark.parametrize("element_type,compare_type", [
    ("f32", "FLOAT"), ("f32", "TOTALORDER"), ("f64", "TOTALORDER"), ("bf16", None), ("f16", "FLOAT"),
    ("s32", "SIGNED"), ("s8", None), ("u32", "UNSIGNED"), ("u64", None), ("pred", None), ("s64", "SIGNED")])
def test_compare_every_direction_matches_xla(element_type, compare_type):
    """All six directions in one module per (type, comparison type).  NaN compares
    unordered under FLOAT and above +inf under TOTALORDER, where -0.0 < +0.0 and -NaN
    sorts below -inf; a missing type= defaults from the element type."""
    values = special_values(element_type)
    if element_type.startswith("f") or element_type == "bf16":
        neg_nan = np.array([np.nan], np.float32).view(np.uint32) | np.uint32(0x80000000)
        values = np.concatenate([values, neg_nan.view(np.float32).astype(values.dtype)])
    x, y = pairs(values)
    n = x.size
    kind = f", type={compare_type}" if compare_type else ""
    lines = "\n".join(f"  c{i} = pred[{n}] compare(x, y), direction={d}{kind}" for i, d in enumerate(DIRECTIONS))
    hlo = f"""HloModule compare
ENTRY main {{
  x = {element_type}[{n}] parameter(0)
  y = {element_type}[{n}] parameter(1)
{lines}
  ROOT t = ({', '.join([f'pred[{n}]'] * 6)}) tuple({', '.join(f'c{i}' for i in range(6))})
}}
"""
    outs = differential(hlo, [x, y])
    if compare_type != "TOTALORDER":
        # The ordinary (IEEE) comparisons, as NumPy computes them.
        # XLA's CPU runtime reads subnormal operands as zero (denormals-are-zero).
        with np.errstate(invalid="ignore"):
            wide_x, wide_y = (v.astype(np.float64) if v.dtype.kind not in "iub" else v
                              for v in (flush_subnormals(x), flush_subnormals(y)))
            for out, op in zip(outs, [np.equal, np.not_equal, np.less, np.less_equal, np.greater,
                                      np.greater_equal]):
                np.testing.assert_array_equal(out, op(wide_x, wide_y))


def test_compare_totalorder_matches_a_numpy_total_order():
    """TOTALORDER as IEEE 754 totalOrder: compare the sign-magnitude bit patterns."""
    values = special_values("f32")
    values = np.concatenate([values, (np.array([np.nan], np.float32).view(np.uint32)
                                      | np.uint32(0x80000000)).view(np.float32)])
    x, y = pairs(values)
    hlo = binary_module("compare", "f32", x.shape, "pred", ", direction=LT, type=TOTALORDER")
    (ours,) = differential(hlo, [x, y])

    def key(v):
        bits = v.view(np.int32).astype(np.int64)
        # Negative patterns order below every positive one (-0.0 < +0.0), reversed.
        return np.where(bits < 0, -(bits & 0x7FFFFFFF) - 1, bits)
    np.testing.assert_array_equal(ours, key(x) < key(y))


# ---------------------------------------------------------------- select and clamp
def test_select_matches_xla():
    rng = np.random.default_rng(3)
    p = rng.integers(0, 2, 20).astype(bool)
    a, c = special_values("f32")[:20], special_values("f32")[10:30]
    hlo = """HloModule select
ENTRY main {
  p = pred[20] parameter(0)
  a = f32[20] parameter(1)
  b = f32[20] parameter(2)
  ROOT r = f32[20] select(p, a, b)
}
"""
    (ours,) = differential(hlo, [p, a, c], **EXACT)
    assert_close(ours, np.where(p, a, c), **EXACT)


@pytest.mark.parametrize("element_type", ["f32", "s32", "u8", "bf16"])
def test_clamp_with_scalar_and_array_bounds_matches_xla(element_type):
    """clamp(lo, x, hi) = min(max(x, lo), hi) elementwise, with scalar or array bounds
    (NaN in x propagates; lo > hi yields hi)."""
    x = _with_random(element_type)
    n = x.size
    rng = np.random.default_rng(4)
    dtype = x.dtype
    lo = rng.integers(0, 5, n).astype(dtype)
    hi = rng.integers(-2, 9, n).astype(dtype)
    t = element_type
    hlo = f"""HloModule clamp
ENTRY main {{
  x = {t}[{n}] parameter(0)
  lo = {t}[{n}] parameter(1)
  hi = {t}[{n}] parameter(2)
  slo = {t}[] constant(1)
  shi = {t}[] constant(6)
  a = {t}[{n}] clamp(lo, x, hi)
  s = {t}[{n}] clamp(slo, x, shi)
  ROOT r = ({t}[{n}], {t}[{n}]) tuple(a, s)
}}
"""
    arrays, scalars = differential(hlo, [x, lo, hi], **EXACT)
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        assert_close(scalars, np.minimum(np.maximum(wide, 1), 6).astype(dtype), **EXACT)
        assert_close(arrays, np.minimum(np.maximum(wide, lo.astype(np.float64)), hi.astype(np.float64)).astype(dtype),
                     **EXACT)


# ------------------------------------------------------------------------ conversions
CONVERSIONS = [
    ("f32", "s32"), ("f32", "s8"), ("f32", "u8"), ("f32", "u32"), ("f32", "s64"), ("f32", "u64"), ("f32", "s16"),
    ("f64", "s32"), ("f64", "u64"), ("f16", "s32"), ("bf16", "s8"), ("f32", "pred"), ("pred", "f32"),
    ("pred", "s32"), ("s32", "pred"), ("s32", "f32"), ("s64", "f32"), ("u32", "f32"), ("u64", "f64"),
    ("s32", "u32"), ("u32", "s8"), ("s8", "u64"), ("s32", "s4"), ("s4", "s32"), ("u4", "f32"),
    ("f32", "bf16"), ("f32", "f16"), ("f64", "f32"), ("f64", "bf16"), ("f16", "bf16"), ("bf16", "f16"),
    ("bf16", "f32"), ("f32", "f8e4m3fn"), ("f32", "f8e5m2"), ("f8e4m3fn", "f32"), ("f8e5m2", "bf16"),
    ("f16", "f8e4m3fn"), ("f32", "f8e4m3fnuz"), ("f32", "f8e5m2fnuz"), ("f32", "f8e4m3b11fnuz"), ("f32", "f8e4m3"),
    ("f32", "f8e3m4"), ("f8e4m3fn", "f8e5m2"), ("f32", "c64"), ("s32", "c64"), ("f64", "c128"), ("c64", "c128"),
    ("c128", "c64"),
]


def _grouped(conversions):
    sources: dict[str, list[str]] = {}
    for source, target in conversions:
        sources.setdefault(source, []).append(target)
    return sorted(sources.items())


@pytest.mark.parametrize("source,targets", _grouped(CONVERSIONS))
def test_convert_matches_xla_exactly(source, targets):
    """Conversions are exactly defined: round to nearest even between floats (overflow to
    inf, or to NaN/max for types without inf), truncation toward zero with saturation from
    float to integer (NaN → 0), wrap-around between integers, x != 0 to pred."""
    x = _with_random(source, scale=100.0)
    hlo = elementwise_module("convert", [source], x.size, [(t, "convert", "") for t in targets])
    differential_by_output(hlo, [x], [f"{source}->{t}" for t in targets], [True] * len(targets))


def test_convert_float_to_int_saturates_and_maps_nan_to_zero():
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.9, -2.9, -0.0, 127.9, 128.0, -129.0], np.float32)
    hlo = """HloModule sat
ENTRY main {
  x = f32[11] parameter(0)
  a = s32[11] convert(x)
  b = s8[11] convert(x)
  c = u8[11] convert(x)
  ROOT t = (s32[11], s8[11], u8[11]) tuple(a, b, c)
}
"""
    s32, s8, u8 = differential(hlo, [x])
    clean = np.nan_to_num(x, nan=0.0, posinf=1e30, neginf=-1e30).astype(np.float64)
    for out, dtype in ((s32, np.int32), (s8, np.int8), (u8, np.uint8)):
        info = np.iinfo(dtype)
        np.testing.assert_array_equal(out, np.clip(np.trunc(clean), info.min, info.max).astype(dtype))


SAME_WIDTH_BITCASTS = [
    ("f32", "s32"), ("s32", "f32"), ("f32", "u32"), ("f16", "bf16"), ("bf16", "s16"), ("f64", "s64"),
    ("u64", "f64"), ("c64", "c64"), ("s8", "u8"), ("f16", "u16"), ("f8e4m3fn", "s8"), ("f8e4m3fn", "f8e5m2")]


@pytest.mark.parametrize("source,targets", _grouped(SAME_WIDTH_BITCASTS))
def test_bitcast_convert_same_width_matches_numpy_view(source, targets):
    x = _with_random(source)
    hlo = elementwise_module("bitcast_convert", [source], x.size, [(t, "bitcast-convert", "") for t in targets])
    outs = differential_by_output(hlo, [x], targets, [True] * len(targets))
    for out, target in zip(outs, targets):
        # Same width: the same bits read as the other type.
        assert out.dtype == dtypes.numpy_dtype(target)
        np.testing.assert_array_equal(out.view(np.uint8), x.view(np.uint8))


@pytest.mark.parametrize("source,target,source_dims,target_dims", [
    ("f32", "u8", [3], [3, 4]), ("u8", "f32", [3, 4], [3]), ("f64", "f32", [2, 3], [2, 3, 2]),
    ("s16", "f32", [5, 2], [5]), ("u32", "f16", [4], [4, 2]), ("s8", "bf16", [3, 2], [3])])
def test_bitcast_convert_different_widths_matches_numpy_view(source, target, source_dims, target_dims):
    """A wider element splits into a new minor dimension of narrower ones (and back),
    in the machine's (little-endian) byte order, as XLA defines it."""
    x = _with_random(source)[: int(np.prod(source_dims))].reshape(source_dims)
    hlo = f"""HloModule bitcast_widths
ENTRY main {{
  x = {source}[{','.join(map(str, source_dims))}] parameter(0)
  ROOT r = {target}[{','.join(map(str, target_dims))}] bitcast-convert(x)
}}
"""
    (ours,) = differential(hlo, [x], **EXACT)
    expected = np.ascontiguousarray(x).view(dtypes.numpy_dtype(target)).reshape(target_dims)
    np.testing.assert_array_equal(ours.view(np.uint8), expected.view(np.uint8))


# ------------------------------------------------------------------ reduce-precision
@pytest.mark.parametrize("element_type,widths", [
    ("f32", [(8, 23), (8, 7), (5, 10), (4, 3), (5, 2), (2, 1), (8, 0), (1, 4), (11, 30)]),
    ("f64", [(11, 52), (8, 23), (5, 10), (3, 40)]), ("f16", [(4, 3), (5, 10), (8, 5)]), ("bf16", [(5, 2), (8, 7)])])
def test_reduce_precision_matches_xla_exactly(element_type, widths):
    # Rounding to a narrower format has one answer (round to nearest even, overflow to
    # inf, underflow to signed zero, NaN kept): exact.  Widths wider than the type's own
    # leave values unchanged.
    x = _with_random(element_type, scale=1000.0)
    ops = [(element_type, "reduce-precision", f", exponent_bits={e}, mantissa_bits={m}") for e, m in widths]
    hlo = elementwise_module("reduce_precision", [element_type], x.size, ops)
    differential_by_output(hlo, [x], [f"e{e}m{m}" for e, m in widths], [True] * len(widths))


@pytest.mark.parametrize("exponent_bits,mantissa_bits,narrow", [(8, 7, ml_dtypes.bfloat16), (5, 10, np.float16)])
def test_reduce_precision_equals_a_round_trip_through_the_narrow_type(exponent_bits, mantissa_bits, narrow):
    """With the exponent and mantissa of bf16 or f16, reduce-precision is a round trip
    f32 → narrow → f32 (ml_dtypes rounds to nearest even like XLA)."""
    x = _with_random("f32", scale=1000.0)
    x = x[np.isfinite(x) | np.isnan(x)]
    attrs = f", exponent_bits={exponent_bits}, mantissa_bits={mantissa_bits}"
    (ours,) = run_ours(unary_module("reduce-precision", "f32", x.shape, attrs=attrs), [x])
    with np.errstate(over="ignore"):
        expected = x.astype(narrow).astype(np.float32)
    # f16's subnormals are kept by the cast but flushed by nothing in reduce-precision
    # either: both sides denormalize the same way, so the results are identical.
    assert_close(ours, expected, **EXACT)


# -------------------------------------------------------------------- stochastic-convert
@pytest.mark.parametrize("source,random,targets", [
    ("f32", "u32", ["s32", "s8", "s16", "s64"]), ("f16", "u16", ["s16", "s8", "s32"]),
    ("bf16", "u16", ["s8", "s32", "s16"]), ("f64", "u64", ["s64", "s32"])])
def test_stochastic_convert_matches_xla_bit_for_bit(source, random, targets):
    """XLA's CPU pipeline decomposes stochastic-convert (StochasticConvertDecomposer); the
    rule must round exactly as that does, including the precision the fraction is scaled
    in (the operand's type, f16 widened to f32), saturation and NaN."""
    rng = np.random.default_rng(5)
    n = 2048
    x = np.concatenate([special_values(source), (rng.standard_normal(n) * 60).astype(np.float32)
                        .astype(dtypes.numpy_dtype(source))])
    random_dtype = dtypes.numpy_dtype(random)
    bits = rng.integers(0, np.iinfo(random_dtype).max, size=x.size, dtype=random_dtype, endpoint=True)
    bits[:4] = [0, np.iinfo(random_dtype).max, 1 << (8 * random_dtype.itemsize - 1), 1]
    hlo = elementwise_module("stochastic_convert", [source, random], x.size,
                             [(t, "stochastic-convert", "") for t in targets])
    outs = differential_by_output(hlo, [x, bits], targets)
    # Independently: every finite in-range result is floor(x) or ceil(x).
    wide = x.astype(np.float64)
    for out, target in zip(outs, targets):
        info = np.iinfo(dtypes.numpy_dtype(target))
        inside = np.isfinite(wide) & (wide > info.min) & (wide < info.max)
        got = out[inside].astype(np.float64)
        assert np.all((got == np.floor(wide[inside])) | (got == np.ceil(wide[inside]))), target


def test_stochastic_convert_to_unsigned_is_rejected():
    # XLA defines stochastic-convert only for signed integer results ("Unsupported
    # stochastic convert" otherwise); the importer says so instead of guessing.
    hlo = """HloModule sc
ENTRY main {
  x = f32[4] parameter(0)
  r = u32[4] parameter(1)
  ROOT y = u8[4] stochastic-convert(x, r)
}
"""
    with pytest.raises(HloImportError, match=r"%y \(stochastic-convert\).*signed integer"):
        run_ours(hlo, [np.zeros(4, np.float32), np.zeros(4, np.uint32)])
    with pytest.raises(Exception):
        run_xla(hlo, [np.zeros(4, np.float32), np.zeros(4, np.uint32)])


# ---------------------------------------------------------------------------- mulhi
MULHI_TYPES = ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"]


def test_mulhi_is_the_high_half_of_the_double_width_product():
    """XLA's MLIR import has no mulhi (it becomes `mhlo.unknown`), so XLA cannot run it
    here: Python's unbounded integers are the oracle, exactly.  64 bits is the case that
    matters: StableHLO has no 128-bit type, so the rule multiplies 32-bit halves."""
    count = 0
    inputs, params, lines = [], [], []
    for i, t in enumerate(MULHI_TYPES):
        x, y = pairs(special_values(t))
        rng = np.random.default_rng(i)
        info = integer_info(t)
        wide = np.uint64 if t.startswith("u") else np.int64
        extra = rng.integers(int(info.min), int(info.max), size=(2, 64), endpoint=True, dtype=wide)
        x = np.concatenate([x, extra[0].astype(x.dtype)])
        y = np.concatenate([y, extra[1].astype(y.dtype)])
        count = x.size
        inputs += [x, y]
        params += [f"  x{i} = {t}[{count}] parameter({2 * i})", f"  y{i} = {t}[{count}] parameter({2 * i + 1})"]
        lines.append(f"  r{i} = {t}[{count}] mulhi(x{i}, y{i})")
    hlo = "HloModule mulhi\nENTRY main {\n" + "\n".join(params + lines) + "\n  ROOT t = (" + ", ".join(
        f"{t}[{inputs[2 * i].size}]" for i, t in enumerate(MULHI_TYPES)) + ") tuple(" + ", ".join(
        f"r{i}" for i in range(len(MULHI_TYPES))) + ")\n}\n"
    outs = run_ours(hlo, inputs)
    for i, (t, out) in enumerate(zip(MULHI_TYPES, outs)):
        bits = int(t[1:])
        x, y = inputs[2 * i], inputs[2 * i + 1]
        # Python's >> floors, which is the arithmetic shift of the signed product.
        high = [(int(a) * int(c)) >> bits for a, c in zip(x.tolist(), y.tolist())]
        wide = np.uint64 if t.startswith("u") else np.int64
        np.testing.assert_array_equal(out, np.array(high, dtype=wide).astype(x.dtype), err_msg=t)


def test_tpu_mixed_precision_operands_are_converted():
    """TPU fusions mix float types where XLA converts implicitly: an f32 padding value for
    a bf16 pad, an f32 update into a bf16 buffer, bf16 + f32 -> f32, a bf16/f32 compare
    (XLA's CPU verifier rejects these, so the oracle is NumPy with the conversions written
    out; every value is exact in bf16)."""
    hlo = """HloModule mixed
ENTRY main {
  x = bf16[2,3] parameter(0)
  y = f32[2,3] parameter(1)
  u = f32[1,3] parameter(2)
  big = f32[] constant(-inf)
  zero = s32[] constant(0)
  p = bf16[2,5] pad(x, big), padding=0_0x1_1
  d = bf16[2,3] dynamic-update-slice(x, u, zero, zero)
  s = f32[2,3] add(x, y)
  c = pred[2,3] compare(x, y), direction=LT
  ROOT r = (bf16[2,5], bf16[2,3], f32[2,3], pred[2,3]) tuple(p, d, s, c)
}
"""
    bf16 = ml_dtypes.bfloat16
    x = np.array([[1, 2, 3], [-4, 0.5, 8]], bf16)
    y = np.array([[0.25, 2, -3], [-4, 1, 7]], np.float32)
    u = np.array([[9, 10, 11]], np.float32)
    p, d, s, c = run_ours(hlo, [x, y, u])
    want_p = np.full((2, 5), -np.inf, np.float32)
    want_p[:, 1:4] = x.astype(np.float32)
    assert_close(p, want_p.astype(bf16))
    want_d = x.copy()
    want_d[0] = u[0].astype(bf16)
    assert_close(d, want_d)
    assert_close(s, x.astype(np.float32) + y)
    np.testing.assert_array_equal(c, x.astype(np.float32) < y)


# --------------------------------------------------------------------------- map
def test_map_applies_a_computation_elementwise():
    hlo = """HloModule map
fma {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] multiply(a, b)
  one = f32[] constant(1)
  ROOT s = f32[] add(m, one)
}
ENTRY main {
  x = f32[3,4] parameter(0)
  y = f32[3,4] parameter(1)
  ROOT r = f32[3,4] map(x, y), dimensions={0,1}, to_apply=fma
}
"""
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (out,) = differential_by_output(hlo, [x, y], ["map"])
    assert_close(out, x * y + 1)

