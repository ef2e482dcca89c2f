"""Real optimized GPU dumps of jax's cuDNN attention (tests/passes/attention/dumps/, written by
generate_cudnn_dumps.py from the programs in cudnn_cases.py) convert with the default
pipeline to modules without any custom-call, and compute on CPU what JAX's XLA
implementation computes for the same inputs (jax.vjp for the gradients)."""

from __future__ import annotations

import pathlib

import jax
import numpy as np
import pytest

from tests.passes.attention.cudnn_cases import cases, random_inputs
from tests.helpers import convert_program

DUMPS = pathlib.Path(__file__).resolve().parent / "dumps"
NUMERIC = [name for name, case in cases().items() if case.reference is not None]


def _convert(name: str, **kwargs):
    text = (DUMPS / f"{name}.hlo").read_text()
    assert "__cudnn$fmha" in text
    program = convert_program(text, **kwargs)
    mlir = str(program.module)
    assert "custom_call" not in mlir, f"{name}: a custom-call survived the default pipeline"
    return program


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    got, want = got.astype(np.float64), want.astype(np.float64)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-6))


@pytest.mark.parametrize("name", NUMERIC)
def test_cudnn_dump_matches_jax_xla(name):
    case = cases()[name]
    inputs = random_inputs(case)
    ours = _convert(name)(*inputs)
    want = jax.tree.leaves(jax.jit(case.reference)(*inputs))
    assert len(ours) == len(want)
    for i, (got, w) in enumerate(zip(ours, want)):
        w = np.asarray(w)
        assert got.shape == w.shape and got.dtype == w.dtype, f"{name} output {i}"
        # The rewrite keeps P (and dP) in f32 for the second matmuls, as cuDNN does; JAX's
        # XLA path rounds P to the input type first, and both round each result once.
        # Measured over three seeds: at most 7.5e-3 of the output's largest magnitude in
        # bf16 (2 ulps of 2^-8) and 9.6e-4 in f16 (2 ulps of 2^-11); allowed: 4 ulps.
        tolerance = 4 * 2.0**-11 if w.dtype == np.float16 else 4 * 2.0**-8
        assert _relative_error(got, w) <= tolerance, f"{name} output {i}: {_relative_error(got, w):.2e}"


def test_cudnn_dropout_dump_is_deterministic_and_unbiased():
    """Dropout's mask cannot be cuDNN's (its Philox stream is internal); the rewrite's own
    mask is fixed by the call's seed, and its rate shows in the output: with q = k = 0 every
    probability is 1/64, v = 1, so each output row is (kept count)·2/64 — mean 1 over 64 rows."""
    case = cases()["dropout"]
    program = _convert("dropout")
    q = np.zeros(case.inputs[0][0], np.float32).astype(jax.numpy.bfloat16)
    v = np.ones(case.inputs[2][0], np.float32).astype(jax.numpy.bfloat16)
    dout = np.ones(case.inputs[3][0], np.float32).astype(jax.numpy.bfloat16)
    first = program(q, q, v, dout)
    second = program(q, q, v, dout)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    out = first[0].astype(np.float32)
    assert abs(out.mean() - 1.0) < 0.1 and out.std() > 0.05
    # dV[j] = Σ_i Pd[i, j]·dO[i]: the dropped probabilities (×2) summed over rows: mean 1.
    dv = first[3].astype(np.float32)
    assert abs(dv.mean() - 1.0) < 0.1
