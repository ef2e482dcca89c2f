"""xla-builder-math (passes/xla_builder_math.py): `xla_builder.math.<Fn>` custom-calls
against SciPy/NumPy in float64 (independent of both XLA's and JAX's implementations).

Tolerances: f32 results of f32 inputs.  The elementary functions are within a few ulps
(rtol 1e-5 plus an absolute floor for results near zero); the special functions are
series/continued-fraction approximations accurate to about 1e-5 relative in f32 (the
same accuracy XLA documents for math.cc), so rtol 1e-4 there."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

from converter.common.errors import ConverterError
from tests.helpers import run_ours

RNG = np.random.default_rng(0)


def _call_module(name: str, arity: int, n: int, dtype: str = "f32") -> str:
    params = "\n".join(f"  p{i} = {dtype}[{n}] parameter({i})" for i in range(arity))
    args = ", ".join(f"p{i}" for i in range(arity))
    return (f"HloModule xla_builder_{name.lower()}\nENTRY main {{\n{params}\n"
            f"  ROOT r = {dtype}[{n}] custom-call({args}), custom_call_target=\"xla_builder.math.{name}\"\n}}\n")


def _uniform(lo: float, hi: float, n: int = 64) -> np.ndarray:
    return RNG.uniform(lo, hi, n).astype(np.float32)


def _dP_da(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d/da of the regularized lower incomplete gamma P(a, x), by a central difference in
    float64 (step 1e-6 relative: truncation and rounding errors both ~1e-10)."""
    h = 1e-6 * np.maximum(a, 1.0)
    return (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)


def _random_gamma_grad(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d sample / d alpha of a Gamma(alpha, 1) sample x, by implicit differentiation of
    P(alpha, x) = u at fixed u: -(dP/dalpha) / (dP/dx), dP/dx the Gamma density."""
    density = np.exp((a - 1) * np.log(x) - x - sp.gammaln(a))
    return -_dP_da(a, x) / density


# name -> (arity, inputs, float64 reference, rtol, atol)
CASES = {
    "Acos": (1, [_uniform(-0.99, 0.99)], np.arccos, 1e-5, 1e-6),
    "Asin": (1, [_uniform(-0.99, 0.99)], np.arcsin, 1e-5, 1e-6),
    "Atan": (1, [_uniform(-20, 20)], np.arctan, 1e-5, 1e-6),
    "Atanh": (1, [_uniform(-0.99, 0.99)], np.arctanh, 1e-5, 1e-6),
    "Acosh": (1, [_uniform(1.0, 30)], np.arccosh, 1e-5, 1e-6),
    "Asinh": (1, [_uniform(-30, 30)], np.arcsinh, 1e-5, 1e-6),
    "Cosh": (1, [_uniform(-10, 10)], np.cosh, 1e-5, 1e-6),
    "Sinh": (1, [_uniform(-10, 10)], np.sinh, 1e-5, 1e-6),
    "Tan": (1, [_uniform(-1.5, 1.5)], np.tan, 1e-5, 1e-6),
    "Erf": (1, [_uniform(-3, 3)], sp.erf, 1e-5, 1e-6),
    "Erfc": (1, [_uniform(-3, 3)], sp.erfc, 1e-4, 1e-6),
    "ErfInv": (1, [_uniform(-0.99, 0.99)], sp.erfinv, 1e-4, 1e-6),
    "Lgamma": (1, [_uniform(0.1, 20)], sp.gammaln, 1e-4, 1e-5),
    "Digamma": (1, [_uniform(0.1, 20)], sp.digamma, 1e-4, 1e-5),
    "BesselI1e": (1, [_uniform(-20, 20)], sp.i1e, 1e-4, 1e-6),
    "NextAfter": (2, [_uniform(-5, 5), _uniform(-5, 5)], None, 0.0, 0.0),
    "Polygamma": (2, [RNG.integers(0, 4, 64).astype(np.float32), _uniform(0.5, 10)],
                  lambda n, x: sp.polygamma(n.astype(int), x), 1e-4, 1e-5),
    "Zeta": (2, [_uniform(1.5, 6), _uniform(0.5, 5)], sp.zeta, 1e-4, 1e-6),
    "Igamma": (2, [_uniform(0.5, 8), _uniform(0.1, 10)], sp.gammainc, 1e-4, 1e-6),
    "Igammac": (2, [_uniform(0.5, 8), _uniform(0.1, 10)], sp.gammaincc, 1e-4, 1e-6),
    "IgammaGradA": (2, [_uniform(0.5, 8), _uniform(0.1, 10)], _dP_da, 1e-3, 1e-5),
    "RandomGammaGrad": (2, [_uniform(0.5, 8), _uniform(0.2, 10)], _random_gamma_grad, 1e-3, 1e-5),
    "RegularizedIncompleteBeta": (3, [_uniform(0.5, 5), _uniform(0.5, 5), _uniform(0.01, 0.99)], sp.betainc,
                                  1e-4, 1e-6),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_xla_builder_math_call_matches_scipy(name):
    arity, inputs, reference, rtol, atol = CASES[name]
    (ours,) = run_ours(_call_module(name, arity, inputs[0].size), inputs)
    assert ours.dtype == np.float32
    if name == "NextAfter":
        # One step towards the target, bit-exact.
        np.testing.assert_array_equal(ours, np.nextafter(*inputs))
        return
    expected = reference(*(x.astype(np.float64) for x in inputs))
    np.testing.assert_allclose(ours.astype(np.float64), expected, rtol=rtol, atol=atol)


def test_a_call_carrying_its_computation_is_that_computation():
    """XLA's expansion keeps the math as the call's to_apply computation: inlined as it
    is (here cosh written as (e^x + e^-x) / 2)."""
    hlo = """HloModule expanded
cosh_expansion {
  arg0 = f32[8] parameter(0)
  e = f32[8] exponential(arg0)
  n = f32[8] negate(arg0)
  f = f32[8] exponential(n)
  s = f32[8] add(e, f)
  h = f32[] constant(0.5)
  hb = f32[8] broadcast(h), dimensions={}
  ROOT r = f32[8] multiply(s, hb)
}
ENTRY main {
  x = f32[8] parameter(0)
  ROOT c = f32[8] custom-call(x), custom_call_target="xla_builder.math.Cosh", to_apply=cosh_expansion
}
"""
    x = _uniform(-4, 4, 8)
    (ours,) = run_ours(hlo, [x])
    np.testing.assert_allclose(ours, np.cosh(x.astype(np.float64)), rtol=1e-6)


def test_bf16_operands_keep_their_type():
    import ml_dtypes

    x = _uniform(-0.9, 0.9, 16).astype(ml_dtypes.bfloat16)
    (ours,) = run_ours(_call_module("Asin", 1, 16, "bf16"), [x])
    assert ours.dtype == ml_dtypes.bfloat16
    # bf16 has an 8-bit significand: within one bf16 rounding of the exact value.
    np.testing.assert_allclose(ours.astype(np.float64), np.arcsin(x.astype(np.float64)), rtol=2 ** -7, atol=1e-3)


def test_an_unknown_function_without_computation_is_refused_by_name():
    with pytest.raises(ConverterError, match=r"<test>:4:\d+.*no portable form of xla::Frobnicate"):
        run_ours(_call_module("Frobnicate", 1, 4), [np.zeros(4, np.float32)])


def test_wrong_operand_count_is_refused():
    hlo = _call_module("Acos", 2, 4)
    with pytest.raises(ConverterError, match="takes 1 operand"):
        run_ours(hlo, [np.zeros(4, np.float32)] * 2)
