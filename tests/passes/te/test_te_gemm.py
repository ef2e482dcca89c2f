"""Transformer Engine GEMM calls (te_gemm_v2_ffi, te_gemm_ffi) in TE's exact typed-FFI
signatures (transformer_engine/jax/csrc/extensions/gemm.cpp), rewritten and run on CPU,
against NumPy in f64 of the same math (collapse at the axis boundaries, dot, inverse
scales, bias, tanh-gelu) rounded once to the output type."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from converter.runtime.convert import convert_text
from passes import PassError
from tests.helpers import assert_close
from tests.passes.te.mxfp8_reference import nvfp4_scale_shape, te_block_scale_shape
from tests.passes.te.te_hlo import T, dims, run, sweep

RNG = np.random.default_rng(27)


def config_fields(mode, lb, rb, lt, rt, collective=0) -> str:
    return (f"collective_op = {collective} : i64, lhs_axis_boundary = {lb} : i64, lhs_transposed = {str(lt).lower()}, "
            f"rhs_axis_boundary = {rb} : i64, rhs_transposed = {str(rt).lower()}, scaling_mode = {mode} : i64, "
            f"use_split_accumulator = false")


def v2_module(lhs, rhs, out_shape, out_t, bias_n, mode, lb, rb, lt, rt, collective=0) -> str:
    lt_, rt_ = T[lhs.dtype], T[rhs.dtype]
    bias = f"{out_t}[{bias_n}]"
    return f"""HloModule te_gemm
ENTRY main {{
  lhs = {lt_}[{dims(lhs.shape)}] parameter(0)
  lsinv = f32[1] parameter(1)
  rhs = {rt_}[{dims(rhs.shape)}] parameter(2)
  rsinv = f32[1] parameter(3)
  bias = {bias} parameter(4)
  one = f32[1] constant({{1}})
  zero = f32[1] constant({{0}})
  cc = ({out_t}[{dims(out_shape)}], u8[33554688]) custom-call(lhs, lsinv, rhs, rsinv, bias, one, zero), custom_call_target="te_gemm_v2_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{config = {{{config_fields(mode, lb, rb, lt, rt, collective)}}}}}
  ROOT o = {out_t}[{dims(out_shape)}] get-tuple-element(cc), index=0
}}
"""


def v1_module(lhs, rhs, out_shape, out_t, bias_n, mode, lb, rb, lt, rt, fuse_gelu) -> str:
    lt_, rt_ = T[lhs.dtype], T[rhs.dtype]
    pre = dims(out_shape) if fuse_gelu else "0"
    return f"""HloModule te_gemm_v1
