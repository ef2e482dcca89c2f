"""cuBLAS / cuBLASLt GEMM custom-calls, written as XLA's GPU compiler prints them, rewritten
by the default pipeline and checked against NumPy references of the documented semantics
(and, for plain forms, against XLA running the equivalent `dot` HLO itself)."""

import json
import math
import re

import ml_dtypes
import numpy as np
import pytest

from converter.runtime.convert import convert_text
from passes import PassOptions
from tests.helpers import assert_close, convert_program, run_xla


def gemm_config(epilogue="DEFAULT", alpha=1.0, beta=0.0, lhs_c=(1,), rhs_c=(0,), lhs_b=(), rhs_b=(),
                alpha_imag=0.0, damax=False, precision="DEFAULT") -> str:
    cfg = {"operation_queue_id": "0", "wait_on_operation_queues": [], "gemm_backend_config": {
        "alpha_real": alpha, "alpha_imag": alpha_imag, "beta": beta,
        "dot_dimension_numbers": {"lhs_contracting_dimensions": [str(d) for d in lhs_c],
                                  "rhs_contracting_dimensions": [str(d) for d in rhs_c],
                                  "lhs_batch_dimensions": [str(d) for d in lhs_b],
                                  "rhs_batch_dimensions": [str(d) for d in rhs_b]},
        "precision_config": {"operand_precision": [precision, precision], "algorithm": "ALG_UNSET"},
        "epilogue": epilogue, "damax_output": damax, "lhs_stride": "6", "rhs_stride": "12",
        "grad_x": False, "grad_y": False}, "force_earliest_schedule": False}
    return json.dumps(cfg, separators=(",", ":"))


def module(params: list[str], result: str, target: str, config: str, extra: str = "") -> str:
    decls = "\n".join(f"  p{i} = {p} parameter({i})" for i, p in enumerate(params))
    names = ", ".join(f"p{i}" for i in range(len(params)))
    d = re.match(r"\((\w+\[[^\]]*\](?:\{[^}]*\})?)", result).group(1)
    return f"""HloModule gemm
ENTRY main {{
{decls}
  g = {result} custom-call({names}), custom_call_target="{target}"{extra}, backend_config={config}
  ROOT d = {d} get-tuple-element(g), index=0
}}
"""


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS = {None: lambda x: x, "relu": lambda x: np.maximum(x, 0), "gelu": gelu_tanh,
               "silu": lambda x: x / (1 + np.exp(-x))}


def run(text, *inputs):
    converted = str(convert_text(text))
    assert "custom_call" not in converted, converted
    return convert_program(text)(*inputs)


RNG = np.random.default_rng(0)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


EPS32 = float(np.finfo(np.float32).eps)


