"""Transformer Engine's grouped GEMM (te_grouped_gemm_ffi) in TE's exact typed-FFI signature
(transformer_engine/jax/csrc/extensions/gemm.cpp GroupedGemmFFI: 12 operands, flat
GroupedGemmConfig attributes), rewritten and run on CPU, against NumPy in f64 per group
(and jax.lax.ragged_dot for the forward), group sizes drawn with empty groups."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.runtime.convert import convert_text
from passes import PassError
from passes.te_grouped_gemm import HostGroupSizesWarning
from tests.helpers import assert_close
from tests.passes.te.te_hlo import T, dims, run

RNG = np.random.default_rng(2727)


def module(lhs, rhs, out_shape, out_t, groups, *, wgrad, lt, rt, mode=0, bias_shape=(0,), ls=None) -> str:
    """The call as GroupedGemmPrimitive lowers it: the group sizes in lhs_first_dims (forward)
    or rhs_first_dims (wgrad), the other dims buffers empty."""
    ll, lr = ls if ls else (lhs.shape[0], int(np.prod(lhs.shape[1:])))
    rl, rr = rhs.shape[0], int(np.prod(rhs.shape[1:]))
    sinv_n = groups if mode else 1
    empty = "s32[0] constant({})"
    lfd, rfd = ("sizes", "e") if not wgrad else ("e", "sizes")
    has_bias = int(np.prod(bias_shape)) > 0
    cfg = (f"has_bias = {str(has_bias).lower()}, lhs_axis_boundary = 1 : i64, lhs_is_trans = {str(lt).lower()}, "
           f"lhs_left_size = {ll} : i64, lhs_right_size = {lr} : i64, rhs_axis_boundary = 1 : i64, "
           f"rhs_is_trans = {str(rt).lower()}, rhs_left_size = {rl} : i64, rhs_right_size = {rr} : i64, "
           f"scaling_mode = {mode} : i64, use_async_d2h_group_sizes = false")
    return f"""HloModule te_grouped_gemm