ENTRY main {{
  lhs = {lt_}[{dims(lhs.shape)}] parameter(0)
  lsinv = f32[1] parameter(1)
  rhs = {rt_}[{dims(rhs.shape)}] parameter(2)
  rsinv = f32[1] parameter(3)
  bias = {out_t}[{bias_n}] parameter(4)
  gelu_in = {out_t}[0] constant({{}})
  one = f32[1] constant({{1}})
  zero = f32[1] constant({{0}})
  cc = ({out_t}[{dims(out_shape)}], {out_t}[{bias_n}], {out_t}[{pre}], u8[33554688]) custom-call(lhs, lsinv, rhs, rsinv, bias, gelu_in, one, zero), custom_call_target="te_gemm_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{{config_fields(mode, lb, rb, lt, rt)}, fuse_bias = {str(bias_n > 0).lower()}, fuse_gelu = {str(fuse_gelu).lower()}, grad = false}}
  o = {out_t}[{dims(out_shape)}] get-tuple-element(cc), index=0
  p = {out_t}[{pre}] get-tuple-element(cc), index=2
  ROOT t = ({out_t}[{dims(out_shape)}], {out_t}[{pre}]) tuple(o, p)
}}
"""


def reference(lhs, rhs, lb, rb, lt, rt, lsinv, rsinv, bias, gelu=False):
    """f64: collapse, transpose per the flags, dot, scales, bias (and gelu)."""
    a = lhs.astype(np.float64).reshape(math.prod(lhs.shape[:lb]), -1)
    b = rhs.astype(np.float64).reshape(math.prod(rhs.shape[:rb]), -1)
    a = a.T if lt else a
    b = b.T if rt else b
    out = a @ b * float(lsinv[0]) * float(rsinv[0])
    if bias is not None and bias.size:
        out = out + bias.astype(np.float64)[None, :]
    pre = out
    if gelu:
        out = 0.5 * out * (1 + np.tanh(math.sqrt(2 / math.pi) * (out + 0.044715 * out ** 3)))
    return out, pre


def fp8(shape, dtype):
    """Values exactly representable in the fp8 type (a cast of moderate normals)."""
    return (RNG.standard_normal(shape) * 2).astype(np.float32).astype(dtype)


# (lhs shape, lhs boundary, lhs transposed, rhs shape, rhs boundary, rhs transposed): the
# non-transposed and transposed forms TE's _get_gemm_layout writes, with leading dims.
LAYOUTS = [((2, 3, 16), 2, False, (16, 24), 1, False),
           ((6, 16), 1, False, (24, 16), 1, True),
           ((16, 2, 3), 1, True, (4, 6, 16), 2, True),
           ((16, 6), 1, True, (16, 4, 6), 1, False)]


def out_shape_of(lhs_shape, lb, lt, rhs_shape, rb, rt):
    lfree = lhs_shape[lb:] if lt else lhs_shape[:lb]
    rfree = rhs_shape[:rb] if rt else rhs_shape[rb:]
    return (*lfree, *rfree)


@pytest.mark.parametrize("layout, with_bias", sweep([(l, b) for l in LAYOUTS for b in (True, False)], {0, 3, 4, 7}))
def test_bf16_gemm_matches_numpy(layout, with_bias):
    ls, lb, lt, rs, rb, rt = layout
    lhs = RNG.standard_normal(ls).astype(ml_dtypes.bfloat16)
    rhs = RNG.standard_normal(rs).astype(ml_dtypes.bfloat16)
    out_shape = out_shape_of(ls, lb, lt, rs, rb, rt)
    n = math.prod(rs[:rb] if rt else rs[rb:])
    bias = RNG.standard_normal(n if with_bias else 0).astype(ml_dtypes.bfloat16)
    ones = np.ones(1, np.float32)
    text = v2_module(lhs, rhs, out_shape, "bf16", bias.size, 0, lb, rb, lt, rt)
    (got,) = run(text, [lhs, ones, rhs, ones, bias])
    want, _ = reference(lhs, rhs, lb, rb, lt, rt, ones, ones, bias)
    # One rounding to bf16 at the end on both sides, sums of ≤ 16 exact bf16 products in
    # f32 vs f64: bf16's tolerance (helpers.TOLERANCES) holds.
    assert_close(np.asarray(got), want.reshape(out_shape).astype(ml_dtypes.bfloat16))


# scaling_mode 1 DELAYED_TENSOR_SCALING, 3 CURRENT_TENSOR_SCALING
@pytest.mark.parametrize("mode, types, out_t", sweep(
    [(m, t, o) for m in (1, 3) for t in ((ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fn),
                                        (ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn)) for o in ("bf16", "f32")],
    {0, 7}))
def test_fp8_tensor_scaled_gemm_matches_numpy(mode, types, out_t):
    lhs, rhs = fp8((2, 4, 32), types[0]), fp8((16, 32), types[1])  # Hopper's TN form
    lsinv, rsinv = np.array([0.37], np.float32), np.array([2.5], np.float32)
    bias_t = ml_dtypes.bfloat16 if out_t == "bf16" else np.float32
    bias = RNG.standard_normal(16).astype(bias_t)
    text = v2_module(lhs, rhs, (2, 4, 16), out_t, 16, mode, 2, 1, False, True)
    (got,) = run(text, [lhs, lsinv, rhs, rsinv, bias])
    want, _ = reference(lhs, rhs, 2, 1, False, True, lsinv, rsinv, bias)
    # fp8 products are exact in f32 and 32-term sums of them nearly so; the f32 scaling
    # adds two roundings: f32's tolerance for f32 output, one bf16 rounding for bf16.
    assert_close(np.asarray(got), want.reshape(2, 4, 16).astype(bias_t))


def test_v1_gemm_gelu_epilogue_writes_pre_gelu_and_gelu():
    lhs = RNG.standard_normal((8, 16)).astype(np.float32)
    rhs = RNG.standard_normal((16, 12)).astype(np.float32)
    bias = RNG.standard_normal(12).astype(np.float32)
    ones = np.ones(1, np.float32)
    text = v1_module(lhs, rhs, (8, 12), "f32", 12, 0, 1, 1, False, False, fuse_gelu=True)
    got, pre = run(text, [lhs, ones, rhs, ones, bias])
    want, want_pre = reference(lhs, rhs, 1, 1, False, False, ones, ones, bias, gelu=True)
    # f32 dot of 16 terms and f32 tanh (XLA's approximation): f32's tolerance.
    assert_close(np.asarray(pre), want_pre.astype(np.float32))
    assert_close(np.asarray(got), want.astype(np.float32))


def test_v1_gemm_without_epilogues_matches_numpy():
    lhs = RNG.standard_normal((4, 8)).astype(np.float16)
    rhs = RNG.standard_normal((8, 8)).astype(np.float16)
    ones = np.ones(1, np.float32)
    text = v1_module(lhs, rhs, (4, 8), "f16", 0, 0, 1, 1, False, False, fuse_gelu=False)
    got, _ = run(text, [lhs, ones, rhs, ones, np.zeros(0, np.float16)])
    want, _ = reference(lhs, rhs, 1, 1, False, False, ones, ones, None)
    assert_close(np.asarray(got), want.astype(np.float16))


@pytest.mark.parametrize("mode, collective, what", [(4, 0, "lhs of type bf16: NVFP4_1D_SCALING operands are f4E2M1FN"),
                                                    (0, 1, "ALL_GATHER")])
def test_unsupported_gemm_modes_are_located_errors(mode, collective, what):
    lhs = np.zeros((4, 32), ml_dtypes.bfloat16)
    rhs = np.zeros((8, 32), ml_dtypes.bfloat16)
    text = v2_module(lhs, rhs, (4, 8), "bf16", 0, mode, 1, 1, False, True, collective)
    with pytest.raises(PassError, match=rf"te_gemm.hlo:\d+:\d+: error: .*te_gemm_v2_ffi.*{what}"):
        convert_text(text, "te_gemm.hlo")


def test_v1_gemm_leaves_an_unfused_bias_to_the_caller():
    """TE ≤ 2.9 passes a non-empty bias with fuse_bias=false when it adds the bias after
    a reduction (GemmPrimitive's sharded impl): the call itself must not add it."""
    lhs = RNG.standard_normal((4, 8)).astype(np.float32)
    rhs = RNG.standard_normal((8, 8)).astype(np.float32)
    bias = RNG.standard_normal(8).astype(np.float32)
    ones = np.ones(1, np.float32)
    text = v1_module(lhs, rhs, (4, 8), "f32", 8, 0, 1, 1, False, False, fuse_gelu=False)
    text = text.replace("fuse_bias = true", "fuse_bias = false")
    got, _ = run(text, [lhs, ones, rhs, ones, bias])
    assert_close(np.asarray(got), reference(lhs, rhs, 1, 1, False, False, ones, ones, None)[0].astype(np.float32))


def te_swizzled_scale(scale, flatten_axis, is_colwise):
    """TE's jax/cpp_extensions/gemm.py swizzled_scale (the JAX transpose that puts MXFP8
    scales in cuBLAS's 128×4 layout before the GEMM call), restated in NumPy."""
    shape = scale.shape
    a, b = math.prod(shape[:flatten_axis]), math.prod(shape[flatten_axis:])
    s2 = scale.reshape(a, b)
    rows, cols = (b, a) if is_colwise else (a, b)
    s2 = s2.T if is_colwise else s2
    return s2.reshape(rows // 128, 4, 32, cols // 4, 4).transpose(0, 3, 2, 1, 4).reshape(shape)


def mxfp8_gemm_module(lhs, ls_shape, rhs, rs_shape, out_shape, out_t, bias_n, lb, rb, lt, rt, form) -> str:
    """form: "v2" (te_gemm_v2_ffi), "v1" (te_gemm_ffi, TE ≥ 2.8: four results, swizzled
    scales) or "v1-plain" (TE 2.6 – 2.7: six results, lhs_swizzled / rhs_swizzled written by
    the C++, so the scale operands arrive plain)."""
    lt_, rt_ = T[lhs.dtype], T[rhs.dtype]
    head = f"""HloModule te_gemm_mxfp8
ENTRY main {{
  lhs = {lt_}[{dims(lhs.shape)}] parameter(0)
  lsinv = f8e8m0fnu[{dims(ls_shape)}] parameter(1)
  rhs = {rt_}[{dims(rhs.shape)}] parameter(2)
  rsinv = f8e8m0fnu[{dims(rs_shape)}] parameter(3)
  bias = {out_t}[{bias_n}] parameter(4)
"""
    fields = config_fields(2, lb, rb, lt, rt)
    if form == "v2":
        return head + f"""  one = f32[1] constant({{1}})
  zero = f32[1] constant({{0}})
  cc = ({out_t}[{dims(out_shape)}], u8[33554688]) custom-call(lhs, lsinv, rhs, rsinv, bias, one, zero), custom_call_target="te_gemm_v2_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{config = {{{fields}}}}}
  ROOT o = {out_t}[{dims(out_shape)}] get-tuple-element(cc), index=0
}}
"""
    swz = (f", f8e8m0fnu[{dims(ls_shape)}], f8e8m0fnu[{dims(rs_shape)}]" if form == "v1-plain" else "")
    return head + f"""  gelu_in = {out_t}[0] constant({{}})
  cc = ({out_t}[{dims(out_shape)}], {out_t}[{bias_n}], {out_t}[0]{swz}, u8[33554688]) custom-call(lhs, lsinv, rhs, rsinv, bias, gelu_in), custom_call_target="te_gemm_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{{fields}, fuse_bias = {str(bias_n > 0).lower()}, fuse_gelu = false, grad = false}}
  ROOT o = {out_t}[{dims(out_shape)}] get-tuple-element(cc), index=0
}}
"""


@st.composite
def mxfp8_gemm_cases(draw):
    lt, rt = draw(st.booleans()), draw(st.booleans())
    k = 32 * draw(st.integers(1, 3))
    free_l = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 5, 32, 64]), min_size=1, max_size=2)))
    free_r = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 5, 32, 64]), min_size=1, max_size=2)))
    # lhs [free..., K] (rowwise) or [K, free...] (colwise); rhs [K, free...] (colwise) or [free..., K].
    lhs_shape, lb = ((k, *free_l), 1) if lt else ((*free_l, k), len(free_l))
    rhs_shape, rb = ((*free_r, k), len(free_r)) if rt else ((k, *free_r), 1)
    ls = te_block_scale_shape(lhs_shape, lb, lt)
    rs = te_block_scale_shape(rhs_shape, rb, not rt)
    assume(ls is not None and rs is not None)
    types = draw(st.sampled_from([(ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fn),
                                  (ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn)]))
    form = draw(st.sampled_from(["v2", "v1", "v1-plain"]))
    out_t = draw(st.sampled_from(["bf16", "f32"]))
    return lhs_shape, lb, lt, ls, rhs_shape, rb, rt, rs, types, form, out_t, draw(st.booleans()), draw(
        st.integers(0, 2 ** 31))