def assert_within_gemm_bound(d, a, b, act, bias=None):
    """|d - act(a·b + bias)| within the f32 error bound, elementwise: the K-term dot (and the
    bias add) in f32 is within (K+1)·(eps/2)·(|a|·|b| + |bias|) of exact (the standard
    rounding-error bound of a sum); the activations' slopes are at most 1.13 (GELU; SiLU
    1.10, RELU 1); the activation's own f32 evaluation is within 4·eps·|x|
    (tests/passes/test_gemm_epilogue_ulps.py measures it alone).  A reference in f64."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    pre = a64 @ b64 + (0 if bias is None else bias.astype(np.float64))
    magnitude = np.abs(a64) @ np.abs(b64) + (0 if bias is None else np.abs(bias.astype(np.float64)))
    k = a.shape[-1] + (bias is not None)
    bound = 1.13 * k * EPS32 / 2 * magnitude + 4 * EPS32 * np.maximum(np.abs(pre), 2.0**-10)
    err = np.abs(d.astype(np.float64) - ACTIVATIONS[act](pre))
    assert np.all(err <= bound), f"beyond the bound by up to {np.max(err / bound):.2f}x"


@pytest.mark.parametrize("epilogue, act", [("DEFAULT", None), ("RELU", "relu"), ("GELU", "gelu"), ("SILU", "silu")])
def test_lt_matmul_activation(epilogue, act):
    a, b = f32(5, 7), f32(7, 3)
    text = module(["f32[5,7]{1,0}", "f32[7,3]{1,0}"], "(f32[5,3]{1,0}, s8[1024]{0})", "__cublas$lt$matmul",
                  gemm_config(epilogue))
    (d,) = run(text, a, b)
    assert_within_gemm_bound(d, a, b, act)


@pytest.mark.parametrize("epilogue, act", [("BIAS", None), ("BIAS_RELU", "relu"), ("BIAS_GELU", "gelu"),
                                           ("BIAS_SILU", "silu")])
def test_lt_matmul_vector_bias_row_major(epilogue, act):
    a, b, bias = f32(4, 6), f32(6, 5), f32(5)
    text = module(["f32[4,6]{1,0}", "f32[6,5]{1,0}", "f32[5]{0}"], "(f32[4,5]{1,0}, s8[1024]{0})",
                  "__cublas$lt$matmul", gemm_config(epilogue))
    (d,) = run(text, a, b, bias)
    assert_within_gemm_bound(d, a, b, act, bias)


def test_lt_matmul_vector_bias_on_a_column_major_output_runs_along_dim_0():
    """D laid out {0,1} (column-major): its minor dimension is 0, so is the bias's."""
    a, b, bias = f32(2, 3), f32(3, 4), f32(2)
    text = module(["f32[2,3]{1,0}", "f32[3,4]{1,0}", "f32[2]{0}"], "(f32[2,4]{0,1}, s8[1024]{0})",
                  "__cublas$lt$matmul", gemm_config("BIAS"))
    (d,) = run(text, a, b, bias)
    assert_close(d, (a.astype(np.float64) @ b + bias[:, None]).astype(np.float32), rtol=1e-5, atol=1e-5)


