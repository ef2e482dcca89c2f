"""Contraction and linear-algebra import rules (rules/linalg.py): dot, convolution, fft,
cholesky, triangular-solve.

Checked against XLA running the same HLO and against NumPy references written from
XLA's operation semantics, accumulated in float64.  Tolerances: float32 results are
sums of a few dozen products, so the f32 table tolerance (a few ulps of the result,
relative) applies; integer dots are exact; bf16 inputs are exact in f32 products."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from converter.hlo.attribute_grammar import conv_dim_labels
from tests.helpers import assert_close, run_ours
from tests.importer.hlo_snippets import differential_by_output

BF16 = ml_dtypes.bfloat16


def _dims(shape) -> str:
    return ",".join(map(str, shape))


# ---------------------------------------------------------------------------- dot
def _numpy_dot_general(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract):
    """dot_general: result dims are batch, lhs free, rhs free."""
    letters = iter("abcdefghijklmnop")
    lhs_sub = [None] * lhs.ndim
    rhs_sub = [None] * rhs.ndim
    for lb, rb in zip(lhs_batch, rhs_batch):
        lhs_sub[lb] = rhs_sub[rb] = next(letters)
    for lc, rc in zip(lhs_contract, rhs_contract):
        lhs_sub[lc] = rhs_sub[rc] = next(letters)
    for i in range(lhs.ndim):
        lhs_sub[i] = lhs_sub[i] or next(letters)
    for i in range(rhs.ndim):
        rhs_sub[i] = rhs_sub[i] or next(letters)
    out = [lhs_sub[b] for b in lhs_batch]
    out += [c for i, c in enumerate(lhs_sub) if i not in lhs_batch and i not in lhs_contract]
    out += [c for i, c in enumerate(rhs_sub) if i not in rhs_batch and i not in rhs_contract]
    wide = np.int64 if lhs.dtype.kind in "iu" else np.float64
    return np.einsum(f"{''.join(lhs_sub)},{''.join(rhs_sub)}->{''.join(out)}", lhs.astype(wide), rhs.astype(wide))


DOT_CASES = [
    # lhs shape, rhs shape, lhs batch, rhs batch, lhs contracting, rhs contracting
    ((4, 8), (8, 3), (), (), (1,), (0,)),
    ((8, 4), (3, 8), (), (), (0,), (1,)),
    ((2, 4, 8), (2, 8, 3), (0,), (0,), (2,), (1,)),
    ((4, 2, 8), (3, 8, 2), (1,), (2,), (2,), (1,)),
    ((2, 3, 4, 5), (3, 2, 5, 4), (0, 1), (1, 0), (3, 2), (2, 3)),
    ((6,), (6,), (), (), (0,), (0,)),
    ((3, 5), (4, 2), (), (), (), ()),
]


def _dot_line(name, lhs, rhs, result_type, case, extra=""):
    _, _, lb, rb, lc, rc = case
    shape = _numpy_dot_general(np.zeros(case[0]), np.zeros(case[1]), lb, rb, lc, rc).shape
    text = (f"  {name} = {result_type}[{_dims(shape)}] dot({lhs}, {rhs}), lhs_batch_dims={{{_dims(lb)}}}, "
            f"rhs_batch_dims={{{_dims(rb)}}}, lhs_contracting_dims={{{_dims(lc)}}}, "
            f"rhs_contracting_dims={{{_dims(rc)}}}{extra}")
    return text, f"{result_type}[{_dims(shape)}]"


def _dots_module(cases, lhs_type, rhs_type, result_type, operands):
    """One module computing a dot per case (a tuple of results), its inputs (`operands`
    gives each case's lhs and rhs arrays) and the NumPy results."""
    params, lines, shapes, inputs, expected = [], [], [], [], []
    for i, case in enumerate(cases):
        lhs, rhs = operands(case)
        params += [f"  l{i} = {lhs_type}[{_dims(case[0])}] parameter({2 * i})",
                   f"  r{i} = {rhs_type}[{_dims(case[1])}] parameter({2 * i + 1})"]
        line, shape = _dot_line(f"d{i}", f"l{i}", f"r{i}", result_type, case)
        lines.append(line)
        shapes.append(shape)
        inputs += [lhs, rhs]
        expected.append(_numpy_dot_general(lhs, rhs, *case[2:]))
    hlo = f"""HloModule dots
ENTRY main {{
{chr(10).join(params)}
{chr(10).join(lines)}
  ROOT t = ({', '.join(shapes)}) tuple({', '.join(f'd{i}' for i in range(len(cases)))})
}}
"""
    return hlo, inputs, expected


@pytest.mark.parametrize("lhs_type,rhs_type,result_type", [
    ("f32", "f32", "f32"), ("bf16", "bf16", "f32"), ("s8", "s8", "s32"), ("f32", "bf16", "f32"),
    ("f64", "f64", "f64"), ("bf16", "bf16", "bf16")])
def test_dot_dimension_numbers_and_mixed_precision(lhs_type, rhs_type, result_type):
    """Batch dims in any position, contracting dims in any order, outer products;
    bf16 x bf16 -> f32 accumulates in f32, s8 x s8 -> s32 in integers; f32 x bf16 (TPU
    dumps) widens the bf16 operand exactly."""
    rng = np.random.default_rng(0)
    np_types = {"f32": np.float32, "bf16": BF16, "s8": np.int8, "f64": np.float64}

    def operands(case):
        if lhs_type == "s8":
            return (rng.integers(-128, 128, case[0]).astype(np.int8),
                    rng.integers(-128, 128, case[1]).astype(np.int8))
        return (rng.standard_normal(case[0]).astype(np.float32).astype(np_types[lhs_type]),
                rng.standard_normal(case[1]).astype(np.float32).astype(np_types[rhs_type]))
    hlo, inputs, expected = _dots_module(DOT_CASES, lhs_type, rhs_type, result_type, operands)
    labels = [str(c) for c in DOT_CASES]
    outs = differential_by_output(hlo, inputs, labels, [result_type == "s32"] * len(labels))
    for out, want, label in zip(outs, expected, labels):
        if result_type == "s32":
            np.testing.assert_array_equal(out, want.astype(np.int32), err_msg=label)
        else:
            # A bf16 result rounds once: its own table tolerance; the sums are short.
            assert_close(out, want.astype(out.dtype), what=label)


@pytest.mark.parametrize("attrs", [", operand_precision={highest,highest}", ", operand_precision={default,high}",
                                   ", algorithm=dot_f32_f32_f32"])
def test_dot_precision_attributes_keep_f32_results(attrs):
    # On CPU these request at least f32 precision: the f32 answer, within f32 tolerance.
    hlo = f"""HloModule dot_precision
ENTRY main {{
  x = f32[4,8] parameter(0)
  w = f32[8,3] parameter(1)
  ROOT d = f32[4,3] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{attrs}
}}
"""
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 3)).astype(np.float32)
    (out,) = differential_by_output(hlo, [x, w], ["dot"])
    assert_close(out, (x.astype(np.float64) @ w).astype(np.float32))