@settings(max_examples=12, deadline=None)
@given(mxfp8_gemm_cases())
def test_mxfp8_gemm_matches_numpy(case):
    """MXFP8 GEMM (scaling_mode 2) in each layout and call form: fp8 operands, e8m0 scales
    per 32 K elements in TE's padded shapes (rowwise for a K-last operand, colwise for a
    K-first one), swizzled as TE's JAX side does; against NumPy f64 dequantize-then-dot."""
    lhs_shape, lb, lt, ls, rhs_shape, rb, rt, rs, types, form, out_t, with_bias, seed = case
    rng = np.random.default_rng(seed)
    lhs = (rng.standard_normal(lhs_shape) * 2).astype(np.float32).astype(types[0])
    rhs = (rng.standard_normal(rhs_shape) * 2).astype(np.float32).astype(types[1])
    out_shape = out_shape_of(lhs_shape, lb, lt, rhs_shape, rb, rt)
    n = math.prod(rhs_shape[:rb] if rt else rhs_shape[rb:])
    bias_t = ml_dtypes.bfloat16 if out_t == "bf16" else np.float32
    bias = rng.standard_normal(n if with_bias else 0).astype(bias_t)

    def scales(data, shape, boundary, colwise):
        """(dump operand, f64 per-element factor over the collapsed data)."""
        r, c = math.prod(data.shape[:boundary]), math.prod(data.shape[boundary:])
        a, b = math.prod(shape[:boundary]), math.prod(shape[boundary:])
        s = rng.integers(0, 256, (a, b)).astype(np.uint8)  # padding: any byte, 255 (NaN) included
        real = (slice(0, r // 32), slice(0, c)) if colwise else (slice(0, r), slice(0, c // 32))
        s[real] = rng.integers(127 - 6, 127 + 7, s[real].shape)
        e = s[real].astype(np.float64) - 127
        factor = np.repeat(2.0 ** e, 32, axis=0 if colwise else 1)
        plain = s.reshape(shape).view(ml_dtypes.float8_e8m0fnu)
        return (plain if form == "v1-plain" else te_swizzled_scale(plain, boundary, colwise)), factor

    ls_op, lf = scales(lhs, ls, lb, lt)
    rs_op, rf = scales(rhs, rs, rb, not rt)
    text = mxfp8_gemm_module(lhs, ls, rhs, rs, out_shape, out_t, bias.size, lb, rb, lt, rt, form)
    (got,) = run(text, [lhs, ls_op, rhs, rs_op, bias], "te_gemm.hlo")
    a = lhs.astype(np.float64).reshape(math.prod(lhs_shape[:lb]), -1) * lf
    b = rhs.astype(np.float64).reshape(math.prod(rhs_shape[:rb]), -1) * rf
    a, b = (a.T if lt else a), (b.T if rt else b)
    want = a @ b + (bias.astype(np.float64)[None, :] if bias.size else 0)
    # Dequantized values are exact in f32; the f32 sum of K products is within K·2^-24 of
    # Σ|a·b| (plus the bias's rounding); then one rounding to the output type (half an ulp:
    # 2^-9 relative for bf16, 2^-24 for f32).
    k = a.shape[1]
    sum_error = k * 2.0 ** -23 * (np.abs(a) @ np.abs(b) + (np.abs(bias.astype(np.float64))[None, :] if bias.size else 0))
    half_ulp = 2.0 ** -8 if out_t == "bf16" else 2.0 ** -23
    err = np.abs(np.asarray(got).astype(np.float64).reshape(want.shape) - want)
    assert np.all(err <= half_ulp * (np.abs(want) + sum_error) + sum_error), float((err - sum_error).max())
    assert got.shape == out_shape


def test_mxfp8_gemm_with_scales_not_covering_the_operand_is_a_located_error():
    lhs = np.zeros((4, 64), ml_dtypes.float8_e4m3fn)
    rhs = np.zeros((8, 64), ml_dtypes.float8_e4m3fn)
    text = mxfp8_gemm_module(lhs, (128, 1), rhs, (128, 4), (4, 8), "bf16", 0, 1, 1, False, True, "v2")
    with pytest.raises(PassError, match=r"te_gemm.hlo:\d+:\d+: error: .*te_gemm_v2_ffi.*lhs scale_inv \[128, 1\].*"
                       r"not TE's padded block-scale layout covering 4 rows × 2 blocks of 32"):
        convert_text(text, "te_gemm.hlo")


@st.composite
def nvfp4_gemm_cases(draw):
    k = 16 * draw(st.integers(1, 6))
    free_l = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 5, 32]), min_size=1, max_size=2)))
    free_r = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 5, 32]), min_size=1, max_size=2)))
    lhs_shape, rhs_shape = (*free_l, k), (*free_r, k)  # TN: both rowwise (gemm.cpp)
    ls, rs = nvfp4_scale_shape(lhs_shape, len(free_l), False), nvfp4_scale_shape(rhs_shape, len(free_r), False)
    assume(ls is not None and rs is not None)
    return (lhs_shape, len(free_l), ls, rhs_shape, len(free_r), rs, draw(st.sampled_from(["bf16", "f32"])),
            draw(st.booleans()), draw(st.sampled_from(["v2", "v1"])), draw(st.integers(0, 2 ** 31)))