def test_alpha_beta_with_matrix_bias_and_bias_relu():
    """relu(alpha·AB + beta·C + bias): alpha scales neither C nor the bias."""
    a, b, c, bias = f32(3, 4), f32(4, 2), f32(3, 2), f32(2)
    text = module(["f32[3,4]{1,0}", "f32[4,2]{1,0}", "f32[3,2]{1,0}", "f32[2]{0}"], "(f32[3,2]{1,0}, s8[1024]{0})",
                  "__cublas$lt$matmul", gemm_config("BIAS_RELU", alpha=2.5, beta=0.5))
    (d,) = run(text, a, b, c, bias)
    want = np.maximum(2.5 * (a.astype(np.float64) @ b) + 0.5 * c + bias, 0)
    assert_close(d, want.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_legacy_gemm_alpha_beta_in_place_form():
    a, b, c = f32(2, 2), f32(2, 2), f32(2, 2)
    text = module(["f32[2,2]{1,0}", "f32[2,2]{1,0}", "f32[2,2]{1,0}"], "(f32[2,2]{1,0}, s8[4194304]{0})",
                  "__cublas$gemm", gemm_config(alpha=3.0, beta=1.0, precision="HIGHEST"),
                  extra=", output_to_operand_aliasing={{0}: (2, {})}")
    (d,) = run(text, a, b, c)
    assert_close(d, (3 * (a.astype(np.float64) @ b) + c).astype(np.float32), rtol=1e-5, atol=1e-5)


def test_legacy_gemm_alpha_and_beta_zero_gives_zeros_even_with_nan():
    a = np.full((2, 3), np.nan, np.float32)
    b = f32(3, 2)
    text = module(["f32[2,3]{1,0}", "f32[3,2]{1,0}"], "(f32[2,2]{1,0}, s8[16]{0})", "__cublas$gemm",
                  gemm_config(alpha=0.0))
    (d,) = run(text, a, b)
    np.testing.assert_array_equal(d, np.zeros((2, 2), np.float32))


def test_gelu_aux_returns_pre_activation():
    a, b, bias = f32(3, 4), f32(4, 5), f32(5)
    text = f"""HloModule gemm
ENTRY main {{
  p0 = f32[3,4]{{1,0}} parameter(0)
  p1 = f32[4,5]{{1,0}} parameter(1)
  p2 = f32[5]{{0}} parameter(2)
  g = (f32[3,5]{{1,0}}, f32[3,5]{{1,0}}, s8[1024]{{0}}) custom-call(p0, p1, p2), custom_call_target="__cublas$lt$matmul", backend_config={gemm_config("BIAS_GELU_AUX")}
  d = f32[3,5]{{1,0}} get-tuple-element(g), index=0
  aux = f32[3,5]{{1,0}} get-tuple-element(g), index=1
  ROOT t = (f32[3,5]{{1,0}}, f32[3,5]{{1,0}}) tuple(d, aux)
}}
"""
    d, aux = run(text, a, b, bias)
    pre = a.astype(np.float64) @ b + bias
    assert_close(aux, pre.astype(np.float32), rtol=1e-5, atol=1e-5)
    assert_close(d, gelu_tanh(pre).astype(np.float32), rtol=1e-5, atol=1e-5)


def test_batch_dims_and_transposed_operands_via_dimension_numbers():
    """lhs [batch, k, m] contracting dim 1, rhs [batch, n, k] contracting dim 2."""
    a, b = f32(2, 4, 3), f32(2, 5, 4)
    text = module(["f32[2,4,3]{2,1,0}", "f32[2,5,4]{2,1,0}"], "(f32[2,3,5]{2,1,0}, s8[1024]{0})",
                  "__cublas$lt$matmul", gemm_config(lhs_c=(1,), rhs_c=(2,), lhs_b=(0,), rhs_b=(0,)))
    (d,) = run(text, a, b)
    assert_close(d, np.einsum("bkm,bnk->bmn", a.astype(np.float64), b).astype(np.float32), rtol=1e-5, atol=1e-5)


def test_batched_bf16_gemm_with_f32_output_and_a_non_leading_rhs_batch_dim():
    """lhs [batch, k, m], rhs [n, batch, k]: XLA's CPU runtime has no bf16 x bf16 -> f32
    kernel for this order, the rewrite must still run.  bf16 products are exact in f32;
    the f32 sum of 8 of them rounds (f32 tolerance)."""
    a, b = f32(4, 8, 3).astype(ml_dtypes.bfloat16), f32(5, 4, 8).astype(ml_dtypes.bfloat16)
    text = module(["bf16[4,8,3]{2,1,0}", "bf16[5,4,8]{2,1,0}"], "(f32[4,3,5]{2,1,0}, s8[1024]{0})",
                  "__cublas$lt$matmul", gemm_config(lhs_c=(1,), rhs_c=(2,), lhs_b=(0,), rhs_b=(1,)))
    (d,) = run(text, a, b)
    want = np.einsum("bkm,nbk->bmn", a.astype(np.float64), b.astype(np.float64))
    assert_close(d, want.astype(np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("in_type, out_type, np_in, np_out, tol", [
    # bf16/f16 inputs are exact in f32; accumulation in f32, one rounding to the output:
    # half an output ulp plus f32 accumulation error.
    ("bf16", "bf16", ml_dtypes.bfloat16, ml_dtypes.bfloat16, 8e-3),
    ("bf16", "f32", ml_dtypes.bfloat16, np.float32, 1e-5),
    ("f16", "f16", np.float16, np.float16, 1e-3),
    ("f64", "f64", np.float64, np.float64, 1e-12),
])
def test_dtypes_and_mixed_output(in_type, out_type, np_in, np_out, tol):
    a, b = f32(6, 8).astype(np_in), f32(8, 4).astype(np_in)
    text = module([f"{in_type}[6,8]{{1,0}}", f"{in_type}[8,4]{{1,0}}"], f"({out_type}[6,4]{{1,0}}, s8[1024]{{0}})",
                  "__cublas$lt$matmul", gemm_config())
    (d,) = run(text, a, b)
    assert_close(d, (a.astype(np.float64) @ b.astype(np.float64)).astype(np_out), rtol=tol, atol=tol)


def test_complex_alpha():
    a = (f32(3, 2) + 1j * f32(3, 2)).astype(np.complex64)
    b = (f32(2, 4) + 1j * f32(2, 4)).astype(np.complex64)
    text = module(["c64[3,2]{1,0}", "c64[2,4]{1,0}"], "(c64[3,4]{1,0}, s8[1024]{0})", "__cublas$gemm",
                  gemm_config(alpha=0.5, alpha_imag=2.0))
    (d,) = run(text, a, b)
    assert_close(d, ((0.5 + 2j) * (a.astype(np.complex128) @ b)).astype(np.complex64), rtol=1e-5, atol=1e-5)


def test_int8_gemm_accumulates_in_integers():
    a = RNG.integers(-128, 127, (4, 64)).astype(np.int8)
    b = RNG.integers(-128, 127, (64, 3)).astype(np.int8)
    text = module(["s8[4,64]{1,0}", "s8[64,3]{1,0}"], "(s32[4,3]{1,0}, s8[1024]{0})", "__cublas$gemm", gemm_config())
    (d,) = run(text, a, b)
    np.testing.assert_array_equal(d, a.astype(np.int32) @ b.astype(np.int32))


def f8(*shape, dtype=ml_dtypes.float8_e4m3fn):
    return (RNG.standard_normal(shape) * 4).astype(dtype)


def test_f8_scaled_inputs_f32_output():
    a, b = f8(16, 32), f8(16, 32)  # rhs stored [n, k]: contracting dim 1 on both
    xs, ys = np.float32(0.5), np.float32(3.0)
    text = module(["f8e4m3fn[16,32]{1,0}", "f8e4m3fn[16,32]{1,0}", "f32[]", "f32[]"],
                  "(f32[16,16]{1,0}, s8[1024]{0})", "__cublas$lt$matmul$f8", gemm_config(lhs_c=(1,), rhs_c=(1,)))
    (d,) = run(text, a, b, xs, ys)
    want = 0.5 * 3.0 * (a.astype(np.float64) @ b.astype(np.float64).T)
    assert_close(d, want.astype(np.float32), rtol=1e-5, atol=1e-4)


def f8_relu_amax_module(rows: int) -> str:
    """An fp8 GEMM [rows, 16] x [16, 16]ᵀ with RELU, a saturating fp8 D and AMAX."""
    return f"""HloModule gemm
ENTRY main {{
  p0 = f8e4m3fn[{rows},16]{{1,0}} parameter(0)
  p1 = f8e4m3fn[16,16]{{1,0}} parameter(1)
  p2 = f32[] parameter(2)
  p3 = f32[] parameter(3)
  p4 = f32[] parameter(4)
  g = (f8e4m3fn[{rows},16]{{1,0}}, f32[], s8[1024]{{0}}) custom-call(p0, p1, p2, p3, p4), custom_call_target="__cublas$lt$matmul$f8", backend_config={gemm_config("RELU", lhs_c=(1,), rhs_c=(1,), damax=True)}
  d = f8e4m3fn[{rows},16]{{1,0}} get-tuple-element(g), index=0
  amax = f32[] get-tuple-element(g), index=1
  ROOT t = (f8e4m3fn[{rows},16]{{1,0}}, f32[]) tuple(d, amax)
}}
"""


def test_f8_output_saturates_after_d_scale_and_reports_amax():
    a, b = f8(16, 16), f8(16, 16)
    scales = [np.float32(2.0), np.float32(4.0), np.float32(2.0)]
    text = f8_relu_amax_module(16)
    d, amax = run(text, a, b, *scales)
    x = np.maximum(2.0 * 4.0 * (a.astype(np.float64) @ b.astype(np.float64).T), 0)
    # AMAX: post-activation, before d_scale, in f32.
    assert_close(amax, np.float32(np.abs(x).max()), rtol=1e-5, atol=0)
    assert (x * 2.0 > 448).any()  # the case under test: values beyond e4m3fn's ±448 saturate
    want = np.clip(x * 2.0, -448, 448).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    # One fp8 rounding of values computed in f32 vs f64: identical except at rounding ties.
    assert_close(d.astype(np.float32), want.astype(np.float32), rtol=0.07, atol=0)


@pytest.mark.parametrize("rows, block_bytes", [(8, 0), (320, 1)])
def test_plain_gemm_matches_xla_running_the_dot_itself(rows, block_bytes):
    """Differential: the custom-call rewritten (whole, or in blocks of 64 rows with a last
    block of the rest) vs XLA computing `dot + bias + max(.,0)`."""
    a, b, bias = f32(rows, 16), f32(16, 4), f32(4)
    plain = f"""HloModule plain
ENTRY main {{
  p0 = f32[{rows},16]{{1,0}} parameter(0)
  p1 = f32[16,4]{{1,0}} parameter(1)
  p2 = f32[4]{{0}} parameter(2)
  d = f32[{rows},4]{{1,0}} dot(p0, p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  bb = f32[{rows},4]{{1,0}} broadcast(p2), dimensions={{1}}
  s = f32[{rows},4]{{1,0}} add(d, bb)
  z = f32[] constant(0)
  zb = f32[{rows},4]{{1,0}} broadcast(z), dimensions={{}}
  ROOT r = f32[{rows},4]{{1,0}} maximum(s, zb)
}}
"""
    text = module([f"f32[{rows},16]{{1,0}}", "f32[16,4]{1,0}", "f32[4]{0}"], f"(f32[{rows},4]{{1,0}}, s8[1024]{{0}})",
                  "__cublas$lt$matmul", gemm_config("BIAS_RELU"))
    (ours,) = run_blocked(text, [a, b, bias], block_bytes) if block_bytes else run(text, a, b, bias)
    (theirs,) = run_xla(plain, [a, b, bias])
    assert_close(ours, theirs)


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
@pytest.mark.parametrize("unit_diagonal", [False, True])
def test_triangular_solve_target(left_side, lower, transpose, unit_diagonal):
    """Every option of `__cublas$triangularSolve` (batched; c64 for ADJOINT, f32 otherwise)
    against NumPy's solve of the matrix the options describe.  The triangle not named by
    `lower` holds garbage that must not be read."""
    dtype, hlo_type = (np.complex64, "c64") if transpose == "ADJOINT" else (np.float32, "f32")
    rng = np.random.default_rng(11)

    def draw(*shape):
        x = rng.standard_normal(shape)
        return (x + 1j * rng.standard_normal(shape) if dtype == np.complex64 else x).astype(dtype)

    tri = np.tril if lower else np.triu
    a = draw(2, 4, 4) + 4 * np.eye(4, dtype=dtype)
    garbage = (np.triu if lower else np.tril)(np.full((4, 4), 1e3, dtype), 1 if lower else -1)
    a_in = (tri(a) + garbage).astype(dtype)
    b_shape = (2, 4, 3) if left_side else (2, 3, 4)
    rhs = draw(*b_shape)
    dims = lambda s: ",".join(map(str, s))  # noqa: E731
    config = (f'{{"left_side":{str(left_side).lower()},"lower":{str(lower).lower()},'
              f'"unit_diagonal":{str(unit_diagonal).lower()},"transpose_a":"{transpose}"}}')
    text = f"""HloModule ts
ENTRY main {{
  p0 = {hlo_type}[2,4,4]{{2,1,0}} parameter(0)
  p1 = {hlo_type}[{dims(b_shape)}]{{2,1,0}} parameter(1)
  g = ({hlo_type}[{dims(b_shape)}]{{2,1,0}}, s8[0]{{0}}) custom-call(p0, p1), custom_call_target="__cublas$triangularSolve", backend_config={config}
  ROOT d = {hlo_type}[{dims(b_shape)}]{{2,1,0}} get-tuple-element(g), index=0
}}
"""
    assert "custom_call" not in str(convert_text(text))
    (x,) = run(text, a_in, rhs)
    m = tri(a).astype(np.complex128 if dtype == np.complex64 else np.float64)
    if unit_diagonal:
        m = m - np.einsum("bii->bi", m)[..., None] * np.eye(4) + np.eye(4)
    if transpose == "TRANSPOSE":
        m = np.swapaxes(m, -1, -2)
    elif transpose == "ADJOINT":
        m = np.conj(np.swapaxes(m, -1, -2))
    if left_side:
        want = np.linalg.solve(m, rhs)
    else:  # X M = B  <=>  Mᵀ Xᵀ = Bᵀ
        want = np.swapaxes(np.linalg.solve(np.swapaxes(m, -1, -2), np.swapaxes(rhs, -1, -2)), -1, -2)
    assert_close(x, want.astype(dtype), rtol=1e-4, atol=1e-4)


def test_bad_operand_count_is_a_clear_error():
    text = module(["f32[2,3]{1,0}", "f32[3,4]{1,0}"], "(f32[2,4]{1,0}, s8[16]{0})", "__cublas$lt$matmul",
                  gemm_config("BIAS"))
    with pytest.raises(Exception, match=r"%g \(custom-call __cublas\$lt\$matmul\): the epilogue adds a bias"):
        convert_text(text, "bad.hlo")


def test_qwen_sample_converts_without_custom_calls():
    from tests.conftest import SAMPLES

    text = str(convert_text((SAMPLES / "gpu_torchxla_qwen_decode_cublas.hlo").read_text()))
    assert "custom_call" not in text and text.count("stablehlo.dot_general") >= 5


# ---------------------------------------------------------------------------------------
# Blocked GEMMs: a call whose CPU working set exceeds PassOptions.gemm_block_bytes is
# computed in blocks of one output dimension.  Each element is the same dot product, so the
# blocked result must equal the unblocked one bit for bit (under jaxlib 0.11+ within the f32
# tolerance where the epilogue takes tanh or exp); NumPy checks the meaning.


# Epilogues computed with tanh or exp (GELU's tanh approximation, SiLU's sigmoid).
TRANSCENDENTAL_EPILOGUES = ("gelu", "silu")


def run_blocked(text, inputs, block_bytes):
    module = str(convert_text(text, "gemm.hlo", pass_options=PassOptions(gemm_block_bytes=block_bytes)))
    assert "custom_call" not in module and "stablehlo.while" in module, module
    return convert_program(text, pass_options=PassOptions(gemm_block_bytes=block_bytes))(*inputs)


def assert_same_bits(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual.reshape(-1).view(np.uint8), expected.reshape(-1).view(np.uint8))


def bf16(*shape):
    return f32(*shape).astype(ml_dtypes.bfloat16)


# (params, result, epilogue config, inputs, NumPy reference in f64 of each output before
# its rounding); shapes chosen so that the blocked dimension differs (an LHS free
# dimension, an RHS free dimension, a batch dimension, a column-major output's rows), with
# and without rows left after the whole blocks.
BLOCKED_CASES = {
    "lhs_rows_bias_gelu_aux": (
        ["f32[300,16]{1,0}", "f32[16,5]{1,0}", "f32[5]{0}"], "(f32[300,5]{1,0}, f32[300,5]{1,0}, s8[1024]{0})",
        gemm_config("BIAS_GELU_AUX"), lambda: [f32(300, 16), f32(16, 5), f32(5)],
        lambda a, b, bias: [gelu_tanh(a @ b + bias), a @ b + bias]),
    "rhs_columns_bf16_alpha_beta_relu": (
        ["bf16[6,16]{1,0}", "bf16[256,16]{1,0}", "bf16[6,256]{1,0}"], "(bf16[6,256]{1,0}, s8[1024]{0})",
        gemm_config("RELU", alpha=0.75, beta=0.5, lhs_c=(1,), rhs_c=(1,)),
        lambda: [bf16(6, 16), bf16(256, 16), bf16(6, 256)],
        lambda a, b, c: [np.maximum(0.75 * (a @ b.T) + 0.5 * c, 0)]),
    "batch_bf16_to_f32_rhs_batch_not_leading": (
        ["bf16[130,8,3]{2,1,0}", "bf16[5,130,8]{2,1,0}"], "(f32[130,3,5]{2,1,0}, s8[1024]{0})",
        gemm_config(lhs_c=(1,), rhs_c=(2,), lhs_b=(0,), rhs_b=(1,)), lambda: [bf16(130, 8, 3), bf16(5, 130, 8)],
        lambda a, b: [np.einsum("bkm,nbk->bmn", a, b)]),
    "column_major_output_bias_along_rows_silu": (
        ["f32[256,12]{1,0}", "f32[12,4]{1,0}", "f32[256]{0}"], "(f32[256,4]{0,1}, s8[1024]{0})",
        gemm_config("BIAS_SILU"), lambda: [f32(256, 12), f32(12, 4), f32(256)],
        lambda a, b, bias: [ACTIVATIONS["silu"](a @ b + bias[:, None])]),
    "complex_alpha": (
        ["c64[200,6]{1,0}", "c64[6,3]{1,0}"], "(c64[200,3]{1,0}, s8[1024]{0})", gemm_config(alpha=0.5, alpha_imag=2.0),
        lambda: [(f32(200, 6) + 1j * f32(200, 6)).astype(np.complex64),
                 (f32(6, 3) + 1j * f32(6, 3)).astype(np.complex64)],
        lambda a, b: [(0.5 + 2j) * (a @ b)]),
    # Large enough for the CPU's blocked GEMM kernels (register tiles, cache blocking of k).
    "bf16_large": (
        ["bf16[2048,512]{1,0}", "bf16[512,1024]{1,0}"], "(bf16[2048,1024]{1,0}, s8[1024]{0})", gemm_config(),
        lambda: [bf16(2048, 512), bf16(512, 1024)], lambda a, b: [a @ b]),
    "int8": (
        ["s8[192,64]{1,0}", "s8[64,3]{1,0}"], "(s32[192,3]{1,0}, s8[1024]{0})", gemm_config(),
        lambda: [RNG.integers(-128, 127, (192, 64)).astype(np.int8), RNG.integers(-128, 127, (64, 3)).astype(np.int8)],
        lambda a, b: [a @ b]),
}


def _reference(case, inputs, outputs):
    """The NumPy value of each output, rounded to its dtype."""
    wide = [x.astype(np.int64) if x.dtype.kind == "i" else x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
            for x in inputs]
    return [np.asarray(w).astype(o.dtype) for w, o in zip(BLOCKED_CASES[case][4](*wide), outputs)]


@pytest.mark.parametrize("fraction", [0, 0.6])
@pytest.mark.parametrize("case", list(BLOCKED_CASES))
def test_blocked_gemm_equals_unblocked_bit_for_bit_and_numpy(case, fraction):
    """fraction: the block size as a fraction of the operands' CPU bytes (0: the smallest
    blocks; 0.6: one or two large blocks, the rest as a smaller last block)."""
    params, result, config, make_inputs, _ = BLOCKED_CASES[case]
    n_out = result.count("[") - 1  # every result but the workspace
    types = re.findall(r"\w+\[[^\]]*\]\{[^}]*\}", result)[:n_out]
    outs = ", ".join(f"o{i}" for i in range(n_out))
    decls = "\n".join(f"  p{i} = {p} parameter({i})" for i, p in enumerate(params))
    gtes = "\n".join(f"  o{i} = {t} get-tuple-element(g), index={i}" for i, t in enumerate(types))
    text = f"""HloModule gemm
ENTRY main {{
{decls}
  g = {result} custom-call({", ".join(f"p{i}" for i in range(len(params)))}), custom_call_target="__cublas$lt$matmul", backend_config={config}
{gtes}
  ROOT t = ({", ".join(types)}) tuple({outs})
}}
"""
    inputs = make_inputs()
    # Floats as the CPU dot holds them (narrower ones widened to f32), integers as they are.
    block_bytes = max(1, int(fraction * sum(x.size * (x.itemsize if x.dtype.kind in "iu" else max(4, x.itemsize))
                                            for x in inputs[:2])))
    whole = run(text, *inputs)
    blocked = run_blocked(text, inputs, block_bytes)
    for got, want in zip(blocked, whole):
        if any(name in case for name in TRANSCENDENTAL_EPILOGUES):
            # XLA's CPU compiler may evaluate tanh/exp in a loop body and in the whole GEMM's
            # fusion by different approximations (a few ulps of f32 apart, more in relative
            # terms where x(1 + tanh)/2 cancels near zero): jaxlib 0.11+ everywhere, jaxlib
            # 0.10.2 on some CPUs (AMD EPYC without AVX-512: measured), so the f32 tolerance.
            # The dot and the linear epilogue steps stay bit-identical.
            assert_close(got, want)
        else:
            assert_same_bits(got, want)
    for got, want in zip(blocked, _reference(case, inputs, blocked)):
        # One rounding to the output type of a value accumulated in f32 (bf16: half an ulp
        # of 2^-8 plus the f32 sums); integers exactly.
        tol = 8e-3 if got.dtype == ml_dtypes.bfloat16 else 1e-5
        assert_close(got, want, rtol=tol, atol=tol)


def test_blocked_fp8_gemm_keeps_saturation_and_amax_over_all_blocks():
    a, b = f8(256, 16), f8(16, 16)
    scales = [np.float32(2.0), np.float32(4.0), np.float32(2.0)]
    text = f8_relu_amax_module(256)
    whole = run(text, a, b, *scales)
    blocked = run_blocked(text, [a, b, *scales], 1)
    for got, want in zip(blocked, whole):
        assert_same_bits(got, want)
    x = np.maximum(8.0 * (a.astype(np.float64) @ b.astype(np.float64).T), 0)
    assert_close(blocked[1], np.float32(np.abs(x).max()), rtol=1e-5, atol=0)


@pytest.mark.parametrize("lhs, rhs, dims, sliced", [
    # [m, k] x [k, n] with m >> n: the LHS rows; with n >> m: the RHS columns.
    ((4096, 64), (64, 8), {}, "a"),
    ((8, 64), (64, 4096), {}, "b"),
    # batched, the batch larger than either free dimension: both operands.
    ((256, 64, 64), (256, 64, 64), {"lhs_c": (2,), "rhs_c": (1,), "lhs_b": (0,), "rhs_b": (0,)}, "ab"),
])
def test_block_plan_slices_the_larger_operand(lhs, rhs, dims, sliced):
    """Which operands the blocked loop slices: those of the dimension leaving the fewest
    bytes whole."""
    def shape(s):
        return f"bf16[{','.join(map(str, s))}]{{{','.join(map(str, reversed(range(len(s)))))}}}"

    out = [lhs[0], lhs[1], rhs[2]] if len(lhs) == 3 else [lhs[0], rhs[1]]
    text = module([shape(lhs), shape(rhs)], f"({shape(out)}, s8[1024]{{0}})", "__cublas$lt$matmul",
                  gemm_config(**dims))
    mlir = str(convert_text(text, pass_options=PassOptions(gemm_block_bytes=64 << 10)))
    sources = set(re.findall(r"stablehlo.dynamic_slice.*: \(tensor<([0-9x]+)x\w+>", mlir))
    assert sources == {"x".join(map(str, {"a": lhs, "b": rhs}[role])) for role in sliced}, mlir


def test_fp8_types_are_told_without_printing_them():
    """_is_fp8 reads an 8-bit float type by its width, not its printed name: the two agree
    on every float type MLIR has (4-, 6- and 19-bit ones included)."""
    from jaxlib.mlir import ir

    from converter.mlir.context import make_context
    from passes.cublas_gemm import _is_fp8

    names = ["f16", "bf16", "f32", "f64", "tf32", "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ", "f8E4M3B11FNUZ",
             "f8E3M4", "f8E4M3", "f8E8M0FNU", "f4E2M1FN", "f6E2M3FN", "f6E3M2FN", "i8", "ui8", "complex<f32>"]
    with make_context():
        for name in names:
            t = ir.Type.parse(name)
            assert _is_fp8(t) == str(t).startswith("f8"), name
