"""cuBLASLt activation epilogues (GELU's tanh approximation, SiLU), held to their error bound.

The GEMM is made exact (every pre-activation a multiple of 1/64 in [-8, 8), products and
sums of such numbers exact in f32), so what is measured is the epilogue alone, against an
independent oracle: the tanh-approximated GELU and x·sigmoid(x) in float64 (NumPy), whose
GELU is checked against JAX's own definition, jax.nn.gelu(approximate=True).

The bound, per element: the f32 epilogue rounds a handful of times, and each rounding of a
value of magnitude <= |x| (0.5·x, x³, the sum inside tanh, the final product) costs at most
half an ulp of it; XLA's tanh and logistic are polynomial/rational approximations within a
couple of ulps of 1.  So |got - exact| <= 4·eps·max(|x|, 2^-10) (eps = 2^-23): 1.2 eps·|x| is
what XLA CPU measures.  The tolerance of 1e-5 that the other GEMM tests use is ~85 ulps at
|x| = 1, wider than a wrong constant's error: 0.044715 -> 0.0447 moves GELU by ~40 eps·|x|,
which this bound catches at every |x| in [1, 3]."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.passes.test_cublas_gemm import gemm_config, module, run

EPS32 = float(np.finfo(np.float32).eps)
ULPS = 4  # the module doc's bound, in eps·|x|


def gelu_tanh_f64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def silu_f64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x / (1 + np.exp(-x))


ORACLES = {"gelu": gelu_tanh_f64, "silu": silu_f64}


def exact_pre_activations() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (128x8) and B (8x8) whose product is every multiple of 1/64 in [-8, 8), exactly:
    B is a signed permutation scaled by powers of two, so each product term is exact and
    each sum has one nonzero term; and a bias (a multiple of 1/64) per column."""
    grid = np.arange(-512, 512, dtype=np.float64) / 64
    rng = np.random.default_rng(7)
    perm = rng.permutation(8)
    scale = np.array([1, -1, 2, -2, 0.5, -0.5, 1, -1])[perm]
    b = np.zeros((8, 8))
    b[np.arange(8), perm] = 1 / scale  # exact: powers of two
    pre = rng.permutation(grid).reshape(128, 8)
    a = pre @ np.linalg.inv(b)  # a = pre · B⁻¹: multiples of 1/128 within [-16, 16], exact
    assert np.array_equal(a @ b, pre)
    return a.astype(np.float32), b.astype(np.float32), pre


def _bound_violations(got: np.ndarray, pre: np.ndarray, act: str) -> np.ndarray:
    err = np.abs(got.astype(np.float64) - ORACLES[act](pre))
    return err > ULPS * EPS32 * np.maximum(np.abs(pre), 2.0**-10)


def test_the_gelu_oracle_is_jaxs_definition():
    import jax
    import jax.numpy as jnp

    x = np.arange(-512, 512, dtype=np.float32) / 64
    theirs = np.asarray(jax.jit(lambda v: jax.nn.gelu(v, approximate=True))(jnp.asarray(x)), np.float64)
    # JAX evaluates in f32: its own few roundings, the same bound as the epilogue's.
    assert np.all(np.abs(theirs - gelu_tanh_f64(x)) <= ULPS * EPS32 * np.maximum(np.abs(x), 2.0**-10))


@pytest.mark.parametrize("epilogue, act", [("GELU", "gelu"), ("SILU", "silu")])
def test_activation_epilogue_within_a_few_ulps(epilogue, act):
    a, b, pre = exact_pre_activations()
    text = module(["f32[128,8]{1,0}", "f32[8,8]{1,0}"], "(f32[128,8]{1,0}, s8[1024]{0})", "__cublas$lt$matmul",
                  gemm_config(epilogue))
    (d,) = run(text, a, b)
    bad = _bound_violations(d, pre, act)
    assert not bad.any(), f"{bad.sum()} elements beyond {ULPS} eps·|x|, e.g. x={pre[bad][:4]}"


@pytest.mark.parametrize("epilogue, act", [("BIAS_GELU", "gelu"), ("BIAS_SILU", "silu")])
def test_bias_activation_epilogue_within_a_few_ulps(epilogue, act):
    a, b, pre = exact_pre_activations()
    bias = (np.arange(8) - 4).astype(np.float32) / 64  # multiples of 1/64: pre + bias stays exact
    text = module(["f32[128,8]{1,0}", "f32[8,8]{1,0}", "f32[8]{0}"], "(f32[128,8]{1,0}, s8[1024]{0})",
                  "__cublas$lt$matmul", gemm_config(epilogue))
    (d,) = run(text, a, b, bias)
    bad = _bound_violations(d, pre + bias, act)
    assert not bad.any(), f"{bad.sum()} elements beyond {ULPS} eps·|x|, e.g. x={(pre + bias)[bad][:4]}"


def test_a_wrong_gelu_constant_is_beyond_the_bound():
    """The bound is tight enough to tell 0.044715 from 0.0447 (issue 28's surviving mutant)."""
    x = np.arange(-512, 512, dtype=np.float64) / 64
    wrong = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.0447 * x**3)))
    assert _bound_violations(wrong, x, "gelu").sum() > 100


REAL_DUMP = "tests/passes/data/cublaslt_bias_gelu_h100.hlo"  # make_cublaslt_bias_gelu.py: XLA's own epilogue


def test_xla_gpu_dump_with_a_bias_gelu_epilogue_within_a_few_ulps():
    """gelu_tanh(x @ w + b) as XLA's H100 compiler writes it (one `__cublas$lt$matmul`,
    epilogue BIAS_GELU), on inputs that keep the GEMM exact: w has one nonzero per column
    (+-1 or +-1/2), x and b are multiples of 1/64."""
    import os

    from converter.runtime.program import load

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), REAL_DUMP)
    with open(path) as f:
        assert '"epilogue":"BIAS_GELU"' in f.read()
    rng = np.random.default_rng(11)
    x = rng.permutation(np.arange(-1024, 1024) / 128).reshape(64, 32)  # multiples of 1/128 in [-8, 8)
    w = np.zeros((32, 48))
    w[rng.integers(0, 32, 48), np.arange(48)] = rng.choice([1, -1, 0.5, -0.5], 48)
    b = rng.integers(-64, 64, 48) / 64
    pre = x @ w + b  # exact in f32 too: one product term and one add per element, all dyadic
    program = load(path)
    (d,) = program(x.astype(np.float32), w.astype(np.float32), b.astype(np.float32))
    bad = _bound_violations(d, pre, "gelu")
    assert not bad.any(), f"{bad.sum()} elements beyond {ULPS} eps·|x|, e.g. x={pre[bad][:4]}"
