"""Transformer Engine's grouped quantize (te_grouped_quantize_ffi) in TE's exact typed-FFI
signature (transformer_engine/jax/csrc/extensions/quantization.cpp GroupedQuantizeFFI: x,
scale, group_sizes → output, colwise_output, scale_inv, colwise_scale_inv, amax, unused;
scaling_mode, q_layout, flatten_axis), rewritten and run on CPU, bit-exact against a NumPy /
ml_dtypes oracle written from TE's math: per group saturate(x · scale[g]) rounded to nearest
even, the colwise copy each group's transpose at the same offset, scale_inv = 1/scale[g] and
amax = max |x| written at the group's rank among the non-empty groups."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.runtime.convert import convert_text
from passes import PassError
from tests.helpers import assert_close
from tests.passes.te.te_hlo import T, dims, fp8_cast, run

RNG = np.random.default_rng(2728)


def module(x, groups, out_t, *, mode=1, layout=2, flatten_axis=-1, amax_used=True) -> str:
    """The call as GroupedQuantizePrimitive lowers it (abstract: flat outputs, scale_inv and
    amax of one f32 per group, the V1 unused u8[0])."""
    numel = int(np.prod(x.shape))
    col = numel if layout == 2 else 1
    cfg = f"flatten_axis = {flatten_axis} : i64, q_layout = {layout} : i64, scaling_mode = {mode} : i64"
    amax_root = ", amax" if amax_used else ""
    amax_t = f", f32[{groups}]" if amax_used else ""
    return f"""HloModule te_grouped_quantize
ENTRY main {{
  x = {T[x.dtype]}[{dims(x.shape)}] parameter(0)
  scale = f32[{groups}] parameter(1)
  sizes = s32[{groups}] parameter(2)
  cc = ({out_t}[{numel}], {out_t}[{col}], f32[{groups}], f32[1], f32[{groups}], u8[0]) custom-call(x, scale, sizes), custom_call_target="te_grouped_quantize_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{{cfg}}}
  out = {out_t}[{numel}] get-tuple-element(cc), index=0
  col = {out_t}[{col}] get-tuple-element(cc), index=1
  sinv = f32[{groups}] get-tuple-element(cc), index=2
  amax = f32[{groups}] get-tuple-element(cc), index=4
  ROOT t = ({out_t}[{numel}], {out_t}[{col}], f32[{groups}]{amax_t}) tuple(out, col, sinv{amax_root})
}}
"""


def reference(x, scale, sizes, fp8_t, flatten_axis=-1):
    """quantization.cpp's loop over groups, in NumPy: (rowwise, colwise, scale_inv, amax)."""
    axis = flatten_axis % x.ndim
    m, n = int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))
    per_size = int(np.prod(x.shape[1:axis]))
    x2 = x.reshape(m, n).astype(np.float32)
    row = np.zeros(m * n, fp8_t)
    col = np.zeros(m * n, fp8_t)
    sinv = np.zeros(len(sizes), np.float32)
    amax = np.zeros(len(sizes), np.float32)
    start, rank = 0, 0
    for g, size in enumerate(sizes):
        rows = int(size) * per_size
        if rows == 0:
            continue  # the scale pointer moves on, scale_inv and amax do not
        q = fp8_cast(x2[start:start + rows] * scale[g], fp8_t)
        row[start * n:(start + rows) * n] = q.reshape(-1)
        col[start * n:(start + rows) * n] = q.T.reshape(-1)
        sinv[rank] = np.float32(1) / scale[g]
        amax[rank] = np.abs(x2[start:start + rows]).max()
        start += rows
        rank += 1
    return row, col, sinv, amax


def sizes_summing_to(groups: int, total: int):
    """Group sizes adding up to `total`, empty groups likely."""
    return st.lists(st.integers(0, total), min_size=groups - 1, max_size=groups - 1).map(
        lambda cuts: np.diff([0, *sorted(cuts), total]).astype(np.int32))


def bits(a):
    return np.asarray(a).view(np.uint8)


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_delayed_scaling_rowwise_colwise_amax_bit_exact(data):
    groups, m, n = 4, 11, 6
    sizes = data.draw(sizes_summing_to(groups, m))
    fp8_t = data.draw(st.sampled_from([ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]))
    in_t = data.draw(st.sampled_from([ml_dtypes.bfloat16, np.float32, np.float16]))
    x = (RNG.standard_normal((m, n)) * 40).astype(in_t)  # some values saturate
    scale = RNG.uniform(0.5, 16, groups).astype(np.float32)
    text = module(x, groups, T[np.dtype(fp8_t)])
    got = run(text, [x, scale, sizes])
    want = reference(x, scale, sizes, fp8_t)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(bits(g), bits(w))


@pytest.mark.parametrize("sizes", [[0, 0, 5], [5, 0, 0], [0, 0, 0]])
def test_empty_groups_and_sums_short_of_the_rows(sizes):
    """Rows past the groups' sum (TE would stop the program) are 0 in both copies; all-empty
    groups write nothing but delayed scaling's zeroed amax."""
    sizes = np.array(sizes, np.int32)
    x = RNG.standard_normal((7, 4)).astype(ml_dtypes.bfloat16)
    scale = np.array([2.0, 4.0, 8.0], np.float32)
    got = run(module(x, 3, "f8e4m3fn"), [x, scale, sizes])
    want = reference(x, scale, sizes, ml_dtypes.float8_e4m3fn)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(bits(g), bits(w))


