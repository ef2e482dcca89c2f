"""Transformer Engine GEMM calls (te_gemm_v2_ffi, te_gemm_ffi) in TE's exact typed-FFI
signatures (transformer_engine/jax/csrc/extensions/gemm.cpp), rewritten and run on CPU,
against NumPy in f64 of the same math (collapse at the axis boundaries, dot, inverse
scales, bias, tanh-gelu) rounded once to the output type."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from converter.runtime.convert import convert_text
from passes import PassError
from tests.helpers import assert_close
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


@pytest.mark.parametrize("mode, collective, what", [(2, 0, "MXFP8_1D_SCALING"), (4, 0, "NVFP4_1D_SCALING"),
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