def _rank3_dot_cases():
    """Every placement of one batch and one contracting dim in rank-3 operands (batch 4,
    m 3, n 5, k 8: XLA's CPU compiler runs dots this large through its runtime kernels)."""
    cases = []
    for lb, lc, rb, rc in itertools.product(range(3), repeat=4):
        if lb == lc or rb == rc:
            continue
        lhs, rhs = [3] * 3, [5] * 3
        lhs[lb], lhs[lc], rhs[rb], rhs[rc] = 4, 8, 4, 8
        cases.append((tuple(lhs), tuple(rhs), (lb,), (rb,), (lc,), (rc,)))
    return cases


def test_batched_bf16_dot_with_f32_result_in_every_dimension_order():
    """GPU split-K GEMMs write bf16 x bf16 -> f32 dots whose split (batch) dim leads the
    lhs but not the rhs ([splits, k, m] x [n, splits, k]); XLA's CPU runtime has no kernel
    for several such orders ("Unsupported element type for DotThunk::Execute"), so XLA is
    no oracle here: NumPy in float64 on the bf16 values is.  Every f32 product of two bf16
    values is exact, so only the f32 sum of 8 products rounds."""
    cases = _rank3_dot_cases()
    rng = np.random.default_rng(2)
    hlo, inputs, expected = _dots_module(cases, "bf16", "bf16", "f32", lambda case: (
        rng.standard_normal(case[0]).astype(BF16), rng.standard_normal(case[1]).astype(BF16)))
    outs = run_ours(hlo, inputs)
    for out, want, case in zip(outs, expected, cases):
        assert_close(out, want.astype(np.float32), what=str(case))


