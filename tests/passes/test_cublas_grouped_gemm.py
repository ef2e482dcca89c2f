"""`__cublas$lt$groupedMatmul` in the form XLA's GPU compiler writes for a `ragged-dot`
(gemm_rewriter's grouped-GEMM path; the backend_config of its grouped-GEMM rewrite tests),
rewritten by the default pipeline and checked against JAX's own `jax.lax.ragged_dot_general`
on CPU (XLA:CPU itself cannot run a `ragged-dot` HLO: "not supported by XLA:CPU
ThunkEmitter", so the plain form is run through JAX's lowering of the same operation), on
the same inputs: empty groups, sizes summing to fewer rows than the lhs, batch dims,
the ragged-contracting mode.

Tolerances: f32 — the dot's sum order differs (≤ 9 terms of magnitude ~1): 1e-5; f16/bf16 —
both sides accumulate in f32 and round once, so results differ by at most one ulp of the
output type where the f32 sums straddle a rounding boundary: bf16 2⁻⁷ relative, f16 2⁻¹⁰.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from converter.common.errors import ConverterError
from converter.runtime.convert import convert_text
from tests.helpers import assert_close, convert_program

TARGET = "__cublas$lt$groupedMatmul"
TYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
TOLERANCE = {"f32": (1e-5, 1e-5), "bf16": (2 ** -7, 2 ** -7), "f16": (2 ** -10, 2 ** -9)}


def config(lhs_c, rhs_c, lhs_b, rhs_b, ragged, group, alpha=1, beta=0, epilogue="DEFAULT") -> str:
    dims = {"lhs_contracting_dimensions": [str(d) for d in lhs_c], "rhs_contracting_dimensions": [str(d) for d in rhs_c],
            "lhs_batch_dimensions": [str(d) for d in lhs_b], "rhs_batch_dimensions": [str(d) for d in rhs_b]}
    return json.dumps({"operation_queue_id": "0", "force_earliest_schedule": False, "reification_cost": [],
                       "device_type": "DEVICE_TYPE_INVALID", "grouped_gemm_backend_config": {
                           "gemm_backend_config": {"alpha_real": alpha, "beta": beta, "dot_dimension_numbers": dims,
                                                   "alpha_imag": 0, "epilogue": epilogue, "grad_x": False,
                                                   "grad_y": False, "damax_output": False,
                                                   "autotune_workspace_size": "4194304"},
                           "ragged_dot_dimension_numbers": {"dot_dimension_numbers": dims,
                                                            "lhs_ragged_dimensions": [str(ragged)],
                                                            "rhs_group_dimensions": [str(d) for d in group]}}},
                      separators=(",", ":"))


def shape_text(dtype: str, dims) -> str:
    return f"{dtype}[{','.join(map(str, dims))}]{{{','.join(map(str, reversed(range(len(dims)))))}}}"


def module(dtype, lhs, rhs, sizes, out, cfg: str) -> str:
    return f"""HloModule grouped