def test_current_scaling_rowwise_with_expert_kernels_grouped_by_slices():
    """A [G, K, N] kernel at flatten_axis 2 (GroupedQuantizePrimitive's kernel case): one
    group per expert of K rows each; current scaling (amax unused), rowwise only."""
    groups, k, n = 3, 4, 5
    x = RNG.standard_normal((groups, k, n)).astype(np.float32)
    scale = np.array([448.0 / np.abs(x[g]).max() for g in range(groups)], np.float32)
    sizes = np.ones(groups, np.int32)
    text = module(x, groups, "f8e4m3fn", mode=3, layout=0, flatten_axis=2, amax_used=False)
    out, col, sinv = run(text, [x, scale, sizes])
    row_w, _, sinv_w, _ = reference(x, scale, sizes, ml_dtypes.float8_e4m3fn, flatten_axis=2)
    np.testing.assert_array_equal(bits(out), bits(row_w))
    np.testing.assert_array_equal(bits(sinv), bits(sinv_w))
    assert col.shape == (1,)


@pytest.mark.parametrize("mode, layout, amax_used, what", [
    (2, 2, True, "MXFP8_1D_SCALING.*pre-swizzled"), (0, 0, True, "NO_SCALING"),
    (1, 1, True, "q_layout 1"), (3, 2, True, "amax result used")])
def test_unconverted_forms_are_located_errors(mode, layout, amax_used, what):
    x = np.zeros((4, 32), ml_dtypes.bfloat16)
    text = module(x, 2, "f8e4m3fn", mode=mode, layout=layout, amax_used=amax_used)
    with pytest.raises(PassError, match=rf"te.hlo:\d+:\d+: error: .*te_grouped_quantize_ffi.*{what}"):
        convert_text(text, "te.hlo")


def test_colwise_output_feeds_the_hopper_fp8_wgrad():
    """TE's fp8 MoE wgrad on Hopper: x and dy quantized per expert (delayed scaling, both
    layouts), their colwise copies (per-group transposes) and scale_invs handed to
    te_grouped_gemm_ffi with lhs_is_trans=false, rhs_is_trans=true, K ragged; against NumPy
    on the oracle's own quantized values: dW[g] = Σ_t x_q[t]ᵀ dy_q[t] · sinv_x · sinv_dy."""
    groups, tokens, m, n = 3, 10, 4, 6
    sizes = np.array([4, 0, 6], np.int32)
    x = RNG.standard_normal((tokens, m)).astype(ml_dtypes.bfloat16)
    dy = RNG.standard_normal((tokens, n)).astype(ml_dtypes.bfloat16)
    sx = np.array([64.0, 2.0, 32.0], np.float32)
    sdy = np.array([128.0, 4.0, 16.0], np.float32)
    q = "flatten_axis = -1 : i64, q_layout = 2 : i64, scaling_mode = 1 : i64"
    gemm = (f"has_bias = false, lhs_axis_boundary = 1 : i64, lhs_is_trans = false, lhs_left_size = {m} : i64, "
            f"lhs_right_size = {tokens} : i64, rhs_axis_boundary = 1 : i64, rhs_is_trans = true, "
            f"rhs_left_size = {n} : i64, rhs_right_size = {tokens} : i64, scaling_mode = 1 : i64, "
            f"use_async_d2h_group_sizes = false")
    quant = "(f8e4m3fn[{0}], f8e4m3fn[{0}], f32[3], f32[1], f32[3], u8[0])"
    text = f"""HloModule te_grouped_wgrad
ENTRY main {{
  x = bf16[{tokens},{m}] parameter(0)
  dy = bf16[{tokens},{n}] parameter(1)
  sx = f32[3] parameter(2)
  sdy = f32[3] parameter(3)
  sizes = s32[3] parameter(4)
  qx = {quant.format(tokens * m)} custom-call(x, sx, sizes), custom_call_target="te_grouped_quantize_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{{q}}}
  qdy = {quant.format(tokens * n)} custom-call(dy, sdy, sizes), custom_call_target="te_grouped_quantize_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{{q}}}
  xcol = f8e4m3fn[{tokens * m}] get-tuple-element(qx), index=1
  xsinv = f32[3] get-tuple-element(qx), index=2
  dycol = f8e4m3fn[{tokens * n}] get-tuple-element(qdy), index=1
  dysinv = f32[3] get-tuple-element(qdy), index=2
  e = s32[0] constant({{}})
  no_bias = f32[0] constant({{}})
  offset = s32[1] constant({{0}})
  cc = (f32[3,{m},{n}], u8[1024]) custom-call(xcol, xsinv, dycol, dysinv, no_bias, e, e, sizes, e, e, e, offset), custom_call_target="te_grouped_gemm_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{{gemm}}}
  ROOT dw = f32[3,{m},{n}] get-tuple-element(cc), index=0
}}
"""
    (got,) = run(text, [x, dy, sx, sdy, sizes])
    xq, _, xsinv, _ = reference(x, sx, sizes, ml_dtypes.float8_e4m3fn)
    dq, _, dsinv, _ = reference(dy, sdy, sizes, ml_dtypes.float8_e4m3fn)
    xq, dq = xq.astype(np.float64).reshape(tokens, m), dq.astype(np.float64).reshape(tokens, n)
    # Non-empty groups 0 and 2 hold scale_inv entries 0 and 1 (the compact walk both calls share).
    want = np.stack([xq[0:4].T @ dq[0:4] * xsinv[0] * dsinv[0], np.zeros((m, n)),
                     xq[4:10].T @ dq[4:10] * xsinv[1] * dsinv[1]])
    # fp8 products exact in f32, ≤ 6-term sums, two power-of-two scalings: f32's tolerance.
    assert_close(got, want.astype(np.float32))