# -------------------------------------------------------------------- convolution
def _numpy_convolution(lhs, rhs, labels, stride, pad, lhs_dilation, rhs_dilation, reversal,
                       feature_groups=1, batch_groups=1):
    """XLA's convolution by definition, in float64: bring operands to (batch, feature,
    spatial...) and (out feature, in feature, spatial...), dilate the input (holes are
    zeros), pad (negative pads crop), dilate and optionally reverse the kernel, slide
    with strides.  Feature groups split input and output features into groups; batch
    groups split the input batch into contiguous groups, one per block of output
    features."""
    rank = len(labels.input_spatial)
    x = np.transpose(lhs.astype(np.float64), [labels.input_batch, labels.input_feature, *labels.input_spatial])
    k = np.transpose(rhs.astype(np.float64), [labels.kernel_output_feature, labels.kernel_input_feature,
                                              *labels.kernel_spatial])
    for d in range(rank):
        if reversal[d]:
            k = np.flip(k, 2 + d)
    # Input dilation.
    dilated = np.zeros(x.shape[:2] + tuple((n - 1) * s + 1 for n, s in zip(x.shape[2:], lhs_dilation)))
    dilated[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in lhs_dilation)] = x
    padded = np.pad(dilated, [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in pad])
    padded = padded[(slice(None), slice(None)) + tuple(
        slice(-min(lo, 0), n - max(-hi, 0)) for n, (lo, hi) in zip(padded.shape[2:], pad))]
    extent = [(n - 1) * d + 1 for n, d in zip(k.shape[2:], rhs_dilation)]
    out_spatial = [(n - e) // s + 1 for n, e, s in zip(padded.shape[2:], extent, stride)]
    batch, in_features = x.shape[:2]
    out_features, kernel_in = k.shape[:2]
    out_batch = batch // batch_groups
    out = np.zeros((out_batch, out_features, *out_spatial))
    per_feature_group = out_features // feature_groups
    per_batch_group = out_features // batch_groups
    for o in range(out_features):
        fg = o // per_feature_group
        bg = o // per_batch_group
        rows = slice(bg * out_batch, (bg + 1) * out_batch)
        channels = slice(fg * kernel_in, (fg + 1) * kernel_in)
        for pos in np.ndindex(*out_spatial):
            window = padded[(rows, channels) + tuple(
                slice(p * s, p * s + e, d) for p, s, e, d in zip(pos, stride, extent, rhs_dilation))]
            out[(slice(None), o) + pos] = np.tensordot(window, k[o], axes=(list(range(1, window.ndim)),
                                                                          list(range(k[o].ndim))))
    # Back to the output's labelled order.
    order = [labels.output_batch, labels.output_feature, *labels.output_spatial]
    return np.transpose(out, np.argsort(order))


def _conv_case(dim_labels, lhs_logical, rhs_logical, stride=None, pad=None, lhs_dilation=None, rhs_dilation=None,
               reversal=None, feature_groups=1, batch_groups=1):
    """A convolution from logical (batch, feature, spatial...) / (out, in, spatial...)
    sizes, laid out as `dim_labels` says."""
    labels = conv_dim_labels(dim_labels)
    rank = len(labels.input_spatial)
    stride = stride or [1] * rank
    pad = pad or [(0, 0)] * rank
    lhs_dilation = lhs_dilation or [1] * rank
    rhs_dilation = rhs_dilation or [1] * rank
    reversal = reversal or [0] * rank
    lhs_shape = [0] * (rank + 2)
    for size, dim in zip(lhs_logical, [labels.input_batch, labels.input_feature, *labels.input_spatial]):
        lhs_shape[dim] = size
    rhs_shape = [0] * (rank + 2)
    for size, dim in zip(rhs_logical, [labels.kernel_output_feature, labels.kernel_input_feature,
                                       *labels.kernel_spatial]):
        rhs_shape[dim] = size
    window = " ".join([
        f"size={'x'.join(str(s) for s in rhs_logical[2:])}", f"stride={'x'.join(map(str, stride))}",
        f"pad={'x'.join(f'{lo}_{hi}' for lo, hi in pad)}", f"lhs_dilate={'x'.join(map(str, lhs_dilation))}",
        f"rhs_dilate={'x'.join(map(str, rhs_dilation))}", f"rhs_reversal={'x'.join(map(str, reversal))}"]) if rank else ""
    attrs = f", window={{{window}}}, dim_labels={dim_labels}"
    if feature_groups > 1:
        attrs += f", feature_group_count={feature_groups}"
    if batch_groups > 1:
        attrs += f", batch_group_count={batch_groups}"
    params = (labels, stride, pad, lhs_dilation, rhs_dilation, reversal, feature_groups, batch_groups)
    return lhs_shape, rhs_shape, attrs, params


CONV_CASES = {
    "2-D NCHW": _conv_case("bf01_oi01->bf01", (2, 3, 6, 5), (4, 3, 3, 2)),
    "2-D NHWC strided padded": _conv_case("b01f_01io->b01f", (2, 3, 7, 6), (4, 3, 3, 3), stride=[2, 1],
                                          pad=[(1, 2), (0, 1)]),
    "2-D dilated both": _conv_case("b01f_01io->b01f", (1, 2, 5, 5), (3, 2, 2, 3), lhs_dilation=[2, 1],
                                   rhs_dilation=[1, 2], pad=[(1, 1), (2, 0)]),
    "2-D negative padding": _conv_case("bf01_oi01->bf01", (1, 2, 6, 6), (2, 2, 2, 2), pad=[(-1, 0), (0, -2)]),
    "2-D window reversal": _conv_case("bf01_oi01->bf01", (1, 2, 4, 5), (2, 2, 2, 3), reversal=[1, 0]),
    "2-D transposed-conv style": _conv_case("bf01_oi01->bf01", (1, 2, 3, 3), (2, 2, 3, 3), lhs_dilation=[2, 2],
                                            pad=[(2, 2), (2, 2)], reversal=[1, 1]),
    "feature groups (depthwise)": _conv_case("b01f_01io->b01f", (2, 4, 5, 5), (4, 1, 3, 3), feature_groups=4),
    "feature groups 2": _conv_case("bf01_oi01->bf01", (1, 6, 4, 4), (4, 3, 2, 2), feature_groups=2),
    "batch groups (weight gradient)": _conv_case("bf01_oi01->bf01", (4, 3, 5, 5), (6, 3, 2, 2), batch_groups=2),
    "1-D NWC": _conv_case("b0f_0io->b0f", (2, 3, 9), (4, 3, 3), stride=[2], pad=[(1, 1)]),
    "1-D TPU 0bf_oi0->0bf": _conv_case("0bf_oi0->0bf", (3, 8, 1), (5, 8, 1)),
    "1-D TPU 0bf wide": _conv_case("0bf_oi0->0bf", (2, 4, 6), (3, 4, 3), pad=[(1, 1)]),
    "3-D": _conv_case("b012f_012io->b012f", (1, 2, 4, 3, 4), (3, 2, 2, 2, 2), stride=[1, 2, 1],
                      pad=[(0, 1), (1, 0), (1, 1)]),
    "2-D odd output layout": _conv_case("f01b_i01o->01bf", (2, 3, 5, 4), (3, 3, 2, 2)),
    # One-element windows: matmuls, rewritten to dot_general by the matmul-convolutions pass.
    "pointwise NHWC": _conv_case("b01f_01io->b01f", (2, 3, 4, 5), (6, 3, 1, 1)),
    "pointwise odd layouts": _conv_case("f01b_i01o->01bf", (2, 3, 5, 4), (4, 3, 1, 1)),
    "pointwise TPU 0bf_oi0->0bf": _conv_case("0bf_oi0->0bf", (8, 5, 3), (4, 5, 1)),
    "pointwise kernel oi": _conv_case("b0f_oi0->f0b", (3, 4, 2), (5, 4, 1)),
    "no spatial dims": _conv_case("bf_io->bf", (3, 4), (5, 4)),
    "pointwise strided (stays a convolution)": _conv_case("b01f_01io->b01f", (1, 2, 5, 5), (3, 2, 1, 1),
                                                         stride=[2, 2]),
}


@pytest.mark.parametrize("lhs_type,rhs_type", [("f32", "f32"), ("f32", "bf16")])
def test_convolution_variants_match_xla_and_numpy(lhs_type, rhs_type):
    rng = np.random.default_rng(2)
    lines, shapes, inputs, expected, params = [], [], [], [], []
    np_rhs = np.float32 if rhs_type == "f32" else BF16
    for i, (label, (lhs_shape, rhs_shape, attrs, conv)) in enumerate(CONV_CASES.items()):
        lhs = rng.standard_normal(lhs_shape).astype(np.float32)
        rhs = rng.standard_normal(rhs_shape).astype(np.float32).astype(np_rhs)
        want = _numpy_convolution(lhs, rhs, *conv)
        params += [f"  l{i} = {lhs_type}[{_dims(lhs_shape)}] parameter({2 * i})",
                   f"  k{i} = {rhs_type}[{_dims(rhs_shape)}] parameter({2 * i + 1})"]
        lines.append(f"  c{i} = f32[{_dims(want.shape)}] convolution(l{i}, k{i}){attrs}")
        shapes.append(f"f32[{_dims(want.shape)}]")
        inputs += [lhs, rhs]
        expected.append(want)
    hlo = f"""HloModule convolution
ENTRY main {{
{chr(10).join(params)}
{chr(10).join(lines)}
  ROOT t = ({', '.join(shapes)}) tuple({', '.join(f'c{i}' for i in range(len(lines)))})
}}
"""
    outs = differential_by_output(hlo, inputs, list(CONV_CASES))
    for out, want, label in zip(outs, expected, CONV_CASES):
        # Sums of at most a few dozen f32 products: f32 tolerance, absolute part scaled
        # to the operands (standard normal).
        assert_close(out, want.astype(np.float32), rtol=1e-4, atol=1e-4, what=label)


def test_integer_convolution_is_exact():
    lhs_shape, rhs_shape, attrs, conv = _conv_case("b01f_01io->b01f", (1, 2, 4, 4), (2, 2, 2, 2), pad=[(1, 0), (0, 1)])
    rng = np.random.default_rng(3)
    lhs = rng.integers(-128, 128, lhs_shape).astype(np.int8)
    rhs = rng.integers(-128, 128, rhs_shape).astype(np.int8)
    want = _numpy_convolution(lhs, rhs, *conv)
    hlo = f"""HloModule int_convolution
ENTRY main {{
  l = s8[{_dims(lhs_shape)}] parameter(0)
  k = s8[{_dims(rhs_shape)}] parameter(1)
  ROOT c = s32[{_dims(want.shape)}] convolution(l, k){attrs}
}}
"""
    (out,) = differential_by_output(hlo, [lhs, rhs], ["s8 conv"], [True])
    np.testing.assert_array_equal(out, want.astype(np.int32))


# ---------------------------------------------------------------------------- fft
def test_fft_all_four_types_in_one_to_three_dimensions():
    rng = np.random.default_rng(4)
    c = (rng.standard_normal((2, 4, 6)) + 1j * rng.standard_normal((2, 4, 6))).astype(np.complex64)
    r = rng.standard_normal((2, 4, 6)).astype(np.float32)
    half = np.fft.rfftn(r, axes=(1, 2)).astype(np.complex64)
    hlo = """HloModule fft
ENTRY main {
  c = c64[2,4,6] parameter(0)
  r = f32[2,4,6] parameter(1)
  h = c64[2,4,4] parameter(2)
  a = c64[2,4,6] fft(c), fft_type=FFT, fft_length={6}
  b = c64[2,4,6] fft(c), fft_type=IFFT, fft_length={4,6}
  d = c64[2,4,4] fft(r), fft_type=RFFT, fft_length={4,6}
  e = f32[2,4,6] fft(h), fft_type=IRFFT, fft_length={4,6}
  f = c64[2,4,6] fft(c), fft_type=FFT, fft_length={2,4,6}
  ROOT t = (c64[2,4,6], c64[2,4,6], c64[2,4,4], f32[2,4,6], c64[2,4,6]) tuple(a, b, d, e, f)
}
"""
    outs = differential_by_output(hlo, [c, r, half], ["FFT 1-D", "IFFT 2-D", "RFFT 2-D", "IRFFT 2-D", "FFT 3-D"])
    expected = [np.fft.fft(c, axis=-1), np.fft.ifftn(c, axes=(1, 2)), half, np.fft.irfftn(half, s=(4, 6), axes=(1, 2)),
                np.fft.fftn(c)]
    for out, want, label in zip(outs, expected, ["FFT", "IFFT", "RFFT", "IRFFT", "FFT 3-D"]):
        # Transforms of length <= 48 with O(1) inputs: errors of a few f32 ulps times
        # log(n), absolute since outputs have zeros.
        assert_close(out, want.astype(out.dtype), rtol=1e-4, atol=1e-4, what=label)


# ----------------------------------------------------------------------- cholesky
def test_cholesky_lower_and_upper_batched():
    rng = np.random.default_rng(5)
    m = rng.standard_normal((3, 4, 4))
    spd = (m @ np.swapaxes(m, 1, 2) + 4 * np.eye(4)).astype(np.float32)
    hlo = """HloModule cholesky
ENTRY main {
  a = f32[3,4,4] parameter(0)
  l = f32[3,4,4] cholesky(a), lower=true
  u = f32[3,4,4] cholesky(a), lower=false
  ROOT t = (f32[3,4,4], f32[3,4,4]) tuple(l, u)
}
"""
    lower, upper = differential_by_output(hlo, [spd], ["lower", "upper"])
    want = np.linalg.cholesky(spd.astype(np.float64))
    # Only the requested triangle is defined (the other holds whatever the
    # implementation leaves there): compare that triangle.
    tril = np.tril(np.ones((4, 4), bool))
    assert_close(np.where(tril, lower, 0), np.where(tril, want, 0).astype(np.float32), rtol=1e-4, atol=1e-5)
    assert_close(np.where(tril.T, upper, 0), np.where(tril.T, np.swapaxes(want, 1, 2), 0).astype(np.float32),
                 rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------- triangular-solve
def test_triangular_solve_every_flag_combination():
    """left_side x lower x unit_diagonal x transpose_a (NO_TRANSPOSE, TRANSPOSE,
    ADJOINT), on complex matrices so that ADJOINT differs from TRANSPOSE.  Only the
    selected triangle of `a` is read; unit_diagonal ignores the stored diagonal."""
    rng = np.random.default_rng(6)
    n, m = 4, 3
    a = (rng.standard_normal((2, n, n)) + 1j * rng.standard_normal((2, n, n))).astype(np.complex64)
    a += (6 * np.eye(n)).astype(np.complex64)  # well conditioned
    left = (rng.standard_normal((2, n, m)) + 1j * rng.standard_normal((2, n, m))).astype(np.complex64)
    right = (rng.standard_normal((2, m, n)) + 1j * rng.standard_normal((2, m, n))).astype(np.complex64)
    combos = list(itertools.product([True, False], [True, False], [True, False],
                                    ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"]))
    lines, shapes, expected = [], [], []
    for i, (left_side, lower, unit, transpose) in enumerate(combos):
        b = left if left_side else right
        # (Not `s1`: XLA's lexer reads that as the element type s1.)
        lines.append(f"  solve{i} = c64[{_dims(b.shape)}] triangular-solve(a, {'bl' if left_side else 'br'}), "
                     f"left_side={'true' if left_side else 'false'}, lower={'true' if lower else 'false'}, "
                     f"unit_diagonal={'true' if unit else 'false'}, transpose_a={transpose}")
        shapes.append(f"c64[{_dims(b.shape)}]")
        t = np.tril(a) if lower else np.triu(a)
        if unit:
            t = t.copy()
            t[:, range(n), range(n)] = 1
        op = {"NO_TRANSPOSE": t, "TRANSPOSE": np.swapaxes(t, 1, 2), "ADJOINT": np.conj(np.swapaxes(t, 1, 2))}[transpose]
        op = op.astype(np.complex128)
        if left_side:
            expected.append(np.linalg.solve(op, b.astype(np.complex128)))       # op(a) x = b
        else:
            expected.append(np.swapaxes(np.linalg.solve(np.swapaxes(op, 1, 2), np.swapaxes(b, 1, 2)), 1, 2))
    hlo = f"""HloModule triangular_solve
ENTRY main {{
  a = c64[2,{n},{n}] parameter(0)
  bl = c64[2,{n},{m}] parameter(1)
  br = c64[2,{m},{n}] parameter(2)
{chr(10).join(lines)}
  ROOT t = ({', '.join(shapes)}) tuple({', '.join(f'solve{i}' for i in range(len(lines)))})
}}
"""
    labels = [f"left={c[0]} lower={c[1]} unit={c[2]} {c[3]}" for c in combos]
    outs = differential_by_output(hlo, [a, left, right], labels)
    for out, want, label in zip(outs, expected, labels):
        # Back substitution over 4 rows of a diagonally dominant matrix: f32 ulps.
        assert_close(out, want.astype(np.complex64), rtol=1e-4, atol=1e-5, what=label)