ENTRY main {{
  lhs = {T[lhs.dtype]}[{dims(lhs.shape)}] parameter(0)
  lsinv = f32[{sinv_n}] parameter(1)
  rhs = {T[rhs.dtype]}[{dims(rhs.shape)}] parameter(2)
  rsinv = f32[{sinv_n}] parameter(3)
  bias = {out_t}[{dims(bias_shape)}] parameter(4)
  sizes = s32[{groups}] parameter(5)
  e = {empty}
  offset = s32[1] constant({{0}})
  cc = ({out_t}[{dims(out_shape)}], u8[33554688]) custom-call(lhs, lsinv, rhs, rsinv, bias, {lfd}, e, {rfd}, e, e, e, offset), custom_call_target="te_grouped_gemm_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{{cfg}}}
  ROOT o = {out_t}[{dims(out_shape)}] get-tuple-element(cc), index=0
}}
"""


def forward_reference(lhs, rhs_g, sizes, rt, scales=None, bias=None):
    """f64 per group: rows of group g times rhs[g] ([n, k] when rt), scaled, plus bias[g]."""
    out = np.zeros((lhs.shape[0], rhs_g.shape[1] if rt else rhs_g.shape[2]))
    start = 0
    for g, size in enumerate(sizes):
        b = rhs_g[g].astype(np.float64)
        rows = lhs[start:start + size].astype(np.float64) @ (b.T if rt else b)
        if scales is not None:
            rows = rows * scales[g]
        if bias is not None and bias.size:
            rows = rows + bias[g].astype(np.float64)
        out[start:start + size] = rows
        start += size
    return out


def sizes_strategy(groups: int, total: int):
    """Group sizes summing to `total` (TE checks the sum equals M or K), empty groups likely."""
    return st.lists(st.integers(0, groups), min_size=groups - 1, max_size=groups - 1).map(
        lambda cuts: np.diff([0, *sorted(min(c * total // groups, total) for c in cuts), total]).astype(np.int32))


def draw_forward_case(data, groups, m, k, n):
    """Drawn group sizes, rhs_is_trans and bias or not; bf16 lhs [m, k] and rhs [G, k, n]
    ([G, n, k] when transposed)."""
    sizes = data.draw(sizes_strategy(groups, m))
    rt = data.draw(st.booleans())
    with_bias = data.draw(st.booleans())
    lhs = RNG.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    rhs_g = RNG.standard_normal((groups, n, k) if rt else (groups, k, n)).astype(ml_dtypes.bfloat16)
    return sizes, rt, with_bias, lhs, rhs_g


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_forward_bf16_matches_numpy_and_ragged_dot(data):
    groups, m, k, n = 4, 12, 16, 8
    sizes, rt, with_bias, lhs, rhs_g = draw_forward_case(data, groups, m, k, n)
    bias = RNG.standard_normal((groups, n) if with_bias else (0,)).astype(ml_dtypes.bfloat16)
    rhs = rhs_g.reshape(groups * rhs_g.shape[1], rhs_g.shape[2])  # TE's stacked 2-D rhs
    ones = np.ones(1, np.float32)
    text = module(lhs, rhs, (m, n), "bf16", groups, wgrad=False, lt=False, rt=rt, bias_shape=bias.shape)
    (got,) = run(text, [lhs, ones, rhs, ones, bias, sizes])
    want = forward_reference(lhs, rhs_g, sizes, rt, bias=bias)
    # bf16 products exact in f32, 16-term sums, one rounding to bf16 (with the bias inside
    # the f32 sum vs. added in f64 after): bf16's tolerance.
    assert_close(got, want.astype(ml_dtypes.bfloat16))
    if not with_bias:
        # JAX's own ragged dot of the same operands (bf16, accumulated in f32).
        rhs_kn = np.swapaxes(rhs_g, 1, 2) if rt else rhs_g
        ref = jax.lax.ragged_dot(jnp.asarray(lhs), jnp.asarray(rhs_kn), jnp.asarray(sizes),
                                 preferred_element_type=jnp.float32)
        assert_close(got, np.asarray(ref).astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("out_t, dtype", [("f32", np.float32), ("f16", np.float16)])
def test_forward_with_empty_groups_writes_zeros_for_them(out_t, dtype):
    groups, k, n = 5, 8, 6
    sizes = np.array([0, 3, 0, 4, 0], np.int32)
    lhs = RNG.standard_normal((7, k)).astype(dtype)
    rhs_g = RNG.standard_normal((groups, k, n)).astype(dtype)
    ones = np.ones(1, np.float32)
    text = module(lhs, rhs_g.reshape(groups * k, n), (7, n), out_t, groups, wgrad=False, lt=False, rt=False)
    (got,) = run(text, [lhs, ones, rhs_g.reshape(groups * k, n), ones, np.zeros(0, dtype), sizes])
    # f32/f16 products summed in f32 over 8 terms, one rounding: the dtype's tolerance.
    assert_close(got, forward_reference(lhs, rhs_g, sizes, False).astype(dtype))


@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_wgrad_matches_numpy_per_group(data):
    """dW[g] = x_gᵀ · dy_g over group g's tokens; an empty group's dW is 0."""
    groups, tokens, m, n = 3, 10, 6, 5
    sizes = data.draw(sizes_strategy(groups, tokens))
    x = RNG.standard_normal((tokens, m)).astype(np.float32)
    dy = RNG.standard_normal((tokens, n)).astype(np.float32)
    ones = np.ones(1, np.float32)
    text = module(x, dy, (groups, m, n), "f32", groups, wgrad=True, lt=True, rt=False)
    (got,) = run(text, [x, ones, dy, ones, np.zeros(0, np.float32), sizes])
    ends = np.cumsum(sizes)
    want = np.stack([x[e - s:e].astype(np.float64).T @ dy[e - s:e] for s, e in zip(sizes, ends)])
    # f32 sums of ≤ 10 products: f32's tolerance.
    assert_close(got, want.astype(np.float32))


# scaling_mode 1 DELAYED_TENSOR_SCALING, 3 CURRENT_TENSOR_SCALING
@pytest.mark.parametrize("mode", [1, 3])
def test_fp8_tensor_scaled_forward_reads_scales_of_non_empty_groups_in_order(mode):
    groups, k, n = 4, 32, 8
    sizes = np.array([3, 0, 2, 3], np.int32)
    lhs = (RNG.standard_normal((8, k)) * 2).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    rhs_g = (RNG.standard_normal((groups, n, k)) * 2).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    lsinv = np.array([0.5, 0.25, 2.0, 9.0], np.float32)
    rsinv = np.array([1.5, 3.0, 0.125, 7.0], np.float32)
    text = module(lhs, rhs_g.reshape(groups * n, k), (8, n), "bf16", groups, wgrad=False, lt=False, rt=True,
                  mode=mode)
    (got,) = run(text, [lhs, lsinv, rhs_g.reshape(groups * n, k), rsinv, np.zeros(0, ml_dtypes.bfloat16), sizes])
    # gemm.cpp moves the scale pointers only past non-empty groups: groups 0, 2, 3 read
    # scales 0, 1, 2 (group 1 is empty).
    compact = np.array([0, 1, 1, 2])
    scales = lsinv[compact].astype(np.float64) * rsinv[compact]
    want = forward_reference(lhs, rhs_g, sizes, True, scales=scales)
    # fp8 products exact in f32, two f32 scalings, one bf16 rounding: bf16's tolerance.
    assert_close(got, want.astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("mode, what", [(2, "MXFP8_1D_SCALING"), (4, "NVFP4_1D_SCALING")])
def test_block_scaled_grouped_gemm_is_refused_by_name(mode, what):
    lhs = np.zeros((4, 32), ml_dtypes.float8_e4m3fn)
    rhs = np.zeros((16, 32), ml_dtypes.float8_e4m3fn)
    text = module(lhs, rhs, (4, 8), "bf16", 2, wgrad=False, lt=False, rt=True, mode=mode)
    with pytest.raises(PassError, match=rf"te.hlo:\d+:\d+: error: .*te_grouped_gemm_ffi.*{what}"):
        convert_text(text, "te.hlo")


def group_transposed(x, sizes):
    """TE's per-group transposed layout (the grouped quantize's colwise output): each group's
    rows [k_g, w] stored as their [w, k_g] transpose at the same offset, flattened."""
    ends = np.cumsum(sizes)
    return np.concatenate([x[e - k:e].T.reshape(-1) for k, e in zip(sizes, ends)] + [x[ends[-1]:].reshape(-1) * 0])


@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_wgrad_reads_per_group_transposed_blocks(data):
    """lhs_is_trans=false (per-group [M, k_g] blocks) and/or rhs_is_trans=true ([N, k_g]
    blocks), as gemm.cpp walks them: dW[g] = x_gᵀ · dy_g all the same."""
    groups, tokens, m, n = 3, 9, 4, 5
    sizes = data.draw(sizes_strategy(groups, tokens))
    lt, rt = data.draw(st.sampled_from([(False, False), (False, True), (True, True)]))
    x = RNG.standard_normal((tokens, m)).astype(np.float32)
    dy = RNG.standard_normal((tokens, n)).astype(np.float32)
    lhs = x if lt else group_transposed(x, sizes).reshape(m, tokens)
    rhs = dy if not rt else group_transposed(dy, sizes).reshape(n, tokens)
    ones = np.ones(1, np.float32)
    text = module(lhs, rhs, (groups, m, n), "f32", groups, wgrad=True, lt=lt, rt=rt)
    (got,) = run(text, [lhs, ones, rhs, ones, np.zeros(0, np.float32), sizes])
    ends = np.cumsum(sizes)
    want = np.stack([x[e - s:e].astype(np.float64).T @ dy[e - s:e] for s, e in zip(sizes, ends)])
    # f32 sums of ≤ 9 products: f32's tolerance.
    assert_close(got, want.astype(np.float32))


def test_fp8_tensor_scaled_wgrad_scales_each_non_empty_group():
    groups, m, n = 3, 4, 16
    sizes = np.array([0, 5, 3], np.int32)
    x = (RNG.standard_normal((8, m)) * 2).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    dy = (RNG.standard_normal((8, n)) * 2).astype(np.float32).astype(ml_dtypes.float8_e5m2)
    lsinv = np.array([0.5, 4.0, 3.0], np.float32)
    rsinv = np.array([0.25, 2.0, 5.0], np.float32)
    text = module(x, dy, (groups, m, n), "f32", groups, wgrad=True, lt=True, rt=False, mode=1)
    (got,) = run(text, [x, lsinv, dy, rsinv, np.zeros(0, np.float32), sizes])
    # Group 0 is empty (zeros); groups 1 and 2 read scales 0 and 1 (gemm.cpp's pointer walk).
    xs, ds = x.astype(np.float64), dy.astype(np.float64)
    want = np.stack([np.zeros((m, n)), xs[0:5].T @ ds[0:5] * 0.5 * 0.25, xs[5:8].T @ ds[5:8] * 4.0 * 2.0])
    # fp8 products exact in f32, ≤ 5-term sums, two f32 scalings: f32's tolerance.
    assert_close(got, want.astype(np.float32))


def copy_then_gemm_module(lhs, rhs_g, groups, *, copy_in_program: bool) -> str:
    """TE's async group-size path (test_custom_call_compute.py test_grouped_gemm_fp16):
    te_grouped_gemm_d2h_group_sizes_ffi (its result aliased to the sizes, {0: 0}), then the
    GEMM with use_async_d2h_group_sizes reading the sizes that call copied."""
    m, k = lhs.shape
    n = rhs_g.shape[2]
    text = module(lhs, rhs_g.reshape(groups * k, n), (m, n), "f32", groups, wgrad=False, lt=False, rt=False)
    text = text.replace("use_async_d2h_group_sizes = false", "use_async_d2h_group_sizes = true")
    if copy_in_program:
        copy = (f"  copied = s32[{groups}] custom-call(sizes), custom_call_target=\"te_grouped_gemm_d2h_group_sizes_ffi\", "
                f"api_version=API_VERSION_TYPED_FFI, output_to_operand_aliasing={{{{}}: (0, {{}})}}, "
                f"backend_config={{num_gemms = {groups} : i64}}\n")
        text = text.replace("  e = ", copy + "  e = ").replace("custom-call(lhs, lsinv, rhs, rsinv, bias, sizes,",
                                                              "custom-call(lhs, lsinv, rhs, rsinv, bias, copied,")
    return text


def test_group_size_copy_is_its_operand_and_feeds_the_async_gemm():
    groups, k, n = 3, 4, 5
    sizes = np.array([2, 0, 4], np.int32)
    lhs = RNG.standard_normal((6, k)).astype(np.float32)
    rhs_g = RNG.standard_normal((groups, k, n)).astype(np.float32)
    ones = np.ones(1, np.float32)
    text = copy_then_gemm_module(lhs, rhs_g, groups, copy_in_program=True)
    assert "te_grouped_gemm_d2h_group_sizes_ffi" in text
    with warnings.catch_warnings():
        warnings.simplefilter("error", HostGroupSizesWarning)  # the copy is in this program: no warning
        (got,) = run(text, [lhs, ones, rhs_g.reshape(groups * k, n), ones, np.zeros(0, np.float32), sizes])
    # f32 sums of 4 products: f32's tolerance.
    assert_close(got, forward_reference(lhs, rhs_g, sizes, False).astype(np.float32))


def test_async_gemm_without_the_copy_in_its_program_warns_with_its_line():
    groups, k, n = 2, 4, 3
    lhs = np.zeros((4, k), np.float32)
    rhs = np.zeros((groups * k, n), np.float32)
    text = copy_then_gemm_module(lhs, rhs.reshape(groups, k, n), groups, copy_in_program=False)
    with pytest.warns(UserWarning, match=r"te.hlo:\d+:\d+: .*te_grouped_gemm_ffi with use_async_d2h_group_sizes"):
        convert_text(text, "te.hlo")


def module_te_2_5(lhs, rhs, out_shape, out_t, groups, mkn, *, wgrad, lt, rt, mode=0, bias_shape=(),
                  async_sizes=None) -> str:
    """The 7-operand call of TE 2.5 to 2.14 (gemm.cpp GroupedGemmFFI of those releases):
    (lhs, lhs_scale_inv, rhs, rhs_scale_inv, bias, group_sizes, group_offset) with flat
    attributes M, N, K, lhs_is_trans, rhs_is_trans, scaling_mode, has_bias,
    is_grouped_dense_wgrad (and, from 2.10, use_async_d2h_group_sizes); bias f32[] when
    there is none (grouped_gemm's jnp.empty((), jnp.float32))."""
    m, n, k = mkn
    sinv_n = groups if mode else 1
    has_bias = bool(bias_shape)
    bias_t = out_t if has_bias else "f32"
    cfg = (f"K = {k} : i64, M = {m} : i64, N = {n} : i64, has_bias = {str(has_bias).lower()}, "
           f"is_grouped_dense_wgrad = {str(wgrad).lower()}, lhs_is_trans = {str(lt).lower()}, "
           f"rhs_is_trans = {str(rt).lower()}, scaling_mode = {mode} : i64")
    if async_sizes is not None:
        cfg += f", use_async_d2h_group_sizes = {str(async_sizes).lower()}"
    return f"""HloModule te_grouped_gemm_2_5
ENTRY main {{
  lhs = {T[lhs.dtype]}[{dims(lhs.shape)}] parameter(0)
  lsinv = f32[{sinv_n}] parameter(1)
  rhs = {T[rhs.dtype]}[{dims(rhs.shape)}] parameter(2)
  rsinv = f32[{sinv_n}] parameter(3)
  bias = {bias_t}[{dims(bias_shape)}] parameter(4)
  sizes = s32[{groups}] parameter(5)
  offset = s32[1] constant({{0}})
  cc = ({out_t}[{dims(out_shape)}], u8[33554688]) custom-call(lhs, lsinv, rhs, rsinv, bias, sizes, offset), custom_call_target="te_grouped_gemm_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{{cfg}}}
  ROOT o = {out_t}[{dims(out_shape)}] get-tuple-element(cc), index=0
}}
"""


@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_te_2_5_form_forward_matches_numpy(data):
    """TE 2.5–2.14's GroupedDense forward: lhs [M, K] ragged in M, rhs [G, K, N] or [G, N, K]."""
    groups, m, k, n = 4, 10, 8, 6
    sizes, rt, with_bias, lhs, rhs_g = draw_forward_case(data, groups, m, k, n)
    bias = RNG.standard_normal((groups, n)).astype(ml_dtypes.bfloat16) if with_bias else np.zeros((), np.float32)
    ones = np.ones(1, np.float32)
    text = module_te_2_5(lhs, rhs_g, (m, n), "bf16", groups, (m, n, k), wgrad=False, lt=False, rt=rt,
                         bias_shape=bias.shape, async_sizes=False)
    (got,) = run(text, [lhs, ones, rhs_g, ones, bias, sizes])
    # bf16 products exact in f32, 8-term sums (+ bias), one rounding to bf16: bf16's tolerance.
    assert_close(got, forward_reference(lhs, rhs_g, sizes, rt, bias=bias if with_bias else None)
                 .astype(ml_dtypes.bfloat16))


def test_te_2_5_form_wgrad_and_fp8_scales_per_non_empty_group():
    """is_grouped_dense_wgrad: dW[g] = x_gᵀ dy_g over the ragged K; tensor-scaled fp8 reads
    scale number (non-empty groups before g), as the 2.5–2.14 loop moves its pointers."""
    groups, tokens, m, n = 3, 8, 4, 16
    sizes = np.array([5, 0, 3], np.int32)
    x = (RNG.standard_normal((tokens, m)) * 2).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    dy = (RNG.standard_normal((tokens, n)) * 2).astype(np.float32).astype(ml_dtypes.float8_e5m2)
    lsinv = np.array([0.5, 4.0, 3.0], np.float32)
    rsinv = np.array([0.25, 2.0, 5.0], np.float32)
    text = module_te_2_5(x, dy, (groups, m, n), "f32", groups, (m, n, tokens), wgrad=True, lt=True, rt=False, mode=3)
    (got,) = run(text, [x, lsinv, dy, rsinv, np.zeros((), np.float32), sizes])
    xs, ds = x.astype(np.float64), dy.astype(np.float64)
    want = np.stack([xs[0:5].T @ ds[0:5] * 0.5 * 0.25, np.zeros((m, n)), xs[5:8].T @ ds[5:8] * 4.0 * 2.0])
    # fp8 products exact in f32, ≤ 5-term sums, two f32 scalings: f32's tolerance.
    assert_close(got, want.astype(np.float32))


def module_v2(lhs, rhs, out_shape, groups, *, alpha_n, beta: str, mode=0) -> str:
    """te_grouped_gemm_v2_ffi as GroupedGemmPrimitive lowers it with use_v2_ffi (gemm.cpp
    GroupedGemmV2FFI: 13 operands, 4 results, GroupedGemmV2Config attributes), the forward:
    sizes in lhs_first_dims and out_first_dims; beta either grouped_gemm's constant zeros or
    (to test the refusal) a parameter."""
    (m, k), (rl, rr) = lhs.shape, rhs.shape
    cfg = (f"lhs_axis_boundary = 1 : i64, lhs_is_trans = false, lhs_left_size = {m} : i64, "
           f"lhs_right_size = {k} : i64, rhs_axis_boundary = 1 : i64, rhs_is_trans = false, "
           f"rhs_left_size = {rl} : i64, rhs_right_size = {rr} : i64, scaling_mode = {mode} : i64")
    beta_line = (f"beta = f32[{groups}] parameter(4)" if beta == "parameter" else
                 f"zero = f32[] constant(0)\n  beta = f32[{groups}] broadcast(zero), dimensions={{}}")
    return f"""HloModule te_grouped_gemm_v2
ENTRY main {{
  lhs = {T[lhs.dtype]}[{m},{k}] parameter(0)
  rhs = {T[rhs.dtype]}[{rl},{rr}] parameter(1)
  sizes = s32[{groups}] parameter(2)
  alpha = f32[{alpha_n}] parameter(3)
  {beta_line}
  no_sinv = f32[0] constant({{}})
  no_bias = bf16[0] constant({{}})
  e = s32[0] constant({{}})
  cc = (bf16[{dims(out_shape)}], u8[33554688], u8[4096], u8[{8 * 2 * groups}]) custom-call(lhs, no_sinv, rhs, no_sinv, no_bias, sizes, e, e, e, sizes, e, alpha, beta), custom_call_target="te_grouped_gemm_v2_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{{cfg}}}
  ROOT o = bf16[{dims(out_shape)}] get-tuple-element(cc), index=0
}}
"""


@pytest.mark.parametrize("alpha_n", [4, 1])
def test_v2_forward_scales_each_group_by_alpha(alpha_n):
    """Per-group alpha (Blackwell) or one alpha for all (Hopper); empty groups and a sum
    short of the rows (the rows past it: 0, as in the v1 rewrite)."""
    groups, m, k, n = 4, 9, 16, 8
    sizes = np.array([3, 0, 4, 1], np.int32)  # 8 of 9 rows
    lhs = RNG.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    rhs_g = RNG.standard_normal((groups, k, n)).astype(ml_dtypes.bfloat16)
    alpha = np.array([0.5, 3.0, 2.0, -1.5][:alpha_n], np.float32)
    text = module_v2(lhs, rhs_g.reshape(groups * k, n), (m, n), groups, alpha_n=alpha_n, beta="constant")
    (got,) = run(text, [lhs, rhs_g.reshape(groups * k, n), sizes, alpha])
    per_group = np.broadcast_to(alpha, (groups,)).astype(np.float64)
    want = forward_reference(lhs, rhs_g, sizes, False, scales=per_group)
    # bf16 products exact in f32, 16-term sums, an f32 alpha, one bf16 rounding: bf16's tolerance.
    assert_close(got, want.astype(ml_dtypes.bfloat16))
    ref = jax.lax.ragged_dot(jnp.asarray(lhs), jnp.asarray(rhs_g), jnp.asarray(sizes),
                             preferred_element_type=jnp.float32)
    row_alpha = np.concatenate([np.repeat(per_group, sizes), np.zeros(m - sizes.sum())])  # past the sum: 0
    scaled = np.asarray(ref) * row_alpha[:, None]
    assert_close(got, scaled.astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("beta, mode, what", [("parameter", 0, "beta is not a constant 0"),
                                              ("constant", 2, "MXFP8_1D_SCALING.*pre-swizzled")])
def test_v2_undefined_beta_and_mxfp8_are_located_errors(beta, mode, what):
    lhs = np.zeros((4, 32), ml_dtypes.bfloat16)
    rhs = np.zeros((64, 8), ml_dtypes.bfloat16)
    text = module_v2(lhs, rhs, (4, 8), 2, alpha_n=2, beta=beta, mode=mode)
    with pytest.raises(PassError, match=rf"te.hlo:\d+:\d+: error: .*te_grouped_gemm_v2_ffi.*{what}"):
        convert_text(text, "te.hlo")