ENTRY main {{
  p0 = {shape_text(dtype, lhs)} parameter(0)
  p1 = {shape_text(dtype, rhs)} parameter(1)
  p2 = {shape_text('s32', sizes)} parameter(2)
  c = ({shape_text(dtype, out)}, s8[4194304]{{0}}) custom-call(p0, p1, p2), custom_call_target="{TARGET}", backend_config={cfg}
  ROOT r = {shape_text(dtype, out)} get-tuple-element(c), index=0
}}
"""


def jax_ragged(lhs, rhs, sizes, lhs_c, rhs_c, lhs_b, rhs_b, ragged, group, out_dtype):
    dims = jax.lax.RaggedDotDimensionNumbers(
        dot_dimension_numbers=((tuple(lhs_c), tuple(rhs_c)), (tuple(lhs_b), tuple(rhs_b))),
        lhs_ragged_dimensions=[ragged], rhs_group_dimensions=list(group))
    out = jax.jit(lambda a, b, g: jax.lax.ragged_dot_general(
        a, b, g, dims, precision=jax.lax.Precision.HIGHEST, preferred_element_type=jnp.float32))(lhs, rhs, sizes)
    return np.asarray(out).astype(out_dtype)


def check(dtype, lhs_shape, rhs_shape, sizes, out_shape, lhs_c, rhs_c, lhs_b, rhs_b, ragged, group, seed=0):
    rng = np.random.default_rng(seed)
    np_t = TYPES[dtype]
    lhs = rng.standard_normal(lhs_shape).astype(np.float32).astype(np_t)
    rhs = rng.standard_normal(rhs_shape).astype(np.float32).astype(np_t)
    sizes = np.asarray(sizes, np.int32)
    text = module(dtype, lhs_shape, rhs_shape, sizes.shape, out_shape, config(lhs_c, rhs_c, lhs_b, rhs_b, ragged, group))
    assert "custom_call" not in str(convert_text(text))
    ours = convert_program(text)(lhs, rhs, sizes)[0]
    expected = jax_ragged(lhs, rhs, sizes, lhs_c, rhs_c, lhs_b, rhs_b, ragged, group, np_t)
    rtol, atol = TOLERANCE[dtype]
    assert_close(ours, expected, rtol=rtol, atol=atol)
    return ours


ROW_CASES = [("bf16", s) for s in ([16, 48], [0, 40], [10, 0, 5, 0], [0, 0, 0, 0])] + [
    ("f16", [10, 0, 5, 0]), ("f32", [0, 40])]


@pytest.mark.parametrize("dtype,sizes", ROW_CASES, ids=str)
def test_ragged_rows_match_jax(dtype, sizes):
    """The MoE form: tokens [m, k] routed to experts [g, k, n] by group sizes; empty
    experts and sizes summing to fewer than m rows (the rest must be 0)."""
    groups = len(sizes)
    ours = check(dtype, (64, 9), (groups, 9, 8), sizes, (64, 8), [1], [1], [], [], 0, [0])
    assert not np.asarray(ours, np.float32)[sum(sizes):].any()


def test_batched_ragged_rows_match_jax():
    """Batch dims and per-batch group sizes (gemm_rewriter test NonContractingWithBatchDim)."""
    check("f32", (3, 16, 9), (3, 2, 9, 8), [[4, 12], [0, 10], [7, 9]], (3, 16, 8), [2], [2], [0], [0], 1, [1])


@pytest.mark.parametrize("sizes", [[4, 5], [4, 5, 3, 4], [0, 6, 0, 2]], ids=str)
def test_ragged_contracting_matches_jax(sizes):
    """The ragged dim is contracted (a weight gradient): one [m, n] result per group, first."""
    check("f32", (64, 16), (16, 8), sizes, (len(sizes), 64, 8), [1], [0], [], [], 1, [])


@settings(max_examples=5, deadline=None)
@given(st.data())
def test_generated_group_sizes_match_jax(data):
    """Random routings: any number of experts, any sizes (some 0, total ≤ rows)."""
    groups = data.draw(st.integers(1, 5))
    rows = data.draw(st.integers(1, 24))
    sizes, left = [], rows
    for _ in range(groups):
        s = data.draw(st.integers(0, left))
        sizes.append(s)
        left -= s
    dtype = data.draw(st.sampled_from(sorted(TYPES)))
    check(dtype, (rows, 5), (groups, 5, 3), sizes, (rows, 3), [1], [1], [], [], 0, [0], seed=rows)


def test_unsupported_config_is_a_located_error():
    text = module("f32", (8, 3), (2, 3, 4), (2,), (8, 4), config([1], [1], [], [], 0, [0], alpha=2))
    with pytest.raises(ConverterError, match=r"<test>:\d+:\d+: .*alpha_real=2"):
        convert_program(text)
    text = module("f32", (8, 3), (2, 3, 4), (2,), (8, 4), config([1], [1], [], [], 0, [0], epilogue="BIAS"))
    with pytest.raises(ConverterError, match="epilogue BIAS"):
        convert_program(text)


def test_column_major_output_and_s64_group_sizes_match_jax():
    """XLA's test MulipleGroupsOutputColumnMajor: an f16[64,8]{0,1} result, s64 sizes."""
    rng = np.random.default_rng(11)
    lhs = rng.standard_normal((64, 9)).astype(np.float16)
    rhs = rng.standard_normal((4, 9, 8)).astype(np.float16)
    sizes = np.array([16, 8, 24, 16], np.int64)
    text = module("f16", (64, 9), (4, 9, 8), (4,), (64, 8), config([1], [1], [], [], 0, [0]))
    text = text.replace("s32[4]{0}", "s64[4]{0}").replace("f16[64,8]{1,0}", "f16[64,8]{0,1}")
    assert "f16[64,8]{0,1}" in text and "s64[4]{0}" in text
    ours = convert_program(text)(lhs, rhs, sizes)[0]
    expected = jax_ragged(lhs, rhs, sizes.astype(np.int32), [1], [1], [], [], 0, [0], np.float16)
    rtol, atol = TOLERANCE["f16"]
    assert_close(ours, expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_plain_ragged_dot_opcode_matches_jax(dtype):
    """The `ragged-dot` the grouped GEMM replaced (XLA's test text), imported by the
    `ragged-dot` rule with the same construction, against JAX on the same inputs."""
    text = f"""HloModule ragged
ENTRY main {{
  p0 = {dtype}[64,9]{{1,0}} parameter(0)
  p1 = {dtype}[4,9,8]{{2,1,0}} parameter(1)
  p2 = s64[4]{{0}} parameter(2)
  ROOT r = {dtype}[64,8]{{1,0}} ragged-dot(p0, p1, p2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}, lhs_ragged_dims={{0}}, rhs_group_dims={{0}}
}}
"""
    rng = np.random.default_rng(12)
    t = TYPES[dtype]
    lhs = rng.standard_normal((64, 9)).astype(np.float32).astype(t)
    rhs = rng.standard_normal((4, 9, 8)).astype(np.float32).astype(t)
    sizes = np.array([16, 0, 24, 10], np.int64)
    ours = convert_program(text)(lhs, rhs, sizes)[0]
    expected = jax_ragged(lhs, rhs, sizes.astype(np.int32), [1], [1], [], [], 0, [0], t)
    rtol, atol = TOLERANCE[dtype]
    assert_close(ours, expected, rtol=rtol, atol=atol)