@settings(max_examples=8, deadline=None)
@given(nvfp4_gemm_cases())
def test_nvfp4_gemm_matches_numpy(case):
    """NVFP4 GEMM (scaling_mode 4): e2m1 operands, both rowwise, e4m3 scales per 16 K
    elements in TE's padded shapes, passed plain (gemm.cpp swizzles them itself), alpha =
    the global decode scales' product; against NumPy f64 dequantize, dot, alpha, bias."""
    lhs_shape, lb, ls, rhs_shape, rb, rs, out_t, with_bias, form, seed = case
    rng = np.random.default_rng(seed)
    f4 = ml_dtypes.float4_e2m1fn
    lhs = np.clip(rng.standard_normal(lhs_shape) * 3, -6, 6).astype(f4)
    rhs = np.clip(rng.standard_normal(rhs_shape) * 3, -6, 6).astype(f4)
    out_shape = (*lhs_shape[:lb], *rhs_shape[:rb])
    n = math.prod(rhs_shape[:rb])
    bias_t = ml_dtypes.bfloat16 if out_t == "bf16" else np.float32
    bias = rng.standard_normal(n if with_bias else 0).astype(bias_t)
    alpha = np.array([rng.uniform(0.5, 2) * 2.0 ** -rng.integers(0, 12)], np.float32)

    def scales(data, shape, boundary):
        r, c = math.prod(data.shape[:boundary]), math.prod(data.shape[boundary:])
        s = rng.integers(0, 256, (math.prod(shape[:boundary]), math.prod(shape[boundary:]))).astype(np.uint8)
        s[:r, :c // 16] = np.abs(rng.standard_normal((r, c // 16)) * 40).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        factor = np.repeat(s[:r, :c // 16].view(ml_dtypes.float8_e4m3fn).astype(np.float64), 16, axis=1)
        return s.reshape(shape).view(ml_dtypes.float8_e4m3fn), factor  # padding: any byte (NaN included)

    ls_op, lf = scales(lhs, ls, lb)
    rs_op, rf = scales(rhs, rs, rb)
    text = mxfp8_gemm_module(lhs, ls, rhs, rs, out_shape, out_t, bias.size, lb, rb, False, True, form)
    text = text.replace("f8e8m0fnu", "f8e4m3fn").replace("scaling_mode = 2", "scaling_mode = 4")
    if form == "v2":
        text = text.replace("one = f32[1] constant({1})", "one = f32[1] parameter(5)")
    else:  # TE ≥ 2.9's te_gemm_ffi: alpha and beta after gelu_input
        text = text.replace("  gelu_in =", "  one = f32[1] parameter(5)\n  zero = f32[1] constant({0})\n  gelu_in =")
        text = text.replace("custom-call(lhs, lsinv, rhs, rsinv, bias, gelu_in)",
                            "custom-call(lhs, lsinv, rhs, rsinv, bias, gelu_in, one, zero)")
    (got,) = run(text, [lhs, ls_op, rhs, rs_op, bias, alpha], "te_gemm.hlo")
    a = lhs.astype(np.float64).reshape(math.prod(lhs_shape[:lb]), -1) * lf
    b = rhs.astype(np.float64).reshape(math.prod(rhs_shape[:rb]), -1) * rf
    bias64 = bias.astype(np.float64)[None, :] if bias.size else 0
    want = (a @ b.T) * float(alpha[0]) + bias64
    # Dequantized products exact in f32; the f32 sum within K·2^-24 of Σ|a·b|, one more
    # rounding for alpha (and for the bias), then one to the output type (half an ulp).
    k = a.shape[1]
    sum_error = (k + 2) * 2.0 ** -23 * (np.abs(a) @ np.abs(b.T) * float(alpha[0]) + np.abs(bias64))
    half_ulp = 2.0 ** -8 if out_t == "bf16" else 2.0 ** -23
    err = np.abs(np.asarray(got).astype(np.float64).reshape(want.shape) - want)
    assert np.all(err <= half_ulp * (np.abs(want) + sum_error) + sum_error), float((err - sum_error).max())
